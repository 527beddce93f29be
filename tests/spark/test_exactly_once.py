"""Exactly-once writes (``deliveryGuarantee=exactly-once``): each Spark task writes in a Kafka
transaction of its own, fenced by the next attempt of the same task and marked committed for
its batch in the same transaction.

- with a real Spark session: a micro-batch whose second task fails (a UDF that raises on the
  first attempt only, after the first task committed) fails the query; restarted from its
  checkpoint, the batch runs again and a read_committed reader (the data source's default) sees
  every record once: the task that had committed writes nothing the second time;
- without Spark, the task protocol itself on a real broker: a zombie attempt is fenced and its
  records stay invisible, an attempt after a committed one writes nothing, bad options fail."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import Consumer
from confluent_kafka import KafkaError as KafkaError_
from confluent_kafka import TopicPartition as CkTopicPartition

from kafkalite.spark.kafka import KafkaError, TransactionalTaskWrite
from kafkalite.spark.source import KafkaBatchWriter
from kafkalite.testing import Broker
from tests.spark.conftest import DEADLINE_S
from tests.spark.support import stream

RECORDS = 40  # per source partition


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory):
    """The data-source tests' broker, with one partition for the transaction state and the
    group offsets (their first use creates the topic: 50 partitions take seconds)."""
    b = Broker(data_dir=tmp_path_factory.mktemp("spark-eo-broker"), config={"auto.create.topics.enable": "false", "offsets.topic.num.partitions": "1",
                   "transaction.state.log.num.partitions": "1"}, subprocess=True, admin=False)  # fmt: skip
    b.start()
    yield b
    if b.running:
        try:
            b.stop()
        except TimeoutError:
            b.kill()


def committed_end(bootstrap: str, topic: str) -> int:
    """The end offset a read_committed consumer sees on partition 0 (its LSO)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso-probe",
                         "isolation.level": "read_committed"})  # fmt: skip
    try:
        return consumer.get_watermark_offsets(CkTopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def group_offset(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.committed([CkTopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def read_values(spark, bootstrap: str, topic: str, **options: str) -> list[str]:
    reader = spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
    for key, value in {"subscribe": topic, **options}.items():
        reader = reader.option(key, value)
    return sorted(bytes(r.value).decode() for r in reader.load().collect())


def test_a_micro_batch_rerun_after_a_task_failure_does_not_duplicate(kspark, kafka, tmp_path):
    from pyspark.sql import functions as F

    source = kafka.create("eo-in", 2)
    sink = kafka.create("eo-out", 1)
    kafka.produce(source, [{"value": f"{p}-{i}", "partition": p}
                           for p in range(2) for i in range(RECORDS)])  # fmt: skip
    marker = tmp_path / "failed-once"
    bootstrap = kafka.bootstrap

    @F.udf("string")
    def fail_once(partition, value):
        """Partition 1's task fails on its first attempt, once partition 0's task has
        committed its transaction (so that the re-run meets a committed task)."""
        import time

        if partition == 1 and not marker.exists():
            marker.touch()
            deadline = time.monotonic() + DEADLINE_S
            while committed_end(bootstrap, sink) <= RECORDS and time.monotonic() < deadline:
                time.sleep(0.1)  # polling interval of the condition
            if committed_end(bootstrap, sink) <= RECORDS:  # the test's assertion names this
                raise RuntimeError("partition 0's task did not commit before the deadline")
            raise RuntimeError("the first attempt of partition 1 fails")
        return bytes(value).decode()

    def run():
        query = (
            stream(kspark, bootstrap, subscribe=source, startingOffsets="earliest")
            .select(fail_once("partition", "value").alias("value"))
            .writeStream.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("deliveryGuarantee", "exactly-once")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(120)
        except Exception:
            pass  # the first run fails: the query's exception is checked below
        return query

    failed = run()
    assert "the first attempt of partition 1 fails" in str(failed.exception())
    # partition 0's task had committed batch 0: its records are visible already
    assert read_values(kspark, bootstrap, sink) == sorted(f"0-{i}" for i in range(RECORDS))
    rerun = run()
    assert rerun.exception() is None and rerun.id == failed.id
    expected = sorted(f"{p}-{i}" for p in range(2) for i in range(RECORDS))
    assert read_values(kspark, bootstrap, sink) == expected  # each record once
    # each task marked batch 0 (offset batch + 1) in its transactional id's group
    for task in range(2):
        assert group_offset(bootstrap, f"kafkalite-spark-{failed.id}-{task}", sink) == 1


def batch(values: list[str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(values, pa.string())], names=["value"])


def test_a_zombie_attempt_is_fenced_and_a_committed_task_is_not_written_again(kafka):
    topic = kafka.create("eo-fence", 1)
    params = {"bootstrap.servers": kafka.bootstrap}
    zombie = TransactionalTaskWrite(params, "fence-task-0", topic)
    assert zombie.committed_batch() is None
    zombie.begin()
    zombie.produce_batch(batch(["zombie"]), topic)
    zombie.task.producer.flush(30)  # its records are in the log, uncommitted
    retry = TransactionalTaskWrite(params, "fence-task-0", topic)
    try:
        assert retry.committed_batch() is None  # fences the zombie, whose txn is aborted
        retry.begin()
        retry.produce_batch(batch(["a", "b"]), topic)
        assert retry.commit(batch_id=3) == 2
        with pytest.raises(KafkaError, match=r"\(fence-task-0\): .*FENCED"):
            zombie.commit(batch_id=3)
    finally:
        zombie.close()
        retry.close()
    again = TransactionalTaskWrite(params, "fence-task-0", topic)
    try:
        assert again.committed_batch() == 3  # a later attempt of batch 3 writes nothing
    finally:
        again.close()
    reader = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "eo-fence-reader",
                       "isolation.level": "read_committed", "enable.partition.eof": True})  # fmt: skip
    reader.assign([CkTopicPartition(topic, 0, 0)])
    got = []
    try:
        while True:
            message = reader.poll(DEADLINE_S)
            assert message is not None, f"timed out; read {got}"
            if message.error() is not None:
                assert message.error().code() == KafkaError_._PARTITION_EOF, message.error()
                break
            got.append(message.value())
    finally:
        reader.close()
    assert got == [b"a", b"b"]


def test_delivery_guarantee_options():
    from pyspark.sql.types import StringType, StructField, StructType

    from kafkalite.spark.options import OptionError

    schema = StructType([StructField("value", StringType())])
    base = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}
    assert KafkaBatchWriter({**base, "deliveryGuarantee": "exactly-once"}, schema).exactly_once
    assert not KafkaBatchWriter(base, schema).exactly_once
    with pytest.raises(OptionError, match="deliveryGuarantee must be at-least-once or exactly"):
        KafkaBatchWriter({**base, "deliveryGuarantee": "twice"}, schema)
    with pytest.raises(OptionError, match="transactionalIdPrefix needs deliveryGuarantee"):
        KafkaBatchWriter({**base, "transactionalIdPrefix": "p"}, schema)
    with pytest.raises(OptionError, match="'transactional.id' is not supported"):
        KafkaBatchWriter({**base, "kafka.transactional.id": "x"}, schema)
