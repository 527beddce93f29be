"""Spark reads and writes Kafka topics through a PySpark Python data source (no JVM jar).

    from kafkalite.spark import KafkaDataSource
    spark.dataSource.register(KafkaDataSource)
    spark.read.format("kafkalite").option("kafka.bootstrap.servers", ...).option("subscribe", ...)

Needs the ``spark`` extra (``pip install kafkalite[spark]``: pyspark, pyarrow, confluent-kafka);
the broker never imports this package. Importing it makes Spark's Python workers run this
interpreter unless PYSPARK_PYTHON or spark.pyspark.python says otherwise (workers.py), so a
job works without an activated virtualenv.
"""

from .source import KafkaDataSource, read_schema
from .workers import use_the_drivers_python

use_the_drivers_python()

__all__ = ["KafkaDataSource", "read_schema"]
