"""Security settings: Kafka's names, listener-prefixed overrides, and start-up refusals that
name the key (config syntax in BrokerConfig; TLS files when the listeners are built)."""

from __future__ import annotations

import pytest

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.security.listeners import inter_broker_client, listener_security
from kafkalite.security.tls import TlsConfigError
from tests.security.support import PLAIN_USERS, make_pki, plain_jaas

NO_ENV: dict[str, str] = {}
SASL = {
    "listeners": "PLAINTEXT://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.1:2",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
}


def load(**overrides: str) -> BrokerConfig:
    return BrokerConfig.load(overrides=overrides, environ=NO_ENV)


def test_protocols_per_listener_and_prefixed_settings():
    config = load(
        **SASL,
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "listener.name.SASL_PLAINTEXT.connections.max.reauth.ms": "60000",
        },
    )
    assert config.security_protocol("SASL_PLAINTEXT") == "SASL_PLAINTEXT"
    assert config.security_protocol("PLAINTEXT") == "PLAINTEXT"
    assert config.reauth_ms("SASL_PLAINTEXT", "PLAIN") == 60000
    assert config.reauth_ms("PLAINTEXT", "PLAIN") == 0
    security = listener_security(config)
    assert security["SASL_PLAINTEXT"].plain_users == PLAIN_USERS
    assert security["SASL_PLAINTEXT"].mechanisms == ("PLAIN",)
    assert not security["PLAINTEXT"].sasl
    props = config.properties()
    assert "listener.name.sasl_plaintext.plain.sasl.jaas.config" in props


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({**SASL, "sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
        (
            {k: v for k, v in SASL.items() if "jaas" not in k},
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
        (
            {**SASL, "listener.name.nope.ssl.client.auth": "required"},
            "listener.name.nope.ssl.client.auth",
        ),
        (
            {**SASL, "listener.name.sasl_plaintext.ssl.bogus": "1"},
            "listener.name.sasl_plaintext.ssl.bogus",
        ),
        (
            {**SASL, "inter.broker.listener.name": "SASL_PLAINTEXT"},
            "sasl.mechanism.inter.broker.protocol",
        ),
        ({**SASL, "security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol"),
        ({"listener.security.protocol.map": "A:TLS"}, "listener.security.protocol.map"),
        ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
        (
            {
                **SASL,
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x required user_a=;",
            },
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
    ],
)
def test_a_bad_security_setting_stops_start_up_naming_the_key(overrides, key):
    with pytest.raises((ConfigError, ValueError)) as info:
        load(**overrides)
    assert key in str(info.value)


def test_tls_files_are_checked_when_the_listeners_are_built(tmp_path):
    pki = make_pki(tmp_path / "pki")
    base = {
        "listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server_file),
    }
    assert listener_security(load(**base))["SSL"].ssl_context is not None
    inline = {
        "listeners": "SSL://127.0.0.1:2",
        "ssl.keystore.certificate.chain": pki.server_chain.replace("\n", " "),
        "ssl.keystore.key": pki.server_key.replace("\n", " "),
        "security.inter.broker.protocol": "SSL",
        "ssl.truststore.certificates": pki.ca_file.read_text(),
    }
    assert listener_security(load(**inline))["SSL"].ssl_context is not None
    assert inter_broker_client(load(**inline)).ssl_context is not None
    cases = [
        (
            {"listener.name.ssl.ssl.keystore.location": "/nonexistent.pem"},
            "listener.name.ssl.ssl.keystore.location",
        ),
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
        ({"ssl.keystore.location": str(pki.ca_file)}, "ssl.keystore.location"),
        ({"ssl.client.auth": "required"}, "ssl.truststore.location"),
        ({"ssl.enabled.protocols": "SSLv3"}, "ssl.enabled.protocols"),
        ({"ssl.cipher.suites": "NOT-A-CIPHER"}, "ssl.cipher.suites"),
    ]
    for extra, key in cases:
        with pytest.raises(TlsConfigError) as info:
            listener_security(load(**{**base, **extra}))
        assert info.value.key == key and key in str(info.value)
