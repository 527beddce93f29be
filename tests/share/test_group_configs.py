"""GROUP config resources (type 32) through confluent-kafka's AdminClient: Kafka's group config
keys set with IncrementalAlterConfigs (and AlterConfigs), validated against the broker's
``group.*`` bounds (INVALID_CONFIG), described with DYNAMIC_GROUP_CONFIG / DEFAULT_CONFIG, kept
in the coordination store across a broker restart, and read by the share coordinator: a
ShareConsumer whose group sets ``share.auto.offset.reset=earliest`` starts at the log start on a
broker whose default is latest."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from kafkalite.testing import Broker

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker():
    with Broker(
        {
            "offsets.topic.num.partitions": 1,
            "share.coordinator.state.topic.num.partitions": 1,
            "group.share.min.record.lock.duration.ms": 1000,
        }
    ) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def alter(admin, group, **ops):
    entries = [
        ConfigEntry(
            name.replace("_", "."),
            value,
            incremental_operation=AlterConfigOpType.DELETE
            if value is None
            else AlterConfigOpType.SET,
        )
        for name, value in ops.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def describe(admin, group):
    resource = ConfigResource(ResourceType.GROUP, group)
    return admin.describe_configs([resource])[resource].result(timeout=30)


def test_defaults_are_described_with_default_source(admin):
    configs = describe(admin, "never-seen")
    assert configs["share.auto.offset.reset"].value == "latest"
    assert configs["share.auto.offset.reset"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["share.record.lock.duration.ms"].value == "30000"
    assert set(configs) >= {
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms",
        "share.auto.offset.reset",
        "share.isolation.level",
    }


def test_set_describe_delete(admin):
    alter(admin, "g-set", share_auto_offset_reset="earliest", share_record_lock_duration_ms="3000")
    configs = describe(admin, "g-set")
    assert configs["share.auto.offset.reset"].value == "earliest"
    assert configs["share.auto.offset.reset"].source == ConfigSource.GROUP_CONFIG.value
    assert configs["share.record.lock.duration.ms"].value == "3000"
    assert configs["share.isolation.level"].source == ConfigSource.DEFAULT_CONFIG.value
    alter(admin, "g-set", share_auto_offset_reset=None)
    configs = describe(admin, "g-set")
    assert configs["share.auto.offset.reset"].value == "latest"
    assert configs["share.record.lock.duration.ms"].value == "3000", "the other key stays"


@pytest.mark.parametrize(
    "ops",
    [
        {"share_auto_offset_reset": "sometimes"},
        {"share_isolation_level": "read_maybe"},
        {"share_record_lock_duration_ms": "500"},  # below Kafka's 1000
        {"share_record_lock_duration_ms": "600000"},  # above group.share.max.record.lock...
        {"share_session_timeout_ms": "1000"},  # below group.share.min.session.timeout.ms
        {"consumer_heartbeat_interval_ms": "99999"},  # above the consumer maximum
        {"share_record_lock_duration_ms": "soon"},
        {"no_such_config": "1"},
    ],
)
def test_invalid_values_are_refused(admin, ops):
    with pytest.raises(KafkaException) as e:
        alter(admin, "g-invalid", **ops)
    assert e.value.args[0].name() == "INVALID_CONFIG"
    assert describe(admin, "g-invalid")["share.auto.offset.reset"].source == (
        ConfigSource.DEFAULT_CONFIG.value
    )


def test_share_consumer_starts_at_earliest_because_of_the_group_config(broker, admin):
    broker.create_topic("gc-earliest")
    broker.produce("gc-earliest", [f"r{i}".encode() for i in range(10)])
    alter(admin, "g-earliest", share_auto_offset_reset="earliest")
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g-earliest"})
    c.subscribe(["gc-earliest"])
    got = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < 10:
            assert time.monotonic() < deadline, f"only {got} before the deadline"
            for m in c.poll(0.5):
                assert m.error() is None, m.error()
                got.append(m.offset())
    finally:
        c.close()
    assert sorted(got) == list(range(10))


def test_lock_duration_is_the_groups(broker, admin):
    """A consumer that takes records and goes quiet: they come back to another after the
    group's 1 s lock, well before the broker's 30 s."""
    broker.create_topic("gc-lock")
    broker.produce("gc-lock", [b"x"])
    alter(admin, "g-lock", share_auto_offset_reset="earliest", share_record_lock_duration_ms="1000")
    conf = {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": "g-lock",
        "share.acknowledgement.mode": "explicit",
    }
    first, second = ShareConsumer(conf), ShareConsumer(conf)
    try:
        first.subscribe(["gc-lock"])
        deadline = time.monotonic() + 60
        held = []
        while not held:
            assert time.monotonic() < deadline
            held = list(first.poll(0.5))
        second.subscribe(["gc-lock"])
        again = []
        deadline = time.monotonic() + 20  # far below the broker's 30 s lock
        while not again:
            assert time.monotonic() < deadline, "not redelivered within the group's lock"
            again = list(second.poll(0.5))
        assert again[0].offset() == 0
    finally:
        first.close()
        second.close()
