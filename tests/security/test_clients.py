"""Real clients over TLS, SASL_PLAINTEXT, SASL_SSL (PLAIN, SCRAM-SHA-256/512) and mTLS.

One broker for the module (support.secure_listeners: a listener per protocol), with test
certificates made by trustme. Each client produces to a topic of its own over one listener
and reads it back over the same listener. SCRAM users are created with
AlterUserScramCredentials, the way Kafka's tools do it, and live in /config/users/<user>.
Bad credentials get SASL_AUTHENTICATION_FAILED and a closed connection; a SASL listener
answers nothing but ApiVersions and the SASL requests before authentication; a certificate
from another CA is refused on the mTLS listener.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import struct
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.client.connection import KafkaConnection
from kafkalite.protocol.api import ApiKey
from kafkalite.security.listeners import ClientSecurity
from kafkalite.testing import Broker, api_versions_ok, free_port, recv_exactly
from tests.security.support import (
    PLAIN_USERS,
    SCRAM_PASSWORD,
    SCRAM_USER,
    add_scram_user,
    make_pki,
    secure_listeners,
    set_quota,
)

DEADLINE_S = 30.0
KCAT = shutil.which("kcat") or "/usr/bin/kcat"


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    root = tmp_path_factory.mktemp("secure-broker")
    pki = make_pki(root / "pki")
    port = free_port()
    # two 1 s samples: the quota test's producer gets no long initial burst (Kafka's default
    # 11 samples let a new client send up to 10 s worth of quota at once)
    overrides, ports = secure_listeners(pki, port, **{"quota.window.num": "2"})
    broker = Broker(
        data_dir=root / "broker", port=port, config=overrides, subprocess=True, admin=False
    )
    broker.start()
    asyncio.run(add_scram_user(broker.bootstrap, SCRAM_USER, SCRAM_PASSWORD))
    yield broker, pki, ports
    broker.stop()


def librdkafka_conf(secure, mode: str) -> dict[str, str]:
    broker, pki, ports = secure
    ca = {"ssl.ca.location": str(pki.ca_file)}
    plain = {"sasl.username": "alice", "sasl.password": PLAIN_USERS["alice"]}
    scram = {"sasl.username": SCRAM_USER, "sasl.password": SCRAM_PASSWORD}
    return {
        "ssl": {"security.protocol": "SSL", "port": ports.ssl, **ca},
        "sasl_plaintext-plain": {
            "security.protocol": "SASL_PLAINTEXT",
            "port": ports.sasl_plaintext,
            "sasl.mechanism": "PLAIN",
            **plain,
        },
        "sasl_plaintext-scram256": {
            "security.protocol": "SASL_PLAINTEXT",
            "port": ports.sasl_plaintext,
            "sasl.mechanism": "SCRAM-SHA-256",
            **scram,
        },
        "sasl_ssl-plain": {
            "security.protocol": "SASL_SSL",
            "port": ports.sasl_ssl,
            "sasl.mechanism": "PLAIN",
            **plain,
            **ca,
        },
        "sasl_ssl-scram256": {
            "security.protocol": "SASL_SSL",
            "port": ports.sasl_ssl,
            "sasl.mechanism": "SCRAM-SHA-256",
            **scram,
            **ca,
        },
        "sasl_ssl-scram512": {
            "security.protocol": "SASL_SSL",
            "port": ports.sasl_ssl,
            "sasl.mechanism": "SCRAM-SHA-512",
            **scram,
            **ca,
        },
        "mtls": {
            "security.protocol": "SSL",
            "port": ports.mtls,
            "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key),
            **ca,
        },
    }[mode]


def confluent(secure, mode: str) -> dict[str, str]:
    conf = dict(librdkafka_conf(secure, mode))
    conf["bootstrap.servers"] = f"127.0.0.1:{conf.pop('port')}"
    return conf


MODES = [
    "ssl",
    "sasl_plaintext-plain",
    "sasl_plaintext-scram256",
    "sasl_ssl-plain",
    "sasl_ssl-scram256",
    "sasl_ssl-scram512",
    "mtls",
]


@pytest.mark.parametrize("mode", MODES)
def test_confluent_kafka_produces_and_consumes(secure, mode):
    topic = f"ck-{mode}"
    conf = confluent(secure, mode)
    producer = Producer(conf)
    for i in range(20):
        producer.produce(topic, value=f"{mode}-{i}".encode(), key=str(i).encode())
    assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer({**conf, "group.id": f"g-{mode}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value().decode())
    finally:
        consumer.close()
    assert got == [f"{mode}-{i}" for i in range(20)]


@pytest.mark.parametrize(
    "mode, kwargs",
    [
        ("ssl", {"security_protocol": "SSL"}),
        (
            "sasl_plaintext-plain",
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"},
        ),
        ("sasl_ssl-scram256", {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256"}),
    ],
)
def test_kafka_python(secure, mode, kwargs):
    from kafka import KafkaConsumer, KafkaProducer

    broker, pki, ports = secure
    conf = librdkafka_conf(secure, mode)
    common = {
        "bootstrap_servers": f"127.0.0.1:{conf['port']}",
        "ssl_cafile": str(pki.ca_file),
        **kwargs,
    }
    if "sasl_mechanism" in kwargs:
        common["sasl_plain_username"] = conf["sasl.username"]
        common["sasl_plain_password"] = conf["sasl.password"]
    topic = f"kp-{mode}"
    producer = KafkaProducer(**common)
    for i in range(10):
        producer.send(topic, f"v{i}".encode()).get(timeout=DEADLINE_S)
    producer.close()
    consumer = KafkaConsumer(
        topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **common
    )
    got = [m.value.decode() for _, m in zip(range(10), consumer, strict=False)]
    consumer.close()
    assert got == [f"v{i}" for i in range(10)]


@pytest.mark.parametrize("mode", ["sasl_ssl-scram512", "sasl_plaintext-plain", "mtls"])
async def test_aiokafka(secure, mode):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    broker, pki, ports = secure
    conf = librdkafka_conf(secure, mode)
    common: dict = {
        "bootstrap_servers": f"127.0.0.1:{conf['port']}",
        "security_protocol": conf["security.protocol"],
    }
    if "ssl.ca.location" in conf:
        common["ssl_context"] = create_ssl_context(
            cafile=str(pki.ca_file),
            certfile=conf.get("ssl.certificate.location"),
            keyfile=conf.get("ssl.key.location"),
        )
    if "sasl.mechanism" in conf:
        common.update(
            sasl_mechanism=conf["sasl.mechanism"],
            sasl_plain_username=conf["sasl.username"],
            sasl_plain_password=conf["sasl.password"],
        )
    topic = f"aio-{mode}"
    producer = AIOKafkaProducer(**common)
    await producer.start()
    try:
        for i in range(10):
            await producer.send_and_wait(topic, f"v{i}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **common)
    await consumer.start()
    got = []
    try:
        async with asyncio.timeout(DEADLINE_S):
            async for message in consumer:
                got.append(message.value.decode())
                if len(got) == 10:
                    break
    finally:
        await consumer.stop()
    assert got == [f"v{i}" for i in range(10)]


@pytest.mark.parametrize("mode", ["sasl_ssl-scram256", "mtls"])
def test_kcat(secure, mode):
    conf = librdkafka_conf(secure, mode)
    args = ["-b", f"127.0.0.1:{conf['port']}"]
    for key, value in conf.items():
        if key != "port":
            args += ["-X", f"{key}={value}"]
    topic = f"kcat-{mode}"
    try:
        subprocess.run(
            [KCAT, *args, "-P", "-t", topic],
            input=b"one\ntwo\nthree\n",
            capture_output=True,
            timeout=60,
            check=True,
        )
        out = subprocess.run(
            [KCAT, *args, "-C", "-t", topic, "-e", "-o", "beginning"],
            capture_output=True,
            timeout=60,
            check=True,
        )
    except FileNotFoundError:
        raise AssertionError("kcat is missing: apt-get install kcat") from None
    assert out.stdout.split() == [b"one", b"two", b"three"]


def test_bad_password_is_refused_by_a_real_client(secure):
    errors = []
    conf = confluent(secure, "sasl_ssl-scram512")
    conf.update({"sasl.password": "wrong", "error_cb": errors.append})
    producer = Producer(conf)
    deadline = time.monotonic() + DEADLINE_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors, "no error reported"
    assert errors[0].code() == KafkaError._AUTHENTICATION
    assert "Authentication failed" in errors[0].str()


# ---------------------------------------------------------------------- the wire, by hand


def frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    client_id = b"raw"
    payload = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    payload += body
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    return recv_exactly(sock, size)


def closed(sock: socket.socket) -> bool:
    sock.settimeout(DEADLINE_S)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_bad_credentials_get_sasl_authentication_failed_and_a_close(secure):
    broker, pki, ports = secure
    with socket.create_connection(("127.0.0.1", ports.sasl_plaintext), timeout=DEADLINE_S) as s:
        mechanism = b"PLAIN"
        s.sendall(frame(17, 1, 1, struct.pack(">h", len(mechanism)) + mechanism))
        body = read_frame(s)
        assert struct.unpack_from(">ih", body) == (1, 0)  # correlation id, no error
        token = b"\0alice\0not-her-password"
        s.sendall(frame(36, 0, 2, struct.pack(">i", len(token)) + token))
        body = read_frame(s)
        correlation_id, error = struct.unpack_from(">ih", body)
        assert (correlation_id, error) == (2, 58)  # SASL_AUTHENTICATION_FAILED
        assert b"Invalid username or password" in body
        assert closed(s)


def test_nothing_is_served_before_authentication(secure):
    broker, pki, ports = secure
    with socket.create_connection(("127.0.0.1", ports.sasl_plaintext), timeout=DEADLINE_S) as s:
        s.sendall(frame(3, 1, 7, struct.pack(">i", -1)))  # Metadata v1, all topics
        assert closed(s)  # no answer at all: the connection is closed
    with socket.create_connection(("127.0.0.1", ports.sasl_plaintext), timeout=DEADLINE_S) as s:
        s.sendall(frame(18, 0, 1, b""))  # ApiVersions is answered, as Kafka does
        correlation_id, error = struct.unpack_from(">ih", read_frame(s))
        assert (correlation_id, error) == (1, 0)
        s.sendall(frame(0, 3, 2, b"\xff\xff\x00\x01\x00\x00\x03\xe8\x00\x00\x00\x00"))  # Produce
        assert closed(s)


def test_a_certificate_from_another_ca_is_refused_on_the_mtls_listener(secure):
    broker, pki, ports = secure
    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    ctx.load_cert_chain(str(pki.rogue_cert), str(pki.rogue_key))
    with socket.create_connection(("127.0.0.1", ports.mtls), timeout=DEADLINE_S) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(frame(18, 0, 1, b""))
                read_frame(s)


async def test_the_brokers_own_client_speaks_scram_over_tls(secure):
    broker, pki, ports = secure
    security = ClientSecurity(
        "SASL_SSL",
        ssl.create_default_context(cafile=str(pki.ca_file)),
        "SCRAM-SHA-512",
        SCRAM_USER,
        SCRAM_PASSWORD,
    )
    async with KafkaConnection("127.0.0.1", ports.sasl_ssl, security=security) as conn:
        response = await conn.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None})
    users = {r.user: sorted(c.mechanism for c in r.credential_infos) for r in response.results}
    assert users[SCRAM_USER] == [1, 2]


# ---------------------------------------------------------------------- quotas

QUOTA = 300_000  # bytes/s


def test_a_throttled_producer_is_held_to_its_byte_rate(secure):
    """Upper bound only: whatever the machine's load, the acknowledged rate over the last 2 s
    of 3 s of greedy producing stays under the quota plus 10% (a slower machine only lowers
    it); throttle_time_ms reaches the client."""
    broker, pki, ports = secure
    asyncio.run(set_quota(broker.bootstrap, "throttled", QUOTA))
    throttles: list[int] = []
    acked: list[tuple[float, int]] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "throttled",
            "linger.ms": 5,
            "batch.size": 16384,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    value = b"x" * 1000
    started = time.monotonic()

    def delivered(err, msg):
        if err is None:
            acked.append((time.monotonic() - started, len(msg.value())))

    while time.monotonic() - started < 3.0:
        try:
            producer.produce("quota-topic", value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(0)  # drop the rest: only what was acknowledged within the 3 s counts
    measured = sum(size for at, size in acked if 1.0 <= at < 3.0)
    asyncio.run(set_quota(broker.bootstrap, "throttled", None))
    assert throttles and max(throttles) > 0
    assert measured <= 1.1 * QUOTA * 2.0, measured
    assert measured >= 0.25 * QUOTA * 2.0, measured  # it was throttled, not stopped


# ---------------------------------------------------------------------- CLI


def test_cli_users_and_quotas_over_sasl_ssl_with_a_command_config(secure, tmp_path):
    from click.testing import CliRunner

    from kafkalite.cli import app

    broker, pki, ports = secure
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        f"ssl.truststore.location={pki.ca_file}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="admin" password="admin-secret";\n'
    )
    common = ["--bootstrap-server", f"127.0.0.1:{ports.sasl_ssl}", "--command-config", str(config)]
    runner = CliRunner()

    def cli(*args: str) -> str:
        result = runner.invoke(app, [*args, *common])
        assert result.exit_code == 0, result.output
        return result.output

    cli("users", "add", "dave", "--password", "dave-secret", "--mechanism", "SCRAM-SHA-256")
    assert "dave" in cli("users", "list") and "SCRAM-SHA-256" in cli("users", "list")
    # dave can now authenticate with SCRAM-SHA-256
    errors = []
    conf = confluent(secure, "sasl_ssl-scram256")
    conf.update(
        {"sasl.username": "dave", "sasl.password": "dave-secret", "error_cb": errors.append}
    )
    assert "alice" not in AdminClientTopics(conf)  # metadata answered: authenticated
    assert not errors
    cli("users", "remove", "dave")
    assert "dave" not in cli("users", "list")
    cli("quotas", "set", "--user", "dave", "--producer-byte-rate", "1048576")
    assert "1.04858e+06" in cli("quotas", "list") or "1048576" in cli("quotas", "list")
    cli("quotas", "set", "--user", "dave", "--remove", "producer_byte_rate")
    assert "dave" not in cli("quotas", "list")
    bad = runner.invoke(app, ["users", "list", "--command-config", str(tmp_path / "missing")])
    assert bad.exit_code == 2 and "--command-config" in bad.output


def AdminClientTopics(conf) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient(conf).list_topics(timeout=DEADLINE_S).topics)


def test_librdkafka_reauthenticates_before_its_session_expires(secure):
    """connections.max.reauth.ms=1000 on the REAUTH listener (KIP-368): librdkafka learns the
    session lifetime from SaslAuthenticate and re-authenticates on the same connection; a
    session left to expire would close the connection on its next request (unit-tested)."""
    broker, pki, ports = secure
    errors: list = []
    conf = {
        "bootstrap.servers": f"127.0.0.1:{ports.reauth}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": PLAIN_USERS["alice"],
        "error_cb": errors.append,
        "linger.ms": 0,
    }
    closes_before = broker.log_text().count("closing connection")
    producer = Producer(conf)
    delivered: list = []
    started = time.monotonic()
    while time.monotonic() - started < 2.5:  # two and a half session lifetimes
        producer.produce("reauth", b"v", on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(DEADLINE_S)
    assert delivered and all(err is None for err in delivered)
    assert not errors, errors  # no disconnection, no authentication failure
    assert broker.log_text().count("closing connection") == closes_before


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    token=st.binary(max_size=64),
    garbage=st.binary(min_size=1, max_size=48),
    raw=st.booleans(),
)
def test_fuzzed_authentication_frames_against_the_broker(secure, token, garbage, raw):
    """A valid handshake, then a random token (in SaslAuthenticate, or as a raw frame) and
    random bytes: the broker answers SASL_AUTHENTICATION_FAILED or closes, never serves the
    garbage that follows, and keeps serving others."""
    broker, pki, ports = secure
    with socket.create_connection(("127.0.0.1", ports.sasl_plaintext), timeout=DEADLINE_S) as s:
        mechanism = b"PLAIN"
        s.sendall(frame(17, 0 if raw else 1, 1, struct.pack(">h", len(mechanism)) + mechanism))
        read_frame(s)
        if raw:
            s.sendall(struct.pack(">i", len(token)) + token)
        else:
            s.sendall(frame(36, 0, 2, struct.pack(">i", len(token)) + token))
        s.sendall(struct.pack(">i", len(garbage)) + garbage)
        s.settimeout(DEADLINE_S)
        try:
            data = s.recv(65536)
        except ConnectionResetError:
            data = b""
        if data and not raw:
            (correlation_id, error) = struct.unpack_from(">ih", data, 4)
            assert (correlation_id, error) == (2, 58)
        assert closed(s)
    assert api_versions_ok(broker.host, broker.port)
