"""Broker secrets never leave the process. Kafka answers every PASSWORD-type
setting with value null and is_sensitive=true; kafkalite does the same in DescribeConfigs (a
real client), in the admin API, in its start-up logs and in its configuration errors."""

from __future__ import annotations

import json
import urllib.request

import pytest
import structlog
from confluent_kafka.admin import AdminClient, ConfigResource

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.testing import Broker
from tests.security.support import (
    ADMIN_PASSWORD,
    ADMIN_TOKEN,
    ADMIN_USER,
    SECRETS,
    sasl_port,
    secured_admin_config,
)

SENSITIVE = (
    "admin.bearer.token",
    "ssl.key.password",
    "ssl.truststore.password",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config",
)
"""The secret settings secured_admin_config sets."""


@pytest.fixture(scope="module")
def broker():
    with structlog.testing.capture_logs() as start_up_logs:
        b = Broker(secured_admin_config()).start()
    b.start_up_logs = start_up_logs
    try:
        yield b
    finally:
        b.close()


def test_describe_configs_answers_secrets_null_and_sensitive(broker) -> None:
    admin = AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{sasl_port(broker)}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": ADMIN_USER,
            "sasl.password": ADMIN_PASSWORD,
        }
    )
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(30)
    for name in SENSITIVE:
        entry = entries[name]
        assert entry.value is None, name
        assert entry.is_sensitive, name
        for synonym in entry.synonyms.values():
            assert synonym.value is None, (name, synonym.name)
    assert not entries["broker.id"].is_sensitive and entries["broker.id"].value == "0"
    shown = repr(
        [(e.name, e.value, [s.value for s in e.synonyms.values()]) for e in entries.values()]
    )
    assert not [s for s in SECRETS if s in shown]


def test_the_admin_storage_route_answers_secrets_null(broker) -> None:
    request = urllib.request.Request(
        f"{broker.admin_url}/brokers/0/storage",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    configs = json.loads(text)["configs"]
    for name in SENSITIVE:
        assert name in configs and configs[name] is None, name
    assert configs["broker.id"] == "0"
    assert not [s for s in SECRETS if s in text]


def test_start_up_logs_and_the_config_repr_hold_no_secret(broker) -> None:
    assert broker.start_up_logs, "the start-up logged nothing: the capture is broken"
    assert not [s for s in SECRETS if s in repr(broker.start_up_logs)]
    config = broker.server.config
    for text in (repr(config), str(config)):
        assert "[hidden]" in text
        assert not [s for s in SECRETS if s in text]


def test_a_configuration_error_does_not_quote_a_secret() -> None:
    bad_jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="pass-SECRET'
    )
    with pytest.raises(ConfigError) as raised:
        BrokerConfig.load(
            overrides={
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": bad_jaas,
            },
            environ={},
        )
    message = str(raised.value)
    assert "listener.name.sasl_plaintext.plain.sasl.jaas.config" in message
    assert "SECRET" not in message


@pytest.mark.parametrize(
    ("name", "sensitive"),
    [
        ("ssl.keystore.password", True),
        ("ssl.key.password", True),
        ("ssl.keystore.key", True),
        ("ssl.keystore.certificate.chain", True),
        ("ssl.truststore.password", True),
        ("ssl.truststore.certificates", True),
        ("sasl.jaas.config", True),
        ("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config", True),
        ("listener.name.external.ssl.keystore.password", True),
        ("password.encoder.secret", True),
        ("admin.bearer.token", True),
        ("ssl.keystore.location", False),
        ("admin.bearer.principal", False),
        ("listener.name.sasl_ssl.connections.max.reauth.ms", False),
    ],
)
def test_which_settings_are_sensitive(name: str, sensitive: bool) -> None:
    from kafkalite.config import is_sensitive_config

    assert is_sensitive_config(name) is sensitive
