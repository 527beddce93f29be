"""Nothing of a connection outlives it in a running broker: after a few hundred clients connect,
ask ApiVersions and go away, the broker's connection objects, its tables and its per-address
counts are back where they were. Counted through the garbage collector and the server's own
tables, not RSS (which the benchmark reports: bench/scale_connections.py)."""

import gc
import socket
import struct
import sys

import pytest

from kafkalite.network import server as network_server
from kafkalite.network.connection import ConnectionInfo, KafkaConnection
from kafkalite.network.server import TRIM_AFTER_CLOSES
from kafkalite.testing import Broker, recv_exactly
from kafkalite.testing.waiting import wait_for

pytestmark = pytest.mark.integration

CONNECTIONS = 300
API_VERSIONS_V3 = struct.pack(">hhih", 18, 3, 7, 4) + b"test" + b"\x00" + b"\x02a\x02b\x00"


@pytest.fixture(scope="module")
def broker():
    with Broker() as b:
        yield b


def live(kind: type) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is kind)


def transports() -> int:
    """The event loop's transport objects (asyncio's or uvloop's) alive in this process."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o).__name__.endswith("Transport"))


def ask_api_versions(sock: socket.socket) -> None:
    sock.sendall(struct.pack(">i", len(API_VERSIONS_V3)) + API_VERSIONS_V3)
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    body = recv_exactly(sock, size)
    assert struct.unpack_from(">ih", body) == (7, 0)


def test_closed_connections_leave_nothing_behind(broker, monkeypatch):
    server = broker.server.socket_server
    releases = []
    release = network_server._release_empty_pools
    assert release is not None  # the extension is built (decision 0074)
    monkeypatch.setattr(
        network_server, "_release_empty_pools", lambda: releases.append(release()) or releases[-1]
    )
    assert CONNECTIONS >= TRIM_AFTER_CLOSES  # a burst big enough for the release after it
    base = server.connection_count
    before = {
        "connections": live(KafkaConnection),
        "infos": live(ConnectionInfo),
        "transports": transports(),
        "from_this_address": server.quotas.connections_from("127.0.0.1"),
    }
    table_before = sys.getsizeof(server._connections)
    table_object = server._connections

    socks = []
    try:
        for _ in range(CONNECTIONS):
            sock = socket.create_connection((broker.host, broker.port), timeout=30)
            socks.append(sock)
            ask_api_versions(sock)
        wait_for(lambda: server.connection_count == base + CONNECTIONS, "every connection taken")
        # what is counted below does count connections (so the checks after the close can fail)
        assert live(KafkaConnection) >= before["connections"] + CONNECTIONS
        assert live(ConnectionInfo) >= before["infos"] + CONNECTIONS
        assert transports() >= before["transports"] + CONNECTIONS
        assert server.quotas.connections_from("127.0.0.1") >= CONNECTIONS
        assert sys.getsizeof(server._connections) > table_before
    finally:
        for sock in socks:
            sock.close()

    wait_for(lambda: server.connection_count == base, "every connection released")
    wait_for(lambda: live(KafkaConnection) <= before["connections"], "connections freed")
    after = {
        "connections": live(KafkaConnection),
        "infos": live(ConnectionInfo),
        "transports": transports(),
        "from_this_address": server.quotas.connections_from("127.0.0.1"),
    }
    assert after == before
    # the set of connections is rebuilt at its present size once the burst is over (a set's
    # table never shrinks by itself: it would keep room for every connection of the burst)
    wait_for(
        lambda: sys.getsizeof(server._connections) <= table_before,
        "the connection table shrunk back",
    )
    # by emptying and refilling the set it had before the burst, not by a new set (one made
    # now would be made inside the arenas the burst emptied and keep one of them: decision 0067)
    assert server._connections is table_object
    # and the empty pools of CPython's arenas were given back, once, after the burst
    wait_for(lambda: releases, "the empty pools given back")
    assert len(releases) == 1


def test_a_second_burst_leaves_nothing_behind_either(broker, monkeypatch):
    """The release after a burst is rate-limited, not once for ever: a later burst is released
    too (one after another, as a broker that clients keep leaving sees them)."""
    test_closed_connections_leave_nothing_behind(broker, monkeypatch)
