"""Value types passed between the request handlers and the replica manager.

Inputs carry what the handler decoded from a request; results carry what it encodes into the
response, per partition, with an ``ErrorCode`` (never an exception: CONTRIBUTING.md, convention 9).
Offsets and epochs use Kafka's sentinels: -1 for "unknown / not given".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kafkalite.protocol.errors import ErrorCode

NO_EPOCH = -1
UNKNOWN_OFFSET = -1

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4  # ListOffsets v8+ (KIP-405): the local log start
LATEST_TIERED_TIMESTAMP = -5  # ListOffsets v9+ (KIP-1005): nothing is tiered here

# Replica ids in Fetch / ListOffsets requests.
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2
FUTURE_LOCAL_REPLICA_ID = -3

# StopReplica's leader epoch for a partition of a topic being deleted (the leader sentinels,
# NO_LEADER and LEADER_DURING_DELETE, are kafkalite.zk.types').
EPOCH_DURING_DELETE = -2


class IsolationLevel(Enum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class FetchIsolation(Enum):
    """How far a read may go: followers to the log end, read_uncommitted consumers to the high
    watermark, read_committed ones to the last stable offset (min(first offset of the oldest
    open transaction, HW))."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartitionState:
    """One partition of a LeaderAndIsr request (Kafka's LeaderAndIsrPartitionState)."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False


@dataclass(slots=True)
class LeaderAndIsrResult:
    """Top-level error (STALE_CONTROLLER_EPOCH) and per-partition errors."""

    error_code: ErrorCode
    partition_errors: dict[Any, ErrorCode] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StopReplicaPartitionState:
    topic: str
    partition: int
    leader_epoch: int = NO_EPOCH  # -2 (EPOCH_DURING_DELETE) when the topic is being deleted
    delete_partition: bool = False


@dataclass(slots=True)
class StopReplicaResult:
    error_code: ErrorCode
    partition_errors: dict[Any, ErrorCode] = field(default_factory=dict)


@dataclass(slots=True)
class ProduceResult:
    """Per-partition outcome of ``append_records`` (ProduceResponse PartitionProduceResponse).

    ``base_offset`` is the first offset assigned (-1 on error); ``log_append_time`` -1 unless the
    topic uses LogAppendTime; ``log_start_offset`` the log start after the append.
    """

    error_code: ErrorCode = ErrorCode.NONE
    base_offset: int = UNKNOWN_OFFSET
    log_append_time: int = -1
    log_start_offset: int = UNKNOWN_OFFSET
    error_message: str | None = None
    last_offset: int = UNKNOWN_OFFSET
    duplicate: bool = False
    record_errors: tuple[Any, ...] = ()
    """The records refused (protocol.errors.RecordError), for INVALID_RECORD (KIP-467)."""


@dataclass(frozen=True, slots=True)
class FetchParams:
    """Request-level fetch parameters. ``replica_id`` >= 0 marks a follower fetch.

    ``client_rack`` is a consumer's client metadata (Fetch v11+: its `client.rack`, "" when
    unset), None for older fetches: only a consumer with client metadata may read from a
    follower, and only its fetches to a leader are answered with a preferred read replica."""

    replica_id: int = CONSUMER_REPLICA_ID
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 50 * 1024 * 1024
    isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED
    hard_max_bytes_limit: bool = False  # Fetch v0-v2: never exceed max_bytes, not even by one batch
    client_rack: str | None = None

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def fetch_only_from_leader(self) -> bool:
        # Kafka's FetchParams.fetchOnlyLeader: followers, and consumers without client metadata.
        if self.replica_id == CONSUMER_REPLICA_ID:
            return self.client_rack is None
        return self.replica_id != DEBUGGING_REPLICA_ID

    @property
    def isolation(self) -> FetchIsolation:
        if self.is_from_follower:
            return FetchIsolation.LOG_END
        if self.isolation_level is IsolationLevel.READ_COMMITTED:
            return FetchIsolation.TXN_COMMITTED
        return FetchIsolation.HIGH_WATERMARK


@dataclass(frozen=True, slots=True)
class FetchInfo:
    """Per-partition fetch request data (FetchRequest.PartitionData)."""

    fetch_offset: int
    max_bytes: int
    log_start_offset: int = UNKNOWN_OFFSET  # a follower's log start offset
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """(epoch, end offset) answer of OffsetsForLeaderEpoch; -1/-1 when undefined."""

    error_code: ErrorCode = ErrorCode.NONE
    leader_epoch: int = NO_EPOCH
    end_offset: int = UNKNOWN_OFFSET


@dataclass(slots=True)
class FetchPartitionData:
    """Per-partition fetch result.

    ``records`` is what the log returned: an object supporting ``len()`` and (for non-empty
    reads) ``view()`` / sendfile coordinates, or ``b""`` when nothing was read; it holds whole
    batches only. ``diverging_epoch`` is set (Fetch v12+) when the fetcher's last fetched epoch
    ends before its fetch offset on this log.
    """

    error_code: ErrorCode = ErrorCode.NONE
    high_watermark: int = UNKNOWN_OFFSET
    last_stable_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    records: Any = b""
    preferred_read_replica: int = -1
    diverging_epoch: EpochEndOffset | None = None
    aborted_transactions: list[Any] | None = None
    log_end_offset: int = UNKNOWN_OFFSET

    @property
    def records_size(self) -> int:
        return len(self.records) if self.records is not None else 0


@dataclass(frozen=True, slots=True)
class ListOffsetResult:
    error_code: ErrorCode = ErrorCode.NONE
    timestamp: int = -1
    offset: int = UNKNOWN_OFFSET
    leader_epoch: int = NO_EPOCH


@dataclass(frozen=True, slots=True)
class DeleteRecordsResult:
    error_code: ErrorCode = ErrorCode.NONE
    low_watermark: int = UNKNOWN_OFFSET


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    """One hosted partition as the admin API and metrics show it."""

    topic: str
    partition: int
    is_leader: bool
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    under_replicated: bool
    under_min_isr: bool
