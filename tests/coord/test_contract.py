"""The coordination contract: every test runs against the embedded store and a real ZooKeeper.

What is checked is what the controller relies on (docs/architecture.md, Coordination): versioned CAS, ephemeral
lifetime, sequential names, multi atomicity, watch delivery and order, session loss reporting.
"""

from __future__ import annotations

import asyncio

import pytest

from kafkalite.coord import (
    ANY_VERSION,
    JUTE_MAXBUFFER,
    BadArguments,
    BadVersion,
    CheckOp,
    CheckResult,
    CreateOp,
    CreateResult,
    DeleteOp,
    DeleteResult,
    EventType,
    NoChildrenForEphemerals,
    NodeData,
    NodeExists,
    NoNode,
    NotEmpty,
    RequestTooLarge,
    RolledBack,
    SessionClosed,
    SessionExpired,
    SessionState,
    SetDataOp,
    SetDataResult,
    WatchEvent,
)
from kafkalite.coord.base import request_length

from .conftest import wait_state, wait_until


async def test_create_get_exists_children(session):
    assert await session.exists("/a") is None
    assert await session.create("/a", b"hello") == "/a"
    data, stat = await session.get_data("/a")
    assert data == b"hello"
    assert stat.version == 0 and stat.data_length == 5 and not stat.is_ephemeral
    assert (await session.exists("/a")) == stat
    await session.create("/a/z")
    await session.create("/a/b", b"")
    assert await session.get_children("/a") == ["b", "z"]
    assert (await session.exists("/a")).num_children == 2
    with pytest.raises(NodeExists):
        await session.create("/a")
    with pytest.raises(NoNode):
        await session.create("/missing/child")
    with pytest.raises(NoNode):
        await session.get_data("/missing")
    with pytest.raises(NoNode):
        await session.get_children("/missing")
    with pytest.raises(BadArguments):
        await session.create("relative")
    with pytest.raises(BadArguments):
        await session.create("/trailing/")


async def test_makepath_and_ensure_path(session):
    assert await session.create("/x/y/z", b"deep", makepath=True) == "/x/y/z"
    assert (await session.get_data("/x/y/z"))[0] == b"deep"
    assert (await session.get_data("/x/y"))[0] == b""
    await session.ensure_path("/x/y/q")
    await session.ensure_path("/x/y/q")
    assert await session.get_children("/x/y") == ["q", "z"]
    await session.delete_recursive("/x")
    assert await session.exists("/x") is None


async def test_set_data_is_compare_and_set(session):
    await session.create("/cas", b"v0")
    stat = await session.set_data("/cas", b"v1", 0)
    assert stat.version == 1
    with pytest.raises(BadVersion):
        await session.set_data("/cas", b"stale", 0)
    assert (await session.get_data("/cas"))[0] == b"v1"
    stat = await session.set_data("/cas", b"any", ANY_VERSION)
    assert stat.version == 2
    with pytest.raises(NoNode):
        await session.set_data("/nope", b"", ANY_VERSION)


async def test_delete_checks_version_and_children(session):
    await session.create("/d")
    await session.create("/d/child")
    with pytest.raises(NotEmpty):
        await session.delete("/d", 0)
    await session.set_data("/d/child", b"x", 0)
    with pytest.raises(BadVersion):
        await session.delete("/d/child", 0)
    await session.delete("/d/child", 1)
    await session.delete("/d", 0)
    assert await session.exists("/d") is None
    with pytest.raises(NoNode):
        await session.delete("/d", ANY_VERSION)


async def test_sequential_names_increase_in_creation_order(session):
    await session.create("/isr_change_notification")
    prefix = "/isr_change_notification/isr_change_"
    first = await session.create(prefix, b"1", sequential=True)
    second = await session.create(prefix, b"2", sequential=True)
    assert first == prefix + "0000000000"
    assert second == prefix + "0000000001"
    await session.delete(first, ANY_VERSION)
    third = await session.create(prefix, sequential=True)
    await session.create("/isr_change_notification/plain")
    fourth = await session.create(prefix, sequential=True)
    # ZooKeeper only promises a per-parent counter that increases (3.8 counts creations, the
    # embedded store counts cversion); Kafka relies on exactly that: names sort by creation.
    names = [first, second, third, fourth]
    assert names == sorted(set(names))
    assert all(len(n) == len(prefix) + 10 and n[len(prefix) :].isdigit() for n in names)
    # cversion counts every child creation and deletion.
    assert (await session.exists("/isr_change_notification")).cversion == 6
    assert await session.get_children("/isr_change_notification") == sorted(
        ["plain", second.rsplit("/", 1)[1], third.rsplit("/", 1)[1], fourth.rsplit("/", 1)[1]]
    )


async def test_ephemeral_nodes_belong_to_their_session(backend, session, other):
    await session.create("/brokers/ids", makepath=True)
    path = await session.create("/brokers/ids/1", b"{}", ephemeral=True)
    stat = await other.exists(path)
    assert stat.ephemeral_owner == session.session_id and stat.is_ephemeral
    with pytest.raises(NoChildrenForEphemerals):
        await session.create("/brokers/ids/1/child")
    seq = await session.create("/brokers/ids/e-", ephemeral=True, sequential=True)
    assert seq.startswith("/brokers/ids/e-")
    await session.close()
    assert session.state is SessionState.CLOSED
    assert await other.get_children("/brokers/ids") == []
    with pytest.raises(SessionClosed):
        await session.get_data("/brokers/ids")


async def test_ephemeral_nodes_vanish_on_expiry(backend, session, other):
    await session.create("/controller", b'{"brokerid":1}', ephemeral=True)
    _data, _stat, watch = await other.get_data_and_watch("/controller")
    _data, _stat, own_watch = await session.get_data_and_watch("/controller")
    await backend.expire(session)
    assert await asyncio.wait_for(watch, 15) == WatchEvent(EventType.DELETED, "/controller")
    await wait_state(session, SessionState.EXPIRED)
    assert await other.exists("/controller") is None
    with pytest.raises(SessionExpired):
        await session.get_data("/")
    with pytest.raises(SessionExpired):
        await own_watch
    # A new session works and can take the node over, like a re-registering broker.
    fresh = await backend.open_session()
    assert fresh.session_id != session.session_id
    await fresh.create("/controller", b'{"brokerid":1}', ephemeral=True)
    assert (await other.exists("/controller")).ephemeral_owner == fresh.session_id


async def test_cas_race_between_two_sessions(session, other):
    await session.create("/controller_epoch", b"0")
    _, stat_a = await session.get_data("/controller_epoch")
    _, stat_b = await other.get_data("/controller_epoch")
    outcomes = await asyncio.gather(
        session.set_data("/controller_epoch", b"1", stat_a.version),
        other.set_data("/controller_epoch", b"1", stat_b.version),
        return_exceptions=True,
    )
    assert sum(isinstance(o, BadVersion) for o in outcomes) == 1
    assert sum(not isinstance(o, Exception) for o in outcomes) == 1

    async def increment(s, times):
        for _ in range(times):
            while True:
                data, stat = await s.get_data("/controller_epoch")
                try:
                    await s.set_data("/controller_epoch", b"%d" % (int(data) + 1), stat.version)
                    break
                except BadVersion:
                    continue

    await asyncio.gather(increment(session, 15), increment(other, 15), increment(session, 10))
    data, stat = await other.get_data("/controller_epoch")
    assert int(data) == 1 + 40
    assert stat.version == 41


async def test_create_race_has_one_winner(session, other):
    outcomes = await asyncio.gather(
        session.create("/controller", b"a", ephemeral=True),
        other.create("/controller", b"b", ephemeral=True),
        return_exceptions=True,
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["NodeExists", "str"]
    winner = session if outcomes[0] == "/controller" else other
    assert (await session.exists("/controller")).ephemeral_owner == winner.session_id


async def test_multi_applies_all_or_nothing(session, other):
    await session.create("/controller_epoch", b"5")
    await session.create("/brokers", b"")
    results = await session.multi(
        [
            CheckOp("/controller_epoch", 0),
            CreateOp("/brokers/topics", b""),
            CreateOp("/brokers/topics/t", b"{}"),
            SetDataOp("/brokers", b"x", 0),
            CreateOp("/brokers/seq-", b"", sequential=True),
            DeleteOp("/brokers/seq-0000000001", ANY_VERSION),
        ]
    )
    assert results[0] == CheckResult("/controller_epoch")
    assert results[1:3] == [CreateResult("/brokers/topics"), CreateResult("/brokers/topics/t")]
    assert isinstance(results[3], SetDataResult) and results[3].stat.version == 1
    # /brokers/topics was created first in the same transaction: cversion 1 names the node.
    assert results[4] == CreateResult("/brokers/seq-0000000001")
    assert results[5] == DeleteResult("/brokers/seq-0000000001")
    assert await other.get_children("/brokers") == ["topics"]

    before = await other.get_data("/brokers")
    with pytest.raises(BadVersion) as failure:
        await session.multi(
            [
                CreateOp("/brokers/topics/u", b"{}"),
                SetDataOp("/brokers", b"y", 1),
                CheckOp("/controller_epoch", 7),  # a deposed controller's stale epoch version
            ]
        )
    assert failure.value.failed_op_index == 2
    kinds = [type(r) for r in failure.value.results]
    assert kinds == [RolledBack, RolledBack, BadVersion]
    assert await other.exists("/brokers/topics/u") is None
    assert await other.get_data("/brokers") == before

    with pytest.raises(NodeExists) as failure:
        await session.multi([CreateOp("/a"), CreateOp("/a")])
    assert failure.value.failed_op_index == 1
    assert await other.exists("/a") is None
    assert await session.multi([]) == []


async def test_one_shot_watches(session, other):
    stat, created = await session.exists_and_watch("/w")
    assert stat is None and not created.done()
    await other.create("/w", b"0")
    assert await asyncio.wait_for(created, 10) == WatchEvent(EventType.CREATED, "/w")

    data, stat, changed = await session.get_data_and_watch("/w")
    assert data == b"0"
    await other.set_data("/w", b"1", stat.version)
    assert await asyncio.wait_for(changed, 10) == WatchEvent(EventType.DATA_CHANGED, "/w")
    # The event comes before the state that caused it can be read, never after a stale read.
    assert (await session.get_data("/w"))[0] == b"1"

    children, child_watch = await session.get_children_and_watch("/w")
    assert children == []
    await other.create("/w/c")
    assert await asyncio.wait_for(child_watch, 10) == WatchEvent(EventType.CHILDREN_CHANGED, "/w")

    stat, exists_watch = await session.exists_and_watch("/w/c")
    assert stat is not None
    _, _, data_watch = await session.get_data_and_watch("/w/c")
    await other.delete("/w/c", ANY_VERSION)
    assert await asyncio.wait_for(exists_watch, 10) == WatchEvent(EventType.DELETED, "/w/c")
    assert await asyncio.wait_for(data_watch, 10) == WatchEvent(EventType.DELETED, "/w/c")

    with pytest.raises(NoNode):
        await session.get_data_and_watch("/w/c")


async def test_watch_data_iterator_yields_changes_in_order(session, other):
    seen: list[NodeData | None] = []
    done = asyncio.Event()

    async def follow():
        async for state in session.watch_data("/epoch"):
            seen.append(state)
            if state is not None and state.data == b"20":
                done.set()
                return

    follower = asyncio.create_task(follow())
    await wait_until(lambda: seen, what="initial state")
    assert seen == [None]
    await other.create("/epoch", b"0")
    for value in range(1, 21):
        _, stat = await other.get_data("/epoch")
        await other.set_data("/epoch", b"%d" % value, stat.version)
    await asyncio.wait_for(done.wait(), 10)
    await follower
    versions = [s.stat.version for s in seen[1:]]
    assert versions == sorted(set(versions)), "states out of order or repeated"
    values = [int(s.data) for s in seen[1:]]
    assert values == sorted(values) and values[-1] == 20


async def test_watch_children_iterator(session, other):
    seen: list[list[str] | None] = []

    async def follow():
        async for children in session.watch_children("/brokers/ids"):
            seen.append(children)
            if children == ["1", "2"]:
                return

    follower = asyncio.create_task(follow())
    await wait_until(lambda: seen == [None], what="absent parent")
    await other.create("/brokers/ids", makepath=True)
    await wait_until(lambda: seen and seen[-1] == [], what="empty parent")
    await other.create("/brokers/ids/2", ephemeral=True)
    await other.create("/brokers/ids/1", ephemeral=True)
    await asyncio.wait_for(follower, 10)
    assert seen[0] is None and seen[1] == [] and seen[-1] == ["1", "2"]


async def test_iterators_end_on_close_and_raise_on_expiry(backend, session, other):
    await other.create("/n", b"")

    closed_seen = []

    async def collect():
        async for state in session.watch_data("/n"):
            closed_seen.append(state)

    closing = asyncio.create_task(collect())
    await wait_until(lambda: closed_seen, what="first state")
    await session.close()
    await asyncio.wait_for(closing, 10)  # ends without an exception
    assert [state.data for state in closed_seen] == [b""]

    victim = await backend.open_session()
    seen = []

    async def follow():
        async for state in victim.watch_data("/n"):
            seen.append(state)

    expiring = asyncio.create_task(follow())
    await wait_until(lambda: seen, what="first state")
    await backend.expire(victim)
    with pytest.raises(SessionExpired):
        await asyncio.wait_for(expiring, 15)


async def test_watches_and_ephemerals_survive_a_dropped_connection(backend, session, other):
    await session.create("/brokers/ids/1", b"me", ephemeral=True, makepath=True)
    await other.create("/w", b"0")
    _, _, watch = await session.get_data_and_watch("/w")
    _, child_watch = await session.get_children_and_watch("/brokers/ids")
    session_id = session.session_id
    await backend.drop_connection(session)
    await other.set_data("/w", b"1", 0)
    await other.create("/brokers/ids/2", ephemeral=True)
    await backend.restore_connection(session)
    assert await asyncio.wait_for(watch, 10) == WatchEvent(EventType.DATA_CHANGED, "/w")
    assert await asyncio.wait_for(child_watch, 10) == WatchEvent(
        EventType.CHILDREN_CHANGED, "/brokers/ids"
    )
    await wait_state(session, SessionState.CONNECTED)
    assert session.session_id == session_id
    assert (await session.get_data("/w"))[0] == b"1"
    assert (await other.exists("/brokers/ids/1")).ephemeral_owner == session_id


async def test_a_dropped_connection_alone_fires_no_watch(backend, session, other):
    """Re-armed watches fire for changes made while disconnected, not for every watch (aiozk
    reconnected with zxid 0, so ZooKeeper fired all of them)."""
    await other.create("/quiet", b"0")
    _, _, watch = await session.get_data_and_watch("/quiet")
    _, child_watch = await session.get_children_and_watch("/")
    await backend.drop_connection(session)
    await backend.restore_connection(session)
    await wait_state(session, SessionState.CONNECTED)
    # one round trip after the reconnect: an event for the re-armed watches would be ahead of it
    assert (await session.get_data("/quiet"))[0] == b"0"
    assert not watch.done() and not child_watch.done()
    await other.set_data("/quiet", b"1", 0)
    assert await asyncio.wait_for(watch, 10) == WatchEvent(EventType.DATA_CHANGED, "/quiet")


async def test_session_state_is_observable(backend):
    s = await backend.open_session()
    assert s.state is SessionState.CONNECTED
    assert s.session_id != 0
    changes = []

    async def record():
        async for state in s.state_changes():
            changes.append(state)

    recorder = asyncio.create_task(record())
    await wait_until(lambda: s._state_listeners, what="state listener")
    await backend.expire(s)
    await asyncio.wait_for(recorder, 15)
    assert changes[-1] is SessionState.EXPIRED
    assert await s.wait_for_state(SessionState.CONNECTED, timeout=1) is SessionState.EXPIRED
    with pytest.raises(SessionExpired):
        await s.create("/x")
    await s.close()  # closing an expired session is harmless
    assert s.state is SessionState.EXPIRED


def _prefix(backend) -> str:
    """The path prefix the backend puts on the wire (a ZooKeeper backend's chroot)."""
    return getattr(backend, "chroot", "") or ""


async def test_requests_longer_than_jute_maxbuffer_are_refused(backend, session):
    """ZooKeeper's jute.maxbuffer (0xfffff bytes per request): a request of exactly that length
    is stored (the ZooKeeper server accepts it: the measure matches the server's), one byte more
    raises RequestTooLarge, applies nothing and leaves the session connected and usable."""
    prefix = _prefix(backend)
    empty = request_length([CreateOp("/big", b"")], multi=False, path_prefix=prefix)
    fits = b"x" * (JUTE_MAXBUFFER - empty)
    assert await session.create("/big", fits) == "/big"
    assert (await session.get_data("/big"))[0] == fits

    with pytest.raises(RequestTooLarge):
        await session.create("/bigger", fits + b"x")
    assert await session.exists("/bigger") is None

    set_empty = request_length([SetDataOp("/big", b"", 0)], multi=False, path_prefix=prefix)
    with pytest.raises(RequestTooLarge):
        await session.set_data("/big", b"y" * (JUTE_MAXBUFFER - set_empty + 1), 0)
    with pytest.raises(RequestTooLarge):
        await session.multi([CreateOp("/m1", b"a"), CreateOp("/m2", fits)])
    assert await session.exists("/m1") is None and await session.exists("/m2") is None
    assert session.state is SessionState.CONNECTED
    stat = await session.set_data("/big", b"small", 0)
    assert stat.version == 1
    assert (await session.get_data("/big"))[0] == b"small"


async def test_get_data_and_watch_many_reads_and_watches_each_node(session, other):
    """The controller's watch on every topic's node: each node's data (None when absent) and a
    one-shot watch per node, a data watch on a present node and a creation watch on an absent
    one, more nodes than one batch; each watch fires once for its own node only."""
    await session.create("/w")
    paths = [f"/w/n{i}" for i in range(300)]
    await session.multi([CreateOp(path, f"{i}".encode()) for i, path in enumerate(paths)])
    asked = [*paths, "/w/absent"]

    found = await session.get_data_and_watch_many(asked)

    assert [data for data, _ in found] == [f"{i}".encode() for i in range(300)] + [None]
    fired: list[tuple[str, WatchEvent]] = []
    for path, (_, watch) in zip(asked, found, strict=True):
        watch.add_done_callback(lambda future, path=path: fired.append((path, future.result())))
    await other.set_data("/w/n7", b"changed", ANY_VERSION)
    await other.delete("/w/n8", ANY_VERSION)
    await other.create("/w/absent", b"new")
    expected = [
        ("/w/n7", WatchEvent(EventType.DATA_CHANGED, "/w/n7")),
        ("/w/n8", WatchEvent(EventType.DELETED, "/w/n8")),
        ("/w/absent", WatchEvent(EventType.CREATED, "/w/absent")),
    ]
    await wait_until(lambda: len(fired) >= 3, what="the three watches")
    assert sorted(fired) == sorted(expected)
    await other.set_data("/w/n7", b"again", ANY_VERSION)  # one-shot: fired already
    await other.set_data("/w/n9", b"other", ANY_VERSION)
    await wait_until(lambda: len(fired) >= 4, what="the fourth watch")
    assert sorted(fired) == sorted(
        [*expected, ("/w/n9", WatchEvent(EventType.DATA_CHANGED, "/w/n9"))]
    )
    assert await session.get_data_and_watch_many([]) == []


async def test_get_data_many_answers_as_get_data_does(session, other):
    """The bulk read the controller loads its context with: thousands of nodes (more than one
    request's worth on ZooKeeper), absent ones None, empty and binary data kept, stats equal
    to ``get_data``'s; a watch armed meanwhile still fires, and the session stays usable."""
    await session.create("/many")
    paths: list[str] = []
    for start in range(0, 2500, 500):
        ops = [
            CreateOp(f"/many/n{i}", b"" if i % 7 == 0 else f'{{"i":{i}}}\x00\xff'.encode())
            for i in range(start, start + 500)
        ]
        await session.multi(ops)
        paths += [op.path for op in ops]
    await session.set_data("/many/n3", b"changed", 0)
    asked = [*paths[:1200], "/many/absent", "/nowhere/at/all", *paths[1200:]]
    _, _, watch = await session.get_data_and_watch("/many/n5")

    found = await session.get_data_many(asked)

    assert len(found) == len(asked)
    assert found[1200] is None and found[1201] is None
    for path, answer in zip(asked, found, strict=True):
        if answer is not None:
            assert answer == await session.get_data(path), path
    assert found[3] is not None and found[3][0] == b"changed" and found[3][1].version == 1
    assert found[0] == (b"", found[0][1])
    assert await session.get_data_many([]) == []
    # the same read answering data and versions alone
    assert await session.get_data_versions_many(asked) == [
        None if answer is None else (answer[0], answer[1].version) for answer in found
    ]
    assert await session.get_data_versions_many([]) == []
    await other.set_data("/many/n5", b"x", ANY_VERSION)
    assert await asyncio.wait_for(watch, 10) == WatchEvent(EventType.DATA_CHANGED, "/many/n5")
    assert (await session.get_data("/many/n5"))[0] == b"x"
