"""Dynamic broker configs through real clients (confluent-kafka's AdminClient, kafka-python's
describe_configs), against one broker with a PLAINTEXT and an SSL listener: Kafka's answers to
AlterConfigs/IncrementalAlterConfigs on BROKER (per broker and the cluster default,
validate_only, the refusals and their messages), DescribeConfigs' sources and synonyms, and
changes observed live: the log default a topic without an override follows, connection limits,
a listener certificate rotated without a restart, a password stored encrypted.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct

import pytest
import trustme
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from kafkalite.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.protocol.api import ApiKey
from kafkalite.security.password_encoder import PasswordEncoder
from kafkalite.testing import Broker, free_port
from kafkalite.zk.broker_configs import get_broker_config
from tests.integration.common import wait_for

SECRET = "encoder-secret"
PLAIN_PASSWORD = "very-plain-password-1234"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pki")
    ca = trustme.CA(organization_name="dyn-test")
    first = ca.issue_cert("127.0.0.1", "localhost", common_name="first")
    second = ca.issue_cert("127.0.0.1", "localhost", common_name="second")
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    first.private_key_and_cert_chain_pem.write_to_path(str(directory / "server.pem"))
    second.private_key_and_cert_chain_pem.write_to_path(str(directory / "second.pem"))
    return directory


@pytest.fixture(scope="module")
def broker(tmp_path_factory, pki):
    port, ssl_port = free_port(), free_port()
    config = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.location": str(pki / "server.pem"),
        "ssl.truststore.location": str(pki / "ca.pem"),
        "log.retention.hours": "100",
        "password.encoder.secret": SECRET,
    }
    b = Broker(config, port=port, data_dir=tmp_path_factory.mktemp("dyn") / "broker")
    b.ssl_port = ssl_port
    b.start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def incremental(admin, name: str, *ops: tuple[str, AlterConfigOpType, str | None], **kw):
    entries = [ConfigEntry(n, v, incremental_operation=op) for n, op, v in ops]
    resource = ConfigResource("broker", name, incremental_configs=entries)
    return admin.incremental_alter_configs([resource], **kw)[resource].result(30)


def describe(admin, name: str = "0") -> dict:
    resource = ConfigResource("broker", name)
    return admin.describe_configs([resource])[resource].result(30)


def send(broker, api_key: int, node_id: int | None = None, **fields):
    """A request from kafkalite's own client (the only one here that sends a BROKER
    resource named "", the cluster default: confluent-kafka and kafka-python refuse it)."""

    async def go():
        async with KafkaClient(broker.bootstrap_servers) as client:
            return await client.send(api_key, request_builder(api_key, **fields), node_id=node_id)

    return asyncio.run(go())


def alter_default(broker, configs: dict[str, str | None], validate_only=False, name=""):
    response = send(
        broker,
        ApiKey.ALTER_CONFIGS,
        resources=[
            {
                "resource_type": 4,
                "resource_name": name,
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        validate_only=validate_only,
    )
    return response.responses[0]


def dynamic_of(broker):
    return broker.server.dynamic_config


def test_librdkafka_0081_broker_requests_are_answered_none(broker, admin) -> None:
    """The requests of librdkafka's 0081-admin on a BROKER resource."""
    resource = ConfigResource(
        "broker", "0", set_config={"sasl.kerberos.min.time.before.relogin": "58000"}
    )
    assert admin.alter_configs([resource])[resource].result(30) is None
    incremental(
        admin,
        "0",
        ("background.threads", AlterConfigOpType.SET, "9"),
        ("log.cleanup.policy", AlterConfigOpType.APPEND, "compact"),
    )
    wait_for(
        lambda: dynamic_of(broker).current.log_cleanup_policy == "delete,compact",
        "the appended cleanup policy applied",
    )
    entries = describe(admin)
    assert entries["background.threads"].value == "9"
    assert entries["background.threads"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    incremental(
        admin,
        "0",
        ("background.threads", AlterConfigOpType.DELETE, ""),
        ("log.cleanup.policy", AlterConfigOpType.SUBTRACT, "compact"),
    )
    wait_for(
        lambda: "background.threads" not in dynamic_of(broker).per_broker,
        "the deletion applied",
    )
    assert dynamic_of(broker).per_broker == {
        "sasl.kerberos.min.time.before.relogin": "58000",
        "log.cleanup.policy": "delete",
    }
    assert alter_default(broker, {}, name="0").error_code == 0  # AlterConfigs replaces all
    wait_for(lambda: dynamic_of(broker).per_broker == {}, "the level emptied")


def test_refusals_carry_kafkas_codes_and_messages(broker, admin) -> None:
    with pytest.raises(KafkaException) as error:
        incremental(admin, "0", ("broker.id", AlterConfigOpType.SET, "5"))
    assert error.value.args[0].name() == "INVALID_CONFIG"
    assert "Cannot update these configs dynamically: Set(broker.id)" in str(error.value)
    with pytest.raises(KafkaException) as error:
        incremental(admin, "0", ("ssl.keystore.location", AlterConfigOpType.SET, "/x.pem"))
    assert "only per-listener using the listener prefix" in str(error.value)
    with pytest.raises(KafkaException) as error:
        incremental(admin, "0", ("no.such.config", AlterConfigOpType.SET, "1"))
    assert error.value.args[0].name() == "INVALID_CONFIG"
    with pytest.raises(KafkaException) as error:  # the start-up validator's rule
        incremental(admin, "0", ("log.segment.bytes", AlterConfigOpType.SET, "1"))
    assert "log.segment.bytes" in str(error.value)
    # the cluster default: per-broker-only settings refused
    answer = alter_default(broker, {"listener.name.ssl.ssl.keystore.location": "/x.pem"})
    assert answer.error_code == 40
    assert "Cannot update these configs at default cluster level" in answer.error_message
    # another broker's level is refused by this one, as Kafka's ZkAdminManager does
    response = send(
        broker,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        resources=[
            {
                "resource_type": 4,
                "resource_name": "7",
                "configs": [{"name": "log.retention.ms", "config_operation": 0, "value": "1"}],
            }
        ],
        validate_only=False,
    )
    assert response.responses[0].error_code == 42  # INVALID_REQUEST
    assert "Unexpected broker id, expected 0, but received 7" in response.responses[0].error_message
    assert dynamic_of(broker).per_broker == {}


def test_validate_only_writes_nothing(broker, admin) -> None:
    incremental(
        admin, "0", ("log.retention.bytes", AlterConfigOpType.SET, "4096"), validate_only=True
    )
    assert (
        alter_default(broker, {"log.retention.bytes": "4096"}, validate_only=True).error_code == 0
    )
    stored = asyncio.run_coroutine_threadsafe(
        get_broker_config(broker.server.session, 0), broker._thread.loop
    ).result(30)
    assert stored == {}
    assert describe(admin)["log.retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value


def test_sources_and_synonyms_in_kafkas_order(broker, admin) -> None:
    """A default-level and a per-broker value of one setting: the broker's wins, synonyms
    list both, then the static and the default value (kafka-python asks for synonyms)."""
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    assert alter_default(broker, {"log.retention.ms": "7200000"}).error_code == 0
    incremental(admin, "0", ("log.retention.ms", AlterConfigOpType.SET, "3600000"))
    wait_for(
        lambda: dynamic_of(broker).current.log_retention_time_ms == 3600000,
        "the per-broker value applied",
    )
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        result = client.describe_configs(
            [KpResource(ConfigResourceType.BROKER, "0", configs=["log.retention.ms"])],
            include_synonyms=True,
            config_filter="all",
        )
        dynamic_only = client.describe_configs(
            [KpResource(ConfigResourceType.BROKER, "0")], config_filter="dynamic"
        )
    finally:
        client.close()
    seen = result["broker"]["0"]["log.retention.ms"]
    assert (seen["value"], seen["config_source"], seen["read_only"]) == (
        "3600000",
        "DYNAMIC_BROKER_CONFIG",
        False,
    )
    assert [(s["name"], s["value"], s["source"]) for s in seen["synonyms"]] == [
        ("log.retention.ms", "3600000", "DYNAMIC_BROKER_CONFIG"),
        ("log.retention.ms", "7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.retention.hours", "100", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]
    # what kafka-python calls dynamic: the settings that are not read-only
    assert "log.retention.ms" in dynamic_only["broker"]["0"]
    assert "broker.id" not in dynamic_only["broker"]["0"]
    entry = describe(admin)["log.retention.ms"]
    assert entry.value == "3600000" and not entry.is_read_only
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    synonyms = dynamic_of(broker).synonyms("log.retention.ms", per_broker=True)
    assert synonyms == [
        ("log.retention.ms", "3600000", 2),
        ("log.retention.ms", "7200000", 3),
        ("log.retention.hours", "100", 4),
        ("log.retention.hours", "168", 5),
    ]
    assert describe(admin)["log.retention.hours"].is_read_only  # not dynamic in Kafka
    assert describe(admin)["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    default_view = send(
        broker,
        ApiKey.DESCRIBE_CONFIGS,
        resources=[{"resource_type": 4, "resource_name": "", "configuration_keys": None}],
        include_synonyms=True,
        include_documentation=False,
    ).results[0]
    assert [(c.name, c.value, c.config_source) for c in default_view.configs] == [
        ("log.retention.ms", "7200000", 3)
    ]
    incremental(admin, "0", ("log.retention.ms", AlterConfigOpType.DELETE, None))
    assert alter_default(broker, {}).error_code == 0
    wait_for(lambda: dynamic_of(broker).current.log_retention_ms is None, "both levels gone")


def test_a_topic_without_an_override_follows_the_new_default(broker, admin) -> None:
    futures = admin.create_topics(
        [NewTopic("plain", 1, 1), NewTopic("pinned", 1, 1, config={"retention.ms": "5000000"})]
    )
    for future in futures.values():
        future.result(30)
    wait_for(lambda: len(broker.server.log_manager.all_logs()) >= 2, "the logs")
    assert alter_default(broker, {"log.retention.ms": "1234567"}).error_code == 0

    def retention(topic: str) -> int:
        logs = [log for log in broker.server.log_manager.all_logs() if log.topic == topic]
        return logs[0].config.retention_ms

    wait_for(lambda: retention("plain") == 1234567, "the topic without override to follow")
    assert retention("pinned") == 5000000
    resource = ConfigResource("topic", "plain")
    entry = admin.describe_configs([resource])[resource].result(30)["retention.ms"]
    assert entry.value == "1234567"
    assert entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert alter_default(broker, {}).error_code == 0
    wait_for(lambda: retention("plain") == 100 * 3600000, "back to the static default")


def _api_versions_frame(correlation_id: int = 7) -> bytes:
    client_id = b"raw"
    body = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, correlation_id, len(client_id))
    body += client_id
    return struct.pack(">i", len(body)) + body


def _answered(sock: socket.socket) -> bool:
    sock.sendall(_api_versions_frame())
    size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
    return len(_recv_exactly(sock, size)) == size


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def test_connection_limits_change_live(broker, pki) -> None:
    """max.connections.per.ip.overrides: an address at 0 is refused from now on (its open
    connection stays); max.connections lowered: a new connection on the SSL listener waits for
    a slot (the inter-broker PLAINTEXT listener is protected, as in Kafka), and is served once
    the limit is raised again."""
    kept = socket.create_connection(("127.0.0.1", broker.port), source_address=("127.0.0.2", 0))
    assert _answered(kept)
    assert (
        alter_default(broker, {"max.connections.per.ip.overrides": "127.0.0.2:0"}).error_code == 0
    )
    quotas = broker.server.socket_server.quotas
    wait_for(lambda: quotas.per_ip_overrides == {"127.0.0.2": 0}, "the override applied")
    refused = socket.create_connection(
        ("127.0.0.1", broker.port), source_address=("127.0.0.2", 0), timeout=30
    )
    with pytest.raises(ConnectionError):
        _answered(refused)
    refused.close()
    assert _answered(kept)
    kept.close()

    assert alter_default(broker, {"max.connections": "1"}).error_code == 0
    wait_for(lambda: quotas.max_connections == 1, "the lower limit applied")
    wait_for(lambda: quotas.total >= 1, "a connection counted")  # none may close meanwhile
    blocked_before = quotas.blocked_seconds()
    waiting = socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=30)
    wait_for(lambda: quotas.blocked_seconds() > blocked_before, "the acceptor to wait for a slot")
    assert alter_default(broker, {}).error_code == 0  # over the protected PLAINTEXT listener
    wait_for(lambda: quotas.max_connections > 1, "the limit raised")
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    served = context.wrap_socket(waiting, server_hostname="127.0.0.1")
    assert _answered(served)
    served.close()


def test_listener_certificate_rotates_without_restart(broker, admin, pki) -> None:
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))

    def subject_cn(sock: ssl.SSLSocket) -> str:
        subject = dict(x[0] for x in sock.getpeercert()["subject"])
        return subject["commonName"]

    old = context.wrap_socket(
        socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=30),
        server_hostname="127.0.0.1",
    )
    assert subject_cn(old) == "first"
    # the keystore file is replaced in place, and named again (Kafka's reload of files
    # without a config change)
    (pki / "server.pem").write_bytes((pki / "second.pem").read_bytes())
    incremental(
        admin,
        "0",
        (
            "listener.name.ssl.ssl.keystore.location",
            AlterConfigOpType.SET,
            str(pki / "server.pem"),
        ),
    )
    new = context.wrap_socket(
        socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=30),
        server_hostname="127.0.0.1",
    )
    assert subject_cn(new) == "second"
    assert _answered(old)  # the connection made before keeps working
    assert _answered(new)
    old.close()
    new.close()
    # a keystore that cannot be read is refused and changes nothing
    with pytest.raises(KafkaException) as error:
        incremental(
            admin,
            "0",
            ("listener.name.ssl.ssl.keystore.location", AlterConfigOpType.SET, "/nonexistent"),
        )
    assert error.value.args[0].name() == "INVALID_CONFIG"


def test_a_password_config_is_stored_encrypted_and_never_returned(broker, admin) -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{PLAIN_PASSWORD}" user_admin="{PLAIN_PASSWORD}";'
    )
    key = "listener.name.plaintext.plain.sasl.jaas.config"
    incremental(admin, "0", (key, AlterConfigOpType.SET, jaas))
    wait_for(lambda: dynamic_of(broker).per_broker.get(key) == jaas, "the decoded value in use")
    stored = asyncio.run_coroutine_threadsafe(
        get_broker_config(broker.server.session, 0), broker._thread.loop
    ).result(30)
    assert PLAIN_PASSWORD not in repr(stored)
    assert stored[key].startswith("keyFactoryAlgorithm:") or "encryptedPassword:" in stored[key]
    assert PasswordEncoder(SECRET).decode(stored[key]) == jaas
    on_disk = b"".join(p.read_bytes() for p in broker.data_dir.rglob("*") if p.is_file())
    assert PLAIN_PASSWORD.encode() not in on_disk
    entry = describe(admin)[key]
    assert entry.value is None and entry.is_sensitive
    assert all(s.value is None for s in entry.synonyms.values())
    # the cluster default may not hold a password
    answer = alter_default(broker, {key: jaas})
    assert answer.error_code == 40
    incremental(admin, "0", (key, AlterConfigOpType.DELETE, None))
