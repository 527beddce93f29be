"""One partition hosted on this broker: its role, its local log and, as leader, its followers.

The role comes from LeaderAndIsr (``make_leader`` / ``make_follower``) and only a newer leader
epoch changes it (ReplicaManager checks that). As leader the partition tracks, for every remote
replica, the log end offset (LEO) it last fetched from and the last time it was caught up;
with that it keeps the high watermark (HW) and the ISR.

Rules enforced here:

- **HW = min LEO over the (maximal) ISR**, the leader included. The maximal ISR is the
  committed ISR plus a replica whose addition is being written (Kafka's PendingExpandIsr), so
  the HW waits for a replica the moment the leader decides to add it; a replica being removed
  still counts until the removal is committed. A follower whose LEO is unknown (not fetched
  since this broker became leader) holds the HW where it is.
- **The HW only advances from follower fetch positions** (and from local appends, which only
  move the leader's own LEO): it never decreases while this broker leads, and never exceeds
  the leader's LEO.
- **ISR shrink**: a follower in the ISR that has not been caught up to the leader's LEO for
  ``replica.lag.time.max.ms`` is removed. **ISR expand**: an assigned follower outside the ISR
  whose LEO reaches the HW and the start offset of the current leader epoch is added.
  A replica's "last caught up time" follows Kafka: the time of a fetch at the leader's LEO, or
  of the previous fetch when this fetch reaches the LEO the leader had then.
- ISR changes are proposals (``zk.types.LeaderAndIsr`` with the new ISR and the expected
  zkVersion) that the owner writes, with the controller epoch of the last LeaderAndIsr, to the partition state node with a compare-and-set; one change is in flight
  at a time. ``complete_isr_update`` applies the result: a new zkVersion commits it; a failed
  CAS means the controller has moved leadership on ("two leaders"): the partition stops
  acting as leader (NOT_LEADER_OR_FOLLOWER) until the next LeaderAndIsr.
- Leader epoch fencing: a request carrying an epoch older than ours is FENCED_LEADER_EPOCH, a
  newer one UNKNOWN_LEADER_EPOCH; -1 means "not given".
- ``min.insync.replicas``: an acks=all append with a smaller ISR fails before the append with
  NOT_ENOUGH_REPLICAS; an acks=all produce whose offset the HW passed while the ISR was too small
  completes with NOT_ENOUGH_REPLICAS_AFTER_APPEND.
- **LSO = min(first offset of the oldest open transaction, HW)** (the producer state tracks
  open transactions); read_committed reads stop at it and name the aborted transactions
  overlapping what they return, from the log's ``.txnindex``, which an ABORT marker extends
  (leader, follower or replay alike: the marker is read back from the log). A leader refuses a
  marker whose coordinator epoch is older than the producer's last (TRANSACTION_COORDINATOR_
  FENCED).
- Becoming follower, the replica truncates using the leader epoch (KIP-101) and not to its HW as
  the seed's v3 design did: ``offset_truncation_state`` computes the truncation point from the
  leader's OffsetsForLeaderEpoch answer.

Sans-I/O apart from the local log: no coordination writes, no asyncio; the clock is injected.
Not safe to call concurrently; the broker calls it from one event loop.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kafkalite.broker.clock import Time
from kafkalite.broker.producer_state import AppendOrigin, ProducerStateManager
from kafkalite.broker.types import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_EPOCH,
    UNKNOWN_OFFSET,
    EpochEndOffset,
    FetchIsolation,
    LeaderAndIsrPartitionState,
    ListOffsetResult,
)
from kafkalite.protocol.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    InvalidRecordError,
    KafkaError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    RecordError,
    RecordValidationError,
    UnknownLeaderEpochError,
)
from kafkalite.protocol.records import (
    LOG_OVERHEAD,
    ControlRecordType,
    RecordBatchHeader,
    complete_batches_length,
    decode_batch,
    iter_batch_headers,
    parse_control_record_type,
    parse_end_txn_marker,
    records_without_key,
    validate_batches,
)
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.txn_index import AbortedTxn
from kafkalite.zk.types import LeaderAndIsr

DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000
_SCAN_CHUNK_BYTES = 1 << 20

_SHARED_ISRS: dict[frozenset[int], frozenset[int]] = {}
_SHARED_ISRS_KEPT = 4096


def shared_isr(replica_ids: Iterable[int]) -> frozenset[int]:
    """One frozenset per distinct ISR, shared by the partitions that have it (a cluster has
    few distinct ones): not one per partition for the garbage collector to walk. Immutable,
    so sharing changes nothing else; the table is emptied when it reaches 4,096 sets."""
    isr = frozenset(replica_ids)
    shared = _SHARED_ISRS.get(isr)
    if shared is None:
        if len(_SHARED_ISRS) >= _SHARED_ISRS_KEPT:
            _SHARED_ISRS.clear()
        shared = _SHARED_ISRS[isr] = isr
    return shared


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows about one remote replica (Kafka's Replica / ReplicaState)."""

    broker_id: int
    log_start_offset: int = UNKNOWN_OFFSET
    log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0

    def update_fetch_state(
        self,
        fetch_offset: int,
        follower_start_offset: int,
        fetch_time_ms: int,
        leader_end_offset: int,
    ) -> None:
        """A fetch at ``fetch_offset``: the follower has everything below it.

        Caught up at ``fetch_time_ms`` if it reached the leader's current LEO; caught up at the
        previous fetch's time if it reached the LEO the leader had at that previous fetch.
        """
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = follower_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms

    def reset(self, now_ms: int, is_new_leader: bool, is_in_sync: bool) -> None:
        """On (re-)election: in-sync followers count as caught up now, the others not at all,
        so a replica outside the ISR never holds the HW back."""
        self.last_caught_up_time_ms = now_ms if is_in_sync else 0
        if is_new_leader:
            self.log_start_offset = UNKNOWN_OFFSET
            self.log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = 0

    def is_caught_up(
        self, leader_end_offset: int, now_ms: int, replica_lag_time_max_ms: int
    ) -> bool:
        return (
            leader_end_offset == self.log_end_offset
            or now_ms - self.last_caught_up_time_ms <= replica_lag_time_max_ms
        )


@dataclass(frozen=True, slots=True)
class OffsetTruncationState:
    offset: int
    truncation_completed: bool


def offset_truncation_state(
    leader_epoch_end: EpochEndOffset,
    local_end_offset_for_epoch: EpochEndOffset | None,
    log_end_offset: int,
    high_watermark: int,
) -> OffsetTruncationState:
    """Where a follower truncates given the leader's OffsetsForLeaderEpoch answer (KIP-101/279;
    Kafka's AbstractFetcherThread.getOffsetTruncationState).

    ``leader_epoch_end`` is the leader's (epoch, end offset) for the follower's latest epoch;
    ``local_end_offset_for_epoch`` the follower's own (epoch, end offset) for the largest epoch
    at or below the one the leader answered with. Without an answer from the leader (undefined
    end offset) the follower falls back to its HW. If the follower does not have the leader's
    epoch it truncates to its own end of the largest epoch below and asks again (not
    completed). With the same epoch on both sides it truncates to the smaller of the two ends
    of that epoch: the follower may have led a later epoch from its own end on, writing records
    the leader never had (KIP-279), so its log end alone is not enough. A follower with no
    epoch at or below the answered one takes the leader's end.
    """
    if leader_epoch_end.end_offset == UNKNOWN_OFFSET:
        return OffsetTruncationState(min(high_watermark, log_end_offset), True)
    if (
        leader_epoch_end.leader_epoch == NO_EPOCH
        or local_end_offset_for_epoch is None
        or local_end_offset_for_epoch.end_offset == UNKNOWN_OFFSET
    ):
        return OffsetTruncationState(min(leader_epoch_end.end_offset, log_end_offset), True)
    if local_end_offset_for_epoch.leader_epoch != leader_epoch_end.leader_epoch:
        return OffsetTruncationState(
            min(local_end_offset_for_epoch.end_offset, log_end_offset), False
        )
    return OffsetTruncationState(
        min(local_end_offset_for_epoch.end_offset, leader_epoch_end.end_offset, log_end_offset),
        True,
    )


@dataclass(slots=True)
class LeaderAppendResult:
    """Outcome of an append on the leader. For a retried batch ``duplicate`` is True and the
    offsets are those it was first written at."""

    first_offset: int
    last_offset: int
    log_append_time: int = -1
    log_start_offset: int = UNKNOWN_OFFSET
    duplicate: bool = False


@dataclass(slots=True)
class LogReadInfo:
    records: object
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    diverging_epoch: EpochEndOffset | None = None
    # read_committed reads: (producer_id, first_offset) of the aborted transactions overlapping
    # the records returned; None for the other isolation levels
    aborted_transactions: list[tuple[int, int]] | None = None


EMPTY_RECORDS = b""


def records_size(records: object) -> int:
    return 0 if records is None else len(records)  # type: ignore[arg-type]


def records_bytes(records: object) -> memoryview:
    """The bytes of a read result: storage slices expose ``view()``, bytes-likes are wrapped."""
    view = getattr(records, "view", None)
    return memoryview(view() if callable(view) else records)  # type: ignore[arg-type]


def whole_batches(records: object) -> object:
    """``records`` without a trailing partial batch (a read cut at its byte limit). Fetch
    responses carry whole batches only; a storage slice keeps its sendfile coordinates."""
    measure = getattr(records, "whole_batches_size", None)
    complete = measure() if measure is not None else -1
    if complete < 0:
        view = records_bytes(records)
        complete = complete_batches_length(view)
    else:
        view = None
    if complete == len(records):  # type: ignore[arg-type]
        return records
    if complete == 0:
        return EMPTY_RECORDS
    if hasattr(records, "size") and hasattr(records, "position"):
        trimmed = copy.copy(records)
        trimmed.size = complete
        return trimmed
    if view is None:
        view = records_bytes(records)
    return bytes(view[:complete])


def end_offset_for_epoch(log, epoch: int) -> EpochEndOffset | None:
    """Kafka's UnifiedLog.endOffsetForEpoch: the largest epoch <= ``epoch`` the log knows and
    the start offset of the epoch after it (the log end for the latest epoch); None when the
    log knows no such epoch."""
    found_epoch, found_offset = log.leader_epoch_cache.end_offset_for(epoch, log.log_end_offset)
    if found_offset == UNKNOWN_OFFSET:
        return None
    return EpochEndOffset(ErrorCode.NONE, found_epoch, found_offset)


def marker_coordinator_epochs(
    records: bytearray | memoryview, headers: list[RecordBatchHeader]
) -> dict[int, int] | None:
    """index of each control batch among ``headers`` -> its marker's coordinator epoch."""
    out: dict[int, int] = {}
    position = 0
    for i, header in enumerate(headers):
        if header.is_control and header.record_count > 0:
            _, control_records = decode_batch(records, position)
            out[i] = parse_end_txn_marker(control_records[0])[1]
        position += header.size
    return out or None


def marker_type(log, offset: int) -> ControlRecordType | None:
    """The type of the control record at ``offset`` (None when no control batch is there)."""
    info = log.read(offset, 256, None, True)
    data = records_bytes(info.records)
    if len(data) < LOG_OVERHEAD:
        return None
    header, records = decode_batch(bytes(data[: complete_batches_length(data)]))
    if not header.is_control or not records or header.base_offset != offset:
        return None
    return parse_control_record_type(records[0])


def aborted_txns_in(log, fetch_offset: int, records: object) -> list[tuple[int, int]]:
    """(producer_id, first_offset) of the aborted transactions a read_committed consumer must
    filter out of ``records`` read from ``fetch_offset`` (Kafka's
    addAbortedTransactions: up to the offset after the last batch returned)."""
    if not records_size(records):
        return []
    # the common case first: no aborted transaction from the fetch offset on (no header walk)
    if not log.has_aborted_txns_from(fetch_offset):
        return []
    last = None
    for _, header in iter_batch_headers(records_bytes(records)):
        last = header
    if last is None:
        return []
    aborted = log.collect_aborted_txns(fetch_offset, last.next_offset)
    return [(t.producer_id, t.first_offset) for t in aborted]


def iter_log_batch_headers(
    log, start_offset: int, chunk_bytes: int = _SCAN_CHUNK_BYTES
) -> Iterator[RecordBatchHeader]:
    """Batch headers of ``log`` from the batch containing ``start_offset`` to its end, read in
    ``chunk_bytes`` slices (a slice cut inside a batch is re-read from that batch)."""
    offset = max(start_offset, log.log_start_offset)
    while offset < log.log_end_offset:
        info = log.read(offset, chunk_bytes, None, True)
        data = records_bytes(info.records)
        data = data[: complete_batches_length(data)]
        if len(data) == 0:
            return
        last = None
        for _, header in iter_batch_headers(data):
            last = header
            yield header
        if last is None or last.next_offset <= offset:
            return
        offset = last.next_offset


class Partition:
    """A hosted partition (Kafka's cluster.Partition). See the module docstring for the rules."""

    def __init__(
        self,
        topic_partition: TopicPartition,
        local_broker_id: int,
        time: Time,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        producer_id_expiration_ms: int = 86_400_000,
    ) -> None:
        self.topic_partition = topic_partition
        self.local_broker_id = local_broker_id
        self.time = time
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.log = None
        self.producer_state: ProducerStateManager | None = None
        self.leader_replica_id: int | None = None
        self.leader_epoch = NO_EPOCH
        self.leader_epoch_start_offset: int | None = None
        self.zk_version = -1
        self.controller_epoch = -1
        self.assigned_replicas: tuple[int, ...] = ()
        self.adding_replicas: tuple[int, ...] = ()
        self.removing_replicas: tuple[int, ...] = ()
        self.isr: frozenset[int] = frozenset()
        self.pending_isr_update: LeaderAndIsr | None = None
        self.fenced_by_isr_conflict = False
        self.remote_replicas: dict[int, ReplicaState] = {}
        # Followers' fetch sessions that parked this partition (session -> follower id): told
        # once, then forgotten, when its LEO, HW, log start or leadership moves.
        self.news_watchers: dict[Any, int] = {}
        # The replica fetcher following this partition, told of every LEO/HW/log start move
        # (its next request carries the log start offset; it reads only what it is told of).
        self.fetch_state_listener: Callable[[TopicPartition], None] | None = None

    def watch_for_news(self, session: Any, replica_id: int) -> None:
        self.news_watchers[session] = replica_id

    def notify_news(self) -> None:
        """This partition's LEO, HW, log start or role moved: each session that parked it
        reads it again. While parked, a follower fetched in its session without reading it;
        Kafka would have recorded each of those fetches as caught up at the LEO it still
        has, so the follower's fetch and caught-up times move to its session's last fetch
        (what Kafka's last read would have left), before anything looks at them."""
        listener = self.fetch_state_listener
        if listener is not None:
            listener(self.topic_partition)
        watchers = self.news_watchers
        if not watchers:
            return
        self.news_watchers = {}
        tp = self.topic_partition
        replicas = self.remote_replicas
        for session, replica_id in watchers.items():
            if session.unpark(tp):
                self._fetched_while_parked(replicas.get(replica_id), session.last_used_ms)

    def parked_session_forgot(self, session: Any) -> None:
        """A session that parked this partition no longer fetches it (its follower forgot it):
        until its last fetch it fetched it in every request without reading it, so the
        follower's fetch and caught-up times move to that fetch, as Kafka's last read of it
        would have left them (else the partition's next news would find them as old as the
        parking, and the follower out of the ISR)."""
        replica_id = self.news_watchers.pop(session, None)
        if replica_id is not None:
            self._fetched_while_parked(self.remote_replicas.get(replica_id), session.last_used_ms)

    @staticmethod
    def _fetched_while_parked(replica: ReplicaState | None, last: int) -> None:
        if replica is not None:
            if last > replica.last_fetch_time_ms:
                replica.last_fetch_time_ms = last
            if last > replica.last_caught_up_time_ms:
                replica.last_caught_up_time_ms = last

    # -- role ---------------------------------------------------------------------------------

    @property
    def topic(self) -> str:
        return self.topic_partition.topic

    @property
    def partition_id(self) -> int:
        return self.topic_partition.partition

    @property
    def is_leader(self) -> bool:
        return self.leader_replica_id == self.local_broker_id and not self.fenced_by_isr_conflict

    @property
    def maximal_isr(self) -> frozenset[int]:
        if self.pending_isr_update is None:
            return self.isr
        return self.isr | frozenset(self.pending_isr_update.isr)

    @property
    def in_sync_replica_ids(self) -> frozenset[int]:
        return self.isr

    @property
    def is_under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.assigned_replicas)

    @property
    def is_under_min_isr(self) -> bool:
        return (
            self.is_leader
            and self.log is not None
            and (len(self.isr) < self.log.config.min_insync_replicas)
        )

    def attach_log(self, log) -> None:
        """Adopt the local log (created or loaded by the LogManager) and rebuild the producer
        state from its snapshots and batch headers."""
        if self.log is log:
            return
        self.log = log
        if hasattr(log, "news_listener"):
            log.news_listener = self  # the partition itself: no bound method per log
        if self.fetch_state_listener is not None:
            self.fetch_state_listener(self.topic_partition)  # another log, another log start
        # The directory as a str: a loaded Log makes its Path only when asked for (a Path per
        # partition here was a quarter of a restart's LeaderAndIsr on the loop).
        log_dir = getattr(log, "dir_str", None)
        if log_dir is None:
            log_dir = getattr(log, "dir", None)
        self.producer_state = ProducerStateManager(
            str(self.topic_partition), log_dir, self.producer_id_expiration_ms
        )
        if getattr(log, "empty_without_snapshots", False) and log.log_end_offset == 0:
            return  # a log this process just created: no snapshot, no batch to replay
        self.reload_producer_state()

    def reload_producer_state(self) -> None:
        log = self.log
        assert log is not None and self.producer_state is not None
        self.producer_state.truncate_and_reload(
            log.log_start_offset,
            log.log_end_offset,
            lambda offset: iter_log_batch_headers(log, offset),
        )
        # markers replayed past the snapshot: their aborted transactions are indexed again
        # (an entry already in the .txnindex is not appended twice)
        self._index_completed_txns()

    # -- transactions -------------------------------------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of the oldest open transaction, HW) (Kafka's LSO)."""
        log = self.log
        assert log is not None
        hw = log.high_watermark
        first_unstable = self.producer_state.first_unstable_offset if self.producer_state else None
        return hw if first_unstable is None else min(first_unstable, hw)

    def _index_completed_txns(self) -> None:
        """Add the transactions that markers just aborted to the log's aborted-transaction
        index (the marker is read back from the log: only its key tells commit from abort)."""
        state = self.producer_state
        log = self.log
        if state is None or log is None or not state.completed_txns:
            return
        for completed in state.take_completed_txns():
            if marker_type(log, completed.last_offset) is ControlRecordType.ABORT:
                log.append_aborted_txn(
                    AbortedTxn(
                        completed.producer_id,
                        completed.first_offset,
                        completed.last_offset,
                        state.last_stable_offset_after(completed),
                    )
                )

    def _update_assignment_and_isr(
        self, state: LeaderAndIsrPartitionState, track_remote: bool = True
    ) -> None:
        """The replicas and ISR of ``state``; a leader (``track_remote``) keeps a ReplicaState
        per remote replica, a follower none."""
        replicas = tuple(state.replicas)
        unchanged = replicas == self.assigned_replicas
        self.assigned_replicas = replicas
        self.adding_replicas = tuple(state.adding_replicas)
        self.removing_replicas = tuple(state.removing_replicas)
        self.isr = shared_isr(state.isr)
        self.pending_isr_update = None
        if not track_remote:
            self.remote_replicas.clear()
            return
        if unchanged and len(self.remote_replicas) == len(replicas) - (
            self.local_broker_id in replicas
        ):
            # The same assignment (an ISR change, a new leader among the same replicas): each
            # remote replica already has its state (the common case of a failover's requests).
            return
        for rid in list(self.remote_replicas):
            if rid not in self.assigned_replicas:
                del self.remote_replicas[rid]
        for rid in self.assigned_replicas:
            if rid != self.local_broker_id and rid not in self.remote_replicas:
                self.remote_replicas[rid] = ReplicaState(rid)

    def make_leader(self, state: LeaderAndIsrPartitionState, log) -> bool:
        """Become (or stay) leader for ``state``; returns True if this broker was not leader.

        The new epoch is recorded in the leader epoch cache at the current LEO, so a follower
        with entries from an epoch the new leader never saw learns where to truncate.
        """
        self.notify_news()
        self.fetch_state_listener = None  # nothing follows it here any more
        self.attach_log(log)
        is_new_leader = (
            self.leader_replica_id != self.local_broker_id or self.fenced_by_isr_conflict
        )
        self.controller_epoch = state.controller_epoch
        self._update_assignment_and_isr(state)
        now = self.time.milliseconds()
        if state.leader_epoch != self.leader_epoch or is_new_leader:
            self.leader_epoch_start_offset = log.log_end_offset
            log.leader_epoch_cache.assign(state.leader_epoch, log.log_end_offset)
        self.leader_epoch = state.leader_epoch
        self.zk_version = state.zk_version
        for rid, replica in self.remote_replicas.items():
            replica.reset(now, is_new_leader, rid in self.isr)
        self.leader_replica_id = self.local_broker_id
        self.fenced_by_isr_conflict = False
        self.maybe_increment_leader_hw(now)
        return is_new_leader

    def make_follower(self, state: LeaderAndIsrPartitionState, log) -> bool:
        """Become (or stay) follower of ``state.leader``; returns True when the leader or the
        leader epoch changed (the fetcher must be (re)started and truncation re-run)."""
        self.notify_news()
        self.attach_log(log)
        self.controller_epoch = state.controller_epoch
        self._update_assignment_and_isr(state, track_remote=False)
        is_new_epoch = state.leader_epoch > self.leader_epoch
        if is_new_epoch:
            self.leader_epoch_start_offset = None
        self.leader_epoch = state.leader_epoch
        self.zk_version = state.zk_version
        self.fenced_by_isr_conflict = False
        if self.leader_replica_id == state.leader and not is_new_epoch:
            return False
        self.leader_replica_id = state.leader
        return True

    def make_offline(self) -> None:
        self.notify_news()
        log = self.log
        if log is not None and getattr(log, "news_listener", None) is self:
            # The log no longer tells this partition: the two made a reference cycle, and a
            # dropped partition must be freed by reference counting (a frozen cycle never is).
            log.news_listener = None
        self.fetch_state_listener = None
        self.leader_replica_id = None
        self.remote_replicas.clear()
        self.pending_isr_update = None

    # -- epoch fencing ------------------------------------------------------------------------

    def check_current_leader_epoch(self, current_leader_epoch: int) -> None:
        if current_leader_epoch == NO_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"The leader epoch in the request ({current_leader_epoch}) is older than the "
                f"current leader epoch {self.leader_epoch} of {self.topic_partition}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"The leader epoch in the request ({current_leader_epoch}) is newer than the "
                f"current leader epoch {self.leader_epoch} of {self.topic_partition}"
            )

    def local_log_with_epoch_or_raise(self, current_leader_epoch: int, require_leader: bool):
        self.check_current_leader_epoch(current_leader_epoch)
        if require_leader and not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"Leader not local for partition {self.topic_partition} on broker "
                f"{self.local_broker_id}"
            )
        if self.log is None:
            raise NotLeaderOrFollowerError(
                f"Log for partition {self.topic_partition} is not available on broker "
                f"{self.local_broker_id}"
            )
        return self.log

    def leader_log_or_raise(self):
        return self.local_log_with_epoch_or_raise(NO_EPOCH, True)

    # -- produce ------------------------------------------------------------------------------

    def append_records_to_leader(
        self,
        records: bytearray | memoryview,
        origin: AppendOrigin,
        required_acks: int,
    ) -> LeaderAppendResult:
        """Append ``records`` as leader: idempotence checks, then the log, then the HW.

        Raises KafkaError subclasses (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
        OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, CORRUPT_MESSAGE, INVALID_RECORD,
        MESSAGE_TOO_LARGE, storage errors); the replica manager turns them into error codes.
        """
        log = self.leader_log_or_raise()
        min_isr = log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {sorted(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {min_isr} for partition {self.topic_partition}"
            )
        producer_state = self.producer_state
        assert producer_state is not None
        # One validation pass (CRC, magic, lengths, max.message.bytes); the log reuses it.
        headers = validate_batches(
            records,
            origin_client=origin is AppendOrigin.CLIENT,
            max_batch_size=log.config.max_message_bytes,
        )
        if not headers:
            raise InvalidRecordError(f"Empty record set in produce to {self.topic_partition}")
        if log.config.compact and (keyless := records_without_key(records, headers)):
            # Kafka's LogValidator.validateKey: the only produce check that reads records, and
            # only for compacted topics (the cleaner could not keep a keyless record). Each
            # refused record is named in the response's record_errors (KIP-467).
            message = (
                "Compacted topic cannot accept message without key in topic partition "
                f"{self.topic_partition}."
            )
            raise RecordValidationError([RecordError(i, message) for i in keyless])
        first_offset = log.log_end_offset
        coordinator_epochs = (
            marker_coordinator_epochs(records, headers)
            if origin is AppendOrigin.COORDINATOR
            else None
        )
        infos, duplicate = producer_state.prepare(headers, first_offset, origin, coordinator_epochs)
        if duplicate is not None:
            return LeaderAppendResult(
                duplicate.first_offset,
                duplicate.last_offset,
                -1,
                log.log_start_offset,
                duplicate=True,
            )
        info = log.append_as_leader(
            records,
            self.leader_epoch,
            origin_client=origin is AppendOrigin.CLIENT,
            validated=headers,
        )
        if info.first_offset != first_offset:
            raise AssertionError(
                f"{self.topic_partition}: log assigned {info.first_offset}, expected {first_offset}"
            )
        producer_state.apply(infos.values(), log.log_end_offset)
        self._index_completed_txns()
        self.maybe_increment_leader_hw(self.time.milliseconds())
        return LeaderAppendResult(
            info.first_offset,
            info.last_offset,
            info.log_append_time,
            log.log_start_offset,
        )

    def append_records_to_follower(self, records: bytearray | memoryview):
        """Append what the leader sent (offsets from the batches) and follow its producer state."""
        log = self.log
        if log is None:
            raise NotLeaderOrFollowerError(f"No log for {self.topic_partition}")
        info = log.append_as_follower(records)
        assert self.producer_state is not None
        # The headers of what was appended (a trailing partial batch is dropped by the log).
        self.producer_state.load_batches(info.batches)
        self.producer_state.update_map_end_offset(log.log_end_offset)
        self._index_completed_txns()
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's HW is the leader's, bounded by what it has: min(leader HW, LEO)."""
        log = self.log
        assert log is not None
        log.high_watermark = min(leader_high_watermark, log.log_end_offset)

    def maybe_advance_log_start_offset(self, leader_log_start_offset: int) -> None:
        """Follow the leader's log start offset (retention or DeleteRecords on the leader), as
        far as this replica's HW allows."""
        log = self.log
        assert log is not None
        target = min(leader_log_start_offset, log.high_watermark)
        if target > log.log_start_offset:
            log.delete_records_before(target)
            if self.producer_state is not None:
                self.producer_state.truncate_head(log.log_start_offset)

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For a waiting acks=all produce: (done, error)."""
        if not self.is_leader or self.log is None:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if self.log.config.min_insync_replicas <= len(self.isr):
                return True, ErrorCode.NONE
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, ErrorCode.NONE

    # -- high watermark and ISR ---------------------------------------------------------------

    def maybe_increment_leader_hw(self, now_ms: int) -> bool:
        """Move the HW to min LEO over the maximal ISR if that is higher; True if it moved."""
        log = self.log
        if log is None or not self.is_leader:
            return False
        new_hw = log.log_end_offset
        for rid in self.maximal_isr:
            if rid == self.local_broker_id:
                continue
            replica = self.remote_replicas.get(rid)
            end = replica.log_end_offset if replica is not None else UNKNOWN_OFFSET
            if end < new_hw:
                new_hw = end
        if new_hw > log.high_watermark:
            log.high_watermark = new_hw
            return True
        return False

    def update_follower_fetch_state(
        self,
        replica_id: int,
        fetch_offset: int,
        follower_start_offset: int,
        fetch_time_ms: int,
        leader_end_offset: int,
    ) -> bool:
        """Record a follower fetch; returns False when the replica is not assigned here."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None:
            return False
        replica.update_fetch_state(
            fetch_offset, follower_start_offset, fetch_time_ms, leader_end_offset
        )
        return True

    def _is_follower_in_sync(self, replica: ReplicaState) -> bool:
        log = self.log
        assert log is not None
        return replica.log_end_offset >= log.high_watermark and (
            self.leader_epoch_start_offset is not None
            and replica.log_end_offset >= self.leader_epoch_start_offset
        )

    def maybe_expand_isr(self, replica_id: int) -> LeaderAndIsr | None:
        """A proposal adding ``replica_id`` to the ISR, or None. Sets the pending update."""
        if not self.is_leader or self.pending_isr_update is not None:
            return None
        if replica_id in self.isr or replica_id not in self.assigned_replicas:
            return None
        replica = self.remote_replicas.get(replica_id)
        if replica is None or not self._is_follower_in_sync(replica):
            return None
        return self._prepare_isr_update(self.isr | {replica_id})

    def out_of_sync_replica_ids(self, now_ms: int) -> set[int]:
        log = self.log
        assert log is not None
        leader_end = log.log_end_offset
        out = set()
        for rid in self.isr:
            if rid == self.local_broker_id:
                continue
            replica = self.remote_replicas.get(rid)
            if replica is None or not replica.is_caught_up(
                leader_end, now_ms, self.replica_lag_time_max_ms
            ):
                out.add(rid)
        return out

    def maybe_shrink_isr(self, now_ms: int | None = None) -> LeaderAndIsr | None:
        """A proposal removing the followers lagging more than replica.lag.time.max.ms."""
        if not self.is_leader or self.pending_isr_update is not None or self.log is None:
            return None
        now = self.time.milliseconds() if now_ms is None else now_ms
        out = self.out_of_sync_replica_ids(now)
        if not out:
            return None
        return self._prepare_isr_update(self.isr - out)

    def _prepare_isr_update(self, new_isr: frozenset[int] | set[int]) -> LeaderAndIsr:
        proposal = LeaderAndIsr(
            self.local_broker_id, self.leader_epoch, tuple(sorted(new_isr)), self.zk_version
        )
        self.pending_isr_update = proposal
        return proposal

    def complete_isr_update(self, proposal: LeaderAndIsr, new_zk_version: int | None) -> bool:
        """Apply the result of writing ``proposal``: the node's new version, or None when the
        compare-and-set failed. Returns True if the HW moved. A result for a proposal that is
        no longer pending (a LeaderAndIsr arrived meanwhile) is ignored."""
        if self.pending_isr_update is not proposal:
            return False
        self.pending_isr_update = None
        if new_zk_version is None:
            self.fenced_by_isr_conflict = True
            self.notify_news()  # no longer leader: its followers must hear it
            return False
        self.isr = shared_isr(proposal.isr)
        self.zk_version = new_zk_version
        return self.maybe_increment_leader_hw(self.time.milliseconds())

    def abort_isr_update(self, proposal: LeaderAndIsr) -> None:
        """The write could not be made (store unreachable): forget it, retry on a later check."""
        if self.pending_isr_update is proposal:
            self.pending_isr_update = None

    @property
    def low_watermark_if_leader(self) -> int:
        """Min log start offset over the replicas that are in sync or known (DeleteRecords)."""
        log = self.leader_log_or_raise()
        low = log.log_start_offset
        for rid, replica in self.remote_replicas.items():
            if rid in self.isr or replica.log_end_offset != UNKNOWN_OFFSET:
                if replica.log_start_offset != UNKNOWN_OFFSET:
                    low = min(low, replica.log_start_offset)
                elif rid in self.isr:
                    low = min(low, UNKNOWN_OFFSET)
        return low

    # -- reads --------------------------------------------------------------------------------

    def read_records(
        self,
        fetch_offset: int,
        current_leader_epoch: int,
        max_bytes: int,
        isolation: FetchIsolation,
        fetch_only_from_leader: bool,
        min_one_message: bool,
        last_fetched_epoch: int = NO_EPOCH,
    ) -> LogReadInfo:
        """Read whole batches from ``fetch_offset``: up to the LEO for followers, up to the HW
        for consumers. Raises OffsetOutOfRangeError outside [log start, LEO]."""
        log = self.local_log_with_epoch_or_raise(current_leader_epoch, fetch_only_from_leader)
        hw = log.high_watermark
        log_start = log.log_start_offset
        leo = log.log_end_offset
        if last_fetched_epoch != NO_EPOCH and last_fetched_epoch >= 0:
            # Kafka's Partition.readRecords: an epoch this log cannot place and an offset below
            # the log start are out of range (the fetcher resets), before any divergence.
            epoch_end = end_offset_for_epoch(log, last_fetched_epoch)
            if epoch_end is None:
                raise OffsetOutOfRangeError(
                    "Could not determine the end offset of the last fetched epoch "
                    f"{last_fetched_epoch} from the request"
                )
            if fetch_offset >= log_start and (
                epoch_end.leader_epoch < last_fetched_epoch or epoch_end.end_offset < fetch_offset
            ):
                return LogReadInfo(EMPTY_RECORDS, hw, hw, log_start, leo, epoch_end)
        if fetch_offset < log_start or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"Received request for offset {fetch_offset} for partition "
                f"{self.topic_partition}, but we only have log segments in the range "
                f"{log_start} to {leo}."
            )
        lso = self.last_stable_offset
        if isolation is FetchIsolation.LOG_END:
            max_offset = leo
        elif isolation is FetchIsolation.TXN_COMMITTED:
            max_offset = lso
        else:
            max_offset = hw
        if fetch_offset >= max_offset or max_bytes <= 0 and not min_one_message:
            records: object = EMPTY_RECORDS
        else:
            read = log.read(fetch_offset, max_bytes, max_offset, min_one_message).records
            if read is None:
                records = EMPTY_RECORDS
            elif len(read) >= max_bytes:
                records = whole_batches(read)
            else:
                records = read
        aborted = None
        if isolation is FetchIsolation.TXN_COMMITTED:
            aborted = aborted_txns_in(log, fetch_offset, records)
        return LogReadInfo(records, hw, lso, log_start, leo, aborted_transactions=aborted)

    # -- offsets ------------------------------------------------------------------------------

    def fetch_offset_for_timestamp(
        self,
        timestamp: int,
        isolation: FetchIsolation | None,
        current_leader_epoch: int,
        fetch_only_from_leader: bool,
    ) -> ListOffsetResult:
        """ListOffsets for one partition (Kafka's Partition.fetchOffsetForTimestamp).

        ``isolation`` None means a follower / debug request reading to the LEO. Raises
        KafkaError subclasses on epoch / leadership errors and OFFSET_NOT_AVAILABLE while a new
        leader's HW is still below the start of its epoch.
        """
        log = self.local_log_with_epoch_or_raise(current_leader_epoch, fetch_only_from_leader)
        if isolation is None or isolation is FetchIsolation.LOG_END:
            last_fetchable = log.log_end_offset
        elif isolation is FetchIsolation.TXN_COMMITTED:
            last_fetchable = self.last_stable_offset
        else:
            last_fetchable = log.high_watermark
        offsets_error: KafkaError | None = None
        if (
            isolation is not None
            and self.leader_epoch_start_offset is not None
            and log.high_watermark < self.leader_epoch_start_offset
        ):
            offsets_error = OffsetNotAvailableError(
                f"Failed to fetch offsets for partition {self.topic_partition} with leader "
                f"epoch {self.leader_epoch} as this partition's high watermark "
                f"({log.high_watermark}) is lagging behind the start offset from the beginning "
                f"of this epoch ({self.leader_epoch_start_offset})."
            )
        if timestamp == LATEST_TIMESTAMP:
            if offsets_error is not None:
                raise offsets_error
            return ListOffsetResult(ErrorCode.NONE, -1, last_fetchable, self.leader_epoch)
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            # Without tiered storage the local log start is the log start.
            start = log.log_start_offset
            return ListOffsetResult(ErrorCode.NONE, -1, start, self._epoch_for_offset(log, start))
        if timestamp == LATEST_TIERED_TIMESTAMP:
            # Kafka's answer when no offset is in remote storage.
            return ListOffsetResult(ErrorCode.NONE, -1, -1, NO_EPOCH)
        # The log answers MAX_TIMESTAMP (-3) itself: the record with the largest timestamp.
        found = log.offset_for_timestamp(timestamp)
        if found is not None and found[0] >= last_fetchable:
            found = None
        if found is None:
            if offsets_error is not None:
                raise offsets_error
            return ListOffsetResult(ErrorCode.NONE, -1, UNKNOWN_OFFSET, NO_EPOCH)
        offset, ts = found
        return ListOffsetResult(ErrorCode.NONE, ts, offset, self._epoch_for_offset(log, offset))

    @staticmethod
    def _epoch_for_offset(log, offset: int) -> int:
        epoch_for = getattr(log.leader_epoch_cache, "epoch_for_offset", None)
        if epoch_for is None:
            return NO_EPOCH
        epoch = epoch_for(offset)
        return NO_EPOCH if epoch is None else epoch

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int, fetch_only_from_leader: bool
    ) -> EpochEndOffset:
        """OffsetsForLeaderEpoch: (largest epoch <= ``leader_epoch``, its end offset)."""
        try:
            log = self.local_log_with_epoch_or_raise(current_leader_epoch, fetch_only_from_leader)
        except KafkaError as e:
            return EpochEndOffset(e.error_code)
        found = end_offset_for_epoch(log, leader_epoch)
        return found if found is not None else EpochEndOffset(ErrorCode.NONE)

    # -- truncation (follower) ----------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop everything at and above ``offset`` and rebuild the producer state."""
        log = self.log
        assert log is not None
        if offset < log.log_end_offset:
            log.truncate_to(offset)  # the log also truncates its leader epoch cache
            self.reload_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        log = self.log
        assert log is not None
        log.truncate_fully_and_start_at(offset)
        self.reload_producer_state()

    def truncate_to_leader_epoch(self, leader_epoch_end: EpochEndOffset) -> OffsetTruncationState:
        """Follower truncation from the leader's OffsetsForLeaderEpoch answer (KIP-101)."""
        log = self.log
        assert log is not None
        local = (
            end_offset_for_epoch(log, leader_epoch_end.leader_epoch)
            if leader_epoch_end.leader_epoch != NO_EPOCH
            else None
        )
        state = offset_truncation_state(
            leader_epoch_end, local, log.log_end_offset, log.high_watermark
        )
        self.truncate_to(state.offset)
        return state

    # -- delete records -----------------------------------------------------------------------

    def delete_records_on_leader(self, offset: int) -> int:
        """Advance the log start offset to ``offset`` (-1: the HW); returns the low watermark.

        Raises POLICY_VIOLATION on a compact-only topic, OFFSET_OUT_OF_RANGE for an offset
        beyond the HW or negative."""
        log = self.leader_log_or_raise()
        if not log.config.delete:
            raise PolicyViolationError(
                f"Records of partition {self.topic_partition} can not be deleted due to the "
                "configured policy"
            )
        converted = log.high_watermark if offset == -1 else offset
        if converted < 0:
            raise OffsetOutOfRangeError(
                f"The offset {converted} for partition {self.topic_partition} is not valid"
            )
        if converted > log.high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {converted} of partition "
                f"{self.topic_partition} since it is larger than the high watermark "
                f"{log.high_watermark}"
            )
        if converted > log.log_start_offset:
            log.delete_records_before(converted)  # also trims the leader epoch cache
            if self.producer_state is not None:
                self.producer_state.truncate_head(log.log_start_offset)
        return self.low_watermark_if_leader
