"""The consumer group protocol's settings: Kafka's names and defaults, checked at start-up (a
bad value stops the broker with a message naming the key)."""

from __future__ import annotations

import pytest

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.group.config import GroupConfig, from_broker_config

NO_ENV: dict[str, str] = {}


def test_kafka_defaults_reach_the_coordinator():
    config = BrokerConfig.load(environ=NO_ENV)
    assert config.group_consumer_assignors == "uniform,range"
    assert config.group_consumer_session_timeout_ms == 45000
    assert config.group_consumer_heartbeat_interval_ms == 5000
    group_config, _ = from_broker_config(config)
    assert group_config.consumer_assignors == ("uniform", "range")
    assert group_config.group_consumer_session_timeout_ms == 45000
    # Kafka 4.x's default: classic groups with members are upgraded and downgraded online
    assert config.group_consumer_migration_policy == "bidirectional"
    assert group_config.upgrade_enabled and group_config.downgrade_enabled


def test_settings_are_taken():
    config = BrokerConfig.load(
        environ=NO_ENV,
        overrides=[
            "group.consumer.assignors=range",
            "group.consumer.session.timeout.ms=6000",
            "group.consumer.heartbeat.interval.ms=500",
        ],
    )
    group_config, _ = from_broker_config(config)
    assert group_config.consumer_assignors == ("range",)
    assert group_config.group_consumer_heartbeat_interval_ms == 500


@pytest.mark.parametrize(
    "setting, key",
    [
        ("group.consumer.assignors=sticky", "group.consumer.assignors"),
        ("group.consumer.assignors=", "group.consumer.assignors"),
        ("group.consumer.session.timeout.ms=0", "group.consumer.session.timeout.ms"),
        ("group.consumer.heartbeat.interval.ms=50000", "group.consumer.heartbeat.interval.ms"),
        ("group.consumer.migration.policy=sideways", "group.consumer.migration.policy"),
    ],
)
def test_bad_values_stop_start_up_naming_the_key(setting, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"[._]")):
        BrokerConfig.load(environ=NO_ENV, overrides=[setting])


def test_group_config_checks_itself():
    with pytest.raises(ValueError, match="group.consumer.assignors"):
        GroupConfig(group_consumer_assignors="sticky")
    with pytest.raises(ValueError, match="heartbeat"):
        GroupConfig(group_consumer_heartbeat_interval_ms=10, group_consumer_session_timeout_ms=5)


def test_migration_policy_is_case_insensitive():
    config = BrokerConfig.load(
        environ=NO_ENV, overrides=["group.consumer.migration.policy=DISABLED"]
    )
    assert config.group_consumer_migration_policy == "disabled"
    config = BrokerConfig.load(
        environ=NO_ENV, overrides=["group.consumer.migration.policy=Upgrade"]
    )
    assert from_broker_config(config)[0].upgrade_enabled
    assert not from_broker_config(config)[0].downgrade_enabled
    with pytest.raises(ValueError, match="group.consumer.migration.policy"):
        GroupConfig(group_consumer_migration_policy="sideways")
    assert GroupConfig(group_consumer_migration_policy="BIDIRECTIONAL").upgrade_enabled
    assert GroupConfig(group_consumer_migration_policy="downgrade").downgrade_enabled
    assert not GroupConfig(group_consumer_migration_policy="downgrade").upgrade_enabled
