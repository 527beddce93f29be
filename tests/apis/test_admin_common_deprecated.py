"""Kafka 3.9's deprecated topic configs: accepted, validated as Kafka does,
and otherwise no-ops."""

import pytest

from kafkalite.apis.admin_common import (
    CONFIG_TYPES,
    topic_config_from_broker_name,
    topic_config_names,
)
from kafkalite.storage.config import DEPRECATED_TOPIC_CONFIGS, validate_topic_configs


@pytest.mark.parametrize(
    "value",
    ["0.8.2", "0.10.0-IV1", "0.10.2.1", "0.11.0", "1.1", "2.8", "2.8-IV1", "3.0-IV1", "3.9"],
)
def test_message_format_version_accepts_kafka_versions(value):
    assert validate_topic_configs({"message.format.version": value}) is None


@pytest.mark.parametrize("value", ["", "4.0", "banana", "3", "2.9", "0.12.0", "3.0-IV"])
def test_message_format_version_refuses_other_values_naming_the_key(value):
    problem = validate_topic_configs({"message.format.version": value})
    assert problem == (
        f"Invalid value {value} for configuration message.format.version: "
        f"Version {value} is not a valid version"
    )


def test_downconversion_flag_is_a_boolean():
    assert validate_topic_configs({"message.downconversion.enable": "false"}) is None
    assert "message.downconversion.enable" in validate_topic_configs(
        {"message.downconversion.enable": "maybe"}
    )


def test_deprecated_configs_mix_with_the_others():
    ok = {"message.format.version": "2.8", "retention.ms": "1000"}
    assert validate_topic_configs(ok) is None
    assert "retention.ms" in validate_topic_configs({**ok, "retention.ms": "soon"})
    assert "Unknown topic config" in validate_topic_configs({**ok, "no.such.config": "1"})


def test_deprecated_configs_are_described_like_kafka():
    assert set(DEPRECATED_TOPIC_CONFIGS) <= set(topic_config_names())
    assert DEPRECATED_TOPIC_CONFIGS["message.format.version"].default == "3.0-IV1"
    assert CONFIG_TYPES["message.format.version"] == 2  # STRING
    assert CONFIG_TYPES["message.downconversion.enable"] == 1  # BOOLEAN
    synonyms = topic_config_from_broker_name()
    assert synonyms["message.format.version"] == "log.message.format.version"
    assert synonyms["message.downconversion.enable"] == "log.message.downconversion.enable"
