"""Embedded-store specifics: durability across restarts, the fault helpers, a model oracle."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.coord import (
    ANY_VERSION,
    BadVersion,
    ConnectionLoss,
    CoordError,
    CreateOp,
    EventType,
    NodeExists,
    NoNode,
    NotEmpty,
    SessionExpired,
    SessionState,
    SetDataOp,
    WatchEvent,
)
from kafkalite.coord.embedded import JOURNAL_FILE, SNAPSHOT_FILE, EmbeddedStore

from .conftest import wait_state, wait_until


def reopen(path, **kwargs) -> EmbeddedStore:
    return EmbeddedStore(path, fsync=False, **kwargs)


async def test_persistent_nodes_survive_restart_and_ephemerals_do_not(tmp_path):
    store = reopen(tmp_path)
    s = await store.open_session()
    await s.create("/brokers/topics/orders", b'{"partitions":{}}', makepath=True)
    await s.set_data("/brokers/topics/orders", b"v1", 0)
    await s.create("/brokers/ids/1", b"me", ephemeral=True, makepath=True)
    await s.create("/isr_change_notification/isr_change_", sequential=True, makepath=True)
    before = await s.exists("/brokers/topics/orders")
    # Simulate a crash: no close, no final snapshot; only the journal holds the writes.
    store._journal.close()
    fcntl.flock(store._lock_fd, fcntl.LOCK_UN)
    os.close(store._lock_fd)

    again = reopen(tmp_path)
    s2 = await again.open_session()
    assert await s2.get_data("/brokers/topics/orders") == (b"v1", before)
    assert await s2.get_children("/brokers/ids") == []  # no session survives the process
    seq = await s2.create("/isr_change_notification/isr_change_", sequential=True)
    assert seq == "/isr_change_notification/isr_change_0000000001"
    await again.close()

    third = reopen(tmp_path)
    s3 = await third.open_session()
    assert (await s3.get_data("/brokers/topics/orders"))[0] == b"v1"
    assert await s3.get_children("/isr_change_notification") == [
        "isr_change_0000000000",
        "isr_change_0000000001",
    ]
    await third.close()


async def test_torn_journal_tail_is_dropped(tmp_path):
    store = reopen(tmp_path, snapshot_every=1000)
    s = await store.open_session()
    await s.create("/a", b"1")
    await s.create("/b", b"2")
    store._journal.flush()
    journal = (tmp_path / JOURNAL_FILE).read_bytes()
    await store.close()
    # Put back the journal as it was before close, plus half of a record (an interrupted append).
    snapshot = json.loads((tmp_path / SNAPSHOT_FILE).read_text())
    snapshot["nodes"] = [n for n in snapshot["nodes"] if n[0] == "/"]
    snapshot["zxid"] = 0
    (tmp_path / SNAPSHOT_FILE).write_text(json.dumps(snapshot))
    lines = journal.splitlines(keepends=True)
    (tmp_path / JOURNAL_FILE).write_bytes(lines[0] + lines[1][: len(lines[1]) // 2])
    again = reopen(tmp_path)
    s2 = await again.open_session()
    assert (await s2.get_data("/a"))[0] == b"1"
    assert await s2.exists("/b") is None
    await again.close()


async def test_snapshot_compaction_keeps_everything(tmp_path):
    store = reopen(tmp_path, snapshot_every=5)
    s = await store.open_session()
    for i in range(23):
        await s.create(f"/n{i:02d}", b"%d" % i)
    assert len((tmp_path / JOURNAL_FILE).read_bytes().splitlines()) < 5
    await store.close()
    again = reopen(tmp_path)
    s2 = await again.open_session()
    assert len(await s2.get_children("/")) == 23
    assert (await s2.get_data("/n22"))[0] == b"22"
    await again.close()


async def test_reopening_an_unchanged_store_keeps_its_snapshot(tmp_path):
    """After a clean close the snapshot holds the whole tree: opening the store again reads
    it without writing it anew (the same file), starts an empty journal, and what is written
    from then on is journaled and recovered as before, empty and binary data included."""
    store = reopen(tmp_path)
    s = await store.open_session()
    await s.create("/brokers/topics/t", b'{"partitions":{"0":[1]}}', makepath=True)
    await s.create("/empty", b"")
    await s.create("/binary", bytes(range(256)))
    await store.close()
    written = (tmp_path / SNAPSHOT_FILE).stat()

    again = reopen(tmp_path)
    assert (tmp_path / SNAPSHOT_FILE).stat().st_ino == written.st_ino
    assert (tmp_path / SNAPSHOT_FILE).stat().st_mtime_ns == written.st_mtime_ns
    assert (tmp_path / JOURNAL_FILE).read_bytes() == b""
    s2 = await again.open_session()
    assert (await s2.get_data("/binary"))[0] == bytes(range(256))
    assert (await s2.get_data("/empty"))[0] == b""
    assert await s2.get_children("/brokers/topics") == ["t"]
    await s2.create("/after", b"x")
    # a crash: the write is in the journal only
    again._journal.close()
    fcntl.flock(again._lock_fd, fcntl.LOCK_UN)
    os.close(again._lock_fd)

    third = reopen(tmp_path)
    s3 = await third.open_session()
    assert (await s3.get_data("/after"))[0] == b"x"
    # replayed, and not written anew: the journal goes on
    assert (tmp_path / SNAPSHOT_FILE).stat().st_ino == written.st_ino
    assert len((tmp_path / JOURNAL_FILE).read_bytes().splitlines()) == 1
    assert sorted(await s3.get_children("/")) == ["after", "binary", "brokers", "empty"]
    await s3.create("/later", b"y")
    crash(third)

    fourth = reopen(tmp_path)
    s4 = await fourth.open_session()
    assert (await s4.get_data("/after"))[0] == b"x"
    assert (await s4.get_data("/later"))[0] == b"y"
    await fourth.close()


def crash(store: EmbeddedStore) -> None:
    """The store left as by kill -9: nothing more written, the lock released."""
    store._journal.close()
    fcntl.flock(store._lock_fd, fcntl.LOCK_UN)
    os.close(store._lock_fd)


async def test_writes_after_a_torn_tail_survive_the_next_crash(tmp_path):
    """Recovery cuts the journal after its last good record: what is appended from then on
    is replayed at the next open, not lost behind the torn record's bytes. The ephemerals'
    deletion at recovery is journaled too."""
    store = reopen(tmp_path)
    s = await store.open_session()
    await s.create("/a", b"1")
    await s.create("/e", b"", ephemeral=True)
    crash(store)
    with open(tmp_path / JOURNAL_FILE, "ab") as journal:
        journal.write(b'0badc0de {"z":99,"t":0,"ops":[["c","/torn"')  # interrupted append

    again = reopen(tmp_path)
    assert b"/torn" not in (tmp_path / JOURNAL_FILE).read_bytes()  # cut, not only passed over
    s2 = await again.open_session()
    assert await s2.exists("/e") is None
    assert await s2.exists("/torn") is None
    await s2.create("/b", b"2")
    crash(again)
    with open(tmp_path / JOURNAL_FILE, "ab") as journal:
        # a whole record but without its line's end: its append was never answered
        payload = b'{"z":98,"t":0,"ops":[["c","/unterminated","",0]]}'
        journal.write(b"%08x %s" % (zlib.crc32(payload), payload))

    third = reopen(tmp_path)
    assert b"/unterminated" not in (tmp_path / JOURNAL_FILE).read_bytes()
    s3 = await third.open_session()
    assert sorted(await s3.get_children("/")) == ["a", "b"]
    await s3.create("/c", b"3")
    crash(third)

    fourth = reopen(tmp_path)
    s4 = await fourth.open_session()
    assert sorted(await s4.get_children("/")) == ["a", "b", "c"]
    assert (await s4.get_data("/b"))[0] == b"2"
    await fourth.close()


async def test_second_process_cannot_open_the_same_directory(tmp_path):
    store = reopen(tmp_path)
    with pytest.raises(CoordError):
        EmbeddedStore(tmp_path)
    await store.close()


async def test_suspended_session_holds_events_and_operations(tmp_path):
    store = reopen(tmp_path)
    s = await store.open_session(timeout_ms=10_000, connection_timeout_ms=5_000)
    other = await store.open_session()
    await other.create("/n", b"0")
    _, _, watch = await s.get_data_and_watch("/n")
    store.suspend_session(s.session_id)
    assert s.state is SessionState.SUSPENDED
    await other.set_data("/n", b"1", 0)
    pending_read = asyncio.create_task(s.get_data("/n"))
    await wait_until(lambda: s._state_waiters, what="the read to wait for the reconnect")
    assert not watch.done() and not pending_read.done()
    store.resume_session(s.session_id)
    assert await watch == WatchEvent(EventType.DATA_CHANGED, "/n")
    assert (await pending_read)[0] == b"1"


async def test_suspension_beyond_the_session_timeout_expires(tmp_path):
    store = reopen(tmp_path)
    s = await store.open_session(timeout_ms=50, connection_timeout_ms=10)
    other = await store.open_session()
    await s.create("/eph", ephemeral=True)
    store.suspend_session(s.session_id)
    with pytest.raises(ConnectionLoss):
        await s.get_data("/eph")
    await wait_state(s, SessionState.EXPIRED, timeout=5)
    assert await other.exists("/eph") is None
    with pytest.raises(SessionExpired):
        await s.get_data("/eph")


async def test_fail_next_before_and_after_apply(tmp_path):
    store = reopen(tmp_path)
    s = await store.open_session()
    store.fail_next(2)
    for _ in range(2):
        with pytest.raises(ConnectionLoss):
            await s.create("/x")
    assert await s.exists("/x") is None
    store.fail_next(1, after_apply=True)
    with pytest.raises(ConnectionLoss):
        await s.create("/x")
    assert await s.exists("/x") is not None  # applied: the answer was what got lost
    with pytest.raises(NodeExists):
        await s.create("/x")


async def test_shared_store_is_reference_counted(tmp_path):
    a = EmbeddedStore.shared(tmp_path, fsync=False)
    b = EmbeddedStore.shared(tmp_path, fsync=False)
    assert a is b
    sa = await a.open_session()
    await a.close()
    assert not b.closed and sa.state is SessionState.CONNECTED
    await b.close()
    assert b.closed and sa.state is SessionState.CLOSED
    assert EmbeddedStore.shared(tmp_path, fsync=False) is not a


# -- oracle: random operation sequences against a plain dict model ------------------------------

paths_st = st.sampled_from(["/a", "/b", "/a/x", "/a/y", "/b/z", "/a/x/q"])
op_st = st.one_of(
    st.tuples(st.just("create"), paths_st, st.binary(max_size=4)),
    st.tuples(st.just("set"), paths_st, st.binary(max_size=4), st.integers(-1, 3)),
    st.tuples(st.just("delete"), paths_st, st.integers(-1, 3)),
    st.tuples(st.just("multi"), st.lists(st.tuples(paths_st, st.binary(max_size=2)), max_size=3)),
)


class Model:
    """Path -> (data, version); the rules written out the obvious way."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {"/": (b"", 0)}

    @staticmethod
    def parent(path: str) -> str:
        return path.rsplit("/", 1)[0] or "/"

    def children(self, path: str) -> list[str]:
        return [p for p in self.nodes if p != "/" and self.parent(p) == path]

    def create(self, path: str, data: bytes) -> None:
        if path in self.nodes:
            raise NodeExists
        if self.parent(path) not in self.nodes:
            raise NoNode
        self.nodes[path] = (data, 0)

    def set(self, path: str, data: bytes, version: int) -> None:
        if path not in self.nodes:
            raise NoNode
        if version not in (-1, self.nodes[path][1]):
            raise BadVersion
        self.nodes[path] = (data, self.nodes[path][1] + 1)

    def delete(self, path: str, version: int) -> None:
        if path not in self.nodes:
            raise NoNode
        if version not in (-1, self.nodes[path][1]):
            raise BadVersion
        if self.children(path):
            raise NotEmpty
        del self.nodes[path]

    def multi(self, creates: list[tuple[str, bytes]]) -> None:
        saved = dict(self.nodes)
        try:
            for path, data in creates:
                self.create(path, data)
        except CoordError:
            self.nodes = saved
            raise


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(op_st, max_size=25))
def test_embedded_store_matches_the_model(tmp_path_factory, ops):
    directory = tmp_path_factory.mktemp("oracle")

    async def run() -> None:
        store = reopen(directory)
        s = await store.open_session()
        model = Model()
        for op in ops:
            kind = op[0]
            expected = actual = None
            try:
                if kind == "create":
                    model.create(op[1], op[2])
                elif kind == "set":
                    model.set(op[1], op[2], op[3])
                elif kind == "delete":
                    model.delete(op[1], op[2])
                else:
                    model.multi(op[1])
            except CoordError as error:
                expected = type(error)
            try:
                if kind == "create":
                    await s.create(op[1], op[2])
                elif kind == "set":
                    await s.set_data(op[1], op[2], op[3])
                elif kind == "delete":
                    await s.delete(op[1], op[2])
                else:
                    await s.multi([CreateOp(p, d) for p, d in op[1]])
            except CoordError as error:
                actual = type(error)
            assert actual is expected, (op, actual, expected)
        await store.close()
        # What is on disk is what the model says.
        again = reopen(directory)
        s2 = await again.open_session()
        for path, (data, version) in model.nodes.items():
            got, stat = await s2.get_data(path)
            assert (got, stat.version) == (data, version)
            assert await s2.get_children(path) == sorted(
                c.rsplit("/", 1)[1] for c in model.children(path)
            )
        await again.close()

    asyncio.run(run())


async def test_multi_set_is_undone_on_failure(tmp_path):
    store = reopen(tmp_path)
    s = await store.open_session()
    await s.create("/p", b"0")
    with pytest.raises(NoNode):
        await s.multi([SetDataOp("/p", b"1", 0), SetDataOp("/missing", b"", ANY_VERSION)])
    data, stat = await s.get_data("/p")
    assert data == b"0" and stat.version == 0


async def test_children_stay_sorted_through_creates_deletes_and_undone_multis(tmp_path):
    """Children are listed sorted whatever the order of their creation and deletion, and a
    failed multi leaves the listing, the count and the parent's counters as they were."""
    store = reopen(tmp_path)
    s = await store.open_session()
    await s.create("/p", b"")
    names = ["m", "b", "z", "a", "k", "10", "9", "x-1", "x_1"]
    for name in names:
        await s.create(f"/p/{name}", b"")
    assert await s.get_children("/p") == sorted(names)
    await s.delete("/p/k", ANY_VERSION)
    await s.delete("/p/a", ANY_VERSION)
    await s.delete("/p/z", ANY_VERSION)
    left = sorted(set(names) - {"k", "a", "z"})
    children, _watch = await s.get_children_and_watch("/p")
    assert children == left
    children.append("not in the store")  # the caller's copy
    before = await s.exists("/p")
    with pytest.raises(NodeExists):
        await s.multi(
            [
                CreateOp("/p/c", b""),
                CreateOp("/p/zz", b""),
                CreateOp("/p/0", b""),
                CreateOp("/p/m", b""),
            ]
        )
    assert await s.get_children("/p") == left
    assert await s.exists("/p") == before
    await s.create("/p/only", b"")
    await s.create("/q", b"")
    await s.create("/q/one", b"")
    await s.delete("/q/one", ANY_VERSION)
    assert await s.get_children("/q") == []
    assert (await s.exists("/q")).num_children == 0
    await s.create("/q/two", b"")
    assert await s.get_children("/q") == ["two"]
    await store.close()
    again = reopen(tmp_path)
    s2 = await again.open_session()
    assert await s2.get_children("/p") == sorted([*left, "only"])
    assert (await s2.exists("/p")).num_children == len(left) + 1
    assert await s2.get_children("/q") == ["two"]
    await again.close()
