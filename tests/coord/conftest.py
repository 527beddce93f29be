"""Fixtures for the coordination suite: one ``backend`` parametrised over embedded and ZooKeeper.

The ZooKeeper server is started once per test session (``zookeeper_server``); each test gets its
own chroot on it, so tests never see each other's nodes and every ZooKeeper test exercises the
chroot path handling. A missing java/ZooKeeper fails the test with the install hint.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from kafkalite.coord import CoordSession, CoordStore, SessionState, open_store
from kafkalite.coord.embedded import EmbeddedSession, EmbeddedStore
from kafkalite.coord.zookeeper import ZooKeeperSession, ZooKeeperStore
from kafkalite.testing import ZooKeeperMissing, ZooKeeperServer

SESSION_TIMEOUT_MS = 4000
_chroots = itertools.count()


def started_zookeeper() -> Iterator[ZooKeeperServer]:
    """A ZooKeeper server, started, cleaned up when the generator closes (the body of a yield
    fixture); a missing java/ZooKeeper fails the test with the install hint."""
    try:
        server = ZooKeeperServer()
    except ZooKeeperMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    server.start()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def zookeeper_server():
    yield from started_zookeeper()


class Backend:
    """What a contract test needs from a backend: stores, sessions and the expiry fault."""

    name = ""

    async def open_session(self, timeout_ms: int = SESSION_TIMEOUT_MS) -> CoordSession:
        session = await self.store.open_session(timeout_ms)
        return session

    async def expire(self, session: CoordSession) -> None:
        raise NotImplementedError

    async def drop_connection(self, session: CoordSession) -> None:
        """Cut the session's connection without ending the session; returns once the session
        has seen the cut (SUSPENDED), so that what follows is not sent on the dying connection."""
        raise NotImplementedError

    async def restore_connection(self, session: CoordSession) -> None:
        """Let the session reconnect (ZooKeeper clients do it themselves)."""

    store: CoordStore


class EmbeddedBackend(Backend):
    name = "embedded"

    def __init__(self, data_dir) -> None:
        self.store = EmbeddedStore(data_dir, session_timeout_ms=SESSION_TIMEOUT_MS, fsync=False)

    async def expire(self, session: CoordSession) -> None:
        assert isinstance(session, EmbeddedSession)
        self.store.expire_session(session.session_id)

    async def drop_connection(self, session: CoordSession) -> None:
        self.store.suspend_session(session.session_id)

    async def restore_connection(self, session: CoordSession) -> None:
        self.store.resume_session(session.session_id)


class ZooKeeperBackend(Backend):
    name = "zookeeper"

    def __init__(self, server: ZooKeeperServer) -> None:
        self.server = server
        self.chroot = f"/contract-{next(_chroots)}-{int(time.time() * 1000)}"
        self.store = open_store(server.connect_string(self.chroot), None, SESSION_TIMEOUT_MS)
        assert isinstance(self.store, ZooKeeperStore)

    async def expire(self, session: CoordSession) -> None:
        assert isinstance(session, ZooKeeperSession)
        await asyncio.to_thread(self.server.expire_session, session.session_id, session.password)

    async def drop_connection(self, session: CoordSession) -> None:
        assert isinstance(session, ZooKeeperSession)
        seen: list[SessionState] = []
        session.add_state_callback(seen.append)
        try:
            await asyncio.to_thread(
                self.server.drop_connection, session.session_id, session.password
            )
            await wait_until(
                lambda: SessionState.SUSPENDED in seen, what="the client to notice the cut"
            )
        finally:
            session.remove_state_callback(seen.append)


@pytest.fixture(params=["embedded", "zookeeper"])
async def backend(request, tmp_path) -> AsyncIterator[Backend]:
    if request.param == "embedded":
        chosen: Backend = EmbeddedBackend(tmp_path / "coord")
    else:
        chosen = ZooKeeperBackend(request.getfixturevalue("zookeeper_server"))
    yield chosen
    await chosen.store.close()


@pytest.fixture
async def session(backend: Backend) -> CoordSession:
    return await backend.open_session()


@pytest.fixture
async def other(backend: Backend) -> CoordSession:
    return await backend.open_session()


async def wait_until(
    condition: Callable[[], object], timeout: float = 10.0, what: str = ""
) -> None:
    """Poll ``condition`` (sync or async) until truthy; fail after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {what or condition}")
        await asyncio.sleep(0.01)  # polling interval of the condition with a deadline


async def wait_state(session: CoordSession, state: SessionState, timeout: float = 15.0) -> None:
    reached = await session.wait_for_state(state, timeout=timeout)
    assert reached is state, f"session reached {reached} instead of {state}"
