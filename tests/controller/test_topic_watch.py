"""TopicNodeWatcher: one task watching every topic's node, on the embedded store."""

from __future__ import annotations

import pytest

from kafkalite.controller import topic_watch
from kafkalite.controller.topic_watch import TopicNodeWatcher
from kafkalite.coord import ANY_VERSION, CreateOp
from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.zk import data as paths
from tests.loop_turns import LoopTurns

from .shell_support import eventually


class Recorder:
    def __init__(self) -> None:
        self.modified: list[tuple[str, bytes]] = []
        self.expired = 0

    def on_modified(self, topic: str, data: bytes) -> None:
        self.modified.append((topic, data))

    def on_expired(self) -> None:
        self.expired += 1


@pytest.fixture
async def store(tmp_path):
    store = EmbeddedStore(tmp_path / "coord", fsync=False)
    yield store
    await store.close()


@pytest.fixture
async def session(store):
    session = await store.open_session(6000)
    await session.ensure_path(paths.BROKER_TOPICS)
    return session


async def make(session, topic: str, data: bytes) -> None:
    await session.create(paths.topic_path(topic), data)


async def settled(watcher: TopicNodeWatcher) -> None:
    """Until nothing is due and every watched topic present or absent has its watch armed."""
    await eventually(lambda: not watcher._due and not watcher._wake.is_set())


async def test_first_read_reports_only_what_the_caller_does_not_hold(session):
    for name in ("same", "changed", "unknown"):
        await make(session, name, name.encode())
    seen = Recorder()
    watcher = TopicNodeWatcher(session, seen.on_modified, seen.on_expired)
    watcher.watch("same", known=b"same")
    watcher.watch("changed", known=b"before")
    watcher.watch("unknown")
    watcher.watch("absent")
    watcher.watch("same", known=b"other")  # watched already: no-op
    await settled(watcher)
    assert sorted(seen.modified) == [("changed", b"changed"), ("unknown", b"unknown")]
    assert len(watcher) == 4 and "absent" in watcher
    await watcher.close()


async def test_every_later_change_is_reported_and_deletion_is_not(session, store):
    await make(session, "t", b"v1")
    other = await store.open_session(6000)
    seen = Recorder()
    watcher = TopicNodeWatcher(session, seen.on_modified, seen.on_expired)
    watcher.watch("t", known=b"v1")
    watcher.watch("later")
    await settled(watcher)
    assert seen.modified == []

    await other.set_data(paths.topic_path("t"), b"v2", ANY_VERSION)
    await eventually(lambda: seen.modified == [("t", b"v2")])
    await other.set_data(paths.topic_path("t"), b"v3", ANY_VERSION)  # re-armed after firing
    await eventually(lambda: seen.modified[-1:] == [("t", b"v3")])
    await other.delete(paths.topic_path("t"), ANY_VERSION)
    await other.create(paths.topic_path("later"), b"created")  # absent when first read
    await eventually(lambda: seen.modified[-1:] == [("later", b"created")])
    await other.create(paths.topic_path("t"), b"again")
    await eventually(lambda: seen.modified[-1:] == [("t", b"again")])
    assert seen.modified == [("t", b"v2"), ("t", b"v3"), ("later", b"created"), ("t", b"again")]
    await watcher.close()


async def test_unwatched_topics_report_nothing_and_their_watch_is_gone(session, store):
    await make(session, "a", b"1")
    await make(session, "b", b"1")
    other = await store.open_session(6000)
    seen = Recorder()
    watcher = TopicNodeWatcher(session, seen.on_modified, seen.on_expired)
    watcher.watch("a", known=b"1")
    watcher.watch("b", known=b"1")
    await settled(watcher)
    watcher.unwatch("a")
    assert "a" not in watcher and "a" not in watcher._watches
    await other.set_data(paths.topic_path("a"), b"2", ANY_VERSION)
    await other.set_data(paths.topic_path("b"), b"2", ANY_VERSION)
    await eventually(lambda: seen.modified == [("b", b"2")])
    await settled(watcher)
    assert seen.modified == [("b", b"2")]
    await watcher.close()
    assert len(watcher) == 0 and watcher._task is None


async def test_many_topics_are_read_in_batches_that_yield(session, monkeypatch):
    monkeypatch.setattr(topic_watch, "READ_BATCH", 100)
    names = [f"t{i:04d}" for i in range(1000)]
    for start in range(0, 1000, 250):
        await session.multi(
            [CreateOp(paths.topic_path(n), n.encode()) for n in names[start : start + 250]]
        )
    seen = Recorder()
    watcher = TopicNodeWatcher(session, seen.on_modified, seen.on_expired)
    with LoopTurns() as turns:
        for name in names:
            watcher.watch(name)
        await settled(watcher)
    assert sorted(seen.modified) == [(n, n.encode()) for n in names]
    assert len(watcher._watches) == 1000
    assert turns.turns >= 10  # a turn of the loop between the ten batches at least
    await watcher.close()


async def test_a_lost_connection_reads_again_and_an_expiry_is_reported_once(session, store):
    await make(session, "a", b"1")
    await make(session, "b", b"1")
    seen = Recorder()
    watcher = TopicNodeWatcher(session, seen.on_modified, seen.on_expired)
    store.fail_next(1)  # the first read is lost: the topics stay due and are read again
    watcher.watch("a")
    watcher.watch("b")
    await eventually(lambda: len(seen.modified) == 2)
    assert sorted(seen.modified) == [("a", b"1"), ("b", b"1")]
    store.expire_session(session.session_id)
    # both topics' watches failed (each leaves the watcher when it fires); one report
    await eventually(lambda: seen.expired >= 1 and not watcher._watches)
    assert seen.expired == 1
    watcher.watch("c")  # stopped: nothing more is watched
    assert "c" not in watcher
    await watcher.close()


async def test_watch_many_is_watch_for_each(session):
    for name in ("same", "changed", "unknown"):
        await make(session, name, name.encode())
    seen = Recorder()
    watcher = TopicNodeWatcher(session, seen.on_modified, seen.on_expired)
    watcher.watch("same", known=b"same")
    watcher.watch_many(
        [("same", b"other"), ("changed", b"before"), ("unknown", None), ("absent", None)]
    )
    watcher.watch_many([])  # nothing to add: no-op
    await settled(watcher)
    assert sorted(seen.modified) == [("changed", b"changed"), ("unknown", b"unknown")]
    assert len(watcher) == 4 and "absent" in watcher
    await watcher.close()
    watcher.watch_many([("later", None)])  # closed: ignored
    assert "later" not in watcher
