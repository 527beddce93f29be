"""The three kinds of group made by real clients, shared by tests/admin/test_group_types.py and
tests/cli/test_groups_types.py: a classic group (confluent-kafka's default protocol, committing),
a consumer group (KIP-848, ``group.protocol: consumer``, committing) and a share group
(confluent-kafka's ShareConsumer), on one subprocess broker with its admin API per module; the
clients stay open (heartbeating in librdkafka's threads) while the tests read them."""

from __future__ import annotations

import pytest

from tests.admin.conftest import AdminClient, admin_broker_process, produce
from tests.admin.support import wait_for

try:
    from confluent_kafka import Consumer, ShareConsumer, TopicPartition
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from confluent_kafka.admin import NewTopic
except ImportError as e:  # pragma: no cover - the test extras are required
    raise RuntimeError("confluent-kafka is required: pip install -e '.[test]'") from e

TOPIC = "kinds"
RECORDS = 20
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def admin_broker(tmp_path_factory):
    yield from admin_broker_process(
        tmp_path_factory.mktemp("group-types"),
        offsets_topic_num_partitions="1",
        share_coordinator_state_topic_num_partitions="1",
        share_auto_offset_reset="earliest",
    )


@pytest.fixture(scope="module")
def admin(admin_broker) -> AdminClient:
    client = AdminClient(admin_broker.admin_url)
    client.wait_for(lambda: client.get("/ready").status == 200, "the admin API to be ready")
    return client


def _consume(consumer, count: int) -> None:
    got: list[object] = []

    def more() -> bool:
        m = consumer.poll(0.3)
        if m is not None and m.error() is None:
            got.append(m)
        return len(got) >= count

    wait_for(more, f"{count} records", DEADLINE_S)


@pytest.fixture(scope="module")
def groups(admin_broker, admin):
    """The three groups, each having read every record of TOPIC (the classic and consumer
    groups committed them all but 5: a lag of 5)."""
    bootstrap = admin_broker.bootstrap_servers
    kafka_admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    kafka_admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    produce(bootstrap, TOPIC, RECORDS, partition=0)
    produce(bootstrap, TOPIC, RECORDS, partition=1)
    clients = []
    for group, protocol in (("kinds-classic", "classic"), ("kinds-consumer", "consumer")):
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": protocol,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([TOPIC])
        clients.append(c)
        _consume(c, 2 * RECORDS)
        c.commit(
            offsets=[TopicPartition(TOPIC, p, RECORDS - 5) for p in (0, 1)], asynchronous=False
        )
    share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "kinds-share"})
    share.subscribe([TOPIC])
    clients.append(share)
    got: list[object] = []

    def more() -> bool:
        got.extend(m for m in share.poll(0.3) if m.error() is None)
        return len(got) >= 2 * RECORDS

    wait_for(more, "the share consumer's records", DEADLINE_S)
    yield {"classic": "kinds-classic", "consumer": "kinds-consumer", "share": "kinds-share"}
    for c in clients:
        c.close()
