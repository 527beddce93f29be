"""ZooKeeper-backend specifics: chroot, connect string, server restart, loss detection."""

from __future__ import annotations

import asyncio

import pytest

from kafkalite.coord import (
    ANY_VERSION,
    BadArguments,
    ConnectionLoss,
    CreateOp,
    CreateResult,
    EventType,
    NodeExists,
    NoNode,
    SessionState,
    WatchEvent,
    open_store,
    parse_connect,
)
from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.coord.zookeeper import AiozkSession, ZooKeeperStore
from kafkalite.testing import ZooKeeperMissing, ZooKeeperServer, free_port
from tests.collector import collector_off, cyclic_garbage

from .conftest import started_zookeeper, wait_state


def test_parse_connect():
    assert parse_connect("h1:2181,h2:2181/kafkalite") == ("h1:2181,h2:2181", "/kafkalite")
    assert parse_connect("h1:2181") == ("h1:2181", None)
    assert parse_connect("h1:2181/a/b/") == ("h1:2181", "/a/b")
    with pytest.raises(BadArguments):
        parse_connect("")
    with pytest.raises(BadArguments):
        parse_connect("/chroot-only")


def test_open_store_picks_the_backend(tmp_path):
    assert isinstance(open_store("127.0.0.1:1/x", None), ZooKeeperStore)
    store = open_store(None, tmp_path)
    assert isinstance(store, EmbeddedStore)
    assert open_store(None, tmp_path) is store  # one store per data dir per process


async def test_chroot_is_created_and_hides_the_prefix(zookeeper_server):
    store = open_store(zookeeper_server.connect_string("/kafkalite/cluster-a"), None, 4000)
    root_store = open_store(zookeeper_server.connect_string(), None, 4000)
    try:
        session = await store.open_session()
        root = await root_store.open_session()
        chroot_stat = await root.exists("/kafkalite/cluster-a")
        assert chroot_stat is not None and not chroot_stat.is_ephemeral
        assert await session.create("/brokers/ids/1", b"x", makepath=True) == "/brokers/ids/1"
        assert await root.get_data("/kafkalite/cluster-a/brokers/ids/1") == (
            b"x",
            (await session.exists("/brokers/ids/1")),
        )
        seq = await session.create("/brokers/ids/s-", sequential=True)
        assert seq == "/brokers/ids/s-0000000001"
        results = await session.multi([CreateOp("/brokers/ids/m-", sequential=True)])
        assert results == [CreateResult("/brokers/ids/m-0000000002")]
        assert await session.get_children("/") == ["brokers"]
        _, watch = await session.get_children_and_watch("/brokers/ids")
        await root.delete("/kafkalite/cluster-a/brokers/ids/1", ANY_VERSION)
        assert await asyncio.wait_for(watch, 10) == WatchEvent(
            EventType.CHILDREN_CHANGED, "/brokers/ids"
        )
    finally:
        await store.close()
        await root_store.close()


async def test_unreachable_ensemble_raises_connection_loss():
    store = open_store(f"127.0.0.1:{free_port()}", None, 4000, connection_timeout_ms=300)
    with pytest.raises(ConnectionLoss):
        await store.open_session()


@pytest.fixture(scope="module")
def own_server():
    """A server of this module's own: these tests stop and pause it."""
    yield from started_zookeeper()


async def test_server_restart_keeps_session_ephemerals_and_watches(own_server):
    store = open_store(own_server.connect_string("/restart"), None, 8000)
    try:
        session = await store.open_session()
        impatient = await store.open_session(connection_timeout_ms=200)
        await session.create("/brokers/ids/1", b"b1", ephemeral=True, makepath=True)
        await session.create("/controller_epoch", b"1")
        _, _, watch = await session.get_data_and_watch("/controller_epoch")
        session_id = session.session_id

        await asyncio.to_thread(own_server.stop)
        # The server closed the socket: noticed at once, not after a ping timeout.
        await wait_state(session, SessionState.SUSPENDED, timeout=8)
        await wait_state(impatient, SessionState.SUSPENDED, timeout=8)
        with pytest.raises(ConnectionLoss):
            await impatient.get_data("/controller_epoch")

        await asyncio.to_thread(own_server.start)
        await wait_state(session, SessionState.CONNECTED, timeout=8)
        assert session.session_id == session_id
        assert (await session.exists("/brokers/ids/1")).ephemeral_owner == session_id
        other = await store.open_session()
        await other.set_data("/controller_epoch", b"2", 0)
        assert await asyncio.wait_for(watch, 10) == WatchEvent(
            EventType.DATA_CHANGED, "/controller_epoch"
        )
    finally:
        await store.close()


async def test_silent_partition_is_detected_within_the_session_timeout(own_server):
    store = open_store(own_server.connect_string("/pause"), None, 2000)
    try:
        session = await store.open_session()
        assert session.negotiated_timeout_ms == 2000
        await session.create("/n", b"")
        own_server.pause()
        try:
            # No socket is closed: only the ping (every timeout/3, deadline 2*timeout/3) notices.
            await wait_state(session, SessionState.SUSPENDED, timeout=2.0 * 1.5 + 1.0)
        finally:
            own_server.resume()
        reached = await session.wait_for_state(
            SessionState.CONNECTED, SessionState.EXPIRED, timeout=15
        )
        assert reached in (SessionState.CONNECTED, SessionState.EXPIRED)
        if reached is SessionState.CONNECTED:
            assert (await session.get_data("/n"))[0] == b""
    finally:
        await store.close()


async def test_disconnected_longer_than_the_session_timeout_is_expired(own_server):
    store = open_store(own_server.connect_string("/outage"), None, 1000)
    try:
        session = await store.open_session()
        await asyncio.to_thread(own_server.stop)
        try:
            await wait_state(session, SessionState.SUSPENDED, timeout=5)
            # No server to tell us: the client declares the expiry itself after the timeout.
            await wait_state(session, SessionState.EXPIRED, timeout=1.0 + 5)
        finally:
            await asyncio.to_thread(own_server.start)
        fresh = await store.open_session()
        assert fresh.state is SessionState.CONNECTED and fresh.session_id != session.session_id
    finally:
        await store.close()


def test_missing_zookeeper_fails_with_an_install_hint(monkeypatch, tmp_path):
    from kafkalite.testing import zookeeper as harness

    monkeypatch.setattr(harness, "ZOOKEEPER_JAR", tmp_path / "absent.jar")
    with pytest.raises(ZooKeeperMissing, match="apt-get install zookeeper"):
        ZooKeeperServer()


async def test_bulk_reads_node_by_node_on_a_server_without_multi_read(zookeeper_server):
    """Servers before 3.6 have no multiRead: the same bulk read then pipelines one GetData per
    node, with the same answers (absent nodes None, the rest as ``get_data`` gives them)."""
    store = open_store(zookeeper_server.connect_string("/no-multi-read"), None, 4000)
    try:
        session = await store.open_session()
        await session.multi([CreateOp(f"/n{i}", str(i).encode()) for i in range(1500)])
        paths = [f"/n{i}" for i in range(1500)] + ["/absent"]
        with_multi_read = await session.get_data_many(paths)
        inner = session._inner
        assert isinstance(inner, AiozkSession) and inner._can_multi_read()
        inner._multi_read_ok = False
        node_by_node = await session.get_data_many(paths)
        assert node_by_node == with_multi_read
        assert node_by_node[-1] is None and node_by_node[7][0] == b"7"
        with pytest.raises(NoNode):
            await session.get_data("/absent")
    finally:
        await store.close()


async def test_a_bulk_read_cut_by_a_dropped_connection_raises_connection_loss(own_server):
    """A connection that breaks while a bulk read waits fails the read with ConnectionLoss
    (outcome unknown, as for any request); the session reconnects and reads again."""
    store = open_store(own_server.connect_string("/bulk-cut"), None, 8000)
    try:
        session = await store.open_session()
        await session.multi([CreateOp(f"/n{i}", b"x" * 100) for i in range(1000)])
        paths = [f"/n{i}" for i in range(1000)] * 20
        reading = asyncio.ensure_future(session.get_data_many(paths))
        await asyncio.to_thread(own_server.drop_connection, session.session_id, session.password)
        try:
            found = await reading
        except ConnectionLoss:
            pass
        else:  # the read won the race with the cut: then it must be whole
            assert len(found) == len(paths) and all(f is not None for f in found)
        await wait_state(session, SessionState.CONNECTED, timeout=10)
        again = await session.get_data_many(paths[:1000])
        assert [data for data, _ in again] == [b"x" * 100] * 1000
    finally:
        await store.close()


async def test_a_refused_request_leaves_no_reference_cycle(zookeeper_server):
    """NodeExists and NoNode, ZooKeeper's everyday refusals (a path ensured, a node looked up
    that is gone), are freed by reference counting with the cyclic collector off: a broker
    process freezes what survives its full collections (kafkalite/observability/gc_freeze.py),
    and an error whose traceback ran through the frames holding it and its request would be
    kept for the process's life, a few objects at each refusal (decision 0072)."""
    store = open_store(zookeeper_server.connect_string("/cycles"), None, 4000)
    try:
        session = await store.open_session()
        await session.create("/taken", b"x", makepath=True)
        with collector_off(collect_first=True):
            for _ in range(3):
                with pytest.raises(NodeExists):
                    await session.create("/taken", b"x")
                with pytest.raises(NoNode):
                    await session.get_data("/gone")
            kept = cyclic_garbage(BaseException)
        assert kept == []
    finally:
        await store.close()
