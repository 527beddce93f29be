"""Streaming through ``readStream.format("kafkalite")`` / ``writeStream.format("kafkalite")``
with a real local Spark session and a real broker: a query stopped mid-stream and restarted
from its checkpoint reads every record exactly once, maxOffsetsPerTrigger caps micro-batches,
partitions added to a topic are read, offsets below the log start follow failOnDataLoss, and a
stream is written back to Kafka."""

from __future__ import annotations

import contextlib

import pytest
from confluent_kafka import TopicPartition as CkTopicPartition

from tests.spark.conftest import wait_for
from tests.spark.support import stream


def rows_read(query) -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)


@contextlib.contextmanager
def running(query):
    try:
        yield query
    finally:
        query.stop()


def test_restart_from_the_checkpoint_reads_every_record_once(kspark, kafka, tmp_path):
    topic = kafka.create("stream-restart", 2)
    kafka.produce(topic, [{"value": f"a{i}", "partition": i % 2} for i in range(400)])
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def start(trigger: dict, **limit: str):
        df = stream(kspark, kafka.bootstrap, subscribe=topic, startingOffsets="earliest", **limit)
        return (
            df.selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger)
            .start()
        )

    with running(
        start({"processingTime": "500 milliseconds"}, maxOffsetsPerTrigger="100")
    ) as first:
        wait_for(lambda: rows_read(first) >= 100, "the first micro-batches")
    first_batches = [p["numInputRows"] for p in first.recentProgress if p["numInputRows"]]
    assert first_batches and max(first_batches) <= 100  # maxOffsetsPerTrigger
    kafka.produce(topic, [{"value": f"b{i}", "partition": i % 2} for i in range(200)])
    second = start({"availableNow": True})  # the rest in one micro-batch
    second.awaitTermination(120)
    assert second.exception() is None
    values = [r.value for r in kspark.read.parquet(out).collect()]
    expected = {f"a{i}" for i in range(400)} | {f"b{i}" for i in range(200)}
    assert len(values) == len(expected) and set(values) == expected


def test_partitions_added_to_a_topic_are_read(kspark, kafka):
    topic = kafka.create("stream-grow", 1)
    kafka.produce(topic, [{"value": f"p0-{i}"} for i in range(20)])
    df = stream(kspark, kafka.bootstrap, subscribe=topic, startingOffsets="earliest")
    query = (
        df.selectExpr("CAST(value AS STRING) AS value", "partition")
        .writeStream.format("memory")
        .queryName("grow")
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    with running(query):
        wait_for(lambda: kspark.sql("SELECT count(*) AS n FROM grow").first().n == 20, "20 rows")
        kafka.add_partitions(topic, 3)
        kafka.produce(topic, [{"value": f"p{p}-{i}", "partition": p} for p in (1, 2)
                              for i in range(10)])  # fmt: skip
        wait_for(lambda: kspark.sql("SELECT count(*) AS n FROM grow").first().n >= 40, "40 rows")
        rows = kspark.sql("SELECT value, partition FROM grow").collect()
    assert sorted((r.partition, r.value) for r in rows) == sorted(
        [(0, f"p0-{i}") for i in range(20)] + [(p, f"p{p}-{i}") for p in (1, 2) for i in range(10)]
    )


def test_offsets_below_the_log_start_follow_fail_on_data_loss(kspark, kafka, tmp_path):
    topic = kafka.create("stream-loss", 1)
    kafka.produce(topic, [{"value": f"{i}"} for i in range(30)])
    deleted = kafka.admin.delete_records([CkTopicPartition(topic, 0, 10)])
    next(iter(deleted.values())).result(30)
    start = f'{{"{topic}":{{"0":0}}}}'

    def run(fail_on_data_loss: str, name: str):
        df = stream(kspark, kafka.bootstrap, subscribe=topic, startingOffsets=start,
                    failOnDataLoss=fail_on_data_loss)  # fmt: skip
        return (
            df.selectExpr("offset")
            .writeStream.format("memory")
            .queryName(name)
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(availableNow=True)
            .start()
        )

    failing = run("true", "loss_fail")
    with pytest.raises(Exception, match="below its log start offset 10"):
        failing.awaitTermination(120)
    lenient = run("false", "loss_skip")
    lenient.awaitTermination(120)
    offsets = sorted(r.offset for r in kspark.sql("SELECT offset FROM loss_skip").collect())
    assert offsets == list(range(10, 30))


def test_a_stream_written_to_kafka(kspark, kafka, tmp_path):
    source = kafka.create("stream-in", 2)
    sink = kafka.create("stream-out", 2)
    kafka.produce(source, [{"key": f"k{i}", "value": f"{i}"} for i in range(100)])
    df = stream(kspark, kafka.bootstrap, subscribe=source, startingOffsets="earliest")
    query = (
        df.selectExpr("key", "CAST(CAST(value AS STRING) AS INT) * 2 AS doubled")
        .selectExpr("key", "CAST(doubled AS STRING) AS value")
        .writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    back = (
        kspark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", sink)
        .load()
        .collect()
    )
    assert sorted(int(bytes(r.value)) for r in back) == [2 * i for i in range(100)]
    # same key, same partition (murmur2, as a Java producer partitions)
    by_key = {bytes(r.key): r.partition for r in back}
    assert len(by_key) == 100 and set(by_key.values()) == {0, 1}
