"""The replica manager: every partition this broker hosts, and the operations handlers call.

Request handlers (``kafkalite/apis/``) call:

- ``append_records`` (Produce; also the group coordinator for ``__consumer_offsets``)
- ``fetch_messages`` (Fetch, from consumers and from follower replicas)
- ``list_offset`` (ListOffsets), ``last_offset_for_leader_epoch`` (OffsetForLeaderEpoch),
  ``delete_records`` (DeleteRecords)
- ``become_leader_or_follower_async`` (LeaderAndIsr), ``stop_replicas_async`` (StopReplica)

Per-partition failures come back as error codes in the results, never as exceptions.

Waiting requests live in purgatories keyed by ``TopicPartition``:

- acks=all produce waits until the high watermark passes its last offset (or it times out with
  REQUEST_TIMED_OUT);
- a fetch with ``max_wait_ms`` waits until ``min_bytes`` are readable, an error shows up, or the
  wait expires. A consumer can read up to the HW, a follower up to the LEO.

Every state change that can satisfy a waiter re-checks the waiters of that partition at once
(``_complete_delayed_requests``): a local append (LEO moved; on a single-replica ISR the HW too),
a follower fetch that moved the HW, a committed ISR change that moved it (produces are
re-checked on every committed ISR change), a leadership change. A waiting fetch
is therefore answered as soon as the data is there, not when ``max_wait_ms`` runs out.

ISR changes decided by partitions are written through the injected ``alter_isr`` callback
(compare-and-set of the partition state node plus an ISR change notification:
``zk.client.update_leader_and_isr``); see ``partition.py`` for the rules. With
``alter_isr_batch`` too (a server), the changes proposed meanwhile are written together by one
flusher task, up to 500 per multi with one notification (``zk.writes.update_leader_and_isr_batch``),
the ones proposed during a write in the next batch; a batch in which any compare-and-set fails
writes nothing and its partitions are written one by one, so only those whose state moved on
stop acting as leader.
Without a callback (single node, tests) a change commits locally.

As follower, partitions are replicated by a ``ReplicaFetcherManager`` (``replica_fetcher.py``,
attached with ``enable_replica_fetchers``): LeaderAndIsr starts a fetch (with KIP-101
truncation first) for every partition whose leader or leader epoch changed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from kafkalite.broker.clock import SYSTEM_TIME, Time
from kafkalite.broker.partition import (
    DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    EMPTY_RECORDS,
    Partition,
    records_size,
)
from kafkalite.broker.producer_state import AppendOrigin, ProducerStateManager
from kafkalite.broker.purgatory import DelayedOperation, DelayedOperationPurgatory
from kafkalite.broker.replica_selector import ReplicaView, preferred_read_replica
from kafkalite.broker.types import (
    CONSUMER_REPLICA_ID,
    DEBUGGING_REPLICA_ID,
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    UNKNOWN_OFFSET,
    DeleteRecordsResult,
    EpochEndOffset,
    FetchInfo,
    FetchIsolation,
    FetchParams,
    FetchPartitionData,
    IsolationLevel,
    LeaderAndIsrPartitionState,
    LeaderAndIsrResult,
    ListOffsetResult,
    PartitionStatus,
    ProduceResult,
    StopReplicaPartitionState,
    StopReplicaResult,
)
from kafkalite.observability import TopicStats
from kafkalite.protocol.errors import (
    ErrorCode,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.loop_slices import SLICE_ITEMS, SLICE_SECONDS, LoopSlices
from kafkalite.zk.types import LeaderAndIsr, LeaderIsrAndControllerEpoch
from kafkalite.zk.writes import ISR_BATCH_MAX_PARTITIONS

log = structlog.get_logger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

AlterIsr = Callable[[TopicPartition, LeaderIsrAndControllerEpoch], Awaitable[int | None]]
"""Write the state to the partition state node if its version is still
``leader_and_isr.zk_version``; return the new version, or None when the compare-and-set
failed (``zk.client.update_leader_and_isr``)."""
AlterIsrBatch = Callable[
    [dict[TopicPartition, LeaderIsrAndControllerEpoch]],
    Awaitable[dict[TopicPartition, int] | None],
]
"""Writes the ISR changes of many partitions at once, all or none
(``zk.writes.update_leader_and_isr_batch``, at most its ``ISR_BATCH_MAX_PARTITIONS``): their
new versions, or None when a compare-and-set failed and nothing was written (each is then
written alone through ``AlterIsr``)."""


class LogManager(Protocol):
    """What the replica manager needs from storage (``kafkalite.storage.log_manager.LogManager``,
    Kafka's LogManager)."""

    log_dir_failure_listeners: list[Callable[[str], None]]
    """Told the path of a log directory that failed."""
    partition_failure_listeners: list[Callable[[str, int], None]]
    """Told ``(topic, partition)`` of a single log that failed."""

    def get_log(self, topic: str, partition: int) -> Any | None: ...

    def get_or_create_log(
        self, topic: str, partition: int, config: Any = None, is_new: bool = True
    ) -> Any: ...

    async def create_logs(
        self, specs: list[tuple[str, int, Any, bool]], batch_size: int = 500
    ) -> dict[tuple[str, int], BaseException]:
        """``get_or_create_log`` for many ``(topic, partition, config, is_new)``; the failures."""
        ...

    def is_missing(self, topic: str, partition: int) -> bool:
        """True if the partition's directory vanished under the broker."""
        ...

    def delete_log(self, topic: str, partition: int, *, remove_files: bool = True) -> Any: ...

    async def delete_logs(
        self, keys: list[tuple[str, int]], batch_size: int = 500
    ) -> Mapping[tuple[str, int], BaseException] | None:
        """``delete_log`` for many, file work off the event loop; the failures by partition."""
        ...


class ReplicaFetcherManager(Protocol):
    """What the replica manager needs from the follower side (replica fetchers)."""

    def add_fetcher_for_partitions(
        self, partitions: Mapping[TopicPartition, tuple[int, int]]
    ) -> None:
        """Start fetching each partition from (leader broker id, fetch offset)."""
        ...

    def remove_fetcher_for_partitions(self, partitions: Iterable[TopicPartition]) -> None: ...


@dataclass(frozen=True, slots=True)
class ReplicaManagerConfig:
    replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS
    producer_id_expiration_ms: int = 86_400_000
    producer_id_expiration_check_interval_ms: int = 600_000
    replica_selector_class: str | None = None

    @classmethod
    def from_broker_config(cls, config: Any) -> ReplicaManagerConfig:
        """Take the fields from a broker config object using Kafka's names (snake_case)."""
        defaults = cls()
        return cls(
            replica_lag_time_max_ms=getattr(
                config, "replica_lag_time_max_ms", defaults.replica_lag_time_max_ms
            ),
            producer_id_expiration_ms=getattr(
                config, "producer_id_expiration_ms", defaults.producer_id_expiration_ms
            ),
            producer_id_expiration_check_interval_ms=getattr(
                config,
                "producer_id_expiration_check_interval_ms",
                defaults.producer_id_expiration_check_interval_ms,
            ),
            replica_selector_class=getattr(config, "replica_selector_class", None),
        )


INLINE_LOG_CREATIONS = 16
"""Up to this many new logs a LeaderAndIsr creates on the event loop (about 0.1-0.3 ms each);
more are created in a worker thread."""

LEADER_AND_ISR_SLICE = 500
"""Partitions handled between two yields to the event loop by the bulk LeaderAndIsr and
StopReplica paths at most (about 40 ms of work for 500 new partitions here)..."""

LEADER_AND_ISR_SLICE_SECONDS = SLICE_SECONDS
"""... and at most this much wall time between two yields (5 ms, 60 new partitions here)."""

STOP_REPLICA_CHUNK = 100
"""Partitions a StopReplica stops between two yields at most."""

FETCH_SLICE_PARTITIONS = 200
"""A fetch of more partitions than this (a follower's first fetch of a session, a follower told
the news of thousands of partitions at once, a consumer of many partitions) is read, and a
follower's fetch state updated, in slices that yield to the loop (``_fetch_messages_in_slices``);
its waiting reads too (``DelayedSlicedFetch``). Up to this many are read in one go: about 5 ms
at the 15-30 µs a partition costs a follower's fetch here, so small fetches keep their path."""

FETCH_SLICE_CHUNK = 25
"""Partitions read (and their follower state updated) between two looks at the slice's clock;
a slice ends after ``SLICE_SECONDS`` or 20 chunks (500 partitions)."""


def _error_result_code_or_storage(exc: BaseException) -> ErrorCode:
    """A log creation failure: a Kafka error keeps its code, anything else from storage is
    KAFKA_STORAGE_ERROR."""
    if isinstance(exc, KafkaError):
        return exc.error_code
    return ErrorCode.KAFKA_STORAGE_ERROR


def _error_result_code(exc: BaseException) -> ErrorCode:
    if isinstance(exc, KafkaError):
        return exc.error_code
    if isinstance(exc, OSError):
        return ErrorCode.KAFKA_STORAGE_ERROR
    raise exc


@dataclass(slots=True)
class _ProducePartitionStatus:
    required_offset: int
    result: ProduceResult
    acks_pending: bool


class DelayedProduce(DelayedOperation):
    """An acks=all produce: done when the HW of every appended partition reached its
    ``required_offset`` (last offset + 1), or an error shows up, or it times out."""

    def __init__(
        self,
        delay_ms: int,
        status: dict[TopicPartition, _ProducePartitionStatus],
        replica_manager: ReplicaManager,
    ) -> None:
        super().__init__(delay_ms)
        self.status = status
        self.replica_manager = replica_manager

    def try_complete(self) -> bool:
        for tp, status in self.status.items():
            if not status.acks_pending:
                continue
            partition = self.replica_manager.online_partition(tp)
            if partition is None:
                done, error = True, ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                done, error = partition.check_enough_replicas_reach_offset(status.required_offset)
            if done or error is not ErrorCode.NONE:
                status.acks_pending = False
                status.result.error_code = error
                if error is not ErrorCode.NONE:
                    status.result.base_offset = UNKNOWN_OFFSET
                    status.result.error_message = None
        if any(s.acks_pending for s in self.status.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for status in self.status.values():
            if status.acks_pending:  # timed out
                status.result.error_code = ErrorCode.REQUEST_TIMED_OUT
                status.result.base_offset = UNKNOWN_OFFSET
        if not self.future.done():
            self.future.set_result({tp: s.result for tp, s in self.status.items()})


class DelayedFetch(DelayedOperation):
    """A fetch waiting for ``min_bytes``. It completes when a read of its partitions returns
    at least ``min_bytes``, or any partition errors or diverges, or on timeout (with whatever
    is there then)."""

    def __init__(
        self,
        delay_ms: int,
        params: FetchParams,
        fetch_infos: dict[TopicPartition, FetchInfo],
        replica_manager: ReplicaManager,
    ) -> None:
        super().__init__(delay_ms)
        self.params = params
        self.fetch_infos = fetch_infos
        self.replica_manager = replica_manager
        self._result: dict[TopicPartition, FetchPartitionData] | None = None

    def _anything_new(self) -> bool:
        """Cheap pre-check for the common min_bytes=1 case: an offset beyond every fetch
        offset, or a state that will produce an error, without reading the log."""
        isolation = self.params.isolation
        for tp, info in self.fetch_infos.items():
            partition = self.replica_manager.online_partition(tp)
            if partition is None or partition.log is None:
                return True
            if self.params.fetch_only_from_leader and not partition.is_leader:
                return True
            if info.current_leader_epoch not in (NO_EPOCH, partition.leader_epoch):
                return True
            log_ = partition.log
            if isolation is FetchIsolation.LOG_END:
                end = log_.log_end_offset
            elif isolation is FetchIsolation.TXN_COMMITTED:
                end = partition.last_stable_offset
            else:
                end = log_.high_watermark
            if info.fetch_offset != end:
                return True
        return False

    def try_complete(self) -> bool:
        if not self._anything_new():
            return False
        result = self.replica_manager.read_from_local_log(self.params, self.fetch_infos)
        if _fetch_satisfied(result, self.params.min_bytes):
            self._result = result
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if self.future.done():
            return
        result = self._result
        if result is None:
            result = self.replica_manager.read_from_local_log(self.params, self.fetch_infos)
        self.future.set_result(result)


def _fetch_satisfied(result: Mapping[TopicPartition, FetchPartitionData], min_bytes: int) -> bool:
    """Whether a waiting fetch's read answers it: ``min_bytes`` of records, or any partition
    with an error, a diverging epoch or a preferred read replica."""
    total = 0
    for data in result.values():
        if (
            data.error_code is not ErrorCode.NONE
            or data.diverging_epoch is not None
            or data.preferred_read_replica >= 0
        ):
            return True
        total += data.records_size
    return total >= min_bytes


class DelayedSlicedFetch(DelayedFetch):
    """A waiting fetch over many partitions (more than ``FETCH_SLICE_PARTITIONS``), whose reads
    the fetch's own task makes in slices (``ReplicaManager._wait_and_read_in_slices``) rather
    than the callback that checks it (an append, an HW move: a read of thousands of partitions
    there held the loop for 0.1 s and more, inside somebody else's request).

    ``try_complete`` never reads: when the cheap pre-check finds news it resolves ``wake`` and
    stays watched; the task reads, completes the operation (``force_complete``) if the read
    answers it as ``DelayedFetch`` would, or else waits again. News found while the task reads
    (``news``) make it read again at once, so none is lost; while a read is due, a check costs
    nothing. Completion by its timer or by force (a parked partition's news, the purgatory's
    shutdown) resolves ``wake`` too, and the task answers with one more read (at shutdown
    ``on_complete`` reads at once, before the logs close, as ``DelayedFetch`` does)."""

    def __init__(
        self,
        delay_ms: int,
        params: FetchParams,
        fetch_infos: dict[TopicPartition, FetchInfo],
        replica_manager: ReplicaManager,
    ) -> None:
        super().__init__(delay_ms, params, fetch_infos, replica_manager)
        self.wake: asyncio.Future[None] = self.future.get_loop().create_future()
        self.news = False
        self.reads = 0
        """Reads made by the task (tests)."""

    def _wake(self) -> None:
        if not self.wake.done():
            self.wake.set_result(None)

    def try_complete(self) -> bool:
        if self.news:
            return False  # a read is due already
        if self._anything_new():
            self.news = True
            self._wake()
        return False

    def on_complete(self) -> None:
        if self.replica_manager.shutting_down and self._result is None:
            self._result = self.replica_manager.read_from_local_log(self.params, self.fetch_infos)
        self._wake()

    def rearm(self) -> None:
        """After a read that did not answer the fetch: wait for the next news (at once if some
        came during the read)."""
        self.wake = self.future.get_loop().create_future()
        if self.news or self.is_completed:
            self.wake.set_result(None)


class DelayedDeleteRecords(DelayedOperation):
    """DeleteRecords waits until the low watermark (min log start over the replicas) reaches
    the requested offset on every partition."""

    def __init__(
        self,
        delay_ms: int,
        requested: dict[TopicPartition, int],
        results: dict[TopicPartition, DeleteRecordsResult],
        replica_manager: ReplicaManager,
    ) -> None:
        super().__init__(delay_ms)
        self.requested = requested
        self.results = results
        self.pending = {tp for tp in requested if results[tp].error_code is ErrorCode.NONE}
        self.replica_manager = replica_manager

    def try_complete(self) -> bool:
        for tp in list(self.pending):
            partition = self.replica_manager.online_partition(tp)
            if partition is None or not partition.is_leader:
                self.results[tp] = DeleteRecordsResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                self.pending.discard(tp)
                continue
            low = partition.low_watermark_if_leader
            if low >= self.requested[tp]:
                self.results[tp] = DeleteRecordsResult(ErrorCode.NONE, low)
                self.pending.discard(tp)
        if self.pending:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for tp in self.pending:
            self.results[tp] = DeleteRecordsResult(ErrorCode.REQUEST_TIMED_OUT)
        if not self.future.done():
            self.future.set_result(dict(self.results))


def _write_snapshots(snapshots: list[tuple[int, str, bytes]]) -> list[OSError | None]:
    """In a worker thread: write each prepared producer snapshot; the error of each, if any."""
    errors: list[OSError | None] = []
    for _, path, payload in snapshots:
        try:
            ProducerStateManager.write_snapshot(path, payload)
            errors.append(None)
        except OSError as e:
            errors.append(e)
    return errors


async def _await_operation(operation: DelayedOperation):
    try:
        return await operation.future
    except asyncio.CancelledError:
        operation.cancel()
        raise


class ReplicaManager:
    """All hosted partitions of one broker; see the module docstring."""

    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        config: ReplicaManagerConfig | Any = None,
        time: Time = SYSTEM_TIME,
        *,
        metadata_cache=None,
        alter_isr: AlterIsr | None = None,
        alter_isr_batch: AlterIsrBatch | None = None,
        log_config_for_topic: Callable[[str], Any] | None = None,
        replica_fetcher_manager: ReplicaFetcherManager | None = None,
        topic_stats: TopicStats | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        if config is None:
            config = ReplicaManagerConfig()
        elif not isinstance(config, ReplicaManagerConfig):
            config = ReplicaManagerConfig.from_broker_config(config)
        self.config = config
        self.time = time
        self.metadata_cache = metadata_cache
        self.alter_isr = alter_isr
        self.alter_isr_batch = alter_isr_batch
        # ISR changes proposed and not yet written (with alter_isr_batch): written together by
        # one flusher task, the ones proposed while a batch is being written in the next one.
        self._pending_isr: dict[TopicPartition, tuple[Partition, LeaderAndIsr]] = {}
        self._isr_flusher: asyncio.Task | None = None
        self.isr_batches_written = 0
        self.log_config_for_topic = log_config_for_topic
        self.replica_fetcher_manager = replica_fetcher_manager
        # Messages and bytes appended as leader, committed ISR changes (Kafka's
        # BrokerTopicStats): the composition root's, read by the admin API's /metrics.
        self.topic_stats = topic_stats if topic_stats is not None else TopicStats()
        # Set by the server when it asks the controller to move its leaderships away: no new
        # fetch starts from then on (see _restart_fetchers).
        self.in_controlled_shutdown = False
        self.partitions: dict[TopicPartition, Partition] = {}
        self.offline_partitions: set[TopicPartition] = set()
        self.controller_epoch = -1
        self.produce_purgatory = DelayedOperationPurgatory("Produce", time)
        self.fetch_purgatory = DelayedOperationPurgatory("Fetch", time)
        self.delete_records_purgatory = DelayedOperationPurgatory("DeleteRecords", time)
        self._isr_tasks: set[asyncio.Task] = set()
        # Held by the bulk LeaderAndIsr / StopReplica paths across their yields.
        self._state_change_lock = asyncio.Lock()
        # Fetches of more partitions are read in slices (tests set it to 0: every fetch is).
        self.fetch_slice_partitions = FETCH_SLICE_PARTITIONS
        # Set by shutdown: the waiting fetches completed then read at once (see
        # DelayedSlicedFetch).
        self.shutting_down = False
        log_manager.log_dir_failure_listeners.append(self.handle_log_dir_failure)
        log_manager.partition_failure_listeners.append(self.handle_partition_failure)

    # -- partitions ---------------------------------------------------------------------------

    def online_partition(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def get_partition_or_raise(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is not None:
            return partition
        if tp in self.offline_partitions:
            raise KafkaStorageError(f"Partition {tp} is in an offline log directory")
        cache = self.metadata_cache
        if cache is not None and cache.contains_partition(tp.topic, tp.partition):
            raise NotLeaderOrFollowerError(
                f"Error while fetching partition state for {tp}: not hosted on broker {self.broker_id}"
            )
        raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {tp}")

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self.partitions.values() if p.is_leader]

    def partition_status(self, tp: TopicPartition) -> PartitionStatus | None:
        """Role, ISR and offsets of a hosted partition (admin API, metrics)."""
        partition = self.partitions.get(tp)
        if partition is None:
            return None
        log_ = partition.log
        return PartitionStatus(
            tp.topic,
            tp.partition,
            partition.is_leader,
            partition.leader_replica_id if partition.leader_replica_id is not None else -1,
            partition.leader_epoch,
            partition.assigned_replicas,
            tuple(sorted(partition.isr)),
            log_.log_start_offset if log_ is not None else UNKNOWN_OFFSET,
            log_.log_end_offset if log_ is not None else UNKNOWN_OFFSET,
            log_.high_watermark if log_ is not None else UNKNOWN_OFFSET,
            partition.is_under_replicated,
            partition.is_under_min_isr,
        )

    def partition_statuses(self) -> list[PartitionStatus]:
        """``partition_status`` of every hosted partition, ordered by topic and partition."""
        return [self.partition_status(tp) for tp in sorted(self.partitions)]  # type: ignore[misc]

    @property
    def leader_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.is_leader)

    @property
    def under_replicated_partition_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.is_under_replicated)

    @property
    def under_min_isr_partition_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.is_under_min_isr)

    def _new_partition(self, tp: TopicPartition) -> Partition:
        return Partition(
            tp,
            self.broker_id,
            self.time,
            self.config.replica_lag_time_max_ms,
            self.config.producer_id_expiration_ms,
        )

    def _log_config(self, topic: str) -> Any:
        return self.log_config_for_topic(topic) if self.log_config_for_topic else None

    def _get_or_create_log(self, tp: TopicPartition, is_new: bool = True):
        return self.log_manager.get_or_create_log(
            tp.topic, tp.partition, self._log_config(tp.topic), is_new
        )

    def mark_log_dir_offline(self, topic_partitions: Iterable[TopicPartition]) -> None:
        """Partitions whose log directory failed: they answer KAFKA_STORAGE_ERROR from now on."""
        topic_partitions = list(topic_partitions)
        if self.replica_fetcher_manager is not None:
            self.replica_fetcher_manager.remove_fetcher_for_partitions(topic_partitions)
        for tp in topic_partitions:
            partition = self.partitions.pop(tp, None)
            if partition is not None:
                partition.make_offline()
            self.offline_partitions.add(tp)
            self._complete_delayed_requests(tp)

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """A log directory failed (storage's ``on_log_dir_failure``): every partition whose log
        lives there goes offline. Returns those partitions."""
        failed = os.path.realpath(log_dir)
        affected = [
            tp
            for tp, partition in self.partitions.items()
            if partition.log is not None
            and os.path.realpath(os.path.dirname(os.fspath(partition.log.dir))) == failed
        ]
        self.mark_log_dir_offline(affected)
        return affected

    def handle_partition_failure(self, topic: str, partition: int) -> None:
        """One partition's storage failed (its directory vanished): it alone goes offline."""
        self.mark_log_dir_offline([TopicPartition(topic, partition)])

    def _complete_delayed_requests(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)

    # -- produce ------------------------------------------------------------------------------

    async def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        entries: Mapping[TopicPartition, bytearray | memoryview | bytes],
        origin: AppendOrigin = AppendOrigin.CLIENT,
        internal_topics_allowed: bool = False,
    ) -> dict[TopicPartition, ProduceResult]:
        """Append each partition's record batches as leader.

        acks 0 and 1 return once appended locally; acks -1 (all) waits until the HW passes
        every successful append or ``timeout_ms`` expires (REQUEST_TIMED_OUT). Errors per
        partition: INVALID_REQUIRED_ACKS, INVALID_TOPIC_EXCEPTION (internal topic from a
        client), UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_
        APPEND), CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER,
        INVALID_PRODUCER_EPOCH, KAFKA_STORAGE_ERROR. A retried idempotent batch is answered with
        its original offsets and not appended again.
        """
        if required_acks not in (-1, 0, 1):
            return {
                tp: ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS, error_message=None)
                for tp in entries
            }
        results: dict[TopicPartition, ProduceResult] = {}
        for tp, records in entries.items():
            if tp.topic in INTERNAL_TOPICS and not internal_topics_allowed:
                results[tp] = ProduceResult(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    error_message=f"Cannot append to internal topic {tp.topic}",
                )
                continue
            try:
                partition = self.get_partition_or_raise(tp)
                appended = partition.append_records_to_leader(records, origin, required_acks)
            except (KafkaError, OSError) as e:
                results[tp] = ProduceResult(
                    _error_result_code(e),
                    error_message=str(e) or None,
                    record_errors=getattr(e, "record_errors", ()),
                )
                continue
            results[tp] = ProduceResult(
                ErrorCode.NONE,
                appended.first_offset,
                appended.log_append_time,
                appended.log_start_offset,
                last_offset=appended.last_offset,
                duplicate=appended.duplicate,
            )
            if not appended.duplicate:
                self.topic_stats.record_append(
                    tp.topic, appended.last_offset - appended.first_offset + 1, len(records)
                )
                self._complete_delayed_requests(tp)

        successes = [tp for tp, r in results.items() if r.error_code is ErrorCode.NONE]
        if required_acks != -1 or not successes:
            return results
        status = {
            tp: _ProducePartitionStatus(
                required_offset=r.last_offset + 1 if r.error_code is ErrorCode.NONE else -1,
                result=r,
                acks_pending=r.error_code is ErrorCode.NONE,
            )
            for tp, r in results.items()
        }
        operation = DelayedProduce(max(0, timeout_ms), status, self)
        if self.produce_purgatory.try_complete_else_watch(operation, successes):
            return operation.future.result()
        return await _await_operation(operation)

    # -- fetch --------------------------------------------------------------------------------

    async def fetch_messages(
        self,
        params: FetchParams,
        fetch_infos: Mapping[TopicPartition, FetchInfo],
        session: Any = None,
    ) -> dict[TopicPartition, FetchPartitionData]:
        """Read the partitions; answer at once if ``max_wait_ms`` <= 0, nothing was asked,
        ``min_bytes`` are there, or a partition has an error or a diverging epoch; else wait
        (long poll) until one of those holds or ``max_wait_ms`` passes.

        Follower fetches (``replica_id`` >= 0) first record the follower's position, which may
        grow the ISR and move the HW (completing acks=all produces).
        """
        result = self.fetch_messages_now_or_later(params, fetch_infos, session)
        if isinstance(result, dict):
            return result
        return await result

    def fetch_messages_now_or_later(
        self,
        params: FetchParams,
        fetch_infos: Mapping[TopicPartition, FetchInfo],
        session: Any = None,
    ) -> dict[TopicPartition, FetchPartitionData] | Awaitable[dict[TopicPartition, Any]]:
        """``fetch_messages`` without a coroutine when the answer is there now (most fetches:
        the Fetch handler then answers without a task): the result, or an awaitable of it
        when the fetch waits in purgatory. The awaitable must be awaited (or cancelled).

        ``session``: the follower's fetch session whose active partitions these are; news on
        one of its parked partitions (which the waiting fetch does not watch) answers the
        waiting fetch at once, so the next round reads it without waiting out max wait."""
        fetch_infos = dict(fetch_infos)
        if len(fetch_infos) > self.fetch_slice_partitions:
            return self._fetch_messages_in_slices(params, fetch_infos, session)
        result = self.read_from_local_log(params, fetch_infos)
        if params.is_from_follower:
            self._update_followers_fetch_state(params.replica_id, fetch_infos.items(), result)
        total = 0
        must_respond = params.max_wait_ms <= 0 or not fetch_infos
        for data in result.values():
            if (
                data.error_code is not ErrorCode.NONE
                or data.diverging_epoch is not None
                or data.preferred_read_replica >= 0
            ):
                must_respond = True
            total += data.records_size
        if must_respond or total >= params.min_bytes:
            return result
        operation = DelayedFetch(params.max_wait_ms, params, fetch_infos, self)
        if self.fetch_purgatory.try_complete_else_watch(operation, list(fetch_infos)):
            return operation.future.result()
        if session is not None and session.parked:
            # Told from inside the append or HW move: answered once that has finished.
            loop = asyncio.get_running_loop()
            session.waiter = lambda: loop.call_soon(operation.force_complete)
        return _await_operation(operation)

    async def _fetch_messages_in_slices(
        self,
        params: FetchParams,
        fetch_infos: dict[TopicPartition, FetchInfo],
        session: Any,
    ) -> dict[TopicPartition, FetchPartitionData]:
        """``fetch_messages_now_or_later`` for a fetch of many partitions: the same reads,
        follower state updates, answer and wait, the reads in slices that yield to the loop.

        Each partition is read and (a follower's fetch) its follower state updated in the same
        slice, so its answer and its fetch state agree, as in one go; other partitions may
        change between slices, as they may between Kafka's handler threads. ``fetch_infos`` is
        the caller's own copy (a session's mapping changes under us)."""
        news: list[bool] = []
        if session is not None and session.parked:
            # A parked partition's news while we read: answer at once after the read, as the
            # unsliced read's waiter (set right after it) would.
            session.waiter = lambda: news.append(True)
        result = await self.read_from_local_log_in_slices(
            params, fetch_infos, update_followers=params.is_from_follower
        )
        if (
            news
            or params.max_wait_ms <= 0
            or not fetch_infos
            or _fetch_satisfied(result, params.min_bytes)
        ):
            return result
        operation = DelayedSlicedFetch(params.max_wait_ms, params, fetch_infos, self)
        # Never completes here (its check does not read); news that came while we read (a
        # partition read in an earlier slice moved on since) wakes it at once.
        self.fetch_purgatory.try_complete_else_watch(operation, list(fetch_infos))
        if session is not None and session.parked:
            loop = asyncio.get_running_loop()
            session.waiter = lambda: loop.call_soon(operation.force_complete)
        return await self._wait_and_read_in_slices(operation)

    async def _wait_and_read_in_slices(
        self, operation: DelayedSlicedFetch
    ) -> dict[TopicPartition, FetchPartitionData]:
        """The waiting of a ``DelayedSlicedFetch``: on each wake, read in slices; answer when a
        read satisfies it, or with one more read once its timer or a force completed it."""
        params, fetch_infos = operation.params, operation.fetch_infos
        try:
            while True:
                await operation.wake
                if operation.is_completed and operation._result is not None:
                    return operation._result  # read at shutdown
                operation.news = False
                operation.reads += 1
                result = await self.read_from_local_log_in_slices(params, fetch_infos)
                if operation.is_completed or _fetch_satisfied(result, params.min_bytes):
                    operation.force_complete()
                    return operation._result if operation._result is not None else result
                operation.rearm()
        except asyncio.CancelledError:
            operation.cancel()
            raise

    async def read_from_local_log_in_slices(
        self,
        params: FetchParams,
        fetch_infos: Mapping[TopicPartition, FetchInfo],
        *,
        update_followers: bool = False,
    ) -> dict[TopicPartition, FetchPartitionData]:
        """``read_from_local_log`` (and with ``update_followers``, a follower's fetch,
        ``_update_followers_fetch_state``) in slices of ``FETCH_SLICE_CHUNK`` partitions,
        yielding to the loop after ``SLICE_SECONDS``: the same result, in the same order, as
        one read when nothing changes meanwhile. The shared ``max_bytes`` carries over."""
        items = list(fetch_infos.items())
        result: dict[TopicPartition, FetchPartitionData] = {}
        limit = params.max_bytes
        min_one_message = not params.hard_max_bytes_limit
        step = FETCH_SLICE_CHUNK
        slices = LoopSlices(max(1, SLICE_ITEMS // step), SLICE_SECONDS)
        # The request's decoding and the handler's set-up (a few ms at thousands of
        # partitions) were this callback's work so far: the first slice gets one of its own.
        await slices.pause()
        for start in range(0, len(items), step):
            chunk = items[start : start + step]
            limit, min_one_message = self._read_partitions(
                params, chunk, result, limit, min_one_message
            )
            if update_followers:
                self._update_followers_fetch_state(params.replica_id, chunk, result)
            if start + step < len(items) and slices.due():
                await slices.pause()
        return result

    def read_from_local_log(
        self, params: FetchParams, fetch_infos: Mapping[TopicPartition, FetchInfo]
    ) -> dict[TopicPartition, FetchPartitionData]:
        """One read of every partition, sharing ``params.max_bytes``; the first non-empty
        partition may exceed the limits by one batch (unless ``hard_max_bytes_limit``)."""
        result: dict[TopicPartition, FetchPartitionData] = {}
        self._read_partitions(
            params,
            fetch_infos.items(),
            result,
            params.max_bytes,
            not params.hard_max_bytes_limit,
        )
        return result

    def _read_partitions(
        self,
        params: FetchParams,
        items: Iterable[tuple[TopicPartition, FetchInfo]],
        result: dict[TopicPartition, FetchPartitionData],
        limit: int,
        min_one_message: bool,
    ) -> tuple[int, bool]:
        """Read ``items`` into ``result`` from the byte budget ``limit`` (and whether the next
        non-empty partition may exceed it by one batch); returns both, as they are after."""
        isolation = params.isolation
        # Kafka answers read_committed fetches with the aborted transactions overlapping the
        # records returned (Partition.read_records) and read_uncommitted ones with null.
        selector = self.config.replica_selector_class
        may_redirect = (
            selector is not None
            and params.client_rack is not None
            and params.replica_id == CONSUMER_REPLICA_ID
        )
        for tp, info in items:
            try:
                partition = self.get_partition_or_raise(tp)
                if may_redirect and partition.is_leader:
                    redirect = self._preferred_read_replica(partition, params, info)
                    if redirect is not None:
                        result[tp] = redirect
                        continue
                read = partition.read_records(
                    info.fetch_offset,
                    info.current_leader_epoch,
                    min(info.max_bytes, limit),
                    isolation,
                    params.fetch_only_from_leader,
                    min_one_message,
                    info.last_fetched_epoch,
                )
            except (KafkaError, OSError) as e:
                result[tp] = FetchPartitionData(_error_result_code(e))
                continue
            size = records_size(read.records)
            if size > 0:
                min_one_message = False
            limit = max(0, limit - size)
            result[tp] = FetchPartitionData(
                ErrorCode.NONE,
                read.high_watermark,
                read.last_stable_offset,
                read.log_start_offset,
                read.records if size > 0 else EMPTY_RECORDS,
                -1,
                read.diverging_epoch,
                read.aborted_transactions,
                read.log_end_offset,
            )
        return limit, min_one_message

    def _preferred_read_replica(
        self, partition: Partition, params: FetchParams, info: FetchInfo
    ) -> FetchPartitionData | None:
        """Kafka's findPreferredReadReplica, on the leader: the answer naming the follower the
        consumer should read from (no records; the leader's offsets), or None to read here.
        Candidates are the alive in-sync followers holding the fetch offset (see
        broker/replica_selector.py)."""
        log = partition.local_log_with_epoch_or_raise(info.current_leader_epoch, True)
        cache = self.metadata_cache
        if cache is None:
            return None
        now = self.time.milliseconds()
        offset = info.fetch_offset
        isr = partition.isr
        followers = []
        for replica_id, state in partition.remote_replicas.items():
            if replica_id not in isr:
                continue
            if not state.log_start_offset <= offset <= state.log_end_offset:
                continue
            broker = cache.get_alive_broker(replica_id)
            if broker is None:
                continue
            followers.append(
                ReplicaView(
                    replica_id,
                    broker.rack,
                    state.log_end_offset,
                    now - state.last_caught_up_time_ms,
                )
            )
        leader_broker = cache.get_alive_broker(self.broker_id)
        leader = ReplicaView(
            self.broker_id,
            leader_broker.rack if leader_broker is not None else None,
            log.log_end_offset,
        )
        chosen = preferred_read_replica(
            self.config.replica_selector_class, params.client_rack, leader, followers
        )
        if chosen is None:
            return None
        return FetchPartitionData(
            ErrorCode.NONE,
            log.high_watermark,
            partition.last_stable_offset,
            log.log_start_offset,
            EMPTY_RECORDS,
            chosen,
            log_end_offset=log.log_end_offset,
        )

    def _update_followers_fetch_state(
        self,
        replica_id: int,
        items: Iterable[tuple[TopicPartition, FetchInfo]],
        result: dict[TopicPartition, FetchPartitionData],
    ) -> None:
        now = self.time.milliseconds()
        # Only a live broker's replica may join an ISR (Kafka's ZooKeeper-mode leaders check
        # their metadata cache the same way): a fetch of a failed broker read late cannot bring
        # it back into an ISR the controller took it out of.
        cache = self.metadata_cache
        may_join_isr = cache is None or cache.get_alive_broker(replica_id) is not None
        for tp, info in items:
            data = result[tp]
            if data.error_code is not ErrorCode.NONE or data.diverging_epoch is not None:
                continue
            partition = self.partitions.get(tp)
            if partition is None or not partition.is_leader:
                continue
            if not partition.update_follower_fetch_state(
                replica_id, info.fetch_offset, info.log_start_offset, now, data.log_end_offset
            ):
                result[tp] = FetchPartitionData(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                continue
            proposal = partition.maybe_expand_isr(replica_id) if may_join_isr else None
            if proposal is not None:
                self._submit_isr_update(partition, proposal)
            if partition.maybe_increment_leader_hw(now):
                # Wake acks=all produces, consumer fetches and DeleteRecords waiting on it.
                self._complete_delayed_requests(tp)
            else:
                # The HW did not move, so no waiting produce or fetch can complete (Kafka's
                # updateFollowerFetchState): checking them anyway cost every other follower's
                # waiting fetch a pass over all its partitions, for each partition of this
                # fetch. The follower's log start may have moved the low watermark, which only
                # DeleteRecords waits on.
                self.delete_records_purgatory.check_and_complete(tp)

    async def wait_for_session_news(self, session: Any, max_wait_ms: int) -> int:
        """Wait until a parked partition of ``session`` has news or ``max_wait_ms`` pass (a
        follower's incremental fetch with nothing else to read: the long poll, without a
        purgatory watch on every partition). Returns the milliseconds left of the wait."""
        loop = asyncio.get_running_loop()
        woken = loop.create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        start = self.time.milliseconds()
        session.waiter = wake
        try:
            await asyncio.wait_for(woken, max_wait_ms / 1000)
        except TimeoutError:
            pass
        finally:
            if session.waiter is wake:
                session.waiter = None
        return max(0, max_wait_ms - (self.time.milliseconds() - start))

    def park_idle_partition(
        self, session: Any, tp: TopicPartition, data: FetchPartitionData
    ) -> bool:
        """The fetch sessions' park hook (broker/fetch_session.py): a follower's session was
        just answered ``data`` for ``tp`` and its follower has all of it. True (and the session
        is told on the partition's next news) when this broker leads ``tp``, the follower is in
        its ISR and ``data`` is still its state, so the session may stop reading it until then.

        A follower out of the ISR is read at every fetch, as Kafka reads every partition of a
        session: whether it may join can change with nothing moving on the partition (its
        broker becomes alive in this broker's metadata, an ISR write that failed is proposed
        again), and only a read of its fetch proposes it."""
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader or session.replica_id not in partition.isr:
            return False
        log_ = partition.log
        if (
            log_ is None
            or log_.offline
            or log_.log_end_offset != data.log_end_offset
            or log_.high_watermark != data.high_watermark
            or log_.log_start_offset != data.log_start_offset
        ):
            return False
        partition.watch_for_news(session, session.replica_id)
        return True

    def forget_parked_partition(self, session: Any, tp: TopicPartition) -> None:
        """The fetch sessions' other hook: ``session``'s follower forgot ``tp`` while it was
        parked (``Partition.parked_session_forgot``)."""
        partition = self.partitions.get(tp)
        if partition is not None:
            partition.parked_session_forgot(session)

    # -- ISR ----------------------------------------------------------------------------------

    def _submit_isr_update(self, partition: Partition, proposal: LeaderAndIsr) -> None:
        tp = partition.topic_partition
        if self.alter_isr is None:
            # No coordination store (single node, tests): the change commits locally.
            if partition.complete_isr_update(proposal, proposal.zk_version + 1):
                self._complete_delayed_requests(tp)
            return
        if self.alter_isr_batch is not None:
            # Batched: every change proposed before the flusher runs (all those of one follower
            # fetch, one ISR check) is one multi and one notification, not one each.
            self._pending_isr[tp] = (partition, proposal)
            if self._isr_flusher is None:
                self._isr_flusher = self._track_isr_task(self._flush_isr_updates())
            return
        self._track_isr_task(self._write_isr_update(partition, proposal))

    def _track_isr_task(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._isr_tasks.add(task)
        task.add_done_callback(self._isr_tasks.discard)
        return task

    async def _flush_isr_updates(self) -> None:
        """Write the pending ISR changes in batches until none is left (one task at a time)."""
        try:
            while self._pending_isr:
                pending, self._pending_isr = self._pending_isr, {}
                items = list(pending.values())
                chunks = [
                    items[i : i + ISR_BATCH_MAX_PARTITIONS]
                    for i in range(0, len(items), ISR_BATCH_MAX_PARTITIONS)
                ]
                await asyncio.gather(*(self._write_isr_batch(chunk) for chunk in chunks))
        finally:
            # Left only when cancelled (shutdown): the changes not taken are not written.
            self._isr_flusher = None
            left, self._pending_isr = self._pending_isr, {}
            for partition, proposal in left.values():
                partition.abort_isr_update(proposal)

    async def _write_isr_batch(self, items: list[tuple[Partition, LeaderAndIsr]]) -> None:
        assert self.alter_isr_batch is not None
        # A proposal replaced or dropped meanwhile (a LeaderAndIsr arrived) is not written.
        items = [(p, proposal) for p, proposal in items if p.pending_isr_update is proposal]
        if not items:
            return
        states = {
            p.topic_partition: LeaderIsrAndControllerEpoch(proposal, p.controller_epoch)
            for p, proposal in items
        }
        isr_before = {p.topic_partition: len(p.isr) for p, _ in items}
        try:
            versions = await self.alter_isr_batch(states)
        except asyncio.CancelledError:
            for p, proposal in items:
                p.abort_isr_update(proposal)
            raise
        except Exception as e:  # the store's failures, at the I/O boundary
            log.warning("isr_batch_update_failed", partitions=len(items), error=repr(e))
            for p, proposal in items:
                p.abort_isr_update(proposal)
            return
        if versions is None:
            # One compare-and-set failed and nothing was written: each alone, so that only
            # the partitions whose state moved on stop acting as leader.
            await asyncio.gather(*(self._write_isr_update(p, proposal) for p, proposal in items))
            return
        self.isr_batches_written += 1
        for p, proposal in items:
            tp = p.topic_partition
            self._isr_update_written(p, proposal, versions[tp], isr_before[tp])

    async def _write_isr_update(self, partition: Partition, proposal: LeaderAndIsr) -> None:
        assert self.alter_isr is not None
        tp = partition.topic_partition
        state = LeaderIsrAndControllerEpoch(proposal, partition.controller_epoch)
        isr_before = len(partition.isr)
        try:
            version = await self.alter_isr(tp, state)
        except asyncio.CancelledError:
            partition.abort_isr_update(proposal)
            raise
        except Exception as e:  # the store's failures, at the I/O boundary
            log.warning("isr_update_failed", partition=str(tp), error=repr(e))
            partition.abort_isr_update(proposal)
            return
        self._isr_update_written(partition, proposal, version, isr_before)

    def _isr_update_written(
        self, partition: Partition, proposal: LeaderAndIsr, version: int | None, isr_before: int
    ) -> None:
        tp = partition.topic_partition
        if version is None:
            log.info(
                "isr_update_conflict",
                partition=str(tp),
                zk_version=proposal.zk_version,
                note="partition state changed under us: no longer acting as leader",
            )
        else:
            self.topic_stats.record_isr_change(isr_before, len(proposal.isr))
        if partition.complete_isr_update(proposal, version) or version is None:
            # The HW moved, or the partition stopped acting as leader: anything waiting
            # on it may complete.
            self._complete_delayed_requests(tp)
        else:
            # A new ISR with the same HW: no waiting fetch can complete (re-checking them
            # cost another follower's waiting fetch a pass over all its partitions for
            # each partition whose ISR grew); a produce's ISR check may.
            self.produce_purgatory.check_and_complete(tp)
            self.delete_records_purgatory.check_and_complete(tp)

    def maybe_shrink_isr(self) -> int:
        """Propose removing lagging followers on every led partition; returns proposals made."""
        now = self.time.milliseconds()
        count = 0
        for partition in list(self.partitions.values()):
            proposal = partition.maybe_shrink_isr(now)
            if proposal is not None:
                count += 1
                self._submit_isr_update(partition, proposal)
        return count

    async def wait_for_isr_updates(self) -> None:
        """Wait for the ISR writes in flight (tests, shutdown)."""
        while self._isr_tasks:
            await asyncio.gather(*list(self._isr_tasks), return_exceptions=True)

    async def run_isr_expiration(self) -> None:
        """Check ISRs every replica.lag.time.max.ms / 2, like Kafka's isr-expiration task."""
        interval = max(1, self.config.replica_lag_time_max_ms // 2) / 1000.0
        while True:
            await asyncio.sleep(interval)
            self.maybe_shrink_isr()

    async def run_producer_state_maintenance(self) -> None:
        """Every producer.id.expiration.check.interval.ms: forget expired producers and
        snapshot the producer state, so a restart replays only the log's tail."""
        interval = max(1, self.config.producer_id_expiration_check_interval_ms) / 1000.0
        while True:
            await asyncio.sleep(interval)
            self.remove_expired_producers()
            await self.take_producer_snapshots_async()

    def remove_expired_producers(self) -> None:
        now = self.time.milliseconds()
        for partition in self.partitions.values():
            if partition.producer_state is not None:
                partition.producer_state.remove_expired_producers(now)

    async def take_producer_snapshots_async(self, batch_size: int = 200) -> int:
        """``take_producer_snapshots`` with the files written (and fsynced) in a worker
        thread, ``batch_size`` at a time: the state is read here, on the loop, and the loop
        is never held by thousands of fsyncs. Returns the snapshots written."""
        prepared = []
        for partition in list(self.partitions.values()):
            state = partition.producer_state
            if state is not None:
                snapshot = state.prepare_snapshot()
                if snapshot is not None:
                    prepared.append((partition, state, snapshot))
        written = 0
        for start in range(0, len(prepared), batch_size):
            chunk = prepared[start : start + batch_size]
            errors = await asyncio.to_thread(_write_snapshots, [s for _, _, s in chunk])
            for (partition, state, snapshot), error in zip(chunk, errors, strict=True):
                if error is None:
                    state.complete_snapshot(snapshot[0])
                    written += 1
                else:  # a failing log dir; the log reports it on its next I/O
                    log.warning(
                        "producer_snapshot_failed",
                        partition=str(partition.topic_partition),
                        error=repr(error),
                    )
        return written

    def take_producer_snapshots(self) -> None:
        for partition in self.partitions.values():
            if partition.producer_state is not None:
                try:
                    partition.producer_state.take_snapshot()
                except OSError as e:  # a failing log dir; the log reports it on its next I/O
                    log.warning(
                        "producer_snapshot_failed",
                        partition=str(partition.topic_partition),
                        error=repr(e),
                    )

    # -- LeaderAndIsr / StopReplica -----------------------------------------------------------

    async def become_leader_or_follower_async(
        self,
        controller_id: int,
        controller_epoch: int,
        partition_states: Iterable[LeaderAndIsrPartitionState],
        slice_size: int = LEADER_AND_ISR_SLICE,
    ) -> LeaderAndIsrResult:
        """Apply a LeaderAndIsr request: logs are created (with the topic's config) as needed,
        only states with a newer leader epoch, or the same leader epoch and leader with a newer
        partition epoch (zk version), change anything (else STALE_CONTROLLER_EPOCH),
        a broker missing from the replicas answers UNKNOWN_TOPIC_OR_PARTITION.

        For requests of any size without holding the event loop: every pass over the
        partitions (reading ``partition_states``, which may be a generator building them,
        classifying, stopping and starting fetchers, making leader or follower) works in
        slices of at most ``slice_size`` partitions and ``LEADER_AND_ISR_SLICE_SECONDS`` with a
        yield between them, and many missing logs are created by the LogManager in a worker
        thread. One request at a time (Kafka's replicaStateChangeLock): a LeaderAndIsr or
        StopReplica arriving meanwhile waits for this one, in the order they called (the lock
        is asked for before anything yields, and asyncio's lock is first come, first served).
        Between slices other requests are served; a partition not made leader or follower yet
        answers as it did before the request (its old role, or NOT_LEADER/UNKNOWN for a new
        one)."""
        async with self._state_change_lock:
            slices = LoopSlices(slice_size, LEADER_AND_ISR_SLICE_SECONDS)
            if controller_epoch < self.controller_epoch:
                stale_errors: dict[TopicPartition, ErrorCode] = {}
                for state in partition_states:
                    stale_errors[TopicPartition(state.topic, state.partition)] = (
                        ErrorCode.STALE_CONTROLLER_EPOCH
                    )
                    if slices.due():
                        await slices.pause()
                return LeaderAndIsrResult(ErrorCode.STALE_CONTROLLER_EPOCH, stale_errors)
            self.controller_epoch = controller_epoch
            errors: dict[TopicPartition, ErrorCode] = {}
            to_lead: list[tuple[Partition, LeaderAndIsrPartitionState]] = []
            to_follow: list[tuple[Partition, LeaderAndIsrPartitionState]] = []
            for state in partition_states:
                self._classify_state(state, errors, to_lead, to_follow)
                if slices.due():
                    await slices.pause()
            changes = to_lead + to_follow
            missing = []
            get_log = self.log_manager.get_log
            for _, state in changes:
                if get_log(state.topic, state.partition) is None:
                    missing.append(
                        (state.topic, state.partition, self._log_config(state.topic), state.is_new)
                    )
                if slices.due():
                    await slices.pause()
            # A few logs are created inline below (a hand-off to a thread costs more than
            # creating them); many go to the worker thread.
            if len(missing) > INLINE_LOG_CREATIONS:
                failures = await self.log_manager.create_logs(missing, batch_size=slice_size)
                for (topic, partition), error in failures.items():
                    errors[TopicPartition(topic, partition)] = _error_result_code_or_storage(error)
            await self._stop_fetchers_of_new_leaders(to_lead, slices)
            new_fetchers: dict[TopicPartition, tuple[int, int]] = {}
            for partition, state in changes:
                if partition.topic_partition not in errors:  # else its log could not be made
                    self._make_leader_or_follower(partition, state, errors, new_fetchers)
                if slices.due():
                    await slices.pause()
            await self._restart_fetchers(new_fetchers, slices)
            return LeaderAndIsrResult(ErrorCode.NONE, errors)

    def _classify_state(
        self,
        state: LeaderAndIsrPartitionState,
        errors: dict[TopicPartition, ErrorCode],
        to_lead: list[tuple[Partition, LeaderAndIsrPartitionState]],
        to_follow: list[tuple[Partition, LeaderAndIsrPartitionState]],
    ) -> None:
        """A state that changes something goes to ``to_lead`` or ``to_follow``; the others get
        their error in ``errors``."""
        tp = TopicPartition(state.topic, state.partition)
        if tp in self.offline_partitions:
            errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            return
        partition = self.partitions.get(tp) or self._new_partition(tp)
        epoch = partition.leader_epoch
        if state.leader_epoch < epoch or (
            # The same leader epoch is taken with a newer partition epoch (zk version) and the
            # same leader: an ISR change the controller made without bumping the leader epoch
            # (decision 0068), as Kafka's brokers take KRaft's partition changes.
            state.leader_epoch == epoch
            and (
                state.zk_version <= partition.zk_version
                or state.leader != partition.leader_replica_id
            )
        ):
            log.info(
                "leader_and_isr_ignored",
                partition=str(tp),
                request_epoch=state.leader_epoch,
                current_epoch=partition.leader_epoch,
            )
            errors[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
            return
        if self.broker_id not in state.replicas:
            errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return
        (to_lead if state.leader == self.broker_id else to_follow).append((partition, state))

    async def _stop_fetchers_of_new_leaders(
        self, to_lead: list[tuple[Partition, LeaderAndIsrPartitionState]], slices: LoopSlices
    ) -> None:
        if self.replica_fetcher_manager is not None and to_lead:
            await self._in_slices(
                self.replica_fetcher_manager.remove_fetcher_for_partitions,
                [p.topic_partition for p, _ in to_lead],
                slices,
            )

    @staticmethod
    async def _in_slices(
        action: Callable[[list[TopicPartition]], None],
        items: list[TopicPartition],
        slices: LoopSlices,
    ) -> None:
        """``action`` on ``items`` in chunks of the slice's size, a yield after each."""
        step = slices.max_items
        for start in range(0, len(items), step):
            action(items[start : start + step])
            if start + step < len(items):
                await slices.pause()

    def _make_leader_or_follower(
        self,
        partition: Partition,
        state: LeaderAndIsrPartitionState,
        errors: dict[TopicPartition, ErrorCode],
        new_fetchers: dict[TopicPartition, tuple[int, int]],
    ) -> None:
        tp = partition.topic_partition
        try:
            log_ = self._get_or_create_log(tp, state.is_new)
            if state.leader == self.broker_id:
                partition.make_leader(state, log_)
            elif partition.make_follower(state, log_) and state.leader >= 0:
                # No leader (-1: offline partition): nothing to fetch from until the
                # controller elects one and says so in a newer LeaderAndIsr.
                new_fetchers[tp] = (state.leader, log_.log_end_offset)
        except (KafkaError, OSError) as e:
            errors[tp] = _error_result_code(e)  # an OSError is KAFKA_STORAGE_ERROR
            if errors[tp] is ErrorCode.KAFKA_STORAGE_ERROR:
                # Kafka's makeLeaders/makeFollowers: the replica is offline from now on (its
                # log is in a failed directory, or its own directory is missing).
                log.error("replica offline", partition=str(tp), error=str(e))
                self.offline_partitions.add(tp)
            return
        self.partitions[tp] = partition
        errors[tp] = ErrorCode.NONE
        self._complete_delayed_requests(tp)

    async def _restart_fetchers(
        self, new_fetchers: dict[TopicPartition, tuple[int, int]], slices: LoopSlices
    ) -> None:
        if self.replica_fetcher_manager is not None and new_fetchers:
            # Only partitions whose leader or leader epoch changed restart their fetch (with
            # truncation); the others keep fetching where they are.
            manager = self.replica_fetcher_manager
            if self.in_controlled_shutdown:
                # Made follower of a partition it led, by the controlled shutdown's election:
                # fetching would bring this broker back into the ISR the controller just took
                # it out of, right before it stops (Kafka's controller refuses a shutting-down
                # broker's ISR return; here the leader writes the ISR, so the broker stays out).
                await self._in_slices(
                    manager.remove_fetcher_for_partitions, list(new_fetchers), slices
                )
                return
            # add_fetcher_for_partitions takes each partition off the fetcher it was on first
            # (a second removal pass beforehand was a third of this pass's cost).
            await self._in_slices(
                lambda tps: manager.add_fetcher_for_partitions(
                    {tp: new_fetchers[tp] for tp in tps}
                ),
                list(new_fetchers),
                slices,
            )

    async def stop_replicas_async(
        self,
        controller_id: int,
        controller_epoch: int,
        partitions: Iterable[StopReplicaPartitionState],
        slice_size: int = LEADER_AND_ISR_SLICE,
    ) -> StopReplicaResult:
        """Apply a StopReplica request: stop fetching; with ``delete_partition`` forget the
        partition and delete its log. An epoch older than ours (-1 and -2 during topic
        deletion excepted) is FENCED_LEADER_EPOCH; the current one is accepted, as Kafka's
        stopReplicas does (a shutting-down follower is stopped at the epoch it already has).

        In slices that yield to the event loop, the deleted logs' files removed in a worker
        thread; under the same lock as LeaderAndIsr."""
        async with self._state_change_lock:
            slices = LoopSlices(slice_size, LEADER_AND_ISR_SLICE_SECONDS)
            states: list[StopReplicaPartitionState] = []
            for state in partitions:
                states.append(state)
                if slices.due():
                    await slices.pause()
            if controller_epoch < self.controller_epoch:
                return StopReplicaResult(
                    ErrorCode.STALE_CONTROLLER_EPOCH,
                    {
                        TopicPartition(s.topic, s.partition): ErrorCode.STALE_CONTROLLER_EPOCH
                        for s in states
                    },
                )
            self.controller_epoch = controller_epoch
            errors: dict[TopicPartition, ErrorCode] = {}
            to_delete: list[tuple[str, int]] = []
            # Chunks small enough for a slice's budget (stopping a partition costs tens of
            # microseconds: its fetch, its waiters, its log's handles).
            step = min(slice_size, STOP_REPLICA_CHUNK)
            for start in range(0, len(states), step):
                chunk = states[start : start + step]
                self._stop_replicas_slice(chunk, errors)
                to_delete.extend(
                    (s.topic, s.partition)
                    for s in chunk
                    if s.delete_partition
                    and errors.get(TopicPartition(s.topic, s.partition)) is ErrorCode.NONE
                )
                await slices.pause()
            if to_delete:
                # All of the request's deletions at once: each log directory's checkpoints are
                # written once for the batch, in a worker thread (not once per partition).
                try:
                    failures = await self.log_manager.delete_logs(to_delete, batch_size=slice_size)
                except (KafkaError, OSError) as e:
                    failures = dict.fromkeys(to_delete, e)
                for (topic, partition), error in (failures or {}).items():
                    errors[TopicPartition(topic, partition)] = _error_result_code_or_storage(error)
            return StopReplicaResult(ErrorCode.NONE, errors)

    def _forget_missing_log(
        self, tp: TopicPartition, errors: dict[TopicPartition, ErrorCode]
    ) -> bool:
        """Deleting a partition whose directory vanished accepts its loss: the replica is no
        longer offline, and the caller's ``delete_logs`` makes the log manager forget it.
        False if it is not missing."""
        if not self.log_manager.is_missing(tp.topic, tp.partition):
            return False
        self.offline_partitions.discard(tp)
        errors[tp] = ErrorCode.NONE
        return True

    def _stop_replicas_slice(
        self, states: list[StopReplicaPartitionState], errors: dict[TopicPartition, ErrorCode]
    ) -> None:
        """One slice of ``stop_replicas_async`` at the accepted controller epoch: the errors go
        into ``errors``; the logs of deleted partitions are left to the caller (a missing one
        is forgotten here)."""
        to_stop: dict[TopicPartition, bool] = {}
        for state in states:
            tp = TopicPartition(state.topic, state.partition)
            partition = self.partitions.get(tp)
            if partition is None:
                to_stop[tp] = state.delete_partition
                errors[tp] = (
                    ErrorCode.KAFKA_STORAGE_ERROR
                    if tp in self.offline_partitions
                    else ErrorCode.NONE
                )
                continue
            epoch = state.leader_epoch
            if epoch in (EPOCH_DURING_DELETE, NO_EPOCH) or epoch >= partition.leader_epoch:
                to_stop[tp] = state.delete_partition
                errors[tp] = ErrorCode.NONE
            else:
                errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
        if self.replica_fetcher_manager is not None and to_stop:
            self.replica_fetcher_manager.remove_fetcher_for_partitions(list(to_stop))
        for tp, delete in to_stop.items():
            if delete:
                partition = self.partitions.pop(tp, None)
                if partition is not None:
                    partition.make_offline()
                self._forget_missing_log(tp, errors)
            else:
                partition = self.partitions.get(tp)
                if partition is not None:
                    partition.notify_news()
            self._complete_delayed_requests(tp)

    # -- offsets ------------------------------------------------------------------------------

    def list_offset(
        self,
        tp: TopicPartition,
        timestamp: int,
        isolation_level: IsolationLevel | None = IsolationLevel.READ_UNCOMMITTED,
        current_leader_epoch: int = NO_EPOCH,
        replica_id: int = CONSUMER_REPLICA_ID,
    ) -> ListOffsetResult:
        """ListOffsets for one partition: -2 earliest, -1 latest (HW for consumers, LEO for
        followers), -3 max timestamp, else the first offset whose timestamp >= ``timestamp``
        (offset -1 when none)."""
        if replica_id == CONSUMER_REPLICA_ID:
            isolation: FetchIsolation | None = (
                FetchIsolation.TXN_COMMITTED
                if isolation_level is IsolationLevel.READ_COMMITTED
                else FetchIsolation.HIGH_WATERMARK
            )
        else:
            isolation = None
        try:
            partition = self.get_partition_or_raise(tp)
            return partition.fetch_offset_for_timestamp(
                timestamp, isolation, current_leader_epoch, replica_id != DEBUGGING_REPLICA_ID
            )
        except (KafkaError, OSError) as e:
            return ListOffsetResult(_error_result_code(e))

    def last_offset_for_leader_epoch(
        self,
        tp: TopicPartition,
        current_leader_epoch: int,
        leader_epoch: int,
        replica_id: int = CONSUMER_REPLICA_ID,
    ) -> EpochEndOffset:
        """OffsetForLeaderEpoch for one partition: (largest epoch <= ``leader_epoch``, its end
        offset), -1/-1 when the log knows no such epoch."""
        try:
            partition = self.get_partition_or_raise(tp)
        except (KafkaError, OSError) as e:
            return EpochEndOffset(_error_result_code(e))
        return partition.last_offset_for_leader_epoch(
            current_leader_epoch, leader_epoch, replica_id != DEBUGGING_REPLICA_ID
        )

    async def delete_records(
        self, timeout_ms: int, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, DeleteRecordsResult]:
        """DeleteRecords: advance each log start offset (-1 = to the HW) and wait until every
        replica caught up with the deletion (low watermark) or ``timeout_ms`` passes."""
        results: dict[TopicPartition, DeleteRecordsResult] = {}
        for tp, offset in offsets.items():
            try:
                partition = self.get_partition_or_raise(tp)
                low = partition.delete_records_on_leader(offset)
            except (KafkaError, OSError) as e:
                results[tp] = DeleteRecordsResult(_error_result_code(e))
                continue
            results[tp] = DeleteRecordsResult(ErrorCode.NONE, low)
            self.fetch_purgatory.check_and_complete(tp)
        requested = {
            tp: (self.partitions[tp].log.high_watermark if offset == -1 else offset)
            for tp, offset in offsets.items()
            if results[tp].error_code is ErrorCode.NONE
        }
        if all(results[tp].low_watermark >= requested[tp] for tp in requested):
            return results
        operation = DelayedDeleteRecords(max(0, timeout_ms), requested, results, self)
        if self.delete_records_purgatory.try_complete_else_watch(operation, list(requested)):
            return operation.future.result()
        return await _await_operation(operation)

    # -- lifecycle ----------------------------------------------------------------------------

    def enable_replica_fetchers(
        self,
        endpoint_for_leader: Callable[[int], Any],
        fetcher_config: Any = None,
    ):
        """Follow leaders from now on: ``endpoint_for_leader(leader_id)`` gives the way to a
        leader (``replica_fetcher.remote_leader_endpoints(metadata_cache,
        inter_broker_listener, broker_id)`` in a broker). Returns the fetcher manager."""
        from kafkalite.broker.replica_fetcher import ReplicaFetcherConfig, ReplicaFetcherManager

        if fetcher_config is not None and not isinstance(fetcher_config, ReplicaFetcherConfig):
            fetcher_config = ReplicaFetcherConfig.from_broker_config(fetcher_config)
        manager = ReplicaFetcherManager(self, endpoint_for_leader, self.time, fetcher_config)
        self.replica_fetcher_manager = manager
        return manager

    async def shutdown(self) -> None:
        """Stop the fetchers, complete every waiter (their conditions are re-checked, the rest
        time out now), cancel ISR writes in flight and snapshot the producer state."""
        fetchers = self.replica_fetcher_manager
        if fetchers is not None and hasattr(fetchers, "shutdown"):
            await fetchers.shutdown()
        self.shutting_down = True
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()
        self.delete_records_purgatory.shutdown()
        for task in list(self._isr_tasks):
            task.cancel()
        await asyncio.gather(*list(self._isr_tasks), return_exceptions=True)
        await self.take_producer_snapshots_async()
