"""Storage damage done under a running broker (issue 22): a truncated active index, a closed
segment altered after it was written. In-process brokers (kafkalite.testing)."""

from __future__ import annotations

import os

from confluent_kafka import Producer

from kafkalite.client import KafkaClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import Record, build_batch
from kafkalite.protocol.types import TopicPartition
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
    tp = TopicPartition(TOPIC, 0)

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
