"""Connection limits (kafkalite/network/quotas.py): the counting rules against an oracle, the
configuration keys, and Kafka's behaviour at each limit over real sockets and with a real
client."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.config import INT_MAX, BrokerConfig, ConfigError, Endpoint
from kafkalite.network.quotas import ConnectionQuotas
from kafkalite.network.server import SocketServer
from kafkalite.testing import free_port
from tests.controller.shell_support import eventually
from tests.network.support import ScriptedDispatcher, frame, read_response

REPO_ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------- counting


@settings(max_examples=200, deadline=None)
@given(
    default=st.integers(0, 3),
    overrides=st.dictionaries(st.sampled_from(["10.0.0.1", "10.0.0.2"]), st.integers(0, 3)),
    ops=st.lists(
        st.tuples(st.booleans(), st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.3"])),
        max_size=40,
    ),
)
def test_per_ip_counting_matches_an_oracle(default, overrides, ops):
    """inc refuses exactly the connections past an address's limit (override, else default);
    a refused connection is still counted until its dec, as in Kafka."""
    quotas = ConnectionQuotas(max_connections_per_ip=default, per_ip_overrides=overrides)
    open_: dict[str, int] = {}
    rejected = 0
    for is_open, ip in ops:
        if is_open:
            allowed = quotas.inc("PLAINTEXT", ip)
            expected = open_.get(ip, 0) < overrides.get(ip, default)
            assert allowed == expected
            if allowed:
                open_[ip] = open_.get(ip, 0) + 1
            else:
                rejected += 1
                assert quotas.connections_from(ip) == open_.get(ip, 0) + 1
                quotas.dec("PLAINTEXT", ip)
        elif open_.get(ip):
            quotas.dec("PLAINTEXT", ip)
            open_[ip] -= 1
        for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
            assert quotas.connections_from(address) == open_.get(address, 0)
        assert quotas.total == sum(open_.values())
    assert quotas.rejected_per_ip == rejected
    with pytest.raises(ValueError):
        quotas.dec("PLAINTEXT", "10.9.9.9")  # never counted


def test_the_inter_broker_listener_is_protected_only_beside_another_listener():
    alone = ConnectionQuotas(max_connections=1, listeners=("A",), inter_broker_listener="A")
    assert alone.inc("A", "10.0.0.1")
    assert not alone.slot_available("A") and alone.protected_listener is None
    two = ConnectionQuotas(max_connections=1, listeners=("A", "B"), inter_broker_listener="A")
    assert two.inc("B", "10.0.0.1")
    assert not two.slot_available("B") and two.slot_available("A")
    assert two.inc("A", "10.0.0.2")
    assert two.over_limit_for("B") and not two.over_limit_for("A")


async def test_wait_for_slot_returns_when_a_connection_is_released():
    quotas = ConnectionQuotas(max_connections=1)
    assert quotas.inc("PLAINTEXT", "10.0.0.1")
    waiting = asyncio.ensure_future(quotas.wait_for_slot("PLAINTEXT"))
    await eventually(lambda: quotas.blocked_seconds() > 0, message="acceptor blocked")
    assert not waiting.done()
    quotas.dec("PLAINTEXT", "10.0.0.1")
    await asyncio.wait_for(waiting, 10)
    blocked = quotas.blocked_seconds()
    assert blocked > 0 and quotas.blocked_seconds() == blocked  # no wait in progress now


# ---------------------------------------------------------------------- configuration


def test_config_defaults_are_kafkas():
    config = BrokerConfig.load(environ={})
    assert config.max_connections == INT_MAX
    assert config.max_connections_per_ip == INT_MAX
    assert config.max_connections_per_ip_override_map == {}
    overrides = "127.0.0.1:2, ::1:4,broker-a.example:5"
    config = BrokerConfig.load(overrides={"max.connections.per.ip.overrides": overrides})
    assert config.max_connections_per_ip_override_map == {
        "127.0.0.1": 2,
        "::1": 4,
        "broker-a.example": 5,
    }


@pytest.mark.parametrize(
    "key, value",
    [
        ("max.connections", "-1"),
        ("max.connections", "3000000000"),
        ("max.connections", "many"),
        ("max.connections.per.ip", "-2"),
        ("max.connections.per.ip", "0"),  # only with overrides, as in Kafka
        ("max.connections.per.ip.overrides", "127.0.0.1"),
        ("max.connections.per.ip.overrides", "127.0.0.1:x"),
        ("max.connections.per.ip.overrides", "127.0.0.1:-1"),
        ("max.connections.per.ip.overrides", "bad host:3"),
        ("max.connections.per.ip.overrides", ":3"),
    ],
)
def test_bad_values_stop_start_up_naming_the_key(key, value):
    with pytest.raises(ConfigError) as error:
        BrokerConfig.load(overrides={key: value}, environ={})
    assert error.value.key == key and key in str(error.value)


def test_zero_per_ip_with_overrides_is_accepted():
    config = BrokerConfig.load(
        overrides={
            "max.connections.per.ip": "0",
            "max.connections.per.ip.overrides": "127.0.0.1:5",
        },
        environ={},
    )
    assert config.max_connections_per_ip == 0


async def test_override_host_names_are_resolved_and_unknown_ones_refused():
    quotas = ConnectionQuotas(per_ip_overrides={"localhost": 3, "10.1.2.3": 1})
    await quotas.resolve_overrides()
    assert quotas.limit_for("127.0.0.1") == 3 and quotas.limit_for("10.1.2.3") == 1
    unknown = ConnectionQuotas(per_ip_overrides={"no-such-host.invalid": 3})
    with pytest.raises(ConfigError) as error:
        await unknown.resolve_overrides()
    assert error.value.key == "max.connections.per.ip.overrides"


def test_a_broker_with_an_unresolvable_override_stops_naming_the_key(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafkalite",
            "serve",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            "admin.listener=",
            "--override",
            "max.connections.per.ip.overrides=no-such-host.invalid:3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 1
    assert "max.connections.per.ip.overrides" in result.stdout + result.stderr


# ---------------------------------------------------------------------- real sockets


@contextlib.asynccontextmanager
async def serving(quotas: ConnectionQuotas, endpoints=None):
    endpoints = endpoints or [Endpoint("PLAINTEXT", "127.0.0.1", 0)]
    srv = SocketServer(endpoints, ScriptedDispatcher(), max_request_bytes=1_000_000, quotas=quotas)
    await srv.start()
    try:
        yield srv
    finally:
        await srv.shutdown(1.0)


async def connect(port: int, source: str = "127.0.0.1"):
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def answered(reader, writer, ident: int) -> bool:
    """Send an echo request; whether its answer came (False: the connection was closed)."""
    try:
        writer.write(frame(struct.pack(">i", ident) + b"E"))
        return (await asyncio.wait_for(read_response(reader), 10))[0] == ident
    except (asyncio.IncompleteReadError, ConnectionError):
        return False


async def test_past_max_connections_per_ip_a_connection_is_closed_at_once():
    quotas = ConnectionQuotas(max_connections_per_ip=2, per_ip_overrides={"127.0.0.2": 3})
    async with serving(quotas) as srv:
        port = srv.bound_endpoints[0].port
        first = [await connect(port) for _ in range(2)]
        for i, (reader, writer) in enumerate(first):
            assert await answered(reader, writer, i)
        reader, writer = await connect(port)  # the TCP handshake succeeds; then it is closed
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
        assert quotas.rejected_per_ip == 1
        await eventually(lambda: quotas.connections_from("127.0.0.1") == 2)
        # the others from that address, and another address with its override, are served
        assert all([await answered(r, w, 10 + i) for i, (r, w) in enumerate(first)])
        others = [await connect(port, "127.0.0.2") for _ in range(3)]
        assert all([await answered(r, w, 20 + i) for i, (r, w) in enumerate(others)])
        # a freed slot takes a new connection
        first[0][1].close()
        await eventually(lambda: quotas.connections_from("127.0.0.1") == 1)
        reader, writer = await connect(port)
        assert await answered(reader, writer, 30)
        for _, w in [*first[1:], *others, (reader, writer)]:
            w.close()


async def test_at_max_connections_the_acceptor_waits_for_a_free_slot():
    quotas = ConnectionQuotas(max_connections=2)
    async with serving(quotas) as srv:
        port = srv.bound_endpoints[0].port
        first = [await connect(port) for _ in range(2)]
        for i, (reader, writer) in enumerate(first):
            assert await answered(reader, writer, i)
        # Accepted by the kernel (listen backlog), but the broker takes it only once a slot
        # frees: its request waits unread meanwhile.
        reader, writer = await connect(port)
        writer.write(frame(struct.pack(">i", 7) + b"E"))
        await eventually(lambda: quotas.blocked_seconds() > 0, message="acceptor blocked")
        assert srv.connection_count == 2 and quotas.rejected_per_ip == 0
        assert 7 not in srv._dispatcher.seen
        # connections already open are served normally meanwhile
        assert await answered(*first[1], 11)
        first[0][1].close()
        assert (await asyncio.wait_for(read_response(reader), 10))[0] == 7
        assert srv.connection_count == 2
        for _, w in [first[1], (reader, writer)]:
            w.close()


async def test_the_inter_broker_listener_gets_in_past_the_limit_closing_the_oldest_other():
    quotas = ConnectionQuotas(
        max_connections=2, listeners=("CLIENT", "INTERNAL"), inter_broker_listener="INTERNAL"
    )
    endpoints = [Endpoint("CLIENT", "127.0.0.1", 0), Endpoint("INTERNAL", "127.0.0.1", 0)]
    async with serving(quotas, endpoints) as srv:
        client_port, internal_port = (e.port for e in srv.bound_endpoints)
        old = await connect(client_port)
        assert await answered(*old, 1)
        recent = await connect(client_port)
        assert await answered(*recent, 2)
        internal = await connect(internal_port)
        assert await answered(*internal, 3)  # not blocked by max.connections
        assert await asyncio.wait_for(old[0].read(), 10) == b""  # least recently used: closed
        assert await answered(*recent, 4)
        await eventually(lambda: quotas.total == 2)
        for _, w in (old, recent, internal):
            w.close()


# ---------------------------------------------------------------------- a real client


def raw_connection(port: int, source: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    return s


def closed_by_peer(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_client_on_other_connections_is_unaffected_by_a_rejected_address(broker_factory):
    from confluent_kafka import Consumer, Producer

    broker = broker_factory(overrides={"max.connections.per.ip.overrides": "127.0.0.2:2"})
    broker.start()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("quota-topic", f"before-{i}".encode())
    assert producer.flush(30) == 0

    kept = [raw_connection(broker.port, "127.0.0.2") for _ in range(2)]
    refused = raw_connection(broker.port, "127.0.0.2")
    assert closed_by_peer(refused)  # the third from 127.0.0.2 is closed at once
    refused.close()

    for i in range(10):
        producer.produce("quota-topic", f"after-{i}".encode())
    assert producer.flush(30) == 0  # the producer's own connections still work
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "quota-readers",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["quota-topic"])
    values = []
    while len(values) < 20:
        msg = consumer.poll(30)
        assert msg is not None, f"only {values} consumed"
        if msg.error() is None:
            values.append(msg.value().decode())
    consumer.close()
    assert values == [f"before-{i}" for i in range(10)] + [f"after-{i}" for i in range(10)]
    # the two connections 127.0.0.2 was allowed are served too
    for s in kept:
        payload = struct.pack(">hhih", 18, 0, 5, 4) + b"test"
        s.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", s.recv(4))[0]
        assert size > 0
        s.close()


def test_the_soft_open_file_limit_is_raised_to_the_hard_one():
    import resource

    from kafkalite.network.server import raise_open_file_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.fail(f"this test needs a finite hard limit above 256, not {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        assert raise_open_file_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
