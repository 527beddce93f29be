"""Share-partition state outlives its broker: acknowledgements are written to
``__share_group_state`` before they are answered and read back when the broker leads the state
partition again, so a restarted broker neither redelivers an accepted record nor forgets a
delivery count (the restarted group does not start over at ``share.auto.offset.reset``)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer

from kafkalite.testing import Broker

pytestmark = pytest.mark.integration


def poll_until(c, done, handle, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        for m in c.poll(0.3):
            assert m.error() is None, m.error()
            handle(m)


def test_share_state_survives_a_broker_restart(tmp_path):
    settings = {
        "share.auto.offset.reset": "earliest",
        "offsets.topic.num.partitions": 1,
        "share.coordinator.state.topic.num.partitions": 1,
    }
    with Broker(settings, subprocess=True, data_dir=tmp_path / "data") as broker:
        broker.create_topic("durable")
        broker.produce("durable", [f"r{i}".encode() for i in range(10)])
        c = ShareConsumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "g-durable",
                "share.acknowledgement.mode": "explicit",
            }
        )
        c.subscribe(["durable"])
        first: dict[int, int] = {}

        def accept_some(m):
            first[m.offset()] = m.delivery_count()
            # the first five are done with; the others are handed back
            kind = AcknowledgeType.ACCEPT if m.offset() < 5 else AcknowledgeType.RELEASE
            c.acknowledge(m, kind)

        poll_until(c, lambda: set(first) >= set(range(10)), accept_some)
        result = c.commit_sync()
        assert all(e is None for e in result.values()), result
        c.close()

        broker.restart()

        c = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g-durable"})
        c.subscribe(["durable"])
        again: dict[int, int] = {}
        try:
            poll_until(
                c,
                lambda: set(again) >= set(range(5, 10)),
                lambda m: again.setdefault(m.offset(), m.delivery_count()),
            )
        finally:
            c.close()
    assert min(again) == 5, "the accepted records were not delivered again"
    assert all(again[o] == first[o] + 1 for o in range(5, 10)), "delivery counts kept"


def test_group_configs_survive_a_broker_restart(tmp_path):
    """A GROUP config resource is stored in the coordination store (the embedded one here):
    described from there after a restart, and used by the restarted share coordinator."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        ResourceType,
    )

    settings = {
        "offsets.topic.num.partitions": 1,
        "share.coordinator.state.topic.num.partitions": 1,
    }
    with Broker(settings, subprocess=True, data_dir=tmp_path / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        entry = ConfigEntry(
            "share.auto.offset.reset",
            "earliest",
            incremental_operation=AlterConfigOpType.SET,
        )
        resource = ConfigResource(ResourceType.GROUP, "g-kept", incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)
        broker.create_topic("kept")
        broker.produce("kept", [f"r{i}".encode() for i in range(3)])

        broker.restart()

        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        described = ConfigResource(ResourceType.GROUP, "g-kept")
        configs = admin.describe_configs([described])[described].result(timeout=30)
        assert configs["share.auto.offset.reset"].value == "earliest"
        assert configs["share.auto.offset.reset"].source == ConfigSource.GROUP_CONFIG.value
        c = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g-kept"})
        c.subscribe(["kept"])
        got: set[int] = set()
        try:
            poll_until(c, lambda: got >= {0, 1, 2}, lambda m: got.add(m.offset()))
        finally:
            c.close()
