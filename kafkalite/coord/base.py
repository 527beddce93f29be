"""The coordination-store interface, shaped after ZooKeeper's guarantees.

The controller (docs/architecture.md, Controller; Kafka's KafkaController) depends on exactly what ZooKeeper
promises, so this interface promises the same, whatever the backend:

- **Sessions.** A client works through a ``CoordSession`` with a timeout. Its state is observable
  (``SessionState``): CONNECTED, SUSPENDED (connection lost, the session may still be alive on the
  server; operations wait for the reconnect up to the connection timeout, then raise
  ``ConnectionLoss``; suspended longer than the session timeout means expired), EXPIRED
  (terminal: the store deleted every ephemeral node the session owned;
  every call raises ``SessionExpired``; the owner opens a new session and re-registers, like
  Kafka's ``ZooKeeperClient.reinitialize``) and CLOSED (terminal, by the owner).
- **Nodes** form a tree of absolute, slash-separated paths. Each has data (bytes) and a ``Stat``.
  ``version`` counts data changes and is the compare-and-set token: ``set_data`` and ``delete``
  take the version the caller expects (``ANY_VERSION`` = -1 to skip the check) and raise
  ``BadVersion`` on mismatch. There is deliberately no default: a forgotten version is a bug.
- **Ephemeral nodes** belong to the session that created them and vanish when it is closed or
  expires; they cannot have children. **Sequential nodes** get a per-parent counter appended as
  ten zero-padded digits, so names sort in creation order (the embedded store uses the parent's
  ``cversion``, which counts child creations and deletions; ZooKeeper 3.8 counts creations only:
  callers may rely on the order, never on the exact numbers).
- **multi** applies check/create/set/delete operations all-or-nothing in order and returns one
  result per operation; on failure it raises the first failing operation's error with
  ``failed_op_index`` and per-operation ``results``.
- **Watches** are ZooKeeper's one-shot watches: ``exists_and_watch``, ``get_data_and_watch`` and
  ``get_children_and_watch`` read and leave a ``Watch`` behind, an awaitable that resolves to the
  first ``WatchEvent`` on that node after the read. A client sees the event before it can read the
  state that caused it, and one session's events arrive in the order the changes were applied.
  Watches survive reconnects (the backend re-arms them) and fail with ``SessionExpired`` /
  ``SessionClosed`` when the session ends. ``watch_data`` and ``watch_children`` build persistent
  async iterators on top (re-read, re-arm, yield each new state), which ride out connection loss.
- **Request size.** A write whose request, serialised as ZooKeeper's wire format
  (``request_length``), is longer than ``JUTE_MAXBUFFER`` raises ``RequestTooLarge`` and applies
  nothing, whatever the backend: ZooKeeper's server refuses such a packet (jute.maxbuffer), so a
  node can never hold more than about 1 MiB, and a caller that builds one (a topic's assignment
  with a huge partition count) learns it at once instead of growing the store.

Every backend raises only the exceptions of ``kafkalite.coord.errors``.
"""

from __future__ import annotations

import abc
import asyncio
import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from .errors import (
    BadArguments,
    ConnectionLoss,
    CoordError,
    NodeExists,
    NoNode,
    RequestTooLarge,
    SessionClosed,
    SessionExpired,
)

ANY_VERSION = -1
"""Expected version that matches every version (ZooKeeper's -1)."""

SEQUENCE_DIGITS = 10

JUTE_MAXBUFFER = 0xFFFFF
"""ZooKeeper's default ``jute.maxbuffer`` (1,048,575 bytes): the longest request packet a server
accepts (the 4-byte length prefix excluded). Both backends refuse a longer write with
``RequestTooLarge`` before it is sent or applied."""

_T = TypeVar("_T")
_NOTHING_YET = object()  # a watch iterator's "last key yielded" before its first yield


class SessionState(enum.Enum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    EXPIRED = "expired"
    CLOSED = "closed"

    @property
    def is_terminal(self) -> bool:
        return self in (SessionState.EXPIRED, SessionState.CLOSED)


class EventType(enum.Enum):
    """ZooKeeper's watched-event types (``Watcher.Event.EventType``)."""

    CREATED = "created"
    DELETED = "deleted"
    DATA_CHANGED = "data_changed"
    CHILDREN_CHANGED = "children_changed"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: EventType
    path: str


@dataclass(slots=True)
class Stat:
    """A node's metadata, field for field ZooKeeper's ``Stat``. Read only by convention: not
    ``frozen``, whose ``__init__`` sets each field through ``object.__setattr__`` (2.3 µs a
    stat against 1.1 µs; a controller's start reads tens of thousands of nodes)."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int

    @property
    def is_ephemeral(self) -> bool:
        return self.ephemeral_owner != 0


@dataclass(frozen=True, slots=True)
class NodeData:
    """A node's data and stat as read together (what ``watch_data`` yields)."""

    data: bytes
    stat: Stat


# -- multi operations and their results ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckOp:
    path: str
    version: int


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetDataOp:
    path: str
    data: bytes
    version: int


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int


Op = CheckOp | CreateOp | SetDataOp | DeleteOp


@dataclass(frozen=True, slots=True)
class CheckResult:
    path: str


@dataclass(frozen=True, slots=True)
class CreateResult:
    path: str
    """The created path (with the sequence suffix for sequential nodes)."""


@dataclass(frozen=True, slots=True)
class SetDataResult:
    path: str
    stat: Stat


@dataclass(frozen=True, slots=True)
class DeleteResult:
    path: str


OpResult = CheckResult | CreateResult | SetDataResult | DeleteResult


# -- request size -------------------------------------------------------------------------------

# ZooKeeper's opcodes' wire sizes: a request header is xid + type; a string or buffer is a 4-byte
# length and the bytes; an ACL list of one world:anyone entry (what every node here gets) is the
# count, perms and the two strings; a multi wraps each operation in a header (type, done, err)
# and ends with one more.
_HEADER = 8
_WORLD_ANYONE_ACL = 4 + 4 + (4 + len("world")) + (4 + len("anyone"))
_MULTI_HEADER = 4 + 1 + 4


def _jute_string(text: str) -> int:
    return 4 + len(text.encode("utf-8"))


def op_length(op: Op, path: str | None = None) -> int:
    """The body of ``op`` as ZooKeeper serialises it (``path`` overrides ``op.path``, for a
    chroot prefix)."""
    path_length = _jute_string(op.path if path is None else path)
    if isinstance(op, CreateOp):
        return path_length + 4 + len(op.data) + _WORLD_ANYONE_ACL + 4
    if isinstance(op, SetDataOp):
        return path_length + 4 + len(op.data) + 4
    return path_length + 4  # DeleteOp, CheckOp: path and version


def request_length(ops: Sequence[Op], *, multi: bool, path_prefix: str = "") -> int:
    """The length ZooKeeper's server compares with jute.maxbuffer for a request of ``ops``
    (one operation unless ``multi``), paths prefixed by ``path_prefix`` (a chroot)."""
    bodies = [op_length(op, path_prefix + op.path if path_prefix else None) for op in ops]
    if not multi:
        return _HEADER + bodies[0]
    return _HEADER + sum(_MULTI_HEADER + body for body in bodies) + _MULTI_HEADER


def check_request_length(
    ops: Sequence[Op], *, multi: bool, path_prefix: str = "", limit: int = JUTE_MAXBUFFER
) -> None:
    """Raise ``RequestTooLarge`` when the request of ``ops`` is longer than ``limit``."""
    length = request_length(ops, multi=multi, path_prefix=path_prefix)
    if length > limit:
        path = ops[0].path if len(ops) == 1 else None
        raise RequestTooLarge(
            f"request of {length} bytes is longer than jute.maxbuffer ({limit} bytes)",
            path=path,
        )


# -- paths ----------------------------------------------------------------------------------------


def validate_path(path: str, *, sequential: bool = False) -> str:
    """Check ``path`` is a ZooKeeper path (PathUtils.validatePath) and return it.

    Absolute, no empty, ``.`` or ``..`` components, no trailing slash (except the root), no NUL.
    A sequential create may end in a slash (the name is then just the sequence number).
    """
    if not isinstance(path, str) or not path.startswith("/"):
        raise BadArguments(f"path must be absolute: {path!r}", path=str(path))
    if path == "/":
        return path
    if "\x00" in path:
        raise BadArguments(f"path contains NUL: {path!r}", path=path)
    if "//" not in path and "/." not in path and path[-1] != "/":
        # The common case without splitting: an empty component needs "//" or a trailing
        # slash, and a "." or ".." component a "/." (every component follows a slash).
        return path
    body = path[1:-1] if (sequential and path.endswith("/")) else path[1:]
    for part in body.split("/"):
        if part in ("", ".", ".."):
            raise BadArguments(f"invalid path: {path!r}", path=path)
    return path


def parent_of(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def join_path(parent: str, child: str) -> str:
    return parent + child if parent.endswith("/") else f"{parent}/{child}"


def sequence_name(path: str, counter: int) -> str:
    """The name ZooKeeper gives a sequential node: the path plus ``%010d`` of the counter."""
    return f"{path}{counter & 0xFFFFFFFF if counter < 0 else counter:0{SEQUENCE_DIGITS}d}"


# -- watches --------------------------------------------------------------------------------------


class Watch:
    """A one-shot watch: ``await watch`` returns the first ``WatchEvent`` after the read.

    Raises ``SessionExpired`` or ``SessionClosed`` when the session ends before an event fires.
    Cancelling the awaiting task does not disarm the watch; ``cancel()`` does (locally).
    """

    __slots__ = ("path", "_future")

    def __init__(self, path: str, future: asyncio.Future[WatchEvent]) -> None:
        self.path = path
        self._future = future

    def __await__(self):
        return asyncio.shield(self._future).__await__()

    def done(self) -> bool:
        return self._future.done()

    def cancel(self) -> None:
        self._future.cancel()

    def add_done_callback(self, callback: Callable[[asyncio.Future[WatchEvent]], None]) -> None:
        """Call ``callback`` with the watch's future once it fires (its result: the
        ``WatchEvent``), fails (``SessionExpired``, ``SessionClosed``, ``ConnectionLoss``) or is
        cancelled: a watch that needs no task of its own waiting for it."""
        self._future.add_done_callback(callback)

    def __repr__(self) -> str:
        return f"Watch({self.path!r}, done={self.done()})"


# -- sessions and stores --------------------------------------------------------------------------


class CoordSession(abc.ABC):
    """One client session. Not thread-safe; use from the event loop that opened it.

    Subclasses implement the primitive operations and call ``_set_state`` on every state change;
    the persistent watch iterators, ``ensure_path`` and ``delete_recursive`` are built here once
    for every backend.
    """

    def __init__(self, timeout_ms: int, connection_timeout_ms: int | None = None) -> None:
        self.timeout_ms = timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or timeout_ms
        self._state = SessionState.CONNECTING
        self._state_waiters: list[tuple[frozenset[SessionState], asyncio.Future]] = []
        self._state_listeners: list[asyncio.Queue[SessionState]] = []
        self._state_callbacks: list[Callable[[SessionState], None]] = []

    # -- state --

    @property
    @abc.abstractmethod
    def session_id(self) -> int:
        """The session id (ZooKeeper's; the embedded store allocates its own)."""

    @property
    def state(self) -> SessionState:
        return self._state

    def _set_state(self, state: SessionState) -> None:
        if state == self._state or self._state.is_terminal:
            return
        self._state = state
        for callback in self._state_callbacks:
            callback(state)
        for listener in self._state_listeners:
            listener.put_nowait(state)
        still_waiting = []
        for states, future in self._state_waiters:
            if future.done():
                continue
            if state in states or state.is_terminal:
                future.set_result(state)
            else:
                still_waiting.append((states, future))
        self._state_waiters = still_waiting

    def add_state_callback(self, callback: Callable[[SessionState], None]) -> None:
        """Call ``callback(state)`` on every state change from now on, synchronously, on the
        session's own loop (it must not block). For a bridge that relays the states elsewhere;
        on the session's loop, ``state_changes`` and ``wait_for_state`` are the tools."""
        self._state_callbacks.append(callback)

    def remove_state_callback(self, callback: Callable[[SessionState], None]) -> None:
        """Stop calling ``callback`` (added by ``add_state_callback``); no error if absent."""
        if callback in self._state_callbacks:
            self._state_callbacks.remove(callback)

    async def wait_for_state(
        self, *states: SessionState, timeout: float | None = None
    ) -> SessionState:
        """Wait until the session is in one of ``states`` (or terminal); returns the state reached.

        Raises ``TimeoutError`` when ``timeout`` seconds pass first.
        """
        wanted = frozenset(states)
        if self._state in wanted or self._state.is_terminal:
            return self._state
        future = asyncio.get_running_loop().create_future()
        self._state_waiters.append((wanted, future))
        async with asyncio.timeout(timeout):
            return await future

    async def state_changes(self) -> AsyncIterator[SessionState]:
        """Every state the session enters from now on, in order; ends after a terminal state."""
        queue: asyncio.Queue[SessionState] = asyncio.Queue()
        self._state_listeners.append(queue)
        try:
            if self._state.is_terminal:
                yield self._state
                return
            while True:
                state = await queue.get()
                yield state
                if state.is_terminal:
                    return
        finally:
            self._state_listeners.remove(queue)

    # -- primitive operations --

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create a node; returns its path (with the sequence suffix when sequential).

        ``makepath`` creates missing ancestors as empty persistent nodes (when the first try
        finds the parent missing). Raises NodeExists, NoNode (parent missing),
        NoChildrenForEphemerals.
        """
        try:
            return await self._create(path, data, ephemeral=ephemeral, sequential=sequential)
        except NoNode:
            if not makepath:
                raise
        await self.ensure_path(parent_of(path))
        return await self._create(path, data, ephemeral=ephemeral, sequential=sequential)

    @abc.abstractmethod
    async def _create(self, path: str, data: bytes, *, ephemeral: bool, sequential: bool) -> str:
        """The backend's create of one node (no ancestors); see ``create``."""

    @abc.abstractmethod
    async def get_data(self, path: str) -> tuple[bytes, Stat]:
        """Raises NoNode."""

    @abc.abstractmethod
    async def set_data(self, path: str, data: bytes, version: int) -> Stat:
        """Compare-and-set. Raises NoNode, BadVersion."""

    @abc.abstractmethod
    async def delete(self, path: str, version: int) -> None:
        """Raises NoNode, BadVersion, NotEmpty."""

    @abc.abstractmethod
    async def exists(self, path: str) -> Stat | None:
        """The node's stat, or None."""

    @abc.abstractmethod
    async def get_children(self, path: str) -> list[str]:
        """Child names, sorted. Raises NoNode."""

    @abc.abstractmethod
    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """All-or-nothing; raises the first failing op's error (see module docstring)."""

    @abc.abstractmethod
    async def exists_and_watch(self, path: str) -> tuple[Stat | None, Watch]:
        """Stat or None, plus a watch for creation, data change or deletion."""

    @abc.abstractmethod
    async def get_data_and_watch(self, path: str) -> tuple[bytes, Stat, Watch]:
        """Data and stat, plus a watch for data change or deletion. Raises NoNode (no watch set)."""

    @abc.abstractmethod
    async def get_children_and_watch(self, path: str) -> tuple[list[str], Watch]:
        """Sorted children, plus a watch for child changes or deletion. Raises NoNode."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close the session: its ephemeral nodes are deleted, its watches fail with SessionClosed."""

    async def __aenter__(self) -> CoordSession:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    # -- built on the primitives --

    async def get_data_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        """``get_data`` of every path, all sent at once (one session answers in order); None
        where the node does not exist. A bridge to another loop crosses once for the batch."""

        async def one(path: str) -> tuple[bytes, Stat] | None:
            try:
                return await self.get_data(path)
            except NoNode:
                return None

        return list(await asyncio.gather(*(one(path) for path in paths)))

    async def get_data_versions_many(self, paths: Sequence[str]) -> list[tuple[bytes, int] | None]:
        """``get_data_many`` answering each node's data and version only (what a bulk read of
        assignments, configs or partition states uses): a store that holds its nodes in
        memory makes no ``Stat`` per node (a controller's start reads 30,000 nodes)."""
        return [
            None if node is None else (node[0], node[1].version)
            for node in await self.get_data_many(paths)
        ]

    async def get_data_and_watch_many(
        self, paths: Sequence[str]
    ) -> list[tuple[bytes | None, Watch] | CoordError]:
        """For each path: its data, or None while it does not exist, and a watch on its next
        change (its creation while absent); or the error its read raised. All sent at once
        (ZooKeeper has no watching multi-read; one session answers in order)."""

        async def one(path: str) -> tuple[bytes | None, Watch]:
            while True:
                try:
                    data, _stat, watch = await self.get_data_and_watch(path)
                    return data, watch
                except NoNode:
                    stat, watch = await self.exists_and_watch(path)
                    if stat is None:
                        return None, watch
                    watch.cancel()  # created between the two reads: read it

        results = await asyncio.gather(*(one(path) for path in paths), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, CoordError):
                raise result
        return results  # type: ignore[return-value]

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its missing ancestors as empty persistent nodes (no error if present)."""
        validate_path(path)
        if path == "/":
            return
        current = ""
        for part in path[1:].split("/"):
            current = f"{current}/{part}"
            try:
                await self.create(current)
            except NodeExists:
                pass

    async def delete_recursive(self, path: str) -> None:
        """Delete ``path`` and everything below it, ignoring nodes that vanish meanwhile."""
        try:
            children = await self.get_children(path)
        except NoNode:
            return
        for child in children:
            await self.delete_recursive(join_path(path, child))
        try:
            await self.delete(path, ANY_VERSION)
        except NoNode:
            pass

    def watch_data(self, path: str) -> AsyncIterator[NodeData | None]:
        """The node's state now and after every change: ``NodeData``, or None while absent.

        Intermediate states between two reads may be skipped (ZooKeeper semantics), but what is
        yielded is in order and the latest state is always yielded eventually. Rides out
        connection loss; raises SessionExpired; ends when the session is closed.
        """

        async def read() -> tuple[NodeData, int, Watch]:
            data, stat, watch = await self.get_data_and_watch(path)
            return NodeData(data, stat), stat.mzxid, watch

        return self._watch_node(path, read)

    def watch_children(self, path: str) -> AsyncIterator[list[str] | None]:
        """The node's sorted children now and after every change, or None while it is absent.

        Same guarantees as ``watch_data``.
        """

        async def read() -> tuple[list[str], list[str], Watch]:
            children, watch = await self.get_children_and_watch(path)
            return children, children, watch

        return self._watch_node(path, read)

    async def _watch_node(
        self, path: str, read: Callable[[], Awaitable[tuple[_T, object, Watch]]]
    ) -> AsyncIterator[_T | None]:
        """The loop behind ``watch_data`` and ``watch_children``: ``read()`` returns the node's
        state, the key that tells a change (data: mzxid; children: the list) and a watch, or
        raises NoNode; the state is yielded whenever its key (None while absent) differs from
        the last one yielded, then the watch is awaited and the node read again."""
        last_key: object = _NOTHING_YET
        while True:
            try:
                try:
                    current, key, watch = await read()
                except NoNode:
                    stat, watch = await self.exists_and_watch(path)
                    if stat is not None:
                        watch.cancel()
                        continue  # created between the two reads
                    current, key = None, None
                if key != last_key:
                    last_key = key
                    yield current
                await watch
            except ConnectionLoss:
                await self._wait_for_reconnect()
            except SessionClosed:
                return

    async def _wait_for_reconnect(self) -> None:
        state = await self.wait_for_state(SessionState.CONNECTED)
        self._raise_if_terminal(state)

    def _raise_if_terminal(self, state: SessionState) -> None:
        if state is SessionState.EXPIRED:
            raise SessionExpired(f"session 0x{self.session_id:x} expired")
        if state is SessionState.CLOSED:
            raise SessionClosed(f"session 0x{self.session_id:x} closed")


class CoordStore(abc.ABC):
    """A coordination store: a factory of sessions on one tree (one ensemble, one chroot)."""

    kind: str = ""

    @abc.abstractmethod
    async def open_session(
        self, timeout_ms: int | None = None, *, connection_timeout_ms: int | None = None
    ) -> CoordSession:
        """Open a session and wait until it is connected."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close every session this store opened that is still open."""


__all__ = [
    "ANY_VERSION",
    "CheckOp",
    "CheckResult",
    "CoordError",
    "CoordSession",
    "CoordStore",
    "CreateOp",
    "CreateResult",
    "DeleteOp",
    "DeleteResult",
    "EventType",
    "NodeData",
    "Op",
    "OpResult",
    "SessionState",
    "SetDataOp",
    "SetDataResult",
    "Stat",
    "Watch",
    "WatchEvent",
    "join_path",
    "parent_of",
    "sequence_name",
    "validate_path",
]
