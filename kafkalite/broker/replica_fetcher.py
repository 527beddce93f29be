"""Follower replication: fetchers that pull from partition leaders (Kafka's ReplicaFetcherThread).

``ReplicaFetcherManager`` keeps ``num.replica.fetchers`` ``ReplicaFetcher``s (one asyncio task
and one connection each) per leader broker, a partition on the one Kafka's hash picks; the
replica manager adds partitions when this broker becomes their follower and removes them
when it leads, stops or moves. Each fetcher runs, per partition, Kafka's two phases:

1. **Truncating** (KIP-101): ask the leader ``OffsetsForLeaderEpoch(latest local epoch)`` and
   truncate the local log where it diverges (``Partition.truncate_to_leader_epoch``); repeat
   while the leader's answer names an epoch this replica does not have. A log with no epoch
   truncates to its high watermark (the pre-KIP-101 rule, the only information there is).
2. **Fetching**: one Fetch per round for every fetching partition, ``replica_id`` = this broker,
   from the local log end offset with the current leader epoch; the records are appended as
   follower (offsets and epochs kept), the follower HW becomes min(leader HW, local LEO), the
   log start offset follows the leader's.

The Fetches of a fetcher form one incremental fetch session with its leader (KIP-227, Kafka's
FetchSessionHandler in ReplicaFetcherThread) when the endpoint offers sessions: after a full
first request, each request carries only the partitions added or whose position changed (and
the ones to forget), and the leader answers only partitions with news, so a caught-up follower
of thousands of partitions sends and decodes almost nothing. Whatever could leave the leader's
session out of step with this fetcher starts it over with a full request (which also closes the
old session): FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH (retried at once), a
request without an answer, a partition re-added (new leader epoch or log) and an answer dropped
because its partition changed meanwhile. A partition that moves to another leader moves to that
leader's fetcher and is forgotten by this session. The fetcher's own side of a round is
O(partitions whose fetch state changed) too: it keeps the wanted set up to date from an index
of changed partitions (``ReplicaFetcher``), never walking every partition it follows.

Errors per partition, as Kafka: OFFSET_OUT_OF_RANGE resets the fetch position from the leader's
log end / start (truncating when the leader's log ends below ours, restarting the log when it
starts above it); FENCED_LEADER_EPOCH drops the partition until the next LeaderAndIsr;
NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION and storage errors
back the partition off for ``replica_fetch_backoff_ms``; a failed request (the leader is down)
backs every partition of that fetcher off.

The leader is reached through a ``LeaderEndPoint``: ``RemoteLeaderEndPoint`` speaks the Kafka
protocol through ``kafkalite.client`` (Fetch v12, OffsetForLeaderEpoch v4, ListOffsets v7);
``LocalLeaderEndPoint`` calls another in-process ``ReplicaManager`` (tests, in-process cluster
harness). Waiting uses the injected clock, so tests drive back-offs without sleeping.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import structlog

from kafkalite.broker.clock import SYSTEM_TIME, Time
from kafkalite.broker.fetch_session import (
    FetchSessionCache,
    FetchSessionHandler,
    IncrementalFetchContext,
    SessionFetchRequest,
)
from kafkalite.broker.partition import records_bytes, records_size
from kafkalite.broker.types import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_EPOCH,
    EpochEndOffset,
    FetchInfo,
    FetchParams,
    FetchPartitionData,
)
from kafkalite.protocol.encoder import Encoded
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.types import TopicPartition, java_string_hash_code, kafka_abs
from kafkalite.protocol.varint import write_unsigned_varint
from kafkalite.storage.loop_slices import SLICE_ITEMS, SLICE_SECONDS, LoopSlices

if TYPE_CHECKING:
    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.client.connection import KafkaConnection

log = structlog.get_logger(__name__)

LOGGED_PARTITIONS = 5
"""Partitions named in a line that logs what happened to many (the others are counted)."""

ANSWER_SLICE_ITEMS = SLICE_ITEMS
"""Partitions a fetcher's pass over many (a fetch answer's appends, a truncation's asks and
answers) handles between two yields to the loop at most (and no more than ``SLICE_SECONDS``
of them)."""


@dataclass(frozen=True, slots=True)
class ReplicaFetcherConfig:
    replica_fetch_max_bytes: int = 1024 * 1024  # per partition
    replica_fetch_response_max_bytes: int = 10 * 1024 * 1024
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_backoff_ms: int = 1000
    num_replica_fetchers: int = 1  # fetchers (connections) per leader broker

    @classmethod
    def from_broker_config(cls, config: Any) -> ReplicaFetcherConfig:
        defaults = cls()
        return cls(
            **{
                name: getattr(config, name, getattr(defaults, name))
                for name in (
                    "replica_fetch_max_bytes",
                    "replica_fetch_response_max_bytes",
                    "replica_fetch_wait_max_ms",
                    "replica_fetch_min_bytes",
                    "replica_fetch_backoff_ms",
                    "num_replica_fetchers",
                )
            }
        )


class LeaderEndPoint(Protocol):
    async def fetch(
        self, params: FetchParams, infos: Mapping[TopicPartition, FetchInfo]
    ) -> dict[TopicPartition, FetchPartitionData]: ...

    async def fetch_epoch_end_offsets(
        self, partitions: Mapping[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, EpochEndOffset]:
        """(current leader epoch, epoch asked) per partition."""
        ...

    async def fetch_offset(
        self, tp: TopicPartition, current_leader_epoch: int, timestamp: int
    ) -> int:
        """The leader's log start (-2) or log end (-1) offset; raises KafkaError."""
        ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class SessionFetchResponse:
    """A Fetch answer in a session: the response's error and session id, and its partitions
    (all of them after a full request; only those with news after an incremental one)."""

    error_code: ErrorCode
    session_id: int
    partitions: dict[TopicPartition, FetchPartitionData]


class LocalLeaderEndPoint:
    """The leader is another ReplicaManager in this process. With ``sessions`` (the leader's
    FetchSessionCache) the follower fetches in an incremental session, served as the Fetch
    handler serves it; without, every fetch is a sessionless full fetch."""

    def __init__(
        self, leader: ReplicaManager, replica_id: int, sessions: FetchSessionCache | None = None
    ) -> None:
        self.leader = leader
        self.replica_id = replica_id
        self.sessions = sessions

    @property
    def supports_fetch_sessions(self) -> bool:
        return self.sessions is not None

    async def fetch(self, params, infos):
        return await self.leader.fetch_messages(params, infos)

    async def fetch_session(
        self, params: FetchParams, request: SessionFetchRequest
    ) -> SessionFetchResponse:
        assert self.sessions is not None
        context = self.sessions.new_context(
            request.session_id,
            request.epoch,
            request.to_send,
            request.to_forget,
            is_follower=True,
            replica_id=self.replica_id,
        )
        if context.error_code is not ErrorCode.NONE:
            return SessionFetchResponse(context.error_code, 0, {})
        if (
            params.max_wait_ms > 0
            and isinstance(context, IncrementalFetchContext)
            and context.waits_for_news
        ):
            left = await self.leader.wait_for_session_news(context.session, params.max_wait_ms)
            params = dataclasses.replace(params, max_wait_ms=left)
        session = context.session if isinstance(context, IncrementalFetchContext) else None
        results = await self.leader.fetch_messages(params, context.fetch_infos, session)
        partitions, session_id = context.update_and_generate_response(results)
        return SessionFetchResponse(ErrorCode.NONE, session_id, dict(partitions))

    async def fetch_epoch_end_offsets(self, partitions):
        return {
            tp: self.leader.last_offset_for_leader_epoch(tp, current, epoch, self.replica_id)
            for tp, (current, epoch) in partitions.items()
        }

    async def fetch_offset(self, tp, current_leader_epoch, timestamp):
        result = self.leader.list_offset(
            tp, timestamp, None, current_leader_epoch, replica_id=self.replica_id
        )
        if result.error_code is not ErrorCode.NONE:
            raise KafkaError(error_code=result.error_code)
        return result.offset

    async def close(self) -> None:
        pass


def _code(value: Any) -> ErrorCode:
    return ErrorCode(int(value))


class RemoteLeaderEndPoint:
    """The leader over the Kafka protocol (a ``kafkalite.client.KafkaClient``-like object with
    ``send(api_key, request, version, node_id)``)."""

    FETCH_VERSION = 12
    OFFSET_FOR_LEADER_EPOCH_VERSION = 4
    LIST_OFFSETS_VERSION = 7

    def __init__(self, client, leader_id: int, replica_id: int) -> None:
        self.client = client
        self.leader_id = leader_id
        self.replica_id = replica_id

    async def _send(self, api_key, version, **values):
        from kafkalite.client.connection import request_builder

        return await self.client.send(
            api_key, request_builder(api_key, **values), version, node_id=self.leader_id
        )

    supports_fetch_sessions = True

    async def fetch(self, params, infos):
        answer = await self._fetch(params, infos, 0, -1, ())
        if answer.error_code is not ErrorCode.NONE:
            raise KafkaError(error_code=answer.error_code)
        return answer.partitions

    async def fetch_session(
        self, params: FetchParams, request: SessionFetchRequest
    ) -> SessionFetchResponse:
        """One request of an incremental fetch session (KIP-227): the response's own error
        (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) is returned, not raised."""
        return await self._fetch(
            params, request.to_send, request.session_id, request.epoch, request.to_forget
        )

    async def _fetch(
        self,
        params: FetchParams,
        infos: Mapping[TopicPartition, FetchInfo],
        session_id: int,
        session_epoch: int,
        forgotten: Iterable[TopicPartition],
    ) -> SessionFetchResponse:
        from kafkalite.client.messages import build_message
        from kafkalite.protocol.api import ApiKey, request_class

        topics: dict[str, list[tuple[TopicPartition, Any]]] = {}
        for tp, info in infos.items():
            topics.setdefault(tp.topic, []).append((tp, info))
        forgotten_topics: dict[str, list[int]] = {}
        for tp in forgotten:
            forgotten_topics.setdefault(tp.topic, []).append(tp.partition)
        values: dict[str, Any] = dict(
            replica_id=self.replica_id,
            max_wait=datetime.timedelta(milliseconds=params.max_wait_ms),
            min_bytes=params.min_bytes,
            max_bytes=params.max_bytes,
            isolation_level=0,
            session_id=session_id,
            session_epoch=session_epoch,
            rack_id="",
        )

        def build(version: int) -> Any:
            # Built from kio's classes directly: the generic builder converts each of the
            # (often thousands of) partitions by reflection, ~4x slower, on the event loop,
            # for every fetch of every follower.
            if version == self.FETCH_VERSION:
                return _fetch_request_v12(values, topics, forgotten_topics)
            return build_message(
                request_class(ApiKey.FETCH, version),
                **values,
                forgotten_topics_data=[
                    {"topic": t, "partitions": ps} for t, ps in forgotten_topics.items()
                ],
                topics=[
                    {"topic": t, "partitions": [_partition_dict(tp, i) for tp, i in ps]}
                    for t, ps in topics.items()
                ],
            )

        response = await self.client.send(
            ApiKey.FETCH, build, self.FETCH_VERSION, node_id=self.leader_id
        )
        out: dict[TopicPartition, FetchPartitionData] = {}
        for topic in response.responses:
            for p in topic.partitions:
                diverging = getattr(p, "diverging_epoch", None)
                out[TopicPartition(topic.topic, p.partition_index)] = FetchPartitionData(
                    _code(p.error_code),
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                    bytes(p.records) if p.records is not None else b"",
                    diverging_epoch=(
                        EpochEndOffset(ErrorCode.NONE, diverging.epoch, diverging.end_offset)
                        if diverging is not None and diverging.epoch >= 0
                        else None
                    ),
                )
        return SessionFetchResponse(
            _code(getattr(response, "error_code", 0)), int(getattr(response, "session_id", 0)), out
        )

    async def fetch_epoch_end_offsets(self, partitions):
        from kafkalite.protocol.api import ApiKey

        topics: dict[str, list[dict]] = {}
        for tp, (current, epoch) in partitions.items():
            topics.setdefault(tp.topic, []).append(
                {"partition": tp.partition, "current_leader_epoch": current, "leader_epoch": epoch}
            )
        response = await self._send(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            self.OFFSET_FOR_LEADER_EPOCH_VERSION,
            replica_id=self.replica_id,
            topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()],
        )
        return {
            TopicPartition(topic.topic, p.partition): EpochEndOffset(
                _code(p.error_code), p.leader_epoch, p.end_offset
            )
            for topic in response.topics
            for p in topic.partitions
        }

    async def fetch_offset(self, tp, current_leader_epoch, timestamp):
        from kafkalite.protocol.api import ApiKey

        response = await self._send(
            ApiKey.LIST_OFFSETS,
            self.LIST_OFFSETS_VERSION,
            replica_id=self.replica_id,
            isolation_level=0,
            topics=[
                {
                    "name": tp.topic,
                    "partitions": [
                        {
                            "partition_index": tp.partition,
                            "current_leader_epoch": current_leader_epoch,
                            "timestamp": timestamp,
                        }
                    ],
                }
            ],
        )
        p = response.topics[0].partitions[0]
        if _code(p.error_code) is not ErrorCode.NONE:
            raise KafkaError(error_code=_code(p.error_code))
        return p.offset

    async def close(self) -> None:
        close = getattr(self.client, "close", None)
        if close is not None:
            await close()


class LeaderConnection:
    """One Kafka-protocol connection to a broker whose address ``resolve()`` gives (looked up
    at each (re)connect, so a leader that moved or restarted is found again). Offers the
    ``send(api_key, request, version, node_id)`` that ``RemoteLeaderEndPoint`` uses."""

    def __init__(
        self,
        resolve: Callable[[], tuple[str, int] | None],
        node_id: int,
        client_id: str = "replica-fetcher",
        request_timeout: float = 30.0,
    ) -> None:
        self.resolve = resolve
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self._conn: KafkaConnection | None = None
        self._address: tuple[str, int] | None = None

    async def _connection(self):
        from kafkalite.client.connection import KafkaConnection
        from kafkalite.client.errors import KafkaConnectionError

        address = self.resolve()
        if address is None:
            raise KafkaConnectionError(f"no live endpoint known for broker {self.node_id}")
        if self._conn is not None and self._conn.connected and address == self._address:
            return self._conn
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
        conn = KafkaConnection(
            address[0],
            address[1],
            client_id=self.client_id,
            request_timeout=self.request_timeout,
            node_id=self.node_id,
        )
        await conn.connect()
        self._conn, self._address = conn, address
        return conn

    async def send(self, api_key, request, version=None, node_id=None):
        conn = await self._connection()
        return await conn.send(api_key, request, version)

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None


def remote_leader_endpoints(
    metadata_cache,
    listener_name: str,
    replica_id: int,
    *,
    request_timeout: float = 30.0,
) -> Callable[[int], RemoteLeaderEndPoint]:
    """The ``endpoint_for_leader`` factory of a broker: leaders are reached on their
    ``listener_name`` (``inter.broker.listener.name``) endpoint from the metadata cache."""

    def make(leader_id: int) -> RemoteLeaderEndPoint:
        def resolve() -> tuple[str, int] | None:
            endpoint = metadata_cache.get_alive_broker_node(leader_id, listener_name)
            return None if endpoint is None else (endpoint.host, endpoint.port)

        connection = LeaderConnection(
            resolve, leader_id, f"broker-{replica_id}-fetcher", request_timeout
        )
        return RemoteLeaderEndPoint(connection, leader_id, replica_id)

    return make


class FetchState(Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"


@dataclass(slots=True)
class PartitionFetchState:
    fetch_offset: int
    current_leader_epoch: int
    state: FetchState
    delayed_until_ms: int = 0


class ReplicaFetcher:
    """Replicates the partitions this broker follows from one leader (one task).

    A round costs O(partitions whose fetch state changed), not O(partitions followed): every
    change of a partition's fetch state (added, removed, backed off or back, truncating or
    fetching, its fetch offset, its local log start offset, its Partition or log gone) marks
    it ``_dirty``, and a round brings only those up to date in ``_wanted`` (the FetchInfo of
    each partition ready to fetch, what a full request would carry) and ``_unsent`` (the ones
    whose entry changed since the session's last request). Invariant, checked by a property
    test against a rebuild from every partition: at each round ``_wanted`` is what the
    rebuild makes, so the session's incremental request equals the rebuild's diff. The local
    log start offset moves without the fetcher (retention, the leader's DeleteRecords), so the
    Partition of each fetching partition tells its fetcher on each LEO/HW/log start move
    (``Partition.fetch_state_listener``). ``_truncating`` and ``_delayed`` index the
    partitions in those states, so finding what is ready reads only them."""

    def __init__(
        self,
        leader_id: int,
        endpoint: LeaderEndPoint,
        replica_manager: ReplicaManager,
        time: Time = SYSTEM_TIME,
        config: ReplicaFetcherConfig | None = None,
    ) -> None:
        self.leader_id = leader_id
        self.endpoint = endpoint
        self.replica_manager = replica_manager
        self.time = time
        self.config = config or ReplicaFetcherConfig()
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._running = True
        self.rounds = 0
        # One incremental fetch session with the leader (KIP-227) when the endpoint offers it.
        self.session: FetchSessionHandler | None = (
            FetchSessionHandler() if getattr(endpoint, "supports_fetch_sessions", False) else None
        )
        # The indexes that keep a round O(partitions whose fetch state changed): see the
        # class docstring.
        self._dirty: set[TopicPartition] = set()
        self._truncating: set[TopicPartition] = set()
        self._delayed: dict[TopicPartition, int] = {}
        self._wanted: dict[TopicPartition, FetchInfo] = {}
        self._wanted_states: dict[TopicPartition, PartitionFetchState] = {}
        self._unsent: set[TopicPartition] = set()
        self._listener: Callable[[TopicPartition], None] | None = self._on_partition_news
        """One bound method, compared by identity; it refers back to this fetcher, so
        `shutdown` drops it (a fetcher in a reference cycle, once frozen, would never be
        freed: kafkalite/observability/gc_freeze.py)."""

    # -- membership ---------------------------------------------------------------------------

    def add_partitions(self, partitions: Mapping[TopicPartition, tuple[int, int]]) -> None:
        """(fetch offset, current leader epoch) per partition; each starts truncating."""
        for tp, (offset, epoch) in partitions.items():
            if self.session is not None and tp in self.partitions:
                # Re-added (a new leader epoch, a new log): its log may be truncated below
                # what the leader's session last told it, so the session starts over.
                self.session.reset()
            self.partitions[tp] = PartitionFetchState(offset, epoch, FetchState.TRUNCATING)
            self._truncating.add(tp)
            self._delayed.pop(tp, None)
            self._dirty.add(tp)
        self._changed.set()

    def remove_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._drop(tp)
        self._changed.set()

    def _drop(self, tp: TopicPartition) -> None:
        if self.partitions.pop(tp, None) is not None:
            self._truncating.discard(tp)
            self._delayed.pop(tp, None)
            self._dirty.add(tp)

    def _on_partition_news(self, tp: TopicPartition) -> None:
        """A followed partition's LEO, HW or log start moved (its Partition's listener): its
        log start offset may be in the next request."""
        if tp in self.partitions:
            self._dirty.add(tp)

    def _set_truncating(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        state.state = FetchState.TRUNCATING
        self._truncating.add(tp)
        self._dirty.add(tp)

    def _set_fetch_offset(
        self, tp: TopicPartition, state: PartitionFetchState, offset: int
    ) -> None:
        state.fetch_offset = offset
        self._dirty.add(tp)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run())
            self._task.add_done_callback(self._on_task_done)

    def _on_task_done(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("replica_fetcher_died", leader=self.leader_id, error=repr(task.exception()))

    async def shutdown(self) -> None:
        """Stop the loop (Kafka's ShutdownableThread.initiateShutdown + awaitShutdown).

        A single ``cancel()`` was not always enough: Python 3.11's ``asyncio.wait_for``, which
        the client once used for its timeouts, returns the answer instead of raising when the
        answer arrives in the same loop iteration as the cancellation, and the loop then waited
        forever on ``_changed`` with the broker's shutdown stuck behind it. Whatever else may
        swallow a cancellation, the loop also checks ``_running``, and the cancellation is
        repeated until the task has ended."""
        self._running = False
        self._changed.set()
        task, self._task = self._task, None
        if task is not None:
            while not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=0.1)
        self._listener = None
        await self.endpoint.close()

    # -- the loop -----------------------------------------------------------------------------

    async def _sleep_ms(self, ms: int) -> None:
        """Wait ``ms`` on the injected clock, or until the partitions change."""
        future = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        handle = self.time.call_later(ms, wake)
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait({future, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            handle.cancel()
            changed.cancel()
            if not future.done():
                future.cancel()

    async def run(self) -> None:
        while self._running:
            self._changed.clear()
            now = self.time.milliseconds()
            truncating = self._ready_to_truncate(now)
            if not truncating:
                self._update_wanted()
            if not truncating and not self._wanted:
                if self._delayed:
                    await self._sleep_ms(max(1, min(self._delayed.values()) - now))
                else:
                    await self._changed.wait()
                continue
            try:
                await self.do_work(truncating)
            except asyncio.CancelledError:
                raise
            except (KafkaError, OSError) as e:
                # The leader is unreachable (client errors are KafkaErrors) or answered the
                # whole request with an error: back off.
                log.info("replica_fetch_failed", leader=self.leader_id, error=repr(e))
                self._delay([*truncating, *self._wanted], self.config.replica_fetch_backoff_ms)
            except Exception:
                # A bug while handling the round. As Kafka marks a partition failed on an
                # unexpected error, the round's partitions stop being fetched until the
                # controller's next LeaderAndIsr adds them again; the fetcher goes on with the
                # others and with partitions added later (it used to die, and every partition
                # it followed with it).
                failed = sorted({*truncating, *self._wanted}, key=str)
                log.exception(
                    "replica_fetch_partitions_failed",
                    leader=self.leader_id,
                    partitions=len(failed),
                    first=[str(tp) for tp in failed[:LOGGED_PARTITIONS]],
                )
                for tp in failed:
                    self._drop(tp)
                if self.session is not None:
                    self.session.reset()
            self.rounds += 1

    def _ready_to_truncate(self, now: int) -> list[TopicPartition]:
        """Ends the back-offs due by ``now``; the truncating partitions not backed off."""
        delayed = self._delayed
        if delayed:
            for tp, until in list(delayed.items()):  # O(partitions backed off)
                if until <= now:
                    del delayed[tp]
                    self._dirty.add(tp)
        return [tp for tp in self._truncating if tp not in delayed]

    def _delay(self, partitions: Iterable[TopicPartition], ms: int) -> None:
        until = self.time.milliseconds() + ms
        for tp in partitions:
            state = self.partitions.get(tp)
            if state is not None:
                state.delayed_until_ms = until
                self._delayed[tp] = until
                self._dirty.add(tp)

    async def do_work(self, truncating: Iterable[TopicPartition] = ()) -> None:
        """One round: truncate the truncating partitions given, then one Fetch for the
        partitions ready to fetch."""
        states = {tp: self.partitions[tp] for tp in truncating if tp in self.partitions}
        if states:
            await self.truncate_to_epoch_end_offsets(states)
        self._update_wanted()
        if self._wanted:
            await self.fetch_once()

    def _update_wanted(self) -> None:
        """Bring ``_wanted`` up to date for the dirty partitions (and only them): a
        partition is wanted when it is fetching and not backed off, with the FetchInfo
        ``_full_wanted`` would make of it. Entries that change are noted in ``_unsent``."""
        dirty = self._dirty
        if not dirty:
            return
        self._dirty = set()
        wanted = self._wanted
        wanted_states = self._wanted_states
        unsent = self._unsent
        online = self.replica_manager.online_partition
        max_bytes = self.config.replica_fetch_max_bytes
        listener = self._listener
        delayed = self._delayed
        for tp in dirty:
            state = self.partitions.get(tp)
            info = None
            if state is not None and state.state is FetchState.FETCHING and tp not in delayed:
                partition = online(tp)
                if partition is None or partition.log is None:
                    self._drop(tp)
                    self._dirty.discard(tp)
                    state = None
                else:
                    if partition.fetch_state_listener is not listener:
                        partition.fetch_state_listener = listener
                    info = FetchInfo(
                        state.fetch_offset,
                        max_bytes,
                        partition.log.log_start_offset,
                        state.current_leader_epoch,
                        NO_EPOCH,
                    )
            if info is None:
                if wanted.pop(tp, None) is not None:
                    del wanted_states[tp]
                    unsent.add(tp)
                continue
            assert state is not None
            wanted_states[tp] = state
            if wanted.get(tp) != info:
                wanted[tp] = info
                unsent.add(tp)

    def _full_wanted(self) -> dict[TopicPartition, FetchInfo]:
        """What ``_wanted`` holds, rebuilt from every partition (the reference the property
        test checks the index against; O(partitions followed))."""
        now = self.time.milliseconds()
        out: dict[TopicPartition, FetchInfo] = {}
        for tp, state in self.partitions.items():
            if state.state is not FetchState.FETCHING or state.delayed_until_ms > now:
                continue
            partition = self.replica_manager.online_partition(tp)
            if partition is None or partition.log is None:
                continue
            out[tp] = FetchInfo(
                state.fetch_offset,
                self.config.replica_fetch_max_bytes,
                partition.log.log_start_offset,
                state.current_leader_epoch,
                NO_EPOCH,
            )
        return out

    # -- truncation ---------------------------------------------------------------------------

    async def truncate_to_epoch_end_offsets(
        self, truncating: Mapping[TopicPartition, PartitionFetchState]
    ) -> None:
        """KIP-101 truncation of the partitions given (a new leader epoch puts every partition
        it moved here). Both passes run in slices that yield to the loop (a failover brings
        thousands); after a pause a partition is handled only if its state is still the one
        given (not removed, re-added or now led meanwhile)."""
        asks: dict[TopicPartition, tuple[int, int]] = {}
        slices = LoopSlices(ANSWER_SLICE_ITEMS, SLICE_SECONDS)
        for tp, state in truncating.items():
            if slices.due():
                await slices.pause()
            if self.partitions.get(tp) is not state:
                continue  # removed or re-added during a pause
            partition = self.replica_manager.online_partition(tp)
            if partition is None or partition.log is None:
                self._drop(tp)
                continue
            latest = partition.log.leader_epoch_cache.latest_epoch
            if latest is None:
                # No epochs known: the high watermark is all this replica can trust.
                partition.truncate_to(partition.log.high_watermark)
                self._start_fetching(tp, state, partition.log.log_end_offset)
            else:
                asks[tp] = (state.current_leader_epoch, latest)
        if not asks:
            return
        answers = await self.endpoint.fetch_epoch_end_offsets(asks)
        fenced: list[TopicPartition] = []
        truncated: list[str] = []
        incomplete: list[str] = []
        try:
            await self._truncate_as_answered(
                answers, truncating, fenced, truncated, incomplete, slices
            )
        finally:
            self._log_partitions("follower_fenced", fenced)
            self._log_partitions("follower_truncated", truncated, completed=True)
            self._log_partitions("follower_truncated", incomplete, completed=False)

    async def _truncate_as_answered(
        self,
        answers: Mapping[TopicPartition, Any],
        truncating: Mapping[TopicPartition, PartitionFetchState],
        fenced: list[TopicPartition],
        truncated: list[str],
        incomplete: list[str],
        slices: LoopSlices,
    ) -> None:
        """The leader's epoch end offsets applied; what happened to each partition is added to
        the lists (``topic-partition@offset`` for a truncation), which the caller logs once
        each."""
        for tp, answer in answers.items():
            if slices.due():
                await slices.pause()
            state = self.partitions.get(tp)
            if state is None or state is not truncating.get(tp):
                continue  # removed or re-added meanwhile
            partition = self.replica_manager.online_partition(tp)
            if partition is None or partition.log is None:
                self._drop(tp)
                continue
            if answer.error_code is not ErrorCode.NONE:
                self._handle_partition_error(tp, answer.error_code, fenced)
                continue
            result = partition.truncate_to_leader_epoch(answer)
            done = truncated if result.truncation_completed else incomplete
            done.append(f"{tp}@{result.offset}")
            if result.truncation_completed:
                self._start_fetching(tp, state, partition.log.log_end_offset)

    def _start_fetching(self, tp: TopicPartition, state: PartitionFetchState, offset: int) -> None:
        state.state = FetchState.FETCHING
        state.fetch_offset = offset
        self._truncating.discard(tp)
        self._dirty.add(tp)

    # -- fetching -----------------------------------------------------------------------------

    async def fetch_once(self) -> None:
        """One Fetch for the partitions in ``_wanted`` (brought up to date by the caller)."""
        params = FetchParams(
            replica_id=self.replica_manager.broker_id,
            max_wait_ms=self.config.replica_fetch_wait_max_ms,
            min_bytes=self.config.replica_fetch_min_bytes,
            max_bytes=self.config.replica_fetch_response_max_bytes,
        )
        if self.session is None:
            infos = dict(self._wanted)
            self._unsent.clear()
            response = await self.endpoint.fetch(params, infos)
        else:
            answered = await self._fetch_in_session(params)
            if answered is None:
                return
            infos, response = answered
        # The states the request was built from: ``_wanted_states`` changes only when the
        # next round starts, after this answer is handled.
        sent_states = self._wanted_states
        fenced: list[TopicPartition] = []
        try:
            await self._handle_answer(response, infos, sent_states, fenced)
        finally:
            self._log_partitions("follower_fenced", fenced)

    async def _handle_answer(
        self,
        response: Mapping[TopicPartition, FetchPartitionData],
        infos: Mapping[TopicPartition, FetchInfo],
        sent_states: Mapping[TopicPartition, PartitionFetchState],
        fenced: list[TopicPartition],
    ) -> None:
        """Each partition's data appended (or its error handled), in slices that yield to the
        loop: a follower catching up thousands of partitions gets them in one answer, whose
        appends in one callback were among the loop stalls over 100 ms the watchdog named at
        10,000 partitions. Another callback may add, remove or re-add a partition during a
        pause; each partition is checked against the state its request was built from just
        before it is handled, as it always was after an out-of-range reset's await."""
        slices = LoopSlices(ANSWER_SLICE_ITEMS, SLICE_SECONDS)
        for tp, data in response.items():
            if slices.due():
                await slices.pause()
            state = self.partitions.get(tp)
            info = infos.get(tp)
            if (
                state is None
                or info is None
                or state is not sent_states.get(tp)
                or state.state is not FetchState.FETCHING
                or state.fetch_offset != info.fetch_offset
            ):
                # The partition was removed, re-added or moved on meanwhile. The leader's
                # session believes it told us this answer; a full request tells us again.
                if self.session is not None:
                    self.session.reset()
                continue
            if data.error_code is ErrorCode.NONE:
                self._process_partition_data(tp, state, data)
            elif data.error_code is ErrorCode.OFFSET_OUT_OF_RANGE:
                await self._handle_offset_out_of_range(tp, state)
            else:
                self._handle_partition_error(tp, data.error_code, fenced)

    async def _fetch_in_session(
        self, params: FetchParams
    ) -> tuple[Mapping[TopicPartition, FetchInfo], dict[TopicPartition, FetchPartitionData]] | None:
        """One request of the session: (what the leader read, its answer), or None when the
        answer cannot be used (the next request is then a full one, sent at once)."""
        session = self.session
        assert session is not None
        request = self._build_session_request(session)
        try:
            answer = await self.endpoint.fetch_session(params, request)  # type: ignore[attr-defined]
        except BaseException:
            session.handle_error()
            raise
        usable = session.handle_response(
            request, answer.error_code, answer.session_id, answer.partitions.keys()
        )
        if usable:
            return request.session_partitions, answer.partitions
        if answer.error_code not in (
            ErrorCode.NONE,
            ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ):
            raise KafkaError(error_code=answer.error_code)
        log.info(
            "replica_fetch_session_reset",
            leader=self.leader_id,
            error=answer.error_code.name,
            session_id=request.session_id,
            epoch=request.epoch,
        )
        return None

    def _build_session_request(self, session: FetchSessionHandler) -> SessionFetchRequest:
        """The session's next request for ``_wanted`` (built from ``_unsent`` only, unless
        it is a full one)."""
        request = session.build_changed(self._wanted, self._unsent)
        self._unsent = set()
        return request

    def _process_partition_data(
        self, tp: TopicPartition, state: PartitionFetchState, data: FetchPartitionData
    ) -> None:
        partition = self.replica_manager.online_partition(tp)
        if partition is None or partition.log is None:
            self._drop(tp)
            return
        if data.diverging_epoch is not None:
            self._set_truncating(tp, state)
            return
        if state.fetch_offset != partition.log.log_end_offset:
            # The log moved under the fetch (Kafka: "Offset mismatch", the partition fails);
            # appending would leave a gap or an overlap: find the position from the leader again.
            log.warning(
                "follower_offset_mismatch",
                partition=str(tp),
                fetch_offset=state.fetch_offset,
                log_end_offset=partition.log.log_end_offset,
            )
            self._set_truncating(tp, state)
            return
        try:
            if records_size(data.records) > 0:
                partition.append_records_to_follower(records_bytes(data.records))
            high_watermark = partition.log.high_watermark
            partition.update_follower_high_watermark(data.high_watermark)
            partition.maybe_advance_log_start_offset(data.log_start_offset)
            if partition.log.high_watermark != high_watermark:
                # Consumers reading from this follower (KIP-392) wait for its HW to move.
                self.replica_manager.fetch_purgatory.check_and_complete(tp)
        except (KafkaError, OSError) as e:
            log.warning("follower_append_failed", partition=str(tp), error=repr(e))
            self._delay([tp], self.config.replica_fetch_backoff_ms)
            return
        # Dirty whether or not the offset moved: the log start may have followed the leader's.
        self._set_fetch_offset(tp, state, partition.log.log_end_offset)

    async def _handle_offset_out_of_range(
        self, tp: TopicPartition, state: PartitionFetchState
    ) -> None:
        """Kafka's fetchOffsetAndTruncate: follow the leader's log end down, or its start up.

        The leader is asked with awaits in between, while a LeaderAndIsr may remove the
        partition from this fetcher (this broker now leads it) or re-add it with a new state:
        nothing is truncated unless the partition is still this fetcher's, with this state
        (Kafka holds the partition map lock across the same steps).
        """
        partition = self.replica_manager.online_partition(tp)
        if partition is None or partition.log is None:
            self._drop(tp)
            return
        try:
            leader_end = await self.endpoint.fetch_offset(
                tp, state.current_leader_epoch, LATEST_TIMESTAMP
            )
            if self.partitions.get(tp) is not state:
                return
            replica_end = partition.log.log_end_offset
            if leader_end < replica_end:
                partition.truncate_to(leader_end)
                self._set_fetch_offset(tp, state, leader_end)
                return
            leader_start = await self.endpoint.fetch_offset(
                tp, state.current_leader_epoch, EARLIEST_TIMESTAMP
            )
        except KafkaError as e:
            self._handle_partition_error(tp, e.error_code)
            return
        if self.partitions.get(tp) is not state:
            return
        replica_end = partition.log.log_end_offset
        if leader_start > replica_end:
            partition.truncate_fully_and_start_at(leader_start)
            self._set_fetch_offset(tp, state, leader_start)
        else:
            self._set_fetch_offset(tp, state, max(leader_start, replica_end))

    def _handle_partition_error(
        self, tp: TopicPartition, error: ErrorCode, fenced: list[TopicPartition] | None = None
    ) -> None:
        """``fenced``: a list to add a fenced partition to, which its caller logs once for the
        whole answer (a leader that moved answers thousands of partitions at once: a log line
        each held the loop 0.1-0.2 s); None logs it here."""
        if error is ErrorCode.FENCED_LEADER_EPOCH:
            # Our epoch is older than the leader's: wait for the controller's LeaderAndIsr.
            if fenced is None:
                self._log_partitions("follower_fenced", [tp])
            else:
                fenced.append(tp)
            self._drop(tp)
            return
        self._delay([tp], self.config.replica_fetch_backoff_ms)

    def _log_partitions(self, event: str, partitions: Sequence[object], **fields: Any) -> None:
        """One line for many partitions: their count and the first few."""
        if partitions:
            log.info(
                event,
                leader=self.leader_id,
                partitions=len(partitions),
                first=[str(tp) for tp in partitions[:LOGGED_PARTITIONS]],
                **fields,
            )


class BrokerIdAndFetcherId(NamedTuple):
    broker_id: int
    fetcher_id: int


@functools.lru_cache(maxsize=4096)
def _topic_hash(topic: str) -> int:
    """Java's String.hashCode of a topic name, computed once per topic (a LeaderAndIsr of
    thousands of partitions of one topic asked for it once per partition)."""
    return java_string_hash_code(topic)


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """Which of a leader's ``num.replica.fetchers`` fetchers follows ``tp`` (Kafka's
    AbstractFetcherManager.getFetcherId, so partitions spread over fetchers as in Kafka)."""
    h = (31 * _topic_hash(tp.topic) + tp.partition) & 0xFFFFFFFF
    return kafka_abs(h - (1 << 32) if h & 0x80000000 else h) % num_fetchers


class ReplicaFetcherManager:
    """``num.replica.fetchers`` fetchers per leader broker, each a task with its own
    connection, a partition always on the same one (``fetcher_id``); implements the replica
    manager's fetcher hooks."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        endpoint_for_leader: Callable[[int], LeaderEndPoint],
        time: Time = SYSTEM_TIME,
        config: ReplicaFetcherConfig | None = None,
    ) -> None:
        self.replica_manager = replica_manager
        self.endpoint_for_leader = endpoint_for_leader
        self.time = time
        self.config = config or ReplicaFetcherConfig()
        self.fetchers: dict[BrokerIdAndFetcherId, ReplicaFetcher] = {}

    def fetcher_for(self, tp: TopicPartition) -> ReplicaFetcher | None:
        for fetcher in self.fetchers.values():
            if tp in fetcher.partitions:
                return fetcher
        return None

    def add_fetcher_for_partitions(
        self, partitions: Mapping[TopicPartition, tuple[int, int]]
    ) -> None:
        by_fetcher: dict[BrokerIdAndFetcherId, dict[TopicPartition, tuple[int, int]]] = {}
        num_fetchers = self.config.num_replica_fetchers
        for tp, (leader_id, offset) in partitions.items():
            partition = self.replica_manager.online_partition(tp)
            epoch = partition.leader_epoch if partition is not None else NO_EPOCH
            key = BrokerIdAndFetcherId(leader_id, fetcher_id(tp, num_fetchers))
            by_fetcher.setdefault(key, {})[tp] = (offset, epoch)
        self.remove_fetcher_for_partitions(partitions)
        for key, group in by_fetcher.items():
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                fetcher = ReplicaFetcher(
                    key.broker_id,
                    self.endpoint_for_leader(key.broker_id),
                    self.replica_manager,
                    self.time,
                    self.config,
                )
                self.fetchers[key] = fetcher
                fetcher.start()
            fetcher.add_partitions(group)

    def remove_fetcher_for_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        for fetcher in self.fetchers.values():
            fetcher.remove_partitions(partitions)

    async def shutdown_idle_fetchers(self) -> None:
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[key]
                await fetcher.shutdown()

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        for fetcher in fetchers:
            await fetcher.shutdown()


def _partition_dict(tp: TopicPartition, info: Any) -> dict[str, Any]:
    return {
        "partition": tp.partition,
        "current_leader_epoch": info.current_leader_epoch,
        "fetch_offset": info.fetch_offset,
        "last_fetched_epoch": info.last_fetched_epoch,
        "log_start_offset": info.log_start_offset,
        "partition_max_bytes": info.max_bytes,
    }


_FETCH_PARTITION_V12 = struct.Struct(">iiqiqiB")
"""A FetchPartition of Fetch v12: partition, current leader epoch, fetch offset, last fetched
epoch, log start offset, partition max bytes, and its tagged fields (none: one zero byte)."""


def _encoded_fetch_topics(topics: dict[str, list[tuple[TopicPartition, Any]]]) -> Encoded:
    """Fetch v12's ``topics`` as wire bytes (compact lengths, no tagged fields): what the
    encoder writes for the FetchTopic structs of the same partitions, without making one.
    A follower's first fetch of a session names every partition it follows; at thousands of
    partitions the structs took one callback long enough for the loop's watchdog to name it."""
    out = bytearray()
    write_unsigned_varint(out, len(topics) + 1)
    pack = _FETCH_PARTITION_V12.pack
    for name, partitions in topics.items():
        data = name.encode()
        write_unsigned_varint(out, len(data) + 1)
        out += data
        write_unsigned_varint(out, len(partitions) + 1)
        for tp, info in partitions:
            out += pack(
                tp.partition,
                info.current_leader_epoch,
                info.fetch_offset,
                info.last_fetched_epoch,
                info.log_start_offset,
                info.max_bytes,
                0,
            )
        out.append(0)  # the topic's tagged fields: none
    return Encoded(bytes(out))


def _fetch_request_v12(
    values: dict[str, Any],
    topics: dict[str, list[tuple[TopicPartition, Any]]],
    forgotten: dict[str, list[Any]] | None = None,
) -> Any:
    """Fetch v12 from kio's classes, its ``topics`` already encoded (``_encoded_fetch_topics``):
    the bytes of the message ``build_message`` makes of the values."""
    from kio.schema.fetch.v12 import request as fetch_v12
    from kio.schema.types import TopicName

    return fetch_v12.FetchRequest(
        **values,
        forgotten_topics_data=tuple(
            fetch_v12.ForgottenTopic(topic=TopicName(name), partitions=tuple(partitions))
            for name, partitions in (forgotten or {}).items()
        ),
        topics=_encoded_fetch_topics(topics),  # type: ignore[arg-type]  # (written as is)
    )
