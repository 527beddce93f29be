"""Spark reads and writes Kafka topics through a PySpark Python data source (no JVM jar).

    from kafkalite.spark import KafkaDataSource
    spark.dataSource.register(KafkaDataSource)
    spark.read.format("kafkalite").option("kafka.bootstrap.servers", ...).option("subscribe", ...)

Needs the ``spark`` extra (``pip install kafkalite[spark]``: pyspark, pyarrow, confluent-kafka);
the broker never imports this package.
"""

from .source import KafkaDataSource, read_schema

__all__ = ["KafkaDataSource", "read_schema"]
