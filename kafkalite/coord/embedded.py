"""The embedded coordination store: ZooKeeper's semantics in-process, durable to the data dir.

One ``EmbeddedStore`` per data directory per process (``EmbeddedStore.shared``), shared by every
session and every broker of the process (the in-process cluster harness runs several brokers on
one store). Everything runs on the event loop; operations are applied synchronously, so a
transaction is atomic by construction, and a failed ``multi`` is undone from an undo log before
anything is journaled or any watch fires.

Semantics are ZooKeeper's, operation for operation: one zxid per transaction, ``version`` /
``cversion`` counters, sequential names from the parent's ``cversion``, ephemeral nodes owned by
a session and deleted (in one transaction) when it closes or expires, the same checks in the
same order (NoNode, BadVersion, NotEmpty). Watches are ZooKeeper's three tables: data watches
(from ``get_data`` and ``exists`` on a present node: DATA_CHANGED, DELETED), exist watches
(``exists`` on an absent node: CREATED) and child watches (CHILDREN_CHANGED, DELETED).

Durability (``data_dir`` given; None keeps everything in memory):

- ``coord-journal.log``: one line per committed transaction,
  ``<crc32 of json, 8 hex digits> <json>\\n`` with
  ``{"z": zxid, "t": time_ms, "ops": [["c", path, data_b64, owner] | ["s", path, data_b64] |
  ["d", path], ...]}``; ops are recorded resolved (final sequential names, no version checks), so
  replay is deterministic. Appended and (with ``fsync=True``) fsynced before the caller is
  answered: persist before you announce.
- ``coord-snapshot.json``: ``{"format": 1, "zxid": z, "nodes": [[path, data_b64, czxid, mzxid,
  ctime, mtime, version, cversion, aversion, ephemeral_owner, pzxid], ...]}`` (parents before
  children), written atomically (temp file, fsync, rename, fsync of the directory) every
  ``snapshot_every`` transactions and at close (at open only when there is none); the journal
  is then truncated. Journal records with ``z`` <= the snapshot's zxid are skipped on replay
  (a crash between the two steps).
- Recovery: snapshot, then journal lines until the first torn, corrupt or unterminated line
  (the tail of an interrupted append, never answered; dropped, and the journal cut there).
  Then every ephemeral node is deleted, since no session survives the process, in one
  transaction appended to the journal. The recovered tree is not written as a new snapshot:
  the journal goes on from its last good record (only a directory without a snapshot gets one
  at open).
- ``coord.lock`` (``flock``) keeps a second process off the same directory.

Fault helpers for tests: ``expire_session``, ``suspend_session`` / ``resume_session`` (a
suspended session's operations wait for the resume up to its connection timeout, its watch
events are held back, and it expires when suspended longer than its session timeout, like a
ZooKeeper client cut off from the ensemble), and ``fail_next(n)`` (the next n operations raise
``ConnectionLoss``, before or after being applied).

Size: a write whose request would be longer than ZooKeeper's ``jute.maxbuffer``
(``base.JUTE_MAXBUFFER``, measured as ZooKeeper serialises it) raises ``RequestTooLarge`` before
anything is applied or journaled, so no node holds more than a ZooKeeper node could.
"""

from __future__ import annotations

import asyncio
import binascii
import bisect
import fcntl
import itertools
import json
import os
import time
import zlib
from collections.abc import Callable, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any, BinaryIO

from .base import (
    ANY_VERSION,
    CheckOp,
    CheckResult,
    CoordSession,
    CoordStore,
    CreateOp,
    CreateResult,
    DeleteOp,
    DeleteResult,
    EventType,
    Op,
    OpResult,
    SessionState,
    SetDataOp,
    SetDataResult,
    Stat,
    Watch,
    WatchEvent,
    check_request_length,
    parent_of,
    sequence_name,
    validate_path,
)
from .errors import (
    BadArguments,
    BadVersion,
    ConnectionLoss,
    CoordError,
    NoChildrenForEphemerals,
    NodeExists,
    NoNode,
    NotEmpty,
    RolledBack,
    SessionClosed,
    SessionExpired,
    StoreCorrupted,
)

JOURNAL_FILE = "coord-journal.log"
SNAPSHOT_FILE = "coord-snapshot.json"
LOCK_FILE = "coord.lock"
SNAPSHOT_FORMAT = 1

_DATA, _EXIST, _CHILD = "data", "exist", "child"
_UNDO_CREATE, _UNDO_SET, _UNDO_DELETE = "create", "set", "delete"


class _Node:
    """One node. ``children`` are the children's names, kept sorted (``get_children`` answers
    a copy, not a sort of thousands of names per call); a node without children shares the
    empty tuple instead of holding an empty container of its own."""

    __slots__ = (
        "data",
        "czxid",
        "mzxid",
        "ctime",
        "mtime",
        "version",
        "cversion",
        "aversion",
        "ephemeral_owner",
        "pzxid",
        "children",
    )

    def __init__(self, data: bytes, zxid: int, now: int, owner: int) -> None:
        self.data = data
        self.czxid = self.mzxid = self.pzxid = zxid
        self.ctime = self.mtime = now
        self.version = self.cversion = self.aversion = 0
        self.ephemeral_owner = owner
        self.children: list[str] | tuple[()] = ()

    def add_child(self, name: str) -> None:
        children = self.children
        if not children:
            self.children = [name]
        elif name > children[-1]:
            children.append(name)  # names created in order (sequential ones, most topics)
        else:
            bisect.insort(children, name)

    def remove_child(self, name: str) -> None:
        children = self.children
        index = bisect.bisect_left(children, name)
        if index < len(children) and children[index] == name:
            if len(children) == 1:
                self.children = ()
            else:
                del children[index]  # type: ignore[union-attr]  # two or more: a list

    def stat(self) -> Stat:
        return Stat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            ctime=self.ctime,
            mtime=self.mtime,
            version=self.version,
            cversion=self.cversion,
            aversion=self.aversion,
            ephemeral_owner=self.ephemeral_owner,
            data_length=len(self.data),
            num_children=len(self.children),
            pzxid=self.pzxid,
        )


_NODE_VERSION = attrgetter("version")


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


class _Txn:
    """One transaction being applied: its zxid, the undo log, the journal ops and the events."""

    __slots__ = ("zxid", "now", "undo", "journal", "events")

    def __init__(self, zxid: int, now: int) -> None:
        self.zxid = zxid
        self.now = now
        self.undo: list[tuple] = []
        self.journal: list[list] = []
        self.events: list[tuple[str, str, EventType]] = []  # (watch table, path, event type)


class EmbeddedStore(CoordStore):
    """The in-process tree. See the module docstring for semantics and on-disk format."""

    kind = "embedded"
    _registry: dict[str, EmbeddedStore] = {}

    def __init__(
        self,
        data_dir: str | os.PathLike | None = None,
        *,
        session_timeout_ms: int = 18000,
        fsync: bool = True,
        snapshot_every: int = 10000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.session_timeout_ms = session_timeout_ms
        self.fsync = fsync
        self.snapshot_every = snapshot_every
        self._clock = clock
        self._nodes: dict[str, _Node] = {}
        self._zxid = 0
        self._sessions: dict[int, EmbeddedSession] = {}
        self._session_ids = itertools.count((int(clock()) & 0xFFFFFFFF) << 24 | 1)
        self._watches: dict[tuple[str, str], list[tuple[EmbeddedSession, asyncio.Future]]] = {}
        self._fail_next = 0
        self._fail_after_apply = False
        self._journal: BinaryIO | None = None
        self._journal_records = 0
        self._lock_fd: int | None = None
        self._refs = 0
        self._registry_key: str | None = None
        self.closed = False
        self._nodes["/"] = _Node(b"", 0, 0, 0)
        if self.data_dir is not None:
            self._open_files()

    # -- sharing in the process --

    @classmethod
    def shared(cls, data_dir: str | os.PathLike, **kwargs) -> EmbeddedStore:
        """The process-wide store of ``data_dir`` (opened on first use, reference-counted)."""
        key = os.path.realpath(data_dir)
        store = cls._registry.get(key)
        if store is None or store.closed:
            store = cls(key, **kwargs)
            store._registry_key = key
            cls._registry[key] = store
        store._refs += 1
        return store

    # -- CoordStore --

    async def open_session(
        self, timeout_ms: int | None = None, *, connection_timeout_ms: int | None = None
    ) -> EmbeddedSession:
        if self.closed:
            raise CoordError("embedded store is closed")
        session = EmbeddedSession(
            self,
            next(self._session_ids),
            timeout_ms or self.session_timeout_ms,
            connection_timeout_ms,
        )
        self._sessions[session.session_id] = session
        session._set_state(SessionState.CONNECTED)
        return session

    async def close(self) -> None:
        """Release one reference; the last one closes every session and snapshots."""
        if self.closed:
            return
        self._refs -= 1
        if self._refs > 0:
            return
        for session in list(self._sessions.values()):
            self._end_session(session, SessionState.CLOSED)
        self.closed = True
        if self._registry_key is not None and self._registry.get(self._registry_key) is self:
            del self._registry[self._registry_key]
        if self.data_dir is not None:
            self._write_snapshot()
            if self._journal is not None:
                self._journal.close()
                self._journal = None
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    # -- fault helpers --

    def expire_session(self, session_id: int) -> None:
        """Expire a session now: its ephemerals go, its watches fail with SessionExpired."""
        session = self._sessions.get(session_id)
        if session is not None:
            self._end_session(session, SessionState.EXPIRED)

    def suspend_session(self, session_id: int) -> None:
        """Cut a session off: operations wait, events are held, expiry after its timeout."""
        session = self._sessions[session_id]
        if session.state is not SessionState.CONNECTED:
            return
        session._set_state(SessionState.SUSPENDED)
        loop = asyncio.get_running_loop()
        session._expiry_timer = loop.call_later(
            session.timeout_ms / 1000, self.expire_session, session_id
        )

    def resume_session(self, session_id: int) -> None:
        """Reconnect a suspended session (if it has not expired meanwhile)."""
        session = self._sessions.get(session_id)
        if session is None or session.state is not SessionState.SUSPENDED:
            return
        if session._expiry_timer is not None:
            session._expiry_timer.cancel()
            session._expiry_timer = None
        session._set_state(SessionState.CONNECTED)
        held, session._held = session._held, []
        for future, event in held:
            if not future.done():
                future.set_result(event)

    def fail_next(self, count: int, *, after_apply: bool = False) -> None:
        """Make the next ``count`` operations raise ConnectionLoss.

        With ``after_apply`` the operation is applied first (the answer is what got lost), which is
        the case callers must be ready for: a write whose outcome is unknown.
        """
        self._fail_next = count
        self._fail_after_apply = after_apply

    # -- reads --

    def _node(self, path: str) -> _Node:
        node = self._nodes.get(validate_path(path))
        if node is None:
            raise NoNode(path, path=path)
        return node

    def _add_watch(self, session: EmbeddedSession, table: str, path: str) -> Watch:
        future = asyncio.get_running_loop().create_future()
        self._watches.setdefault((table, path), []).append((session, future))
        return Watch(path, future)

    # -- writes --

    def execute(
        self, session: EmbeddedSession, ops: Sequence[Op], *, multi: bool = False
    ) -> list[OpResult]:
        """Apply ``ops`` atomically for ``session``; raises the first failure, applying nothing."""
        txn = _Txn(self._zxid + 1, int(self._clock() * 1000))
        results: list[OpResult] = []
        for index, op in enumerate(ops):
            try:
                results.append(self._apply(txn, session.session_id, op))
            except CoordError as error:
                for step in reversed(txn.undo):
                    self._undo(step)
                if multi:
                    error.failed_op_index = index
                    error.results = [
                        error if i == index else RolledBack(path=o.path) for i, o in enumerate(ops)
                    ]
                raise
        if txn.journal:
            self._commit(txn)
        return results

    def _apply(self, txn: _Txn, owner: int, op: Op) -> OpResult:
        if isinstance(op, CreateOp):
            return CreateResult(self._check_create(txn, op, owner))
        if isinstance(op, SetDataOp):
            node = self._node(op.path)
            self._check_version(op.path, node, op.version)
            self._do_set(txn, op.path, bytes(op.data))
            return SetDataResult(op.path, node.stat())
        if isinstance(op, DeleteOp):
            node = self._node(op.path)
            if op.path == "/":
                raise BadArguments("cannot delete the root", path="/")
            self._check_version(op.path, node, op.version)
            if node.children:
                raise NotEmpty(op.path, path=op.path)
            self._do_delete(txn, op.path)
            return DeleteResult(op.path)
        if isinstance(op, CheckOp):
            self._check_version(op.path, self._node(op.path), op.version)
            return CheckResult(op.path)
        raise BadArguments(f"unknown operation {op!r}")

    @staticmethod
    def _check_version(path: str, node: _Node, version: int) -> None:
        if version != ANY_VERSION and version != node.version:
            raise BadVersion(f"{path}: expected version {version}, is {node.version}", path=path)

    def _check_create(self, txn: _Txn, op: CreateOp, owner: int) -> str:
        path = validate_path(op.path, sequential=op.sequential)
        if path == "/":
            raise NodeExists(path, path=path)
        parent_path = parent_of(path)
        parent = self._nodes.get(parent_path)
        if parent is None:
            raise NoNode(parent_path, path=parent_path)
        if parent.ephemeral_owner:
            raise NoChildrenForEphemerals(parent_path, path=parent_path)
        if op.sequential:
            path = sequence_name(path, parent.cversion)
        if path in self._nodes:
            raise NodeExists(path, path=path)
        self._do_create(txn, path, bytes(op.data), owner if op.ephemeral else 0)
        return path

    # The three mutations, shared by live transactions and journal replay (txn.undo is ignored
    # on replay). Each records its undo step (a tuple, undone by _undo: no closure and cells per
    # operation), its journal op and the watch events it triggers.

    def _do_create(self, txn: _Txn, path: str, data: bytes, owner: int) -> None:
        parent_path = parent_of(path)
        parent = self._nodes[parent_path]
        name = path[len(parent_path) :].lstrip("/")
        txn.undo.append((_UNDO_CREATE, path, parent, name, parent.cversion, parent.pzxid))
        self._nodes[path] = _Node(data, txn.zxid, txn.now, owner)
        parent.add_child(name)
        parent.cversion += 1
        parent.pzxid = txn.zxid
        txn.journal.append(["c", path, _b64(data), owner])
        txn.events.append((_EXIST, path, EventType.CREATED))
        txn.events.append((_CHILD, parent_path, EventType.CHILDREN_CHANGED))

    def _do_set(self, txn: _Txn, path: str, data: bytes) -> None:
        node = self._nodes[path]
        txn.undo.append((_UNDO_SET, node, node.data, node.version, node.mzxid, node.mtime))
        node.data = data
        node.version += 1
        node.mzxid = txn.zxid
        node.mtime = txn.now
        txn.journal.append(["s", path, _b64(data)])
        txn.events.append((_DATA, path, EventType.DATA_CHANGED))

    def _do_delete(self, txn: _Txn, path: str) -> None:
        parent_path = parent_of(path)
        parent = self._nodes[parent_path]
        name = path[len(parent_path) :].lstrip("/")
        node = self._nodes.pop(path)
        txn.undo.append((_UNDO_DELETE, path, parent, name, parent.cversion, parent.pzxid, node))
        parent.remove_child(name)
        parent.cversion += 1
        parent.pzxid = txn.zxid
        txn.journal.append(["d", path])
        txn.events.append((_DATA, path, EventType.DELETED))
        txn.events.append((_CHILD, path, EventType.DELETED))
        txn.events.append((_CHILD, parent_path, EventType.CHILDREN_CHANGED))

    def _undo(self, step: tuple) -> None:
        """Put back what one _do_create, _do_set or _do_delete changed (its recorded step)."""
        if step[0] is _UNDO_SET:
            _, node, data, version, mzxid, mtime = step
            node.data, node.version, node.mzxid, node.mtime = data, version, mzxid, mtime
            return
        kind, path, parent, name, cversion, pzxid = step[:6]
        parent.cversion, parent.pzxid = cversion, pzxid
        if kind is _UNDO_CREATE:
            del self._nodes[path]
            parent.remove_child(name)
        else:
            self._nodes[path] = step[6]  # the deleted node
            parent.add_child(name)

    def _commit(self, txn: _Txn) -> None:
        """Make the transaction durable, then fire its watches (persist before you announce)."""
        self._zxid = txn.zxid
        if self.data_dir is not None:
            self._append_journal(txn)
        for table, path, event_type in txn.events:
            # ZooKeeper fires data-table watches for CREATED too (exists() on an absent node
            # registers there); DELETED removes both a node's data and child watches.
            tables = (_EXIST, _DATA) if event_type is EventType.CREATED else (table,)
            for t in tables:
                for session, future in self._watches.pop((t, path), ()):
                    session._deliver(future, WatchEvent(event_type, path))

    # -- sessions --

    def _end_session(self, session: EmbeddedSession, state: SessionState) -> None:
        if session.state.is_terminal:
            return
        if session._expiry_timer is not None:
            session._expiry_timer.cancel()
            session._expiry_timer = None
        self._sessions.pop(session.session_id, None)
        # The session's own watches fail first: a dead session hears nothing of its own cleanup.
        error_type = SessionExpired if state is SessionState.EXPIRED else SessionClosed

        def fail(future: asyncio.Future) -> None:
            if not future.done():
                future.set_exception(error_type(f"session 0x{session.session_id:x} {state.value}"))
                future.exception()  # retrieved: nobody may be awaiting it

        for key in list(self._watches):
            remaining = []
            for owner, future in self._watches[key]:
                if owner is session:
                    fail(future)
                else:
                    remaining.append((owner, future))
            if remaining:
                self._watches[key] = remaining
            else:
                del self._watches[key]
        for future, _event in session._held:
            fail(future)
        session._held = []
        session._set_state(state)
        owned = [p for p, n in self._nodes.items() if n.ephemeral_owner == session.session_id]
        if owned and not self.closed:
            txn = _Txn(self._zxid + 1, int(self._clock() * 1000))
            for path in sorted(owned, reverse=True):
                self._do_delete(txn, path)
            self._commit(txn)

    def _take_injected_failure(self) -> bool | None:
        """None: no failure; False: fail before applying; True: fail after applying."""
        if self._fail_next <= 0:
            return None
        self._fail_next -= 1
        return self._fail_after_apply

    # -- durability --

    def _open_files(self) -> None:
        assert self.data_dir is not None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise CoordError(f"{self.data_dir} is in use by another process") from None
        journal_end, journal_records, cleanup = self._recover()
        if journal_end is None:
            # No snapshot on disk (a new directory): the tree as recovered, and an empty journal.
            self._write_snapshot()
            return
        # The snapshot and the journal's good records hold the tree: it is not written anew
        # (at 10,000 topics that cost the start-up 0.15-0.2 s after a crash). The journal
        # is kept, cut after its last good record (a torn tail would stop the next replay
        # before anything appended after it), and appended to; a record it held that the
        # snapshot also holds is skipped on replay (see _recover).
        path = self.data_dir / JOURNAL_FILE
        journal: BinaryIO = open(path, "r+b" if path.exists() else "wb")  # noqa: SIM115
        journal.truncate(journal_end)
        journal.seek(journal_end)
        if self.fsync:
            os.fsync(journal.fileno())
        self._journal = journal
        self._journal_records = journal_records
        if cleanup is not None:
            self._append_journal(cleanup)  # the ephemerals' deletion, durable as any write

    def _recover(self) -> tuple[int | None, int, _Txn | None]:
        """Load the snapshot, then replay the journal; delete the ephemeral nodes. Returns
        where the journal's last good record ends (None without a snapshot on disk), how
        many good records it holds, and the transaction deleting the ephemerals (None when
        there were none)."""
        assert self.data_dir is not None
        journal_end: int | None = None
        snapshot = self.data_dir / SNAPSHOT_FILE
        if snapshot.exists():
            journal_end = 0
            try:
                doc = json.loads(snapshot.read_bytes())
                if doc.get("format") != SNAPSHOT_FORMAT:
                    raise StoreCorrupted(f"{snapshot}: unknown format {doc.get('format')!r}")
                self._zxid = int(doc["zxid"])
                self._load_nodes(doc["nodes"])
            except (ValueError, KeyError, TypeError, binascii.Error) as error:
                raise StoreCorrupted(f"{snapshot}: {error}") from error
        records = 0
        journal = self.data_dir / JOURNAL_FILE
        if journal.exists():
            content = journal.read_bytes()
            start = 0
            while True:
                end = content.find(b"\n", start)
                if end < 0:
                    break  # the unterminated tail of an interrupted append (never answered)
                record = self._parse_journal_line(content[start:end])
                if record is None:
                    break  # torn or corrupt: the tail of an interrupted append
                start = end + 1
                records += 1
                if record["z"] > self._zxid:
                    self._replay(record)
            if journal_end is not None:
                journal_end = start
        cleanup = None
        ephemerals = [p for p, n in self._nodes.items() if n.ephemeral_owner]
        if ephemerals:
            cleanup = _Txn(self._zxid + 1, int(self._clock() * 1000))
            for path in sorted(ephemerals, reverse=True):
                self._do_delete(cleanup, path)
            self._zxid = cleanup.zxid
        return journal_end, records, cleanup

    def _replay(self, record: dict) -> None:
        """Apply one journal record: the mutations of _do_create, _do_set and _do_delete
        without their undo steps, journal ops and events (nobody is listening yet)."""
        zxid, now = record["z"], record["t"]
        nodes = self._nodes
        unb64 = binascii.a2b_base64
        for op in record["ops"]:
            kind, path = op[0], op[1]
            if kind == "s":
                node = nodes[path]
                node.data = unb64(op[2]) if op[2] else b""
                node.version += 1
                node.mzxid = zxid
                node.mtime = now
                continue
            parent_path, _, name = path.rpartition("/")
            parent = nodes[parent_path or "/"]
            if kind == "c":
                nodes[path] = _Node(unb64(op[2]) if op[2] else b"", zxid, now, op[3])
                parent.add_child(name)
            else:
                del nodes[path]
                parent.remove_child(name)
            parent.cversion += 1
            parent.pzxid = zxid
        self._zxid = zxid

    def _load_nodes(self, entries: list[list]) -> None:
        """The snapshot's nodes, parents before children (one pass: at 10,000 topics the
        snapshot holds 50,000 nodes, and this loop is most of the store's start-up). Each node
        is made without ``__init__`` (its fields are set once, not set and then overwritten);
        siblings come in order (the snapshot is sorted by path), so each child is appended."""
        nodes = self._nodes
        unb64 = binascii.a2b_base64
        new = _Node.__new__
        for (
            path,
            data,
            czxid,
            mzxid,
            ctime,
            mtime,
            version,
            cversion,
            aversion,
            owner,
            pzxid,
        ) in entries:
            node = new(_Node)
            node.data = unb64(data) if data else b""
            node.czxid = czxid
            node.mzxid = mzxid
            node.ctime = ctime
            node.mtime = mtime
            node.version = version
            node.cversion = cversion
            node.aversion = aversion
            node.ephemeral_owner = owner
            node.pzxid = pzxid
            node.children = ()
            nodes[path] = node
            if path != "/":
                parent, _, name = path.rpartition("/")
                nodes[parent or "/"].add_child(name)

    @staticmethod
    def _parse_journal_line(line: bytes) -> dict | None:
        if len(line) < 10 or line[8:9] != b" ":
            return None
        payload = line[9:]
        try:
            if int(line[:8], 16) != zlib.crc32(payload):
                return None
            return json.loads(payload)
        except ValueError:
            return None

    def _append_journal(self, txn: _Txn) -> None:
        payload = json.dumps(
            {"z": txn.zxid, "t": txn.now, "ops": txn.journal}, separators=(",", ":")
        ).encode()
        line = b"%08x %s\n" % (zlib.crc32(payload), payload)
        journal = self._journal
        assert journal is not None
        journal.write(line)
        journal.flush()
        if self.fsync:
            os.fsync(journal.fileno())
        self._journal_records += 1
        if self._journal_records >= self.snapshot_every:
            self._write_snapshot()

    def _write_snapshot(self) -> None:
        """Write the whole tree atomically, then start an empty journal."""
        assert self.data_dir is not None
        nodes = [
            [
                path,
                _b64(n.data),
                n.czxid,
                n.mzxid,
                n.ctime,
                n.mtime,
                n.version,
                n.cversion,
                n.aversion,
                n.ephemeral_owner,
                n.pzxid,
            ]
            for path, n in sorted(self._nodes.items())
        ]
        doc = json.dumps({"format": SNAPSHOT_FORMAT, "zxid": self._zxid, "nodes": nodes})
        final = self.data_dir / SNAPSHOT_FILE
        temp = self.data_dir / (SNAPSHOT_FILE + ".tmp")
        with open(temp, "wb") as out:
            out.write(doc.encode())
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, final)
        dir_fd = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        if self._journal is not None:
            self._journal.close()
        journal: BinaryIO = open(self.data_dir / JOURNAL_FILE, "wb")  # noqa: SIM115
        if self.fsync:
            os.fsync(journal.fileno())
        self._journal = journal
        self._journal_records = 0


class EmbeddedSession(CoordSession):
    """A session on an ``EmbeddedStore``."""

    def __init__(
        self,
        store: EmbeddedStore,
        session_id: int,
        timeout_ms: int,
        connection_timeout_ms: int | None,
    ) -> None:
        super().__init__(timeout_ms, connection_timeout_ms)
        self.store = store
        self._session_id = session_id
        self._held: list[tuple[asyncio.Future, WatchEvent]] = []
        self._expiry_timer: asyncio.TimerHandle | None = None

    @property
    def session_id(self) -> int:
        return self._session_id

    def _deliver(self, future: asyncio.Future, event: WatchEvent) -> None:
        if self.state is SessionState.SUSPENDED:
            self._held.append((future, event))
        elif not future.done():
            future.set_result(event)

    async def _ready(self) -> bool | None:
        """Wait until the session can talk to the store; returns the injected failure mode."""
        self._raise_if_terminal(self.state)
        if self.state is SessionState.SUSPENDED:
            try:
                state = await self.wait_for_state(
                    SessionState.CONNECTED, timeout=self.connection_timeout_ms / 1000
                )
            except TimeoutError:
                raise ConnectionLoss(
                    f"session 0x{self.session_id:x} not reconnected within "
                    f"{self.connection_timeout_ms} ms"
                ) from None
            self._raise_if_terminal(state)
        failure = self.store._take_injected_failure()
        if failure is False:
            raise ConnectionLoss("injected connection loss (operation not applied)")
        return failure

    async def _write(self, ops: Sequence[Op], *, multi: bool = False) -> list[OpResult]:
        check_request_length(ops, multi=multi)
        failure = await self._ready()
        results = self.store.execute(self, ops, multi=multi)
        if failure:
            raise ConnectionLoss("injected connection loss (operation applied)")
        return results

    async def _create(self, path: str, data: bytes, *, ephemeral: bool, sequential: bool) -> str:
        results = await self._write([CreateOp(path, data, ephemeral, sequential)])
        return results[0].path

    async def get_data(self, path: str) -> tuple[bytes, Stat]:
        await self._ready()
        node = self.store._node(path)
        return node.data, node.stat()

    async def get_data_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        """All at once, as one read (ZooKeeper's multiRead): no task per node."""
        return await self._read_many(paths, _Node.stat)

    async def get_data_versions_many(self, paths: Sequence[str]) -> list[tuple[bytes, int] | None]:
        """As ``get_data_many``, one read, with each node's version instead of its stat."""
        return await self._read_many(paths, _NODE_VERSION)

    async def _read_many(self, paths: Sequence[str], about: Callable[[_Node], Any]) -> list:
        """Each node's data and ``about(node)``, None where absent, in one read."""
        if not paths:
            return []
        await self._ready()
        nodes = self.store._nodes
        out: list = []
        for path in paths:
            node = nodes.get(path)
            if node is None:
                validate_path(path)
                out.append(None)
            else:
                out.append((node.data, about(node)))
        return out

    async def get_data_and_watch_many(
        self, paths: Sequence[str]
    ) -> list[tuple[bytes | None, Watch] | CoordError]:
        """All in one pass, as one read: no task or stat per node."""
        if not paths:
            return []
        await self._ready()
        store = self.store
        nodes = store._nodes
        out: list[tuple[bytes | None, Watch] | CoordError] = []
        for path in paths:
            node = nodes.get(path)
            if node is None:
                validate_path(path)
                out.append((None, store._add_watch(self, _EXIST, path)))
            else:
                out.append((node.data, store._add_watch(self, _DATA, path)))
        return out

    async def set_data(self, path: str, data: bytes, version: int) -> Stat:
        results = await self._write([SetDataOp(path, data, version)])
        return results[0].stat

    async def delete(self, path: str, version: int) -> None:
        await self._write([DeleteOp(path, version)])

    async def exists(self, path: str) -> Stat | None:
        await self._ready()
        node = self.store._nodes.get(validate_path(path))
        return node.stat() if node is not None else None

    async def get_children(self, path: str) -> list[str]:
        await self._ready()
        return list(self.store._node(path).children)

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        if not ops:
            return []
        return await self._write(list(ops), multi=True)

    async def exists_and_watch(self, path: str) -> tuple[Stat | None, Watch]:
        await self._ready()
        node = self.store._nodes.get(validate_path(path))
        if node is None:
            return None, self.store._add_watch(self, _EXIST, path)
        return node.stat(), self.store._add_watch(self, _DATA, path)

    async def get_data_and_watch(self, path: str) -> tuple[bytes, Stat, Watch]:
        await self._ready()
        node = self.store._node(path)
        return node.data, node.stat(), self.store._add_watch(self, _DATA, path)

    async def get_children_and_watch(self, path: str) -> tuple[list[str], Watch]:
        await self._ready()
        node = self.store._node(path)
        return list(node.children), self.store._add_watch(self, _CHILD, path)

    async def close(self) -> None:
        if not self.state.is_terminal:
            self.store._end_session(self, SessionState.CLOSED)
