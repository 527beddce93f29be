"""The coordination thread: a busy caller loop cannot expire the session, and what crosses the
thread boundary (answers, exceptions, watch events, cancellation, shutdown) behaves as on one
loop.

The held-loop tests block the test's own event loop on purpose: that blocking call is the thing
under test (a broker loop held by bulk work), not a way to wait for something.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import warnings

import pytest

from kafkalite.coord import (
    BadVersion,
    CreateOp,
    EventType,
    NoNode,
    SessionClosed,
    SessionExpired,
    SessionState,
    SetDataOp,
    WatchEvent,
    open_store,
)
from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.coord.threaded import ThreadedSession, ThreadedStore
from kafkalite.coord.zookeeper import AiozkStore, ZooKeeperSession, ZooKeeperStore

from .conftest import wait_state, wait_until

HELD_SESSION_MS = 2000
HELD_FOR_S = 2.5 * HELD_SESSION_MS / 1000  # well past the session timeout


def hold_the_loop(seconds: float, how: str) -> None:
    """Keep the calling thread (and its event loop) busy: asleep (the GIL is free meanwhile) or
    computing in Python (the GIL is contended, as with bulk work on the broker's loop)."""
    if how == "sleep":
        time.sleep(seconds)  # the stimulus (a loop blocked this long), not synchronisation
        return
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sum(range(10_000))


async def record_states(session, states: list[SessionState]) -> asyncio.Task:
    async def record() -> None:
        async for state in session.state_changes():
            states.append(state)

    task = asyncio.create_task(record())
    await wait_until(lambda: session._state_listeners, what="the state recorder")
    return task


def chroot(name: str) -> str:
    return f"/{name}-{int(time.time() * 1000)}"


@pytest.mark.parametrize("how", ["sleep", "busy"])
async def test_a_held_caller_loop_keeps_the_session(zookeeper_server, how):
    connect = zookeeper_server.connect_string(chroot(f"held-{how}"))
    store = open_store(connect, None, HELD_SESSION_MS)
    observer_store = open_store(connect, None, 4000)
    recorder = None
    try:
        session = await store.open_session()
        assert isinstance(session, ZooKeeperSession)
        assert session.negotiated_timeout_ms == HELD_SESSION_MS
        session_id = session.session_id
        await session.create("/brokers/ids/1", b"b1", ephemeral=True, makepath=True)
        states: list[SessionState] = []
        recorder = await record_states(session, states)

        hold_the_loop(HELD_FOR_S, how)

        # The loop runs again; whatever the thread relayed meanwhile is delivered first.
        stat = await session.exists("/brokers/ids/1")
        assert stat is not None and stat.ephemeral_owner == session_id
        observer = await observer_store.open_session()
        stat = await observer.exists("/brokers/ids/1")
        assert stat is not None and stat.ephemeral_owner == session_id
        assert session.session_id == session_id
        assert SessionState.EXPIRED not in states
        await wait_state(session, SessionState.CONNECTED)
    finally:
        if recorder is not None:
            recorder.cancel()
        await store.close()
        await observer_store.close()


async def test_the_same_hold_expires_a_session_served_by_the_callers_loop(zookeeper_server):
    """The control: the aiozk client on the held loop itself (no thread) sends no ping, and the
    server expires the session. It shows that the test above can fail."""
    connect = zookeeper_server.connect_string(chroot("held-inline"))
    servers, root = connect.split("/", 1)
    store = AiozkStore(servers, chroot="/" + root, session_timeout_ms=HELD_SESSION_MS)
    observer_store = open_store(connect, None, 4000)
    try:
        session = await store.open_session()
        await session.create("/brokers/ids/1", b"b1", ephemeral=True, makepath=True)

        hold_the_loop(HELD_FOR_S, "busy")

        await wait_state(session, SessionState.EXPIRED, timeout=30)
        observer = await observer_store.open_session()
        assert await observer.exists("/brokers/ids/1") is None
    finally:
        await store.close()
        await observer_store.close()


# -- the thread boundary, over an embedded store run in a coordination thread ---------------------


class ThreadedEmbeddedStore(ThreadedStore):
    """The embedded store served by a coordination thread: the bridge without a server."""

    def __init__(self, connection_timeout_ms: int = 4000) -> None:
        super().__init__(thread_name="test-coordination")
        self.connection_timeout_ms = connection_timeout_ms

    def _make_inner(self) -> EmbeddedStore:
        return EmbeddedStore(None, session_timeout_ms=60000, fsync=False)

    async def on_thread(self, function, *args):
        """``function(inner_store, *args)`` run on the coordination thread's loop."""

        async def run():
            return function(self._inner, *args)

        return await asyncio.wrap_future(self.thread.submit(run()))

    async def open_session(self, timeout_ms=None, *, connection_timeout_ms=None):
        return await super().open_session(
            timeout_ms, connection_timeout_ms=connection_timeout_ms or self.connection_timeout_ms
        )


def tasks_running(store: ThreadedEmbeddedStore, name: str) -> list[asyncio.Task]:
    return [
        task
        for task in asyncio.all_tasks(store.thread.loop)
        if name in getattr(task.get_coro(), "__qualname__", "")
    ]


@pytest.fixture
async def threaded():
    store = ThreadedEmbeddedStore()
    yield store
    await store.close()


async def test_calls_run_on_the_coordination_thread(threaded):
    session = await threaded.open_session()
    assert isinstance(session, ThreadedSession)
    assert session.state is SessionState.CONNECTED and session.session_id != 0
    assert threaded.thread.loop is not asyncio.get_running_loop()
    assert threaded.thread.loop.is_running()

    async def where():
        return threading.current_thread().name

    assert await asyncio.wrap_future(threaded.thread.submit(where())) == "test-coordination"
    assert await session.create("/a", bytearray(b"1")) == "/a"
    assert await session.get_data("/a") == (b"1", await session.exists("/a"))


async def test_exceptions_keep_their_types_and_details(threaded):
    session = await threaded.open_session()
    with pytest.raises(NoNode):
        await session.get_data("/missing")
    await session.create("/a", b"0")
    with pytest.raises(BadVersion):
        await session.set_data("/a", b"1", 7)
    with pytest.raises(BadVersion) as failure:
        await session.multi([CreateOp("/b"), SetDataOp("/a", b"1", 7)])
    assert failure.value.failed_op_index == 1 and len(failure.value.results) == 2
    assert await session.exists("/b") is None


async def test_events_are_delivered_before_the_answer_that_follows_them(threaded):
    session = await threaded.open_session()
    other = await threaded.open_session()
    await session.create("/n", b"0")
    _, _, changed = await session.get_data_and_watch("/n")
    _, children = await session.get_children_and_watch("/n")
    # One call on the thread makes both changes; the answer to the next call comes after
    # their events, and the events in the order they happened.
    seen: list[EventType] = []
    changed._future.add_done_callback(lambda f: seen.append(f.result().type))
    children._future.add_done_callback(lambda f: seen.append(f.result().type))
    await other.multi([SetDataOp("/n", b"1", 0), CreateOp("/n/c")])
    assert changed.done() and children.done()
    assert seen == [EventType.DATA_CHANGED, EventType.CHILDREN_CHANGED]


async def test_a_cancelled_caller_cancels_the_call_on_the_thread(threaded):
    session = await threaded.open_session()
    await threaded.on_thread(lambda inner, sid: inner.suspend_session(sid), session.session_id)
    await wait_state(session, SessionState.SUSPENDED)
    call = asyncio.create_task(session.get_data("/a"))  # waits for a reconnect that never comes
    await wait_until(lambda: tasks_running(threaded, "get_data"), what="the call on the thread")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await wait_until(lambda: not tasks_running(threaded, "get_data"), what="the call cancelled")


async def test_a_timeout_around_a_call_still_raises_timeout_error(threaded):
    session = await threaded.open_session()
    await threaded.on_thread(lambda inner, sid: inner.suspend_session(sid), session.session_id)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await session.get_data("/a")
    await wait_until(lambda: not tasks_running(threaded, "get_data"), what="the call cancelled")


def inner_watches(store: ThreadedEmbeddedStore, path: str) -> list[asyncio.Future]:
    """The watch futures the embedded store on the thread holds for ``path`` (read from here:
    a snapshot of a dict only the thread changes)."""
    return [
        future
        for key, entries in list(store._inner._watches.items())
        if key[1] == path
        for _session, future in entries
    ]


async def test_a_watch_answered_after_the_caller_gave_up_is_cancelled_over_there(threaded):
    session = await threaded.open_session()
    call = asyncio.create_task(session.exists_and_watch("/x"))
    # Exactly one turn of the loop, not a wait for time: the call's first step runs and its read
    # is on its way to the thread. A future resolved at the next turn (tests/loop_turns.py)
    # gives two turns, in which the thread's answer can already be relayed back (1 failure
    # in 30 runs), and the case this test makes would not happen.
    await asyncio.sleep(0)
    # Hold this loop (without yielding to it) until the thread has set the watch, so that the
    # answer is still waiting to be relayed here when the caller gives up.
    deadline = time.monotonic() + 10
    while not inner_watches(threaded, "/x"):
        assert time.monotonic() < deadline, "the read never reached the thread"
        time.sleep(0.001)  # polling interval of the condition (the loop is held on purpose)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    (inner,) = inner_watches(threaded, "/x")
    await wait_until(inner.cancelled, what="the abandoned watch to be cancelled on the thread")


async def test_a_watch_cancelled_by_the_caller_never_fires(threaded):
    session = await threaded.open_session()
    other = await threaded.open_session()
    _, cancelled = await session.exists_and_watch("/w")
    cancelled.cancel()
    _, kept = await session.exists_and_watch("/w")
    await other.create("/w")
    assert await asyncio.wait_for(kept, 10) == WatchEvent(EventType.CREATED, "/w")
    assert cancelled._future.cancelled()
    assert session._watches == set()


async def test_expiry_fails_watches_then_reports_the_state(threaded):
    session = await threaded.open_session()
    states: list[SessionState] = []
    recorder = await record_states(session, states)
    _, watch = await session.exists_and_watch("/x")
    seen: list[tuple[SessionState, bool]] = []
    session.add_state_callback(lambda state: seen.append((state, watch.done())))
    await threaded.on_thread(lambda inner, sid: inner.expire_session(sid), session.session_id)
    await asyncio.wait_for(recorder, 10)
    assert states == [SessionState.EXPIRED]
    assert seen == [(SessionState.EXPIRED, True)]  # the watch had failed already
    with pytest.raises(SessionExpired):
        await watch
    with pytest.raises(SessionExpired):
        await session.get_data("/")


async def test_close_stops_the_thread_without_leftovers():
    store = ThreadedEmbeddedStore()
    threads_before = set(threading.enumerate())
    session = await store.open_session()
    await session.create("/e", ephemeral=True)
    _, watch = await session.exists_and_watch("/x")
    pending = asyncio.create_task(session.get_children("/"))  # in flight at close
    thread = store.thread
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await store.close()
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
    assert thread.loop is None and not (set(threading.enumerate()) - threads_before)
    assert session.state is SessionState.CLOSED
    with pytest.raises(SessionClosed):
        await watch
    try:
        await pending  # answered before the close, or cut off by it
    except SessionClosed:
        pass
    with pytest.raises(SessionClosed):
        await session.get_data("/e")
    # Used again, the store starts a new thread.
    again = await store.open_session()
    assert await again.exists("/e") is None
    await store.close()


async def test_the_zookeeper_store_stops_its_thread_on_close(zookeeper_server):
    root = chroot("thread-close")
    store = open_store(zookeeper_server.connect_string(root), None, 4000)
    assert isinstance(store, ZooKeeperStore) and store.thread is None  # nothing until used
    session = await store.open_session()
    thread = store.thread
    assert thread is not None and thread.running
    os_thread = thread._thread
    await session.create("/e", ephemeral=True)
    await store.close()
    assert store.thread is None and not thread.running and not os_thread.is_alive()
    assert session.state is SessionState.CLOSED
    observer_store = open_store(zookeeper_server.connect_string(), None, 4000)
    try:
        observer = await observer_store.open_session()
        assert await observer.get_children(root) == []  # closeSession was sent
    finally:
        await observer_store.close()


async def test_a_broker_whose_loop_is_held_keeps_its_registration_and_controller(
    tmp_path, zookeeper_server
):
    """The issue itself, end to end: a broker on ZooKeeper whose loop is held past its session
    timeout (bulk work) is still registered on the same session and still controller in the
    same epoch; nothing was renewed."""
    from kafkalite.config import BrokerConfig
    from kafkalite.server import KafkaServer
    from kafkalite.testing import free_port

    config = BrokerConfig.load(
        overrides={
            "log.dirs": str(tmp_path / "data"),
            "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
            "admin.listener": "",
            "zookeeper.connect": zookeeper_server.connect_string(chroot("held-broker")),
            "zookeeper.session.timeout.ms": str(HELD_SESSION_MS),
        },
        environ={},
    )
    server = KafkaServer(config)
    await server.startup()
    try:
        await wait_until(lambda: server.controller.is_active, what="the broker to be controller")
        session_id = server.session.session_id
        epoch = server.controller.epoch

        hold_the_loop(HELD_FOR_S, "busy")

        registration = await server.session.exists("/brokers/ids/0")
        assert registration is not None and registration.ephemeral_owner == session_id
        controller = await server.session.exists("/controller")
        assert controller is not None and controller.ephemeral_owner == session_id
        assert server.session.session_id == session_id and server.session.renewals == 0
        assert server.controller.is_active and server.controller.epoch == epoch
    finally:
        await server.shutdown()


async def test_a_session_shared_with_another_loop(zookeeper_server):
    """``for_running_loop``: a component on a loop of its own (the controller) uses the broker's
    session: its answers, batched reads and watch events arrive on that loop, the session's
    expiry reaches both proxies, and it is one session (one ephemeral owner)."""
    store = open_store(zookeeper_server.connect_string(chroot("shared")), None, 4000)
    session = await store.open_session()
    await session.create("/a", b"1")
    other = LoopThreadForTest()
    try:

        async def on_other_loop():
            view = await session.for_running_loop()
            assert view is not session and view.session_id == session.session_id
            path = await view.create("/e", ephemeral=True)
            stat = await view.exists(path)
            many = await view.get_data_many(["/a", "/missing"])
            versions = await view.get_data_versions_many(["/missing", "/a"])
            assert versions == [None, (b"1", 0)]
            changes = view.watch_data("/a")
            first = await anext(changes)
            return view, stat, many, first, changes

        view, stat, many, first, changes = await other.run(on_other_loop())
        assert stat.ephemeral_owner == session.session_id
        assert many[0][0] == b"1" and many[1] is None
        assert first.data == b"1"
        await session.set_data("/a", b"2", -1)

        async def next_change():
            return await anext(changes)

        assert (await other.run(next_change())).data == b"2"
        await session.close()

        async def state_there():
            await view.wait_for_state(SessionState.CLOSED, timeout=15)
            return view.state

        assert await other.run(state_there()) is SessionState.CLOSED
    finally:
        other.stop()
        await store.close()


class LoopThreadForTest:
    """A second event loop in a thread; ``run`` awaits a coroutine run there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def run(self, coro):
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
