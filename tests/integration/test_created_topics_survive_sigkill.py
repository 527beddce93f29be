"""A crash right after CreateTopics' answer: the topics' logs are there after the restart.

A new log fsyncs nothing when it is created (its directory and empty ``.log`` are written back
with the next checkpoint's directory fsync, or the clean shutdown's sync); what the answer
promises is the topic in the coordination store, from which the restarted broker's controller
sends the LeaderAndIsr that finds (or makes) each log. A subprocess broker is killed with
SIGKILL as soon as CreateTopics has answered, restarted on the same data, and every partition
must be led, present on disk and writable.
"""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import Broker
from tests.integration.common import wait_for

TOPICS = [f"crash-created-{i}" for i in range(20)]
PARTITIONS = 3


def test_topics_answered_before_a_sigkill_are_present_and_writable_after_it(tmp_path):
    with Broker(subprocess=True, data_dir=tmp_path / "broker", admin=False) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics(
            [NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in TOPICS],
            operation_timeout=30,
        )
        for future in futures.values():
            future.result(timeout=60)
        broker.kill()  # SIGKILL: no clean-shutdown marker, no checkpoint written after this
        broker.start(timeout=120)

        logs = broker.log_dir
        for topic in TOPICS:
            for p in range(PARTITIONS):
                assert (logs / f"{topic}-{p}").is_dir(), f"{topic}-{p} lost"

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})

        def all_led() -> bool:
            md = admin.list_topics(timeout=10)
            return all(
                t in md.topics
                and md.topics[t].error is None
                and len(md.topics[t].partitions) == PARTITIONS
                and all(p.leader >= 0 for p in md.topics[t].partitions.values())
                for t in TOPICS
            )

        wait_for(all_led, "every created partition led after the restart", timeout=60)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        delivered: list[tuple[str, int]] = []
        errors: list[object] = []

        def on_delivery(err, msg) -> None:
            if err is not None:
                errors.append(err)
            else:
                delivered.append((msg.topic(), msg.partition()))

        for topic in TOPICS:
            for p in range(PARTITIONS):
                producer.produce(topic, b"after", partition=p, on_delivery=on_delivery)
        assert producer.flush(60) == 0
        assert not errors
        assert sorted(delivered) == sorted((t, p) for t in TOPICS for p in range(PARTITIONS))
