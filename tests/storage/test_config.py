"""LogConfig: Kafka's names and defaults, overlays, errors naming the key."""

from __future__ import annotations

import pytest

from kafkalite.config import BrokerConfig
from kafkalite.storage.config import LogConfig


def test_defaults_are_kafkas():
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.segment_index_bytes == 10485760
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 604800000 and config.retention_bytes == -1
    assert config.flush_messages == config.flush_ms == 2**63 - 1
    assert config.max_message_bytes == 1048588
    assert config.cleanup_policy == "delete" and config.min_insync_replicas == 1


def test_from_properties_overlays_defaults():
    base = LogConfig(segment_bytes=1000)
    config = LogConfig.from_properties(
        {"retention.ms": "60000", "cleanup.policy": "compact,delete", "unknown.key": "x"},
        defaults=base,
    )
    assert config.segment_bytes == 1000 and config.retention_ms == 60000
    assert config.compact and config.delete
    assert config.to_properties()["retention.ms"] == "60000"
    assert LogConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "abc"),
        ("segment.bytes", "10"),
        ("segment.bytes", "3000000000"),  # Kafka's INT: the offset index holds int32 positions
        ("max.message.bytes", "2147483648"),
        ("retention.ms", "1_000"),  # Java's parseLong takes no separators
        ("retention.ms", "-5"),
        ("message.timestamp.type", "Whenever"),
        ("cleanup.policy", "shred"),
        ("unclean.leader.election.enable", "yes"),
        ("min.cleanable.dirty.ratio", "1.5"),
    ],
)
def test_bad_values_name_the_key(key, value):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        LogConfig.from_properties({key: value})


def test_strict_rejects_unknown_names():
    with pytest.raises(ValueError, match="no.such.config"):
        LogConfig.from_properties({"no.such.config": "1"}, strict=True)


def test_broker_config_finest_unit_wins():
    def load(**overrides):
        return LogConfig.from_broker_config(BrokerConfig.load(overrides=overrides, environ={}))

    config = load(
        **{
            "log.retention.hours": "1",
            "log.retention.minutes": "2",
            "log.roll.hours": "3",
            "log.segment.bytes": "2048",
        }
    )
    assert config.retention_ms == 120_000
    assert config.segment_ms == 3 * 3_600_000
    assert config.segment_bytes == 2048
    assert load(**{"log.retention.ms": "5", "log.retention.hours": "9"}).retention_ms == 5
