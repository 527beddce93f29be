"""``ShareGroupService``: share groups on one broker, around the pure parts (Kafka's
SharePartitionManager, ShareSessionCache and the share side of the group coordinator).

- membership: ``ShareGroupManager`` (group.py), for the groups this broker coordinates;
- share sessions (KIP-932): keyed (group, member) on this broker. ShareFetch epoch 0 opens one
  (replacing any previous one; it may carry no acknowledgement), -1 closes it (its
  acknowledgements are applied, nothing is fetched, the member's records on its partitions go
  back); any other epoch must be the session's next one (INVALID_SHARE_SESSION_EPOCH; no session:
  SHARE_SESSION_NOT_FOUND) and adds the request's partitions, removes the forgotten ones;
- share-partitions: one ``SharePartition`` per (group, topic, partition) led here, created on
  first fetch from the persisted state (ReadShareGroupState through the persister) or, when
  there is none, initialised at ``share.auto.offset.reset`` (latest: the high watermark;
  earliest: the log start) and persisted;
- acquisition: records are read from the leader log (up to the high watermark, or the last
  stable offset under ``share.isolation.level=read_committed``) and acquired batch by batch; the
  response carries the whole batches that hold acquired records and the acquired ranges, and the
  client drops the records outside them;
- every change of a share-partition's state that must outlive the broker (acknowledgements,
  releases, lock timeouts, the start offset) is written through the persister
  (WriteShareGroupState) before the request that caused it is answered;
- acquisition locks: a heap of deadlines and one timer at the earliest; member sessions the
  same way.

Everything runs on the broker's event loop; a share-partition is never touched by two coroutines
between two awaits.
"""

from __future__ import annotations

import asyncio
import heapq
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from kafkalite.broker.types import FetchInfo, FetchIsolation, FetchParams
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.records import complete_batches_length, iter_batch_headers
from kafkalite.protocol.types import TopicPartition
from kafkalite.share.coordinator import StateResult
from kafkalite.share.group import ShareGroupManager
from kafkalite.share.group_configs import by_duration_ms
from kafkalite.share.partition import Acquired, SharePartition, StateBatch

log = structlog.get_logger(__name__)

PartitionKey = tuple[str, str, int]  # group, topic, partition
TopicIdPartition = tuple[uuid.UUID, int]


class Persister(Protocol):
    """Kafka's Persister: the share coordinator, wherever it is."""

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> StateResult: ...

    async def initialize(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        start_offset: int,
        state_epoch: int = 0,
    ) -> ErrorCode: ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode: ...

    async def write(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[StateBatch],
    ) -> ErrorCode: ...


@dataclass(frozen=True, slots=True)
class ShareConfig:
    delivery_count_limit: int = 5
    record_lock_duration_ms: int = 30000
    partition_max_record_locks: int = 2000
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"


@dataclass(frozen=True, slots=True)
class ShareGroupOverview:
    """One share group as ListGroups shows it (the fields of group/'s GroupOverview)."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str


@dataclass(slots=True)
class ShareSession:
    epoch: int = 1
    partitions: set[TopicIdPartition] = field(default_factory=set)


@dataclass(slots=True)
class PartitionFetch:
    """What one share-partition answers in a ShareFetch."""

    error: ErrorCode = ErrorCode.NONE
    records: bytes = b""
    acquired: list[Acquired] = field(default_factory=list)
    leader_epoch: int = -1


class ShareGroupService:
    def __init__(
        self,
        broker_id: int,
        replica_manager: Any,
        metadata_cache: Any,
        persister: Persister,
        config: ShareConfig | None = None,
        time_ms: Callable[[], int] | None = None,
        group_configs: Any = None,
    ) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.persister = persister
        self.config = config or ShareConfig()
        self.time_ms = time_ms or (lambda: int(time.time() * 1000))
        self.group_configs = group_configs
        self.groups = ShareGroupManager(
            session_timeout_ms=self.config.session_timeout_ms,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            max_size=self.config.max_size,
            time_ms=self.time_ms,
            session_timeout_for=lambda g: int(
                self.setting(g, "share.session.timeout.ms", self.config.session_timeout_ms)
            ),
        )
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.partitions: dict[PartitionKey, SharePartition] = {}
        self._loading: dict[PartitionKey, asyncio.Lock] = {}
        self._load_tasks: dict[tuple[str, uuid.UUID, int], asyncio.Task] = {}
        self._write_locks: dict[PartitionKey, asyncio.Lock] = {}
        self._revalidate: set[PartitionKey] = set()
        """Cached share-partitions of a group that had no share session here: their state may
        have been reset or deleted meanwhile (AlterShareGroupOffsets, DeleteShareGroupOffsets,
        DeleteGroups at the group's coordinator, which may be another broker), so the next
        fetch checks the persisted state epoch before serving them."""
        self._deadlines: list[tuple[int, PartitionKey]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._tasks: set[asyncio.Task] = set()

    # -- group configs -----------------------------------------------------------------------

    def setting(self, group_id: str, name: str, default: Any) -> Any:
        """The group's value of group config ``name`` (share/group_configs.py), else
        ``default`` (the broker's setting) when no group config store is wired."""
        if self.group_configs is None:
            return default
        return self.group_configs.value(group_id, name)

    def lock_duration_ms(self, group_id: str) -> int:
        return int(
            self.setting(
                group_id, "share.record.lock.duration.ms", self.config.record_lock_duration_ms
            )
        )

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return int(
            self.setting(group_id, "share.heartbeat.interval.ms", self.config.heartbeat_interval_ms)
        )

    def _read_committed(self, group_id: str) -> bool:
        level = self.setting(group_id, "share.isolation.level", self.config.isolation_level)
        return str(level).lower() == "read_committed"

    # -- topics ------------------------------------------------------------------------------

    def topic_lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        topic_id = self.metadata_cache.get_topic_id(name)
        count = self.metadata_cache.num_partitions(name)
        if topic_id is None or not count:
            return None
        return topic_id, count

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.metadata_cache.get_topic_name(topic_id)

    def loaded_partition(self, group_id: str, topic: str, partition: int) -> SharePartition | None:
        """The in-memory state of share-partition (group, topic, partition) when this broker
        leads the partition and has loaded it (a first ShareFetch loads it), else None. For
        reading only: its owner is this service. None too while it may be stale (no member of
        the group fetches here: see ``_revalidate``)."""
        key = (group_id, topic, partition)
        return None if key in self._revalidate else self.partitions.get(key)

    # -- membership --------------------------------------------------------------------------

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed: tuple[str, ...] | None,
        client_id: str = "",
        client_host: str = "",
    ):
        result = self.groups.heartbeat(
            group_id,
            member_id,
            member_epoch,
            rack_id,
            subscribed,
            self.topic_lookup,
            client_id,
            client_host,
        )
        if result.removed is not None:
            self._member_left(group_id, result.removed)
        self._arm_timer()
        return result

    def _member_left(self, group_id: str, member_id: str) -> None:
        """A member left the group (heartbeat epoch -1). A leaving client closes its share
        sessions itself (ShareAcknowledge epoch -1, carrying its last acknowledgements), on
        other connections and so in any order with the leave: the session is kept for one lock
        duration so those acknowledgements still count, then closed if it is still open."""
        if (group_id, member_id) not in self.sessions:
            self._member_gone(group_id, member_id)
            return
        loop = asyncio.get_running_loop()
        loop.call_later(
            self.lock_duration_ms(group_id) / 1000,
            lambda: (
                None
                if self.groups.is_member(group_id, member_id)
                else self._member_gone(group_id, member_id)
            ),
        )

    def _member_gone(self, group_id: str, member_id: str) -> None:
        """A member left or timed out: its sessions close and its records go back."""
        self.sessions.pop((group_id, member_id), None)
        changed = [
            key
            for key, sp in self.partitions.items()
            if key[0] == group_id and sp.release_member(member_id)
        ]
        for key in changed:
            self._spawn(self._persist(key))
        self._maybe_idle(group_id)

    def _maybe_idle(self, group_id: str) -> None:
        """No share session of the group is left here: the group may be empty, and its
        offsets reset or deleted at its coordinator (which may be another broker) before
        anyone fetches here again, so its cached share-partitions are checked against the
        persisted state epoch before they are served or shown."""
        if not any(g == group_id for g, _ in self.sessions):
            self._revalidate.update(k for k in self.partitions if k[0] == group_id)

    # -- share sessions ----------------------------------------------------------------------

    def open_session(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        add: Iterable[TopicIdPartition],
        forget: Iterable[TopicIdPartition],
    ) -> tuple[ErrorCode, ShareSession | None]:
        """Apply a request's session epoch and partition changes; the session to serve."""
        key = (group_id, member_id)
        if epoch == 0:
            old = self.sessions.pop(key, None)
            if old is not None:
                self._release_partitions(group_id, member_id, old.partitions)
            if not any(g == group_id for g, _ in self.sessions):
                # nobody of the group fetched here: the group may have been empty, and its
                # offsets reset or deleted by an operator since this broker cached them
                self._revalidate.update(k for k in self.partitions if k[0] == group_id)
            session = self.sessions[key] = ShareSession(1, set(add))
            return ErrorCode.NONE, session
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch == -1:
            return ErrorCode.NONE, session
        if epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        session.partitions.update(add)
        forgotten = set(forget) & session.partitions
        session.partitions -= forgotten
        self._release_partitions(group_id, member_id, forgotten)
        return ErrorCode.NONE, session

    def close_session(self, group_id: str, member_id: str) -> None:
        session = self.sessions.pop((group_id, member_id), None)
        if session is not None:
            self._release_partitions(group_id, member_id, session.partitions)
            self._maybe_idle(group_id)

    def _release_partitions(
        self, group_id: str, member_id: str, partitions: Iterable[TopicIdPartition]
    ) -> None:
        for topic_id, partition in partitions:
            name = self.topic_name(topic_id)
            key = (group_id, name or "", partition)
            sp = self.partitions.get(key)
            if sp is not None and sp.release_member(member_id):
                self._spawn(self._persist(key))

    # -- share-partitions --------------------------------------------------------------------

    def is_ready(self, group_id: str, topic_id: uuid.UUID, partition: int) -> bool:
        """Whether a fetch can acquire from the share-partition without loading it first
        (True too when it cannot be served at all: ``acquire`` answers the error)."""
        name = self.topic_name(topic_id)
        if name is None:
            return True
        leader = self.replica_manager.online_partition(TopicPartition(name, partition))
        if leader is None or not leader.is_leader:
            return True
        return self._current((group_id, name, partition), leader, topic_id) is not None

    def _current(
        self, key: tuple[str, str, int], leader: Any, topic_id: uuid.UUID
    ) -> SharePartition | None:
        """The cached share-partition of ``key`` if it is still good to serve: loaded under
        this leadership (epoch), for this topic id, and not waiting for a revalidation."""
        sp = self.partitions.get(key)
        if (
            sp is not None
            and sp.leader_epoch == leader.leader_epoch
            and sp.topic_id == topic_id
            and key not in self._revalidate
        ):
            return sp
        return None

    def start_loading(self, group_id: str, topic_id: uuid.UUID, partition: int) -> asyncio.Task:
        """Load (or keep loading) the share-partition in the background: a fetch serves the
        share-partitions that are ready, and one being initialised joins a later fetch, as
        Kafka's SharePartitionManager initialises share-partitions asynchronously."""
        key = (group_id, topic_id, partition)
        task = self._load_tasks.get(key)
        if task is None or task.done():

            async def load() -> None:
                try:
                    await self.share_partition(group_id, topic_id, partition)
                except Exception as e:  # the fetch that acquires from it reports the error
                    log.debug("loading a share-partition failed", error=repr(e))

            task = asyncio.get_running_loop().create_task(load())
            self._load_tasks[key] = task
            task.add_done_callback(
                lambda t: (
                    self._load_tasks.pop(key, None) if self._load_tasks.get(key) is t else None
                )
            )
        return task

    async def share_partition(
        self, group_id: str, topic_id: uuid.UUID, partition: int
    ) -> tuple[ErrorCode, SharePartition | None]:
        """The share-partition, loaded from the persister on first use. NOT_LEADER_OR_FOLLOWER
        when this broker does not lead the partition; UNKNOWN_TOPIC_ID for an unknown topic."""
        name = self.topic_name(topic_id)
        if name is None:
            return ErrorCode.UNKNOWN_TOPIC_ID, None
        tp = TopicPartition(name, partition)
        leader = self.replica_manager.online_partition(tp)
        if leader is None or not leader.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        key = (group_id, name, partition)
        sp = self._current(key, leader, topic_id)
        if sp is not None:
            self._catch_up_log_start(sp, leader)
            return ErrorCode.NONE, sp
        # not loaded, or loaded under an earlier leadership of the partition: what another
        # leader persisted meanwhile is the truth now
        lock = self._loading.setdefault(key, asyncio.Lock())
        async with lock:
            sp = self.partitions.get(key)
            if (
                sp is not None
                and sp.leader_epoch == leader.leader_epoch
                and sp.topic_id == topic_id
            ):
                if key not in self._revalidate:
                    return ErrorCode.NONE, sp
                # still the persisted state (no reset under a new state epoch, no delete)?
                current = await self.persister.read(group_id, topic_id, partition, -1)
                if current.error is not ErrorCode.NONE:
                    return _retriable(current.error), None
                self._revalidate.discard(key)
                if current.start_offset >= 0 and current.state_epoch == sp.state_epoch:
                    self._catch_up_log_start(sp, leader)
                    return ErrorCode.NONE, sp
            self._revalidate.discard(key)
            self.partitions.pop(key, None)
            state = await self.persister.read(group_id, topic_id, partition, leader.leader_epoch)
            if state.error is not ErrorCode.NONE:
                return _retriable(state.error), None
            settings = {
                "delivery_count_limit": self.config.delivery_count_limit,
                "lock_duration_ms": self.lock_duration_ms(group_id),
                "max_record_locks": self.config.partition_max_record_locks,
            }
            log_ = leader.leader_log_or_raise()
            if state.start_offset < 0:
                if self.group_configs is not None:
                    await self.group_configs.wait_loaded()
                start = self._initial_offset(group_id, log_)
                error = await self.persister.initialize(group_id, topic_id, partition, start)
                if error is not ErrorCode.NONE:
                    return _retriable(error), None
                sp = SharePartition(start, **settings)
                sp.state_epoch = 0
            else:
                sp = SharePartition.restore(state.start_offset, state.state_batches, **settings)
                sp.state_epoch = state.state_epoch
            sp.leader_epoch = leader.leader_epoch
            sp.topic_id = topic_id
            self._catch_up_log_start(sp, leader)
            self.partitions[key] = sp
            return ErrorCode.NONE, sp

    def _initial_offset(self, group_id: str, log_: Any) -> int:
        """Where a share-partition without state starts: the group's share.auto.offset.reset
        (earliest: the log start; latest: the high watermark; by_duration: the first record
        at or after now minus the duration, else the high watermark)."""
        reset = str(
            self.setting(group_id, "share.auto.offset.reset", self.config.auto_offset_reset)
        ).lower()
        if reset == "earliest":
            return log_.log_start_offset
        duration = by_duration_ms(reset)
        if duration is not None:
            found = log_.offset_for_timestamp(self.time_ms() - duration)
            if found is not None:
                return min(max(found[0], log_.log_start_offset), log_.high_watermark)
        return log_.high_watermark

    @staticmethod
    def _catch_up_log_start(sp: SharePartition, partition: Any) -> None:
        log_ = partition.log
        if log_ is not None and log_.log_start_offset > sp.start_offset:
            sp.move_start(log_.log_start_offset)

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic_id: uuid.UUID,
        partition: int,
        batches: Iterable[tuple[int, int, list[int]]],
    ) -> ErrorCode:
        error, sp = await self.share_partition(group_id, topic_id, partition)
        if sp is None:
            return error
        result = ErrorCode.NONE
        for first, last, types in batches:
            e = sp.acknowledge(member_id, first, last, types)
            if e is not ErrorCode.NONE:
                result = e
        name = self.topic_name(topic_id) or ""
        write = await self._persist((group_id, name, partition))
        return result if result is not ErrorCode.NONE else write

    async def acquire(
        self,
        group_id: str,
        member_id: str,
        topic_id: uuid.UUID,
        partition: int,
        max_records: int,
        max_bytes: int,
        min_one_batch: bool = True,
    ) -> PartitionFetch:
        """Acquire up to ``max_records`` records, batch by batch, from the batches that fit in
        ``max_bytes``: batches are taken in offset order while their total stays within it,
        and the first batch that would pass it ends the fetch, unless nothing is in the answer
        yet (``min_one_batch``: the response's first batch is returned whatever its size, as
        Kafka's log read with minOneMessage). Only the records of returned batches are
        acquired, so nothing is locked that the client never sees."""
        error, sp = await self.share_partition(group_id, topic_id, partition)
        if sp is None:
            return PartitionFetch(error)
        name = self.topic_name(topic_id) or ""
        tp = TopicPartition(name, partition)
        try:
            leader = self.replica_manager.get_partition_or_raise(tp)
            isolation = (
                FetchIsolation.TXN_COMMITTED
                if self._read_committed(group_id)
                else FetchIsolation.HIGH_WATERMARK
            )
            sp.lock_duration_ms = self.lock_duration_ms(group_id)
            now = self.time_ms()
            wanted = max(1, max_records)
            chunks: dict[int, bytes] = {}  # base offset -> the batch, each batch once
            acquired: list[Acquired] = []
            count = size = 0
            tried: set[int] = set()
            full = False
            while count < wanted and not full:
                offset = sp.first_acquirable_offset()
                if offset in tried or (offset >= sp.end_offset and not sp.can_acquire_new()):
                    break
                tried.add(offset)
                read = leader.read_records(
                    offset, -1, max(0, max_bytes - size), isolation, True, True
                )
                buf = bytes(read.records) if read.records else b""
                positions = {h.base_offset: (pos, h.size) for h, pos in _headers(buf)}
                if not positions:
                    break
                progressed = False
                for kind in _kinds(buf, read.aborted_transactions):
                    base = kind[0]
                    if count >= wanted:
                        break
                    pos, length = positions[base]
                    fits = size + length <= max_bytes or (
                        min_one_batch and not chunks and size == 0
                    )
                    if base not in chunks and not fits:
                        full = True
                        break
                    got = sp.acquire(member_id, [kind], wanted - count, now)
                    if not got:
                        progressed = progressed or kind[2]  # a control batch archived
                        continue
                    progressed = True
                    acquired.extend(got)
                    count += sum(a.last_offset - a.first_offset + 1 for a in got)
                    if base not in chunks:
                        chunks[base] = buf[pos : pos + length]
                        size += length
                if not progressed:
                    break
            records = b"".join(chunks[base] for base in sorted(chunks))
        except KafkaError as e:
            return PartitionFetch(e.error_code)
        if acquired:
            key = (group_id, name, partition)
            deadline = now + sp.lock_duration_ms
            heapq.heappush(self._deadlines, (deadline, key))
            self._arm_timer()
        return PartitionFetch(ErrorCode.NONE, records, _merge(acquired), leader.leader_epoch)

    async def wait_for_records(
        self, partitions: Iterable[tuple[str, int, int]], max_wait_ms: int
    ) -> None:
        """Long poll: until a partition's high watermark passes the given offset or
        ``max_wait_ms`` passes (the fetch purgatory wakes it when records arrive)."""
        infos = {TopicPartition(t, p): FetchInfo(offset, 1) for t, p, offset in partitions}
        if not infos or max_wait_ms <= 0:
            return
        params = FetchParams(max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1)
        try:
            await self.replica_manager.fetch_messages(params, infos)
        except KafkaError:
            return

    # -- persisting --------------------------------------------------------------------------

    async def _persist(self, key: PartitionKey) -> ErrorCode:
        sp = self.partitions.get(key)
        if sp is None:
            return ErrorCode.NONE
        group_id, name, partition = key
        topic_id = sp.topic_id
        if topic_id is None or topic_id != self.metadata_cache.get_topic_id(name):
            # the topic is gone (or was created again): this state has nowhere to go
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        leader = self.replica_manager.online_partition(TopicPartition(name, partition))
        leader_epoch = leader.leader_epoch if leader is not None else -1
        lock = self._write_locks.setdefault(key, asyncio.Lock())
        async with lock:
            error = await self.persister.write(
                group_id,
                topic_id,
                partition,
                sp.state_epoch,
                leader_epoch,
                sp.start_offset,
                sp.state_batches(),
            )
        if error is ErrorCode.FENCED_STATE_EPOCH:
            # an operator reset the group's offsets meanwhile: the next fetch reads it back
            self.partitions.pop(key, None)
        elif error is not ErrorCode.NONE:
            log.warning("writing share state failed", key=key, error=error.name)
        return error

    def overviews(self, states: Any = None, types: Any = None) -> list[Any]:
        """The share groups coordinated here as ListGroups lists them (protocol type and group
        type "share"), filtered by state and type as Kafka does (case-insensitively)."""
        wanted_states = {s.lower() for s in states} if states else None
        wanted_types = {t.lower() for t in types} if types else None
        if wanted_types is not None and "share" not in wanted_types:
            return []
        out = []
        for group in self.groups.groups.values():
            if wanted_states is not None and group.state.lower() not in wanted_states:
                continue
            out.append(ShareGroupOverview(group.group_id, "share", group.state, "share"))
        return out

    # -- offsets administration (DescribeShareGroupOffsets, Alter..., Delete...) -------------

    def group_is_empty(self, group_id: str) -> bool:
        group = self.groups.groups.get(group_id)
        return group is None or not group.members

    def is_share_group(self, group_id: str) -> bool:
        """Whether this broker coordinates a share group ``group_id`` (members or not)."""
        return group_id in self.groups.groups

    def subscribed_topics(self, group_id: str) -> set[str]:
        """The topics the group's members subscribe to; of an empty group, every topic it was
        subscribed to (where its share-partitions' state may be)."""
        group = self.groups.groups.get(group_id)
        if group is None:
            return set()
        current = {t for m in group.members.values() for t in m.subscribed}
        return current if group.members else set(group.topics)

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group (Kafka's deleteGroups of a share group): refused while
        it has members (NON_EMPTY_GROUP); else the persisted state of every partition of every
        topic it was subscribed to is deleted (DeleteShareGroupState), then the group. A state
        that could not be deleted keeps the group (the error, retriable, is answered) so a
        retry finds the topics again."""
        group = self.groups.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        for topic in sorted(group.topics):
            found = self.topic_lookup(topic)
            if found is None:
                continue  # a deleted topic's state went with it (on_partitions_deleted)
            topic_id, count = found
            for partition in range(count):
                error = await self.delete_state(group_id, topic_id, partition)
                if error is not ErrorCode.NONE:
                    return error
        if self.groups.groups.get(group_id) is group and not group.members:
            del self.groups.groups[group_id]
        return ErrorCode.NONE

    async def start_offset(
        self, group_id: str, topic_id: uuid.UUID, partition: int
    ) -> tuple[ErrorCode, int, int]:
        """(error, start offset or -1 without state, leader epoch) of a share-partition."""
        state = await self.persister.read(group_id, topic_id, partition, -1)
        if state.error is not ErrorCode.NONE:
            return _retriable(state.error), -1, -1
        return ErrorCode.NONE, state.start_offset, state.leader_epoch

    async def reset_start_offset(
        self, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int
    ) -> ErrorCode:
        """A new state at ``start_offset`` under a higher state epoch (the group is empty):
        the in-flight records are forgotten and a leader holding the old state is fenced."""
        state = await self.persister.read(group_id, topic_id, partition, -1)
        if state.error is not ErrorCode.NONE:
            return _retriable(state.error)
        error = await self.persister.initialize(
            group_id, topic_id, partition, start_offset, state.state_epoch + 1
        )
        if error is ErrorCode.NONE:
            self.partitions.pop((group_id, self.topic_name(topic_id) or "", partition), None)
        return _retriable(error)

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        error = await self.persister.delete(group_id, topic_id, partition)
        if error is ErrorCode.NONE:
            self.partitions.pop((group_id, self.topic_name(topic_id) or "", partition), None)
        return _retriable(error)

    def start_background(self, coro: Any) -> None:
        """A task that lives as long as the service (cancelled by ``shutdown``)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            coro.close()  # built outside a loop (a unit test): nothing to follow
            return
        self._spawn(coro)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- timers ------------------------------------------------------------------------------

    def _arm_timer(self) -> None:
        candidates = [d for d in (self.groups.next_deadline(),) if d is not None]
        if self._deadlines:
            candidates.append(self._deadlines[0][0])
        if not candidates:
            return
        at = min(candidates)
        if self._timer is not None and self._timer_at is not None and self._timer_at <= at:
            return
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        delay = max(0.0, (at - self.time_ms()) / 1000)
        self._timer_at = at
        self._timer = loop.call_later(delay + 0.001, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        now = self.time_ms()
        due: set[PartitionKey] = set()
        while self._deadlines and self._deadlines[0][0] <= now:
            due.add(heapq.heappop(self._deadlines)[1])
        for key in due:
            sp = self.partitions.get(key)
            if sp is not None and sp.expire_locks(now):
                self._spawn(self._persist(key))
            if sp is not None:
                later = sp.next_deadline()
                if later is not None:
                    heapq.heappush(self._deadlines, (later, key))
        for group_id, member_id in self.groups.expire():
            log.info("share group member expired", group=group_id, member=member_id)
            self._member_gone(group_id, member_id)
        self._arm_timer()

    async def shutdown(self) -> None:
        close = getattr(self.persister, "close", None)
        if close is not None:
            await close()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._tasks) + list(self._load_tasks.values()):
            task.cancel()
        self.partitions.clear()
        self.sessions.clear()

    def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions deleted here (StopReplica with delete, a topic deletion): their
        share-partitions are forgotten and their persisted state deleted, as Kafka's group
        coordinator deletes the share-group state of deleted topics, so a topic created again
        under the same name starts clean."""
        gone = {(tp.topic, tp.partition) for tp in partitions}
        for key in [k for k in self.partitions if (k[1], k[2]) in gone]:
            sp = self.partitions.pop(key)
            if sp.topic_id is not None:
                self._spawn(self._delete_quietly(key[0], sp.topic_id, key[2]))

    async def _delete_quietly(self, group_id: str, topic_id: Any, partition: int) -> None:
        error = await self.persister.delete(group_id, topic_id, partition)
        if error is not ErrorCode.NONE:
            log.info(
                "deleting the share state of a deleted partition failed",
                group=group_id,
                topic_id=str(topic_id),
                partition=partition,
                error=error.name,
            )

    def on_resignation(self, topic: str, partition: int) -> None:
        """This broker no longer leads ``topic``-``partition``: forget its share-partitions
        (the new leader reads them back from the persister)."""
        for key in [k for k in self.partitions if k[1] == topic and k[2] == partition]:
            del self.partitions[key]


def _merge(ranges: list[Acquired]) -> list[Acquired]:
    """Adjacent acquired ranges with one delivery count as one (batch by batch acquisition
    yields one range per batch)."""
    out: list[Acquired] = []
    for a in sorted(ranges, key=lambda r: r.first_offset):
        if (
            out
            and out[-1].last_offset + 1 == a.first_offset
            and (out[-1].delivery_count == a.delivery_count)
        ):
            out[-1] = Acquired(out[-1].first_offset, a.last_offset, a.delivery_count)
        else:
            out.append(a)
    return out


def _retriable(error: ErrorCode) -> ErrorCode:
    """A share coordinator that is not ready yet: the client retries the partition."""
    if error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return error


def _headers(buf: bytes):
    """(header, position) of each complete batch of ``buf``."""
    for pos, header in iter_batch_headers(memoryview(buf)[: complete_batches_length(buf)]):
        yield header, pos


def _kinds(buf: bytes, aborted: list[tuple[int, int]] | None = None):
    """(base offset, last offset, never to deliver) of each complete batch of ``buf``: control
    batches, and under read_committed the batches of aborted transactions (``aborted``: their
    (producer id, first offset), as a read_committed Fetch answers; a producer's batches from
    that offset up to its next control batch are aborted, as consumers filter them)."""
    pending = sorted(aborted or (), key=lambda t: t[1])
    aborting: set[int] = set()
    for header, _ in _headers(buf):
        while pending and pending[0][1] <= header.base_offset:
            aborting.add(pending.pop(0)[0])
        if header.is_control:
            aborting.discard(header.producer_id)
            yield header.base_offset, header.last_offset, True
            continue
        skip = header.is_transactional and header.producer_id in aborting
        yield header.base_offset, header.last_offset, skip
