"""Helpers shared by the Spark tests: a streaming DataFrame read through the kafkalite source."""


def stream(spark, bootstrap: str, **options):
    reader = spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()
