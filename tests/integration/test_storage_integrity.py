"""Storage damage done under a running broker: a truncated active index, a closed
segment altered after it was written. In-process brokers (kafkalite.testing)."""

from __future__ import annotations

import os
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.client import KafkaClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import Record, build_batch, iter_batch_headers
from kafkalite.protocol.types import TopicPartition as KafkaTopicPartition
from kafkalite.storage.verifier import FETCH_STATS
from kafkalite.testing import Broker
from kafkalite.testing._helpers import client_loop

TOPIC = "integrity"


def on_broker_loop(broker: Broker, fn, *args):
    """Call ``fn(*args)`` on the in-process broker's event loop (the storage is not safe
    for use from another thread)."""

    async def call():
        return fn(*args)

    return broker._thread.run(call(), 30)


def produce_raw(broker: Broker, values: list[bytes]) -> tuple[ErrorCode, int]:
    """One Produce of one batch: the partition's error code and base offset, no retries."""
    batch = build_batch([Record(i, 0, None, value, ()) for i, value in enumerate(values)])
    tp = KafkaTopicPartition(TOPIC, 0)

    async def send():
        client = KafkaClient(broker.bootstrap_servers, client_id="integrity", request_timeout=10)
        await client.start()
        try:
            await client.refresh_metadata([TOPIC])
            response = await client.produce(tp, batch, acks=-1, timeout_ms=10_000)
        finally:
            await client.close()
        result = response.responses[0].partition_responses[0]
        return ErrorCode.of(int(result.error_code)), int(result.base_offset)

    return client_loop().run(send(), 60)


def test_a_truncated_active_index_is_a_storage_error_never_an_unknown_one_after_the_write():
    """The active .index of a partition, cut on disk while the broker ran: a produce was answered
    UNKNOWN_SERVER_ERROR with its 200 records written (and the log end not moved past them), so
    a retry duplicated them. Now the index failure takes the log dir offline and the produce is
    answered KAFKA_STORAGE_ERROR; the retry is refused the same way and writes nothing."""
    with Broker(config={"log.index.interval.bytes": 1024}) as broker:
        broker.create_topic(TOPIC, partitions=1)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
        for i in range(200):
            producer.produce(TOPIC, b"%05d" % i + b"x" * 100, partition=0)
            if i % 20 == 19:  # batches of 2 KiB: the index gets entries, so its file exists
                assert producer.flush(30) == 0
        assert producer.flush(30) == 0
        log_manager = broker.server.log_manager
        log = log_manager.get_log(TOPIC, 0)
        assert log.log_end_offset == 200
        # An idle log's files are released (release_idle_logs); cut the index meanwhile.
        on_broker_loop(broker, log.release_resources)
        index = log.active_segment.offset_index.file
        assert index.stat().st_size > 0
        os.truncate(index, 0)

        values = [b"retry-%03d" % i for i in range(200)]
        error, _ = produce_raw(broker, values)
        assert error is ErrorCode.KAFKA_STORAGE_ERROR, error
        assert str(broker.log_dir) in log_manager.offline_dirs
        written = log.active_segment.size
        # A producer's retries: the partition is offline, nothing more is written.
        retrying = Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 2000}
        )
        failures = []
        for value in values:
            retrying.produce(
                TOPIC, value, partition=0, on_delivery=lambda err, msg: failures.append(err)
            )
        assert retrying.flush(30) == 0
        assert len(failures) == len(values) and all(e is not None for e in failures)
        assert log.active_segment.size == written, "a refused retry writes nothing"


def test_a_byte_altered_in_a_closed_segment_never_reaches_a_consumer():
    """Before: a value altered on disk in a rolled segment of a running broker reached a
    librdkafka consumer with its default check.crcs=false (the broker counted the batches it
    appended as verified until a restart). The broker now checks a closed segment's batches
    on their first read: the consumer gets the good batches before the damaged one, never the
    damaged one, and the refusal is counted and logged."""
    with Broker(config={"log.segment.bytes": 100_000}) as broker:
        broker.create_topic(TOPIC, partitions=1)
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "linger.ms": 20,
                "batch.size": 16384,  # batches well below log.segment.bytes
            }
        )
        values = {i: b"%05d-" % i + bytes([0x61 + i % 26]) * 400 for i in range(600)}
        errors = []
        for i in range(600):
            producer.produce(
                TOPIC, values[i], partition=0, on_delivery=lambda e, m: e and errors.append(e)
            )
        assert producer.flush(30) == 0 and not errors, errors[:3]
        log = broker.server.log_manager.get_log(TOPIC, 0)
        assert log.log_end_offset == 600 and log.number_of_segments >= 3
        segment_file = log.segments[0].log.file
        pos, bad = list(iter_batch_headers(segment_file.read_bytes()))[1]
        at = pos + bad.batch_length + 12 - 5  # a byte of the batch's last value
        fd = os.open(segment_file, os.O_RDWR)
        try:
            os.pwrite(fd, bytes([os.pread(fd, 1, at)[0] ^ 0x55]), at)
        finally:
            os.close(fd)
        refused_before = FETCH_STATS.corrupt_batches_refused

        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "integrity",
                "enable.auto.commit": False,
                "check.crcs": False,
            }
        )
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        received: dict[int, bytes] = {}
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                for message in consumer.consume(500, timeout=0.5):
                    if message.error() is None:
                        received[message.offset()] = message.value()
                if len(received) == len(values):
                    break  # all served: the damaged batch among them
                if (
                    FETCH_STATS.corrupt_batches_refused > refused_before
                    and len(received) >= bad.base_offset
                ):
                    break
        finally:
            consumer.close()
        assert not any(bad.base_offset <= o <= bad.last_offset for o in received), (
            "the damaged batch was served"
        )
        assert all(received[o] == values[o] for o in received), "a corrupted value was delivered"
        assert set(received) == set(range(bad.base_offset)), "the good batches before it"
        assert FETCH_STATS.corrupt_batches_refused > refused_before
