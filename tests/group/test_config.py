"""Group coordinator settings from Kafka property names or a broker config object."""

from types import SimpleNamespace

import pytest

from kafkalite.group.config import GroupConfig, OffsetConfig, from_broker_config, from_properties


def test_kafka_defaults():
    g, o = GroupConfig(), OffsetConfig()
    assert (
        g.group_min_session_timeout_ms,
        g.group_max_session_timeout_ms,
        g.group_initial_rebalance_delay_ms,
    ) == (6000, 1800000, 3000)
    assert (
        o.offset_metadata_max_bytes,
        o.offsets_retention_minutes,
        o.offsets_topic_num_partitions,
    ) == (4096, 10080, 50)
    assert o.offsets_retention_ms == 10080 * 60_000
    assert o.offsets_topic_configs()["cleanup.policy"] == "compact"


def test_from_properties_uses_kafka_names_and_ignores_others():
    g, o = from_properties(
        {
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "7",
            "offset.metadata.max.bytes": "10",
            "log.dirs": "/x",
        }
    )
    assert g.group_initial_rebalance_delay_ms == 0
    assert o.offsets_topic_num_partitions == 7 and o.offset_metadata_max_bytes == 10


def test_bad_value_names_the_property():
    with pytest.raises(ValueError, match="offsets.retention.minutes"):
        from_properties({"offsets.retention.minutes": "soon"})


def test_from_broker_config_takes_matching_attributes():
    cfg = SimpleNamespace(
        group_max_session_timeout_ms=60_000, offsets_commit_timeout_ms=1234, broker_id=3
    )
    g, o = from_broker_config(cfg)
    assert g.group_max_session_timeout_ms == 60_000 and o.offsets_commit_timeout_ms == 1234
    assert g.group_min_session_timeout_ms == 6000


def test_from_the_projects_broker_config():
    from kafkalite.config import BrokerConfig

    cfg = BrokerConfig.load(
        None,
        {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5"},
        environ={},
    )
    g, o = from_broker_config(cfg)
    assert g.group_initial_rebalance_delay_ms == 0 and o.offsets_topic_num_partitions == 5
