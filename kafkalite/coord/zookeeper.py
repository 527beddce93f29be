"""The ZooKeeper backend: a real ensemble through aiozk (ZooKeeper >= 3.5).

``ZooKeeperStore`` / ``ZooKeeperSession`` are what callers get: proxies whose aiozk client runs
on an event loop of its own in a dedicated thread (``threaded.py``), so the session's pings and
reconnects never wait for a busy broker loop. ``AiozkStore`` / ``AiozkSession`` below are the
client itself, written for one loop (the coordination thread's).

aiozk is used for its wire protocol and connection handling only; this module owns the session
semantics, because aiozk's defaults contradict the ones the controller needs. The pitfalls and
what is done about each:

- **Failed transactions do not raise**: ``Transaction.commit()`` returns a falsy ``Result``. We
  send the ``TransactionRequest`` ourselves and turn the per-operation replies into results, or
  into the first failing operation's error with ``failed_op_index`` and ``results``.
- **Cached versions**: ``ZKClient.delete`` / ``set_data`` silently use the version from a stat
  cache. We never go through ``ZKClient``; every write sends the version the caller passed.
- **Silent retries**: aiozk resends a request after a connection error, so a create could be
  applied twice (and fail with NodeExists the second time). We install a retry policy that never
  resends: the caller gets ``ConnectionLoss`` (outcome unknown), as with ZooKeeper's own client.
- **Late loss detection**: aiozk notices a broken connection only when a ping times out (up to a
  session timeout). We watch the connection's read loop: when the server closes the socket (it
  stopped, or it closed our session) the session is SUSPENDED at once, pending requests fail with
  ``ConnectionLoss`` and the reconnect starts. A silent network partition is still detected by
  the ping (``timeout / 3`` interval, ``2 * timeout / 3`` deadline), i.e. within the session
  timeout (``zookeeper.session.timeout.ms``, 18000 by default).
- **Slow reconnect**: aiozk backs off 2, 4, 8 ... 60 s between attempts to find a server, and
  waits without a deadline for the ``srvr`` handshake answer. We cap the backoff and the
  handshake at a third of the session timeout (and at 2 s), so a restarted server is found while
  the session is still alive.
- **Resurrected sessions and false expiry**: aiozk treats any failed handshake (a server that
  closes the socket while starting) as session loss, then silently opens a brand-new session;
  and a failure while re-arming watches kills its repair loop for good. Our repair loop treats
  only a connect answer with session id 0 as expiry, retries everything else, and never opens a
  second session: the session ends as EXPIRED so the owner knows its ephemeral nodes are gone
  and re-registers.
- **Expiry while cut off**: a client only hears "expired" from a server. When no server has been
  reachable for longer than the negotiated session timeout we declare the session EXPIRED
  ourselves (Curator's simulated expiration), so the broker stops acting on stale leadership.
- **Oversized requests**: a server closes the connection on a packet longer than its
  jute.maxbuffer, which suspends the session for every caller and fails their requests with
  ``ConnectionLoss``. Writes are measured first (``base.check_request_length``, the server's
  default 0xfffff) and a longer one raises ``RequestTooLarge`` without being sent, as the
  embedded store does.
- **Chroot as container node**: ``ZKClient(chroot=...)`` creates the chroot as a CONTAINER node,
  which the server deletes once it becomes empty. We prefix paths ourselves and create the
  chroot as persistent nodes, as Kafka does.

Watches are aiozk watch callbacks keyed by (event type, path); aiozk re-arms them after a
reconnect with ``SetWatches`` (relative to the last zxid seen), so no change is missed while
disconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import struct
from collections.abc import Callable, Sequence

from aiozk import exc, protocol
from aiozk.connection import Connection
from aiozk.features import Features
from aiozk.retry import RetryPolicy
from aiozk.session import Session as _AiozkClientSession
from aiozk.states import States

from .base import (
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
)
from .threaded import ThreadedSession, ThreadedStore

log = logging.getLogger(__name__)

_ERRORS: dict[type, type[CoordError]] = {
    exc.NodeExists: NodeExists,
    exc.NoNode: NoNode,
    exc.BadVersion: BadVersion,
    exc.NotEmpty: NotEmpty,
    exc.NoChildrenForEphemerals: NoChildrenForEphemerals,
    exc.BadArguments: BadArguments,
    exc.RolledBack: RolledBack,
    exc.RuntimeInconsistency: RolledBack,
    exc.SessionExpired: SessionExpired,
    exc.ConnectionLoss: ConnectionLoss,
    exc.OperationTimeout: ConnectionLoss,
}

_EVENT_TYPES = {
    protocol.WatchEvent.CREATED: EventType.CREATED,
    protocol.WatchEvent.DELETED: EventType.DELETED,
    protocol.WatchEvent.DATA_CHANGED: EventType.DATA_CHANGED,
    protocol.WatchEvent.CHILDREN_CHANGED: EventType.CHILDREN_CHANGED,
}


def _convert(error: Exception, path: str | None = None) -> CoordError:
    """An aiozk failure as the project's exception (the boundary)."""
    for aiozk_type, ours in _ERRORS.items():
        if isinstance(error, aiozk_type):
            return ours(path or "", path=path)
    return ConnectionLoss(f"{type(error).__name__}: {error}", path=path)


def _stat(raw) -> Stat:
    return Stat(
        czxid=raw.created_zxid,
        mzxid=raw.last_modified_zxid,
        ctime=raw.created,
        mtime=raw.modified,
        version=raw.version,
        cversion=raw.child_version,
        aversion=raw.acl_version,
        ephemeral_owner=raw.ephemeral_owner,
        data_length=raw.data_length,
        num_children=raw.num_children,
        pzxid=raw.last_modified_children,
    )


def _retrieve_exception(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.debug("aiozk read loop ended: %r", task.exception())


class _NeverResend(RetryPolicy):
    """Send each request once; a second attempt (after a connection error) raises FailedRetry."""

    def __init__(self) -> None:
        super().__init__(try_limit=1, sleep_func=lambda _timings: None)
        self._sent: set[int] = set()

    async def enforce(self, request=None) -> None:
        key = id(request)
        if key in self._sent:
            self._sent.discard(key)
            raise exc.FailedRetry
        self._sent.add(key)

    def clear(self, request) -> None:
        self._sent.discard(id(request))


_FRAME_LENGTH = struct.Struct("!i")
_REPLY_HEADER = struct.Struct("!iqi")  # xid, zxid, error code
_REQUEST_HEAD = struct.Struct("!ii")  # frame length, xid
_GET_DATA_BODY = struct.Struct("!ii")  # opcode, path length
_MULTI_HEADER = struct.Struct("!i?i")  # op type, done, error
_STAT = struct.Struct("!qqqqiiiqiiq")  # ZooKeeper's Stat, field for field ours
_GET_DATA = 4
_MULTI_READ = struct.pack("!i", 22)
_GET_DATA_OP = _MULTI_HEADER.pack(_GET_DATA, False, -1)
_MULTI_END = _MULTI_HEADER.pack(-1, True, -1)
_CREATE, _DELETE, _SET_DATA, _CHECK, _CREATE2 = 1, 2, 5, 13, 15
_INT = struct.Struct("!i")
_MULTI = struct.pack("!i", 14)
_CHECK_OP = _MULTI_HEADER.pack(_CHECK, False, -1)
_SET_DATA_OP = _MULTI_HEADER.pack(_SET_DATA, False, -1)
_DELETE_OP = _MULTI_HEADER.pack(_DELETE, False, -1)
_OPEN_ACL = b"".join(
    (struct.pack("!ii", 1, 31), struct.pack("!i", 5), b"world", struct.pack("!i", 6), b"anyone")
)
"""One ACL, all permissions for world:anyone (ZooKeeper's OPEN_ACL_UNSAFE, as aiozk sends)."""
_ERROR_OP = -1
_NO_NODE = -101
_RAW = "raw"
"""The opcode recorded for a pipelined request's xid: its reply is handed over undecoded."""
MULTI_READ_OPS = 1000
"""Reads per multiRead request (a few hundred KiB of partition states per reply)."""
BULK_WRITE_REQUESTS = 1000
"""Pipelined requests written to the socket at once (one write each, not one per request)."""


class _Connection(Connection):
    """aiozk's connection with a cheaper reply reader.

    aiozk reads every reply in three awaits, two of them through ``asyncio.wait_for`` (a task
    and a timer each), then decodes it field by field through its generic ``Part`` classes: at
    10,000 partition state nodes that was most of a new controller's load. Here a reply is two
    ``readexactly`` (no task: they return at once when the bytes are buffered), and the replies
    of a bulk read (``AiozkSession.get_data_many``, opcode ``_RAW``) are handed over undecoded.
    A server that stops mid-reply is caught by the session's ping as before (its answer queues
    behind the stalled reply; the ping times out and the connection is replaced)."""

    async def read_response(self, initial_connect=False):
        if initial_connect or self.pending_specials[protocol.CLOSE_XID]:
            return await super().read_response(initial_connect)
        reader = self.reader
        try:
            size = _FRAME_LENGTH.unpack(await reader.readexactly(4))[0]
            frame = await reader.readexactly(size)
        except asyncio.IncompleteReadError:
            raise ConnectionAbortedError from None
        xid, zxid, error_code = _REPLY_HEADER.unpack_from(frame)
        if error_code:
            self.opcode_xref.pop(xid, None)
            return xid, zxid, exc.get_response_error(error_code)
        if xid == protocol.WATCH_XID:
            return xid, zxid, protocol.WatchEvent.deserialize(frame[_REPLY_HEADER.size :])
        opcode = self.opcode_xref.pop(xid)
        if opcode is _RAW:
            return xid, zxid, frame
        return xid, zxid, protocol.response_xref[opcode].deserialize(frame[_REPLY_HEADER.size :])


class _BulkRead:
    """The replies of pipelined requests, collected in order; the caller's future is resolved
    once every reply is in, or at the first failure (but NoNode when ``missing_ok``)."""

    __slots__ = ("errors", "future", "missing", "missing_ok", "replies", "session")

    def __init__(self, count: int, session: _AiozkClientSession, missing_ok: bool) -> None:
        self.missing_ok = missing_ok
        self.replies: list[bytes | None] = [None] * count
        self.missing = count
        self.errors: list[tuple[int, Exception]] = []
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.session = session

    def answer(self, index: int, zxid: int, frame: bytes) -> None:
        self.replies[index] = frame
        self.session.last_zxid = zxid
        self._count()

    def fail(self, index: int, error: Exception) -> None:
        if not (self.missing_ok and isinstance(error, exc.NoNode)):
            self.errors.append((index, error))
            if not self.future.done():
                self.future.set_result(None)
        self._count()

    def _count(self) -> None:
        self.missing -= 1
        if self.missing == 0 and not self.future.done():
            self.future.set_result(None)


class _BulkReply:
    """Stands in aiozk's pending table for one request of a bulk read (what its read loop and
    ``abort`` call on a future: ``done``, ``cancelled``, ``set_result``, ``set_exception``)."""

    __slots__ = ("batch", "index")

    def __init__(self, batch: _BulkRead, index: int) -> None:
        self.batch = batch
        self.index = index

    def done(self) -> bool:
        return self.batch.future.done()

    def cancelled(self) -> bool:
        return False

    def set_result(self, outcome: tuple[int, bytes]) -> None:
        self.batch.answer(self.index, outcome[0], outcome[1])

    def set_exception(self, error: Exception) -> None:
        self.batch.fail(self.index, error)


def _read_data_and_stat(frame: bytes, offset: int) -> tuple[bytes, Stat, int]:
    """A GetData result at ``offset``: the data (length-prefixed, -1 for none), the Stat, and
    the offset after them."""
    length = _FRAME_LENGTH.unpack_from(frame, offset)[0]
    offset += 4
    if length < 0:
        data = b""
    else:
        data = frame[offset : offset + length]
        offset += length
    return data, Stat(*_STAT.unpack_from(frame, offset)), offset + _STAT.size


def _data_and_stat(frame: bytes) -> tuple[bytes, Stat]:
    """A GetData reply after its header: the data and the Stat."""
    data, stat, _ = _read_data_and_stat(frame, _REPLY_HEADER.size)
    return data, stat


def _multi_read_results(
    frame: bytes, paths: Sequence[str], first: int
) -> list[tuple[bytes, Stat] | None]:
    """A multiRead reply after its header: one (data, Stat) per GetData, None for NoNode; any
    other failed read raises its error (``paths[first + i]`` names read i)."""
    out: list[tuple[bytes, Stat] | None] = []
    offset = _REPLY_HEADER.size
    header = _MULTI_HEADER.unpack_from
    length_of = _FRAME_LENGTH.unpack_from
    while True:
        kind, done, _err = header(frame, offset)
        offset += _MULTI_HEADER.size
        if done:
            return out
        if kind == _GET_DATA:
            data, stat, offset = _read_data_and_stat(frame, offset)
            out.append((data, stat))
        elif kind == _ERROR_OP:
            code = length_of(frame, offset)[0]
            offset += 4
            if code != _NO_NODE:
                raise _convert(exc.get_response_error(code), paths[first + len(out)])
            out.append(None)
        else:
            raise ConnectionLoss(f"unexpected multiRead result type {kind}")


def _string(text: str) -> bytes:
    raw = text.encode()
    return _INT.pack(len(raw)) + raw


def _buffer(data: bytes) -> bytes:
    return _INT.pack(len(data)) + bytes(data)


def _multi_replies(frame: bytes) -> list[object]:
    """A multi reply after its header, one entry per operation: the created path (str), the
    set node's Stat, None for a check or delete, or aiozk's error for a failed operation."""
    out: list[object] = []
    offset = _REPLY_HEADER.size
    header = _MULTI_HEADER.unpack_from
    length_of = _INT.unpack_from
    while True:
        kind, done, _err = header(frame, offset)
        offset += _MULTI_HEADER.size
        if done:
            return out
        if kind == _ERROR_OP:
            out.append(exc.get_response_error(length_of(frame, offset)[0]))
            offset += 4
        elif kind in (_CREATE, _CREATE2):
            length = length_of(frame, offset)[0]
            offset += 4
            out.append(frame[offset : offset + length].decode())
            offset += length
            if kind == _CREATE2:
                offset += _STAT.size
        elif kind == _SET_DATA:
            out.append(Stat(*_STAT.unpack_from(frame, offset)))
            offset += _STAT.size
        elif kind in (_CHECK, _DELETE):
            out.append(None)
        else:
            raise ConnectionLoss(f"unexpected multi result type {kind}")


class _Session(_AiozkClientSession):
    """aiozk's session with a repair loop that tells expiry from connection failure.

    aiozk's own loop treats any failure to read the connect response (the server closed the
    socket mid-handshake, e.g. while starting) as session loss and starts a new session; and a
    failure while re-arming watches kills the loop for good. Here only a connect response with
    session id 0 means expired; anything else is a connection failure and the loop tries again.
    """

    async def repair_loop(self):
        while not self.closing:
            await self.state.wait_for(States.SUSPENDED, States.LOST)
            if self.closing:
                break
            await self.find_server(allow_read_only=self.allow_read_only)
            try:
                async with asyncio.timeout(self.timeout):
                    alive = await self._establish()
            except (TimeoutError, OSError, exc.ZKError) as error:
                log.debug("session handshake failed: %r", error)
                self.conn.abort(exc.ConnectError)
                asyncio.create_task(self.conn.close(self.timeout))  # noqa: RUF006
                await asyncio.sleep(0.05)
                continue
            if not alive:
                log.info("ZooKeeper session 0x%x expired", self.session_id or 0)
                if self.state != States.LOST:
                    self.state.transition_to(States.LOST)
                self.conn.abort(exc.SessionLost)
                asyncio.create_task(self.conn.close(self.timeout))  # noqa: RUF006
                # The owner ends the session on LOST; never open a new one behind its back.
                return
            self.state.transition_to(
                States.READ_ONLY if self.conn.start_read_only else States.CONNECTED
            )
            self.conn.start_read_loop()
            try:
                await self.set_existing_watches()
            except Exception as error:  # noqa: BLE001 - the connection broke: repair again
                log.debug("re-arming watches failed: %r", error)
                self.conn.abort(exc.ConnectError)
                if self.state == States.CONNECTED:
                    self.state.transition_to(States.SUSPENDED)

    async def _establish(self) -> bool:
        """Send ConnectRequest on the new connection; False when the server says expired."""
        answer = await self.conn.send_connect(
            protocol.ConnectRequest(
                protocol_version=0,
                last_seen_zxid=self.last_zxid or 0,
                timeout=int((self.timeout or 0) * 1000),
                session_id=self.session_id or 0,
                password=self.password,
                read_only=self.allow_read_only,
            )
        )
        if answer is None:
            raise exc.ConnectError(self.conn.host, self.conn.port)
        zxid, response = answer
        if response.session_id == 0:
            return False
        self.session_id = response.session_id
        self.password = response.password
        self.timeout = response.timeout / 1000
        # The connect reply carries no zxid (aiozk answers None): keep the last one seen, as
        # the Java client does, so re-armed watches (SetWatches relativeZxid) fire only for
        # changes made while disconnected and a lagging server refuses us.
        if zxid is not None:
            self.last_zxid = zxid
        return True

    async def find_server(self, allow_read_only):
        delay = 0.05
        cap = max(0.05, min(2.0, self.timeout / 3))
        while True:
            for host, port in random.sample(self.hosts, len(self.hosts)):
                conn = await self.make_connection(host, port)
                if conn is None:
                    continue
                if conn.start_read_only and not allow_read_only:
                    asyncio.create_task(conn.close(self.timeout))  # noqa: RUF006
                    continue
                old_conn, self.conn = self.conn, conn
                if old_conn is not None:
                    asyncio.create_task(old_conn.close(self.timeout))  # noqa: RUF006
                return
            await asyncio.sleep(delay)
            delay = min(cap, delay * 2)

    async def make_connection(self, host, port):
        # aiozk logs every refused attempt with a traceback; a refused connection while a
        # server restarts is expected, so keep it at debug level.
        conn = _Connection(
            host, port, watch_handler=self.event_dispatch, read_timeout=self.read_timeout
        )
        try:
            # aiozk reads the ``srvr`` handshake answer without a deadline; a server that accepts
            # but does not answer (starting up, stopping, paused) would hang the reconnect.
            async with asyncio.timeout(max(0.5, min(2.0, self.timeout / 3))):
                await conn.connect()
        except Exception as error:  # noqa: BLE001 - any failure means "try the next server"
            log.debug("cannot connect to %s:%s: %s", host, port, error)
            return None
        return conn


class AiozkStore(CoordStore):
    """Sessions on one ZooKeeper ensemble under one chroot, all on the loop that uses them
    (``ZooKeeperStore`` runs one in its coordination thread)."""

    kind = "zookeeper"

    def __init__(
        self,
        servers: str,
        *,
        chroot: str | None = None,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
    ) -> None:
        self.servers = servers
        self.chroot = validate_path(chroot) if chroot and chroot != "/" else None
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self._sessions: set[AiozkSession] = set()
        self._chroot_ready = self.chroot is None

    async def open_session(
        self, timeout_ms: int | None = None, *, connection_timeout_ms: int | None = None
    ) -> AiozkSession:
        session = AiozkSession(
            self.servers,
            chroot=self.chroot,
            timeout_ms=timeout_ms or self.session_timeout_ms,
            connection_timeout_ms=connection_timeout_ms or self.connection_timeout_ms,
        )
        await session.start()
        if not self._chroot_ready:
            await session._ensure_chroot()
            self._chroot_ready = True
        self._sessions = {s for s in self._sessions if not s.state.is_terminal}
        self._sessions.add(session)
        return session

    async def close(self) -> None:
        sessions, self._sessions = self._sessions, set()
        for session in sessions:
            await session.close()


class AiozkSession(CoordSession):
    """One ZooKeeper session (one aiozk ``Session``), on the loop that opened it."""

    def __init__(
        self,
        servers: str,
        *,
        chroot: str | None,
        timeout_ms: int,
        connection_timeout_ms: int | None = None,
    ) -> None:
        super().__init__(timeout_ms, connection_timeout_ms)
        self.servers = servers
        self.chroot = chroot
        self._zk = _Session(servers, timeout_ms / 1000, _NeverResend(), False, None)
        self._session_id = 0
        self.password = b""
        self._supervisor: asyncio.Task | None = None
        self._watches: set[asyncio.Future] = set()
        self._closing = False
        self._multi_read_ok = True

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def negotiated_timeout_ms(self) -> int:
        return int(self._zk.timeout * 1000)

    # -- lifecycle --

    async def start(self) -> None:
        try:
            async with asyncio.timeout(self.connection_timeout_ms / 1000):
                await self._zk.start()
        except TimeoutError:
            await self._shutdown_client(send_close=False)
            self._set_state(SessionState.CLOSED)
            raise ConnectionLoss(
                f"no ZooKeeper server of {self.servers} answered within "
                f"{self.connection_timeout_ms} ms"
            ) from None
        self._session_id = self._zk.session_id
        self.password = self._zk.password
        self.timeout_ms = self.negotiated_timeout_ms  # the server may clamp what we asked for
        self._set_state(SessionState.CONNECTED)
        self._supervisor = asyncio.create_task(self._supervise(), name="zk-session-supervisor")

    async def _ensure_chroot(self) -> None:
        current = ""
        for part in self.chroot[1:].split("/"):
            current = f"{current}/{part}"
            request = self._create_request(current, b"", ephemeral=False, sequential=False)
            try:
                await self._send(request, current)
            except NodeExists:
                pass

    async def close(self) -> None:
        if self.state.is_terminal or self._closing:
            return
        self._closing = True
        await self._shutdown_client(send_close=self._zk.state == States.CONNECTED)
        self._end(SessionState.CLOSED)

    async def _supervise(self) -> None:
        """Mirror aiozk's connection state into ours; end the session on expiry."""
        zk = self._zk
        try:
            while True:
                conn = zk.conn
                read_loop = conn.read_loop_task if conn is not None else None
                if read_loop is not None:
                    # aiozk's read loop dies on a ping answer that arrives after the ping timed
                    # out; that connection is being replaced anyway, so only retrieve the error.
                    read_loop.add_done_callback(_retrieve_exception)
                change = zk.state.wait_for(States.SUSPENDED, States.LOST)
                waiting = {change} | ({read_loop} if read_loop is not None else set())
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if not change.done():
                    change.cancel()
                    # The read loop ended: the server closed the socket (stopped, or closed
                    # our session). Do not wait for a ping to time out.
                    if zk.state == States.CONNECTED and zk.conn is conn:
                        zk.state.transition_to(States.SUSPENDED)
                if conn is not None:
                    conn.abort(exc.ConnectError)
                if zk.state == States.LOST or zk.session_id != self._session_id:
                    await self._expire()
                    return
                self._set_state(SessionState.SUSPENDED)
                try:
                    # Cut off for longer than the session timeout: the ensemble has expired the
                    # session (or will, the moment it can count). Say so now instead of when a
                    # reconnect finally succeeds (Curator's simulated expiration).
                    async with asyncio.timeout(zk.timeout):
                        await zk.state.wait_for(States.CONNECTED, States.LOST)
                except TimeoutError:
                    log.warning(
                        "ZooKeeper session 0x%x disconnected for longer than its %d ms timeout; "
                        "treating it as expired",
                        self._session_id,
                        self.timeout_ms,
                    )
                    await self._expire()
                    return
                if zk.state == States.LOST or zk.session_id != self._session_id:
                    await self._expire()
                    return
                self._set_state(SessionState.CONNECTED)
        except asyncio.CancelledError:
            raise
        except Exception:  # the supervisor must never die silently
            log.exception("ZooKeeper session supervisor failed; treating the session as expired")
            await self._expire()

    async def _expire(self) -> None:
        await self._shutdown_client(send_close=False, from_supervisor=True)
        self._end(SessionState.EXPIRED)

    def _end(self, state: SessionState) -> None:
        error = SessionExpired if state is SessionState.EXPIRED else SessionClosed
        for future in self._watches:
            if not future.done():
                future.set_exception(error(f"session 0x{self._session_id:x} {state.value}"))
                future.exception()
        self._watches.clear()
        self._set_state(state)

    async def _shutdown_client(self, *, send_close: bool, from_supervisor: bool = False) -> None:
        """Stop aiozk's session machinery (no reconnect, no new session), optionally saying goodbye."""
        zk = self._zk
        zk.closing = True
        if self._supervisor is not None and not from_supervisor:
            await _cancel_and_wait(self._supervisor)
        for task in (zk.repair_loop_task, zk.heartbeat_task):
            if task is not None and not task.done():
                await _cancel_and_wait(task)
        if zk.heartbeat_handle is not None:
            zk.heartbeat_handle.cancel()
            zk.heartbeat_handle = None
        conn = zk.conn
        if conn is None:
            return
        if send_close:
            # closeSession: the server deletes our ephemeral nodes, answers, closes the socket.
            # (aiozk's CLOSE_XID is None, which serializes no xid at all: send a real one.)
            zk.xid = zk.xid + 1 if zk.xid < 0x7FFFFFFF else 1
            closed = conn.send(protocol.CloseRequest(), xid=zk.xid)
            waiting = {closed} | ({conn.read_loop_task} if conn.read_loop_task else set())
            await asyncio.wait(
                waiting,
                timeout=min(self.timeout_ms / 1000, 5.0),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if closed.done():
                closed.exception() if not closed.cancelled() else None
            else:
                closed.cancel()
        conn.closing = True
        if conn.read_loop_task is not None and not conn.read_loop_task.done():
            await _cancel_and_wait(conn.read_loop_task)
        conn.abort(exc.ConnectError)
        if conn.writer is not None:
            conn.writer.close()

    # -- plumbing --

    def _full(self, path: str, *, sequential: bool = False) -> str:
        validate_path(path, sequential=sequential)
        if self.chroot is None:
            return path
        return self.chroot if path == "/" else self.chroot + path

    def _rel(self, full: str) -> str:
        if self.chroot is None:
            return full
        if full == self.chroot:
            return "/"
        return full[len(self.chroot) :] if full.startswith(self.chroot + "/") else full

    def _create_request(self, full: str, data: bytes, *, ephemeral: bool, sequential: bool):
        features = Features(self._zk.conn.version_info if self._zk.conn else (3, 5, 0))
        request_class = (
            protocol.Create2Request if features.create_with_stat else protocol.CreateRequest
        )
        request = request_class(path=full, data=data, acl=[protocol.UNRESTRICTED_ACCESS])
        request.set_flags(ephemeral=ephemeral, sequential=sequential, container=False)
        return request

    async def _ensure_connected(self, path: str | None) -> None:
        """Wait (up to the connection timeout) until the session is connected."""
        self._raise_if_terminal(self.state)
        if self.state is not SessionState.CONNECTED:
            try:
                state = await self.wait_for_state(
                    SessionState.CONNECTED, timeout=self.connection_timeout_ms / 1000
                )
            except TimeoutError:
                raise ConnectionLoss(
                    f"not reconnected to ZooKeeper within {self.connection_timeout_ms} ms",
                    path=path,
                ) from None
            self._raise_if_terminal(state)

    async def _send(self, request, path: str | None):
        """Send one request when connected; aiozk failures come back as our exceptions."""
        await self._ensure_connected(path)
        try:
            async with asyncio.timeout(self.timeout_ms / 1000 + self.connection_timeout_ms / 1000):
                response = await self._zk.send(request)
        except exc.ZKError as error:
            # aiozk's error, kept by its request's future, took a traceback through the frames
            # holding that future and the request: a reference cycle, kept for the process's
            # life once frozen (decision 0072). Cleared, and ours raised outside the handler
            # (no context) with its name dropped as it leaves (this frame, kept by its
            # traceback, would refer back to it).
            error.__traceback__ = None
            failure: CoordError = _convert(error, path)
            if isinstance(failure, SessionExpired | ConnectionLoss):
                self._raise_if_terminal(self.state)
        except TimeoutError:
            failure = ConnectionLoss("ZooKeeper request timed out", path=path)
        else:
            if self._zk.session_id != self._session_id:
                raise SessionExpired(f"session 0x{self._session_id:x} expired", path=path)
            return response
        try:
            raise failure
        finally:
            del failure

    def _watch(self, path: str, kinds: Sequence[int]) -> tuple[Watch, Callable[..., None]]:
        """Register local callbacks for ``kinds`` before the read (an event may follow the reply
        immediately); returns the watch and ``unregister(*kinds)`` (no kinds: all of them)."""
        future = asyncio.get_running_loop().create_future()
        full = self._full(path)
        callbacks: dict[int, Callable[[str], None]] = {}

        def unregister(*which: int) -> None:
            for kind in which or list(callbacks):
                callback = callbacks.pop(kind, None)
                if callback is not None:
                    with contextlib.suppress(KeyError):
                        self._zk.remove_watch_callback(kind, full, callback)
            if not callbacks:
                self._watches.discard(future)

        for kind in kinds:

            def fire(_path: str, kind: int = kind) -> None:
                if not future.done():
                    future.set_result(WatchEvent(_EVENT_TYPES[kind], path))

            callbacks[kind] = fire
            self._zk.add_watch_callback(kind, full, fire)
        self._watches.add(future)
        future.add_done_callback(lambda _f: unregister())
        return Watch(path, future), unregister

    # -- operations --

    def _check_length(self, ops: Sequence[Op], *, multi: bool) -> None:
        check_request_length(ops, multi=multi, path_prefix=self.chroot or "")

    async def _create(self, path: str, data: bytes, *, ephemeral: bool, sequential: bool) -> str:
        full = self._full(path, sequential=sequential)
        self._check_length([CreateOp(path, data, ephemeral, sequential)], multi=False)
        request = self._create_request(
            full, bytes(data), ephemeral=ephemeral, sequential=sequential
        )
        response = await self._send(request, path)
        return self._rel(response.path)

    async def get_data(self, path: str) -> tuple[bytes, Stat]:
        response = await self._send(
            protocol.GetDataRequest(path=self._full(path), watch=False), path
        )
        return response.data or b"", _stat(response.stat)

    async def get_data_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        """Every node's data and stat, None where absent, in as few round trips as the server
        allows: ZooKeeper >= 3.6 answers ``multiRead`` (up to ``MULTI_READ_OPS`` reads per
        request, a read's failure reported in its own slot), older servers get one GetData per
        node. Either way the requests are encoded here and written together without waiting
        for answers (one session's requests are answered in order), as Kafka's
        ``ZooKeeperClient.handleRequests`` pipelines them, and the replies are decoded with
        ``struct`` (aiozk's per-request path costs a task, two timers and a generic decoder per
        node: most of a new controller's load at 10,000 partitions). Any failure but NoNode
        fails the whole read with that node's error."""
        if not paths:
            return []
        fulls = [self._full(path).encode() for path in paths]
        if self._can_multi_read():
            bodies = []
            for start in range(0, len(fulls), MULTI_READ_OPS):
                parts = [_MULTI_READ]
                for full in fulls[start : start + MULTI_READ_OPS]:
                    parts += (_GET_DATA_OP, _FRAME_LENGTH.pack(len(full)), full, b"\0")
                parts.append(_MULTI_END)
                bodies.append(b"".join(parts))
            try:
                frames = await self._pipelined(bodies, paths[::MULTI_READ_OPS])
            except (ConnectionLoss, SessionExpired, SessionClosed):
                raise
            except CoordError as error:
                # A server that does not know multiRead answers the request with an error.
                log.info("ZooKeeper refused multiRead (%r): reading node by node", error)
                self._multi_read_ok = False
            else:
                out: list[tuple[bytes, Stat] | None] = []
                for index, frame in enumerate(frames):
                    assert frame is not None
                    out += _multi_read_results(frame, paths, index * MULTI_READ_OPS)
                return out
        bodies = [_GET_DATA_BODY.pack(_GET_DATA, len(full)) + full + b"\0" for full in fulls]
        frames = await self._pipelined(bodies, paths, missing_ok=True)
        return [_data_and_stat(frame) if frame is not None else None for frame in frames]

    def _can_multi_read(self) -> bool:
        conn = self._zk.conn
        version = conn.version_info if conn is not None else None
        return self._multi_read_ok and version is not None and tuple(version) >= (3, 6)

    async def _pipelined(
        self, bodies: list[bytes], paths: Sequence[str], *, missing_ok: bool = False
    ) -> list[bytes | None]:
        """Send each body (a request's opcode and record) as one request, all written together
        (``BULK_WRITE_REQUESTS`` per write), and return the raw reply frames in order: None for
        a NoNode reply when ``missing_ok``; any other error reply fails the call with that
        request's error (``paths[i]`` names request i)."""
        await self._ensure_connected(None)
        zk = self._zk
        conn = zk.conn
        if conn is None or conn.closing or conn.writer is None:
            raise ConnectionLoss("not connected to ZooKeeper")
        batch = _BulkRead(len(bodies), zk, missing_ok)
        pending = conn.pending
        kinds = conn.opcode_xref
        head = _REQUEST_HEAD.pack
        for start in range(0, len(bodies), BULK_WRITE_REQUESTS):
            frames = []
            for index in range(start, min(start + BULK_WRITE_REQUESTS, len(bodies))):
                body = bodies[index]
                xid = zk.xid = zk.xid + 1 if zk.xid < 0x7FFFFFFF else 1
                frames += (head(len(body) + 4, xid), body)
                kinds[xid] = _RAW
                pending[xid] = _BulkReply(batch, index)
            try:
                conn.writer.write(b"".join(frames))
            except Exception as error:  # noqa: BLE001 - a broken socket: as aiozk's send does
                conn.abort()
                raise ConnectionLoss(f"write failed: {error!r}") from None
            if start + BULK_WRITE_REQUESTS < len(bodies):
                await asyncio.sleep(0)  # the replies to what is written are read meanwhile
        try:
            async with asyncio.timeout(self.timeout_ms / 1000 + self.connection_timeout_ms / 1000):
                await batch.future
        except TimeoutError:
            raise ConnectionLoss("ZooKeeper request timed out") from None
        zk.set_heartbeat()
        if batch.errors:
            index, error = min(batch.errors, key=lambda item: item[0])
            converted = _convert(error, paths[index] if index < len(paths) else None)
            if isinstance(converted, SessionExpired | ConnectionLoss):
                self._raise_if_terminal(self.state)
            raise converted
        if zk.session_id != self._session_id:
            raise SessionExpired(f"session 0x{self._session_id:x} expired")
        return batch.replies

    async def set_data(self, path: str, data: bytes, version: int) -> Stat:
        self._check_length([SetDataOp(path, data, version)], multi=False)
        request = protocol.SetDataRequest(path=self._full(path), data=bytes(data), version=version)
        response = await self._send(request, path)
        return _stat(response.stat)

    async def delete(self, path: str, version: int) -> None:
        if path == "/":
            raise BadArguments("cannot delete the root", path=path)
        await self._send(protocol.DeleteRequest(path=self._full(path), version=version), path)

    async def exists(self, path: str) -> Stat | None:
        try:
            response = await self._send(
                protocol.ExistsRequest(path=self._full(path), watch=False), path
            )
        except NoNode:
            return None
        return _stat(response.stat)

    async def get_children(self, path: str) -> list[str]:
        request = protocol.GetChildren2Request(path=self._full(path), watch=False)
        response = await self._send(request, path)
        return sorted(response.children)

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """One transaction. Encoded and decoded here with ``struct`` (aiozk's generic encoder
        was most of the CPU of a controller's partition state writes: thousands of operations
        per event), sent as one request like any other."""
        if not ops:
            return []
        self._check_length(ops, multi=True)
        conn = self._zk.conn
        create_kind = (
            _CREATE2
            if Features(conn.version_info if conn else (3, 5, 0)).create_with_stat
            else _CREATE
        )
        parts: list[bytes] = [_MULTI]
        for op in ops:
            if isinstance(op, CheckOp):
                parts += (_CHECK_OP, _string(self._full(op.path)), _INT.pack(op.version))
            elif isinstance(op, CreateOp):
                full = self._full(op.path, sequential=op.sequential)
                flags = (1 if op.ephemeral else 0) | (2 if op.sequential else 0)
                parts += (
                    _MULTI_HEADER.pack(create_kind, False, -1),
                    _string(full),
                    _buffer(op.data),
                    _OPEN_ACL,
                    _INT.pack(flags),
                )
            elif isinstance(op, SetDataOp):
                parts += (
                    _SET_DATA_OP,
                    _string(self._full(op.path)),
                    _buffer(op.data),
                    _INT.pack(op.version),
                )
            elif isinstance(op, DeleteOp):
                parts += (_DELETE_OP, _string(self._full(op.path)), _INT.pack(op.version))
            else:
                raise BadArguments(f"unknown operation {op!r}")
        parts.append(_MULTI_END)
        try:
            frame = (await self._pipelined([b"".join(parts)], ()))[0]
        except CoordError as error:
            if error.failed_op_index is None and not isinstance(
                error, ConnectionLoss | SessionExpired | SessionClosed
            ):
                # The server reported the failure in the reply header: no per-op detail.
                error.results = None
            raise
        assert frame is not None
        replies = _multi_replies(frame)
        failed = next(
            (
                i
                for i, reply in enumerate(replies)
                if isinstance(reply, Exception)
                and not isinstance(reply, exc.RolledBack | exc.RuntimeInconsistency)
            ),
            None,
        )
        if failed is not None:
            error = _convert(replies[failed], ops[failed].path)
            error.failed_op_index = failed
            error.results = [
                error if i == failed else RolledBack(path=op.path) for i, op in enumerate(ops)
            ]
            raise error
        results: list[OpResult] = []
        for op, reply in zip(ops, replies, strict=True):
            if isinstance(op, CheckOp):
                results.append(CheckResult(op.path))
            elif isinstance(op, CreateOp):
                assert isinstance(reply, str)
                results.append(CreateResult(self._rel(reply)))
            elif isinstance(op, SetDataOp):
                assert isinstance(reply, Stat)
                results.append(SetDataResult(op.path, reply))
            else:
                results.append(DeleteResult(op.path))
        return results

    async def exists_and_watch(self, path: str) -> tuple[Stat | None, Watch]:
        # ZooKeeper keeps an exists() watch on a present node in its data-watch table and on an
        # absent one in its exist table. Local callbacks for all three event kinds are in place
        # before the request; the reply tells which table the server used, and the other kinds
        # are dropped so that aiozk re-arms the right table after a reconnect (an exist watch on
        # a present node would fire a spurious CREATED).
        created, changed, deleted = (
            protocol.WatchEvent.CREATED,
            protocol.WatchEvent.DATA_CHANGED,
            protocol.WatchEvent.DELETED,
        )
        watch, unregister = self._watch(path, [created, changed, deleted])
        try:
            response = await self._send(
                protocol.ExistsRequest(path=self._full(path), watch=True), path
            )
        except NoNode:
            unregister(changed, deleted)
            return None, watch
        except BaseException:
            watch.cancel()
            raise
        unregister(created)
        return _stat(response.stat), watch

    async def get_data_and_watch(self, path: str) -> tuple[bytes, Stat, Watch]:
        watch, unregister = self._watch(
            path, [protocol.WatchEvent.DATA_CHANGED, protocol.WatchEvent.DELETED]
        )
        try:
            response = await self._send(
                protocol.GetDataRequest(path=self._full(path), watch=True), path
            )
        except BaseException:
            watch.cancel()
            raise
        return response.data or b"", _stat(response.stat), watch

    async def get_children_and_watch(self, path: str) -> tuple[list[str], Watch]:
        watch, unregister = self._watch(
            path, [protocol.WatchEvent.CHILDREN_CHANGED, protocol.WatchEvent.DELETED]
        )
        try:
            request = protocol.GetChildren2Request(path=self._full(path), watch=True)
            response = await self._send(request, path)
        except BaseException:
            watch.cancel()
            raise
        return sorted(response.children), watch


async def _cancel_and_wait(task: asyncio.Task) -> None:
    """Cancel ``task`` and wait for its end. ``asyncio.wait`` rather than ``await task`` under
    ``suppress(CancelledError)``: the caller's own cancellation must propagate, not be taken for
    the task's and swallowed. The task's failure, if any, is retrieved and dropped (aiozk's
    loops end with connection errors when they are stopped)."""
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled():
        task.exception()


class ZooKeeperSession(ThreadedSession):
    """A ZooKeeper session whose client runs in the store's coordination thread."""

    @property
    def password(self) -> bytes:
        return self._inner.password if self._inner is not None else b""

    @property
    def negotiated_timeout_ms(self) -> int:
        return self._inner.negotiated_timeout_ms if self._inner is not None else 0


class ZooKeeperStore(ThreadedStore):
    """Sessions on one ZooKeeper ensemble under one chroot, served by one coordination thread
    (started by the first ``open_session``, stopped by ``close``)."""

    kind = "zookeeper"
    session_class = ZooKeeperSession

    def __init__(
        self,
        servers: str,
        *,
        chroot: str | None = None,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
    ) -> None:
        super().__init__(thread_name=f"zookeeper-session {servers}{chroot or ''}")
        self.servers = servers
        self.chroot = validate_path(chroot) if chroot and chroot != "/" else None
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms

    def _make_inner(self) -> AiozkStore:
        return AiozkStore(
            self.servers,
            chroot=self.chroot,
            session_timeout_ms=self.session_timeout_ms,
            connection_timeout_ms=self.connection_timeout_ms,
        )

    async def open_session(
        self, timeout_ms: int | None = None, *, connection_timeout_ms: int | None = None
    ) -> ZooKeeperSession:
        session = await super().open_session(
            timeout_ms, connection_timeout_ms=connection_timeout_ms
        )
        assert isinstance(session, ZooKeeperSession)
        return session
