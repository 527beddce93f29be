"""DynamicBrokerConfig (server/dynamic_config.py) without a broker: Kafka's validation rules
and messages, the precedence of the levels with synonyms, what is dropped from the store with a
log line (an undecodable password, an invalid value, a per-broker setting at the default
level), the reconfigurables, and the watcher on the embedded store following
``/config/brokers/<id>`` and ``<default>`` change notifications."""

from __future__ import annotations

import pytest
import structlog

from kafkalite.config import BrokerConfig
from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.security.password_encoder import PasswordEncoder
from kafkalite.server.config_watch import load_broker_configs, watch_broker_configs
from kafkalite.server.dynamic_config import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    DynamicBrokerConfig,
    InvalidDynamicConfig,
    broker_config_synonyms,
    config_type,
    is_password_config,
)
from kafkalite.zk import data as paths
from kafkalite.zk.broker_configs import broker_of_entity_path, get_broker_config, set_broker_config
from tests.controller.shell_support import eventually
from tests.server.support import running

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="pw";'
PW_KEY = "listener.name.plaintext.plain.sasl.jaas.config"


def dynamic(**props: str) -> DynamicBrokerConfig:
    return DynamicBrokerConfig(BrokerConfig.load(overrides=props, environ={}))


@pytest.mark.parametrize(
    ("props", "per_broker", "message"),
    [
        ({"broker.id": "2"}, True, "Cannot update these configs dynamically: Set(broker.id)"),
        ({"log.retention.hours": "1"}, True, "Cannot update these configs dynamically"),
        ({"listeners": "PLAINTEXT://:1"}, True, "Cannot update these configs dynamically"),
        ({"nope.nope": "1"}, True, "Unknown broker configs: Set(nope.nope)"),
        (
            {"ssl.keystore.location": "/k.pem"},
            True,
            "only per-listener using the listener prefix: Set(ssl.keystore.location)",
        ),
        (
            {"sasl.kerberos.min.time.before.relogin": "1"},
            False,
            "at default cluster level, broker id must be specified",
        ),
        ({"sasl.kerberos.min.time.before.relogin": "soon"}, True, "Not a long"),
        ({"log.segment.bytes": "10"}, False, "log.segment.bytes"),
        ({PW_KEY: JAAS}, True, "Password encoder secret not configured"),
        ({"listener.name.nosuch.ssl.client.auth": "required"}, True, "not in listeners"),
    ],
)
def test_refusals(props, per_broker, message) -> None:
    with pytest.raises(InvalidDynamicConfig) as error:
        dynamic().validate(props, per_broker)
    assert message in str(error.value)


def test_accepted_settings_build_the_config_the_broker_would_run() -> None:
    d = dynamic(**{"log.retention.hours": "5"})
    new = d.validate({"log.retention.ms": "1000", "max.connections": "10"}, per_broker=False)
    assert (new.log_retention_time_ms, new.max_connections) == (1000, 10)
    assert d.current.log_retention_time_ms == 5 * 3600000  # validate applies nothing
    d.validate({"num.io.threads": "4", "log.cleaner.threads": "2"}, per_broker=True)


def test_a_password_needs_the_encoder_and_the_broker_level() -> None:
    d = dynamic(**{"password.encoder.secret": "s"})
    d.validate({PW_KEY: JAAS}, per_broker=True)
    with pytest.raises(InvalidDynamicConfig, match="default cluster level"):
        d.validate({PW_KEY: JAAS}, per_broker=False)
    stored = d.to_persistent({PW_KEY: JAAS, "log.retention.ms": "1"})
    assert JAAS not in stored[PW_KEY] and stored["log.retention.ms"] == "1"
    assert d.from_persistent(stored, per_broker=True) == {PW_KEY: JAAS, "log.retention.ms": "1"}


def test_a_password_the_broker_cannot_decode_is_ignored_with_a_log_line() -> None:
    stored = {PW_KEY: PasswordEncoder("other").encode(JAAS), "log.retention.ms": "1"}
    with structlog.testing.capture_logs() as logs:
        props = dynamic(**{"password.encoder.secret": "s"}).from_persistent(stored, True)
    assert props == {"log.retention.ms": "1"}
    assert any("could not be decoded" in entry["event"] for entry in logs)
    # the old secret still reads it (a secret being changed)
    old = dynamic(**{"password.encoder.secret": "s", "password.encoder.old.secret": "other"})
    assert old.from_persistent(stored, True)[PW_KEY] == JAAS


def test_what_cannot_apply_from_the_store_is_dropped() -> None:
    d = dynamic()
    props = d.from_persistent(
        {"broker.id": "9", "ssl.keystore.location": "/x", "log.retention.ms": "7"}, True
    )
    assert props == {"log.retention.ms": "7"}
    assert d.from_persistent({"listener.name.plaintext.ssl.client.auth": "required"}, False) == {}
    with structlog.testing.capture_logs():
        assert d.update(per_broker={"log.segment.bytes": "3", "log.retention.ms": "7"})
    assert d.per_broker == {"log.retention.ms": "7"}  # the invalid one dropped, the other kept
    assert d.current.log_retention_time_ms == 7


def test_precedence_and_synonyms_in_kafkas_order() -> None:
    d = dynamic(**{"log.retention.hours": "5"})
    d.update(default={"log.retention.ms": "2000"}, per_broker={"log.retention.ms": "1000"})
    assert d.current.log_retention_time_ms == 1000
    assert d.synonyms("log.retention.ms", per_broker=True) == [
        ("log.retention.ms", "1000", DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "2000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "5", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    ]
    # the default resource leaves the per-broker level out
    assert d.synonyms("log.retention.ms", per_broker=False)[0][2] == DYNAMIC_DEFAULT_BROKER_CONFIG
    d.update(per_broker={})
    assert d.current.log_retention_time_ms == 2000
    d.update(default={})
    assert d.current.log_retention_time_ms == 5 * 3600000


def test_synonym_names() -> None:
    assert broker_config_synonyms("log.roll.hours", False) == ["log.roll.ms", "log.roll.hours"]
    assert broker_config_synonyms("listener.name.ssl.ssl.keystore.location", True) == [
        "listener.name.ssl.ssl.keystore.location",
        "ssl.keystore.location",
    ]
    assert broker_config_synonyms("listener.name.s.plain.sasl.jaas.config", True)[1] == (
        "sasl.jaas.config"
    )
    assert is_password_config("listener.name.ssl.ssl.keystore.password")
    assert not is_password_config("log.retention.ms")
    assert (config_type("log.retention.ms"), config_type("ssl.key.password")) == (5, 9)
    assert config_type("log.cleanup.policy") == 7 and config_type("delete.topic.enable") == 1


def test_reconfigurables_see_old_and_new_and_one_failure_does_not_stop_the_others() -> None:
    d = dynamic()
    seen = []

    def broken(old, new):
        raise RuntimeError("boom")

    d.add_reconfigurable(broken)
    d.add_reconfigurable(lambda old, new: seen.append((old.max_connections, new.max_connections)))
    with structlog.testing.capture_logs() as logs:
        assert d.update(default={"max.connections": "5"})
    assert seen == [(2**31 - 1, 5)]
    assert any(e["event"] == "reconfiguration failed" for e in logs)
    assert not d.update(default={"max.connections": "5"})  # nothing changed, nothing called
    assert len(seen) == 1


async def test_the_watcher_follows_both_levels_of_this_broker() -> None:
    store = EmbeddedStore(None)
    session = await store.open_session()
    try:
        d = dynamic(**{"broker.id": "1"})
        await set_broker_config(session, None, {"log.retention.ms": "3000"})
        await load_broker_configs(session, d)
        assert d.current.log_retention_time_ms == 3000
        async with running(watch_broker_configs(session, d)):
            await set_broker_config(session, 1, {"log.retention.ms": "1000"})
            await eventually(lambda: d.current.log_retention_time_ms == 1000, message="own level")
            await set_broker_config(session, 2, {"max.connections": "3"})  # another broker's
            await set_broker_config(session, None, {"max.connections": "4"})
            await eventually(lambda: d.current.max_connections == 4, message="the default")
            assert d.per_broker == {"log.retention.ms": "1000"}
        assert await get_broker_config(session, 2) == {"max.connections": "3"}
        changes = await session.get_children(paths.CONFIG_CHANGES)
        entities = set()
        for child in changes:
            data, _ = await session.get_data(f"{paths.CONFIG_CHANGES}/{child}")
            entities.add(paths.decode_config_change(data))
        assert {"brokers/<default>", "brokers/1", "brokers/2"} <= entities
        data, _ = await session.get_data("/config/brokers/<default>")
        assert paths.decode_entity_config(data) == {"max.connections": "4"}
    finally:
        await store.close()


def test_entity_paths_of_notifications() -> None:
    assert broker_of_entity_path("brokers/<default>") is None
    assert broker_of_entity_path("brokers/3") == 3
    assert broker_of_entity_path("topics/t") == ""


def test_every_static_setting_survives_the_rebuild() -> None:
    """The effective config is built from the static settings as properties: every field's
    printed value must load back to the same value (a Literal of ints once did not)."""
    static = BrokerConfig.load(
        overrides={
            "password.encoder.key.length": "256",
            "log.cleaner.io.max.bytes.per.second": "1e9",
            "log.retention.hours": "3",
            "listener.name.plaintext.ssl.client.auth": "required",
        },
        environ={},
    )
    rebuilt = BrokerConfig.load(
        overrides={k: v for k, v in static.properties().items() if v is not None}, environ={}
    )
    assert rebuilt == static
    d = DynamicBrokerConfig(static)
    d.update(per_broker={"log.retention.ms": "5"})
    d.update(per_broker={})
    assert d.current == static


def test_kafka_settings_without_a_field_are_described_with_kafkas_default() -> None:
    d = dynamic()
    assert "background.threads" in d.described_names()
    assert d.current_value("background.threads") == "10"
    assert d.synonyms("background.threads", per_broker=True) == [
        ("background.threads", "10", DEFAULT_CONFIG)
    ]
    d.update(per_broker={"background.threads": "9"})
    assert d.current_value("background.threads") == "9"
