"""The group coordinator's decisions, sans I/O (Kafka's GroupCoordinator + GroupMetadataManager).

``GroupCoordinatorCore`` owns every group of the ``__consumer_offsets`` partitions this broker
leads and decides everything the classic group protocol needs: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups, DeleteGroups,
session and rebalance timeouts, and offsets retention. It never sleeps, never awaits, never
touches a socket or a log: the caller (``coordinator.GroupCoordinator``, or a test) drives it.

How it talks to the outside world:

- **Requests** carry a caller-chosen *token*. A request whose answer is known at once gets it in
  the returned ``Effects.responses``; one that must wait (a JoinGroup in a rebalance, a follower's
  SyncGroup, a commit being written) gets it in the ``Effects`` of a later call. Every token gets
  exactly one response, including when its group is unloaded (NOT_COORDINATOR) or a member is
  replaced (FENCED_INSTANCE_ID).
- **Records to write** come out as ``Append`` (partition of ``__consumer_offsets`` + key/value
  pairs, None value = tombstone). The caller writes them, in the order given, and reports the
  outcome with ``on_append_complete(append_id, error, base_offset)``. Persist before announce:
  an assignment is handed to members, and a committed offset becomes visible to OffsetFetch,
  only after its record was written.
- **Time** comes from the injected ``time_ms`` function; timers (session timeouts, join and sync
  phase deadlines, new-member and pending-member expiry, the periodic offsets-retention check)
  live in a ``TimerQueue``. The caller asks ``next_deadline()`` and calls ``tick()`` once the
  clock has passed it.
- **Ownership**: ``begin_loading(partition, epoch)`` / ``load_record(...)`` /
  ``complete_loading(partition, epoch)`` rebuild the groups of a partition this broker became
  leader of; ``unload_partition(partition)`` drops them when leadership moves. While loading,
  requests for its groups get COORDINATOR_LOAD_IN_PROGRESS (SyncGroup: REBALANCE_IN_PROGRESS,
  Heartbeat: NONE, as Kafka answers older clients); for partitions it does not own,
  NOT_COORDINATOR; before ``startup()``/after ``shutdown()``, COORDINATOR_NOT_AVAILABLE.

Not safe to call concurrently: one caller at a time (the asyncio shell runs it on one loop).
"""

from __future__ import annotations

import functools
import itertools
import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import structlog

from kafkalite.group.config import GroupConfig, OffsetConfig
from kafkalite.group.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ClassicMemberView,
    ConsumerGroup,
    ConsumerGroupError,
    ConsumerGroupLoader,
    HeartbeatResult,
    MemberState,
    TopicsView,
    from_classic_group,
)
from kafkalite.group.metadata import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    NO_GENERATION,
    NO_LEADER,
    NO_MEMBER_ID,
    NO_PROTOCOL,
    CommitRecordMetadataAndOffset,
    GroupMetadata,
    GroupOverview,
    GroupState,
    GroupSummary,
    JoinGroupResponseMember,
    MemberMetadata,
    OffsetAndMetadata,
)
from kafkalite.group.records import (
    ConsumerGroupKey,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_record,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    partition_for,
)
from kafkalite.group.timers import TimerQueue
from kafkalite.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

log = structlog.get_logger(__name__)

Token = Hashable
Record = tuple[bytes, bytes | None]

#: timers that fence a member of a consumer group, and why (a classic member inside one also
#: has Kafka's join and sync timeouts)
_CG_MEMBER_TIMERS = {
    "cg-session": "session timeout",
    "cg-revoke": "rebalance timeout",
    "cg-join": "join timeout",
    "cg-sync": "sync timeout",
}


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_LEADER
    members: tuple[JoinGroupResponseMember, ...] = ()
    skip_assignment: bool = False
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    error: ErrorCode
    members: tuple[LeaveMemberResult, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetFetchPartition:
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    error: ErrorCode
    partitions: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Append:
    """Records for one ``__consumer_offsets`` partition, to be written in this order; report
    the outcome with ``on_append_complete(append_id, ...)``."""

    append_id: int
    partition: int
    records: tuple[Record, ...]
    #: a transactional append (TxnOffsetCommit): the producer's id and epoch, -1 otherwise
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True)
class Effects:
    responses: list[tuple[Token, object]] = field(default_factory=list)
    appends: list[Append] = field(default_factory=list)

    def response_for(self, token: Token) -> object | None:
        for t, r in self.responses:
            if t == token:
                return r
        return None

    def extend(self, other: Effects) -> None:
        self.responses.extend(other.responses)
        self.appends.extend(other.appends)


class PartitionStatus(Enum):
    LOADING = "loading"
    LOADED = "loaded"


@dataclass(slots=True)
class _Loading:
    epoch: int
    offsets: dict[tuple[str, TopicPartition], tuple[int, OffsetAndMetadata]] = field(
        default_factory=dict
    )
    groups: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    # transactional offset commits not yet ended by a marker, per producer id
    txn_offsets: dict[int, dict[tuple[str, TopicPartition], tuple[int, OffsetAndMetadata]]] = field(
        default_factory=dict
    )
    consumer_groups: dict[str, ConsumerGroupLoader] = field(default_factory=dict)


def _older(append_offset: int | None, than: int | None) -> bool:
    """Kafka's CommitRecordMetadataAndOffset.olderThan: was the first written before the
    second? Unknown positions (offsets loaded from the log) count as older."""
    return append_offset is None or than is None or append_offset < than


def _offset_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a failed offset-commit append onto what the client may act on."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error


def _group_store_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a failed group-metadata append (storeGroup)."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error is ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    if error in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def _java_string_length(s: str) -> int:
    """Java's String.length() (UTF-16 code units), which Kafka compares with
    offset.metadata.max.bytes."""
    return len(s.encode("utf-16-le")) // 2


_EXPIRE_OFFSETS_TIMER = ("expire-offsets",)


def _ignore_append(error: ErrorCode, base_offset: int | None) -> None:
    """Records whose outcome nobody waits for (a fenced member's tombstones...)."""


# --------------------------------------------------------------------------- the core


class GroupCoordinatorCore:
    def __init__(
        self,
        broker_id: int,
        group_config: GroupConfig | None = None,
        offset_config: OffsetConfig | None = None,
        *,
        time_ms: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self.group_config = group_config or GroupConfig()
        self.offset_config = offset_config or OffsetConfig()
        self._time_ms = time_ms
        self.is_active = False
        self.groups: dict[str, GroupMetadata] = {}
        self.partitions: dict[int, PartitionStatus] = {}
        self._partition_epochs: dict[int, int] = {}
        self._commit_ids = itertools.count()  # tells pending commits of a partition apart
        self._loading: dict[int, _Loading] = {}
        self.timers: TimerQueue[tuple[str, ...]] = TimerQueue()
        #: per group in PreparingRebalance: (initial delayed join?, configured delay, remaining)
        self._join_phase: dict[str, tuple[bool, int]] = {}
        self._sync_generation: dict[str, int] = {}
        self._append_callbacks: dict[int, Callable[[ErrorCode, int | None], None]] = {}
        self._next_append_id = 0
        self._out = Effects()
        #: per consumer group: its group-level ``consumer.assignment.interval.ms`` and
        #: ``consumer.assignor.offload.enable`` as last given (GROUP config resources)
        self._assignment_overrides: dict[str, tuple[int | None, bool | None]] = {}
        #: per consumer group: its group-level ``consumer.session.timeout.ms`` and
        #: ``consumer.heartbeat.interval.ms`` as last given (None: the broker's)
        self._session_overrides: dict[str, tuple[int | None, int | None]] = {}
        #: the broker's topics as the last ConsumerGroupHeartbeat saw them (a deferred
        #: assignment resolves subscriptions against it)
        self._topics: TopicsView | None = None

    # ------------------------------------------------------------------ lifecycle

    def startup(self) -> None:
        self.is_active = True
        self.timers.set(
            _EXPIRE_OFFSETS_TIMER,
            self._now() + self.offset_config.offsets_retention_check_interval_ms,
        )

    def shutdown(self) -> Effects:
        for partition in list(self.partitions):
            self._unload(partition)
        self.is_active = False
        self.timers = TimerQueue()
        return self._drain()

    def _now(self) -> int:
        return self._time_ms()

    def _drain(self) -> Effects:
        out, self._out = self._out, Effects()
        return out

    def _respond(self, token: Token | None, result: object) -> None:
        if token is not None:
            self._out.responses.append((token, result))

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.offset_config.offsets_topic_num_partitions)

    # ------------------------------------------------------------------ ownership and loading

    def is_group_local(self, group_id: str) -> bool:
        return self.partitions.get(self.partition_for(group_id)) is PartitionStatus.LOADED

    def is_group_loading(self, group_id: str) -> bool:
        return self.partitions.get(self.partition_for(group_id)) is PartitionStatus.LOADING

    @property
    def is_loading(self) -> bool:
        return any(s is PartitionStatus.LOADING for s in self.partitions.values())

    def owned_partitions(self) -> dict[int, PartitionStatus]:
        return dict(self.partitions)

    def is_newer_epoch(self, partition: int, epoch: int) -> bool:
        """False when ``partition`` is already loaded or loading at ``epoch`` or later (a
        repeated LeaderAndIsr): nothing to do then."""
        return partition not in self.partitions or self._partition_epochs.get(partition, -1) < epoch

    def continue_leading(self, partition: int, epoch: int) -> bool:
        """A new leader epoch for a partition this coordinator has loaded and still leads (a
        follower went offline, a reassignment): keep its groups, only take the epoch (Kafka's
        makeLeaders skips a partition already led here, so no reload). False when the
        partition is not loaded (then the caller loads it)."""
        if self.partitions.get(partition) is not PartitionStatus.LOADED:
            return False
        self._partition_epochs[partition] = max(epoch, self._partition_epochs.get(partition, -1))
        return True

    def begin_loading(self, partition: int, epoch: int) -> Effects:
        """Became leader of ``partition`` at ``epoch``: drop whatever we held for it and start
        rebuilding its groups from the records the caller feeds to ``load_record``."""
        if partition in self.partitions:
            self._unload(partition)
        self.partitions[partition] = PartitionStatus.LOADING
        self._partition_epochs[partition] = epoch
        self._loading[partition] = _Loading(epoch)
        return self._drain()

    def load_record(self, partition: int, offset: int, key: bytes, value: bytes | None) -> None:
        """One record of the partition, in log order. Later records win; tombstones delete."""
        state = self._loading.get(partition)
        if state is None:
            raise RuntimeError(f"partition {partition} is not loading")
        k, v = decode_record(key, value)
        if isinstance(k, ConsumerGroupKey):
            loader = state.consumer_groups.get(k.group)
            if loader is None:
                loader = state.consumer_groups[k.group] = ConsumerGroupLoader(k.group)
            loader.apply(k, v)
            return
        if isinstance(k, OffsetCommitKey):
            tp_key = (k.group, TopicPartition(k.topic, k.partition))
            if v is None:
                state.offsets.pop(tp_key, None)
            else:
                assert isinstance(v, OffsetCommitValue)
                state.offsets[tp_key] = (
                    offset,
                    OffsetAndMetadata(
                        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
                    ),
                )
        else:
            assert isinstance(k, GroupMetadataKey)
            if v is None:
                # a group tombstone removes the group, not its offsets (those have their own)
                state.groups[k.group] = None
            else:
                assert isinstance(v, GroupMetadataValue)
                state.groups[k.group] = v

    def load_txn_record(
        self, partition: int, producer_id: int, offset: int, key: bytes, value: bytes | None
    ) -> None:
        """A record of a transactional batch (TxnOffsetCommit): held until its marker."""
        state = self._loading.get(partition)
        if state is None:
            raise RuntimeError(f"partition {partition} is not loading")
        k, v = decode_record(key, value)
        if not isinstance(k, OffsetCommitKey) or v is None:
            return
        assert isinstance(v, OffsetCommitValue)
        state.txn_offsets.setdefault(producer_id, {})[
            (k.group, TopicPartition(k.topic, k.partition))
        ] = (
            offset,
            OffsetAndMetadata(
                v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
            ),
        )

    def load_txn_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker: its offsets become committed (if newer) or are dropped."""
        state = self._loading.get(partition)
        if state is None:
            raise RuntimeError(f"partition {partition} is not loading")
        pending = state.txn_offsets.pop(producer_id, {})
        if not commit:
            return
        for key, (offset, om) in pending.items():
            current = state.offsets.get(key)
            if current is None or current[0] < offset:
                state.offsets[key] = (offset, om)

    def complete_loading(self, partition: int, epoch: int) -> Effects:
        """The whole partition was read: install its groups (Empty or Stable) and start their
        members' session timers. Ignored when leadership moved meanwhile (epoch mismatch)."""
        state = self._loading.get(partition)
        if state is None or state.epoch != epoch or self._partition_epochs.get(partition) != epoch:
            return self._drain()
        del self._loading[partition]
        now = self._now()
        loaded: dict[str, GroupMetadata] = {}
        for group_id, value in state.groups.items():
            if value is not None:
                loaded[group_id] = self._group_from_record(group_id, value, now)
        for (group_id, tp), (append_offset, om) in state.offsets.items():
            group = loaded.get(group_id)
            if group is None:
                # offsets without group metadata: a group that only stores offsets
                group = loaded[group_id] = GroupMetadata(group_id, current_state_timestamp=now)
            group.offsets[tp] = CommitRecordMetadataAndOffset(append_offset, om)
        for group_id, loader in state.consumer_groups.items():
            cg = loader.build(self.group_config.consumer_assignors[0])
            if cg is None:
                continue
            group = loaded.get(group_id)
            if group is None or group.members:
                # a classic group with members too (an upgrade whose classic tombstone was not
                # written): the consumer group, written after it, wins; the offsets stay
                fresh = GroupMetadata(group_id, current_state_timestamp=now)
                if group is not None:
                    fresh.offsets = group.offsets
                group = loaded[group_id] = fresh
            self._attach_consumer_group(group, cg)
        for producer_id, pending in state.txn_offsets.items():
            for (group_id, tp), (append_offset, om) in pending.items():
                group = loaded.get(group_id)
                if group is None:
                    group = loaded[group_id] = GroupMetadata(group_id, current_state_timestamp=now)
                group.pending_txn_offsets.setdefault(producer_id, {})[tp] = (
                    CommitRecordMetadataAndOffset(append_offset, om)
                )
        self.partitions[partition] = PartitionStatus.LOADED
        for group_id, group in loaded.items():
            if group_id in self.groups:
                continue
            self.groups[group_id] = group
            for member in group.members.values():
                self._schedule_heartbeat(group, member)
            if group.consumer is not None:
                for member_id, cg_member in group.consumer.members.items():
                    if cg_member.is_classic:  # its own (JoinGroup) session timeout
                        self._schedule_classic_session(group_id, cg_member)
                    else:
                        self._schedule_consumer_session(group_id, member_id)
            if len(group) > self.group_config.group_max_size:
                self._prepare_rebalance(group, "loaded group is over capacity")
        return self._drain()

    def _group_from_record(
        self, group_id: str, value: GroupMetadataValue, now: int
    ) -> GroupMetadata:
        group = GroupMetadata(
            group_id,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            current_state_timestamp=value.current_state_timestamp
            if value.current_state_timestamp >= 0
            else None,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol if value.members else None,
        )
        for m in value.members:
            member = MemberMetadata(
                member_id=m.member_id,
                group_id=group_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=value.protocol_type,
                supported_protocols=[(value.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            group.add(member)
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        if value.members:
            group.leader_id = (
                value.leader if value.leader in group.members else next(iter(group.members))
            )
            group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def is_current_resignation(self, partition: int, epoch: int | None) -> bool:
        """False for a resignation older than the epoch we loaded (a stale request)."""
        return epoch is None or self._partition_epochs.get(partition, -1) <= epoch

    def unload_partition(self, partition: int, epoch: int | None = None) -> Effects:
        """Leadership of ``partition`` moved away: answer everyone waiting with NOT_COORDINATOR
        and forget its groups. An ``epoch`` older than the one we loaded is ignored."""
        if not self.is_current_resignation(partition, epoch):
            return self._drain()
        self._unload(partition)
        return self._drain()

    def _unload(self, partition: int) -> None:
        self.partitions.pop(partition, None)
        self._partition_epochs.pop(partition, None)
        self._loading.pop(partition, None)
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(group_id)
            self._forget_settings(group_id)
            for member in group.members.values():
                if member.awaiting_join is not None:
                    self._respond(
                        member.awaiting_join,
                        JoinGroupResult(member.member_id, error=ErrorCode.NOT_COORDINATOR),
                    )
                    member.awaiting_join = None
                if member.awaiting_sync is not None:
                    self._respond(
                        member.awaiting_sync, SyncGroupResult(error=ErrorCode.NOT_COORDINATOR)
                    )
                    member.awaiting_sync = None
                self.timers.cancel(("hb", group_id, member.member_id))
            for pending in group.pending_members:
                self.timers.cancel(("pending", group_id, pending))
            self._cancel_group_timers(group)
            group.state = GroupState.DEAD

    def _cancel_group_timers(self, group: GroupMetadata) -> None:
        if group.consumer is not None:
            for member_id in group.consumer.members:
                self._cancel_consumer_timers(group.group_id, member_id)
        self.timers.cancel(("join", group.group_id))
        self.timers.cancel(("sync", group.group_id))
        self._join_phase.pop(group.group_id, None)
        self._sync_generation.pop(group.group_id, None)

    # ------------------------------------------------------------------ validation

    def _validate_group_status(
        self, group_id: str | None, allow_empty_id: bool
    ) -> ErrorCode | None:
        if group_id is None or (not allow_empty_id and group_id == ""):
            return ErrorCode.INVALID_GROUP_ID
        if not self.is_active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        status = self.partitions.get(self.partition_for(group_id))
        if status is PartitionStatus.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if status is not PartitionStatus.LOADED:
            return ErrorCode.NOT_COORDINATOR
        return None

    @staticmethod
    def _validate_current_member(
        group: GroupMetadata, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
        """Kafka's validateCurrentMember: a static member's instance id must map to this member
        id (another id: FENCED_INSTANCE_ID, none: UNKNOWN_MEMBER_ID); a dynamic member must be
        in the group."""
        if group_instance_id is not None:
            current = group.static_members.get(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # ------------------------------------------------------------------ JoinGroup

    def join_group(
        self,
        token: Token,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        reason: str | None = None,
        supports_skip_assignment: bool = False,
        topics: TopicsView | None = None,
    ) -> Effects:
        """JoinGroup. ``require_known_member_id`` is ``version >= 4`` (KIP-394); it only applies
        to dynamic members. ``rebalance_timeout_ms`` < 0 (v0) means the session timeout.
        ``supports_skip_assignment`` is ``version >= 9`` (KIP-814)."""
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        protocols = list(protocols)
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error is not None:
            self._respond(token, JoinGroupResult(member_id, error=error))
            return self._drain()
        gc = self.group_config
        if (
            not gc.group_min_session_timeout_ms
            <= session_timeout_ms
            <= gc.group_max_session_timeout_ms
        ):
            self._respond(
                token, JoinGroupResult(member_id, error=ErrorCode.INVALID_SESSION_TIMEOUT)
            )
            return self._drain()
        is_unknown_member = member_id == NO_MEMBER_ID
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown_member:
                self._respond(token, JoinGroupResult(member_id, error=ErrorCode.UNKNOWN_MEMBER_ID))
                return self._drain()
            group = self.groups[group_id] = GroupMetadata(
                group_id, current_state_timestamp=self._now()
            )
        if group.consumer is not None and group_instance_id is not None:
            # a static classic member replacing a static member of the consumer protocol
            # (same instance id): the latter goes, and if it was the last one of its protocol
            # the group is downgraded and this member joins the classic group
            self._replace_consumer_static_member(group, group_instance_id)
        if group.consumer is not None:
            if not group.consumer.is_empty():
                if topics is None:  # a caller that cannot resolve subscriptions
                    self._respond(
                        token,
                        JoinGroupResult(member_id, error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
                    )
                    return self._drain()
                # a classic member joins a consumer group with members as a classic member of
                # it (Kafka's classicGroupJoinToConsumerGroup)
                self._classic_join_to_consumer_group(
                    token,
                    topics,
                    group,
                    require_known_member_id,
                    member_id,
                    group_instance_id,
                    client_id,
                    client_host,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    protocol_type,
                    protocols,
                )
                return self._drain()
            # an empty consumer group becomes a classic one (Kafka's downgrade of an empty
            # group): its records go, its offsets stay
            self._append(
                self.partition_for(group_id), tuple(group.consumer.tombstones()), _ignore_append
            )
            group.consumer = None
            group.protocol_type = None
            group.subscribed_topics = None
            group.state = GroupState.EMPTY
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            self.timers.cancel(("hb", group_id, member_id))
            self._respond(
                token, JoinGroupResult(NO_MEMBER_ID, error=ErrorCode.GROUP_MAX_SIZE_REACHED)
            )
        elif is_unknown_member:
            self._do_unknown_join_group(
                token,
                group,
                group_instance_id,
                require_known_member_id and group_instance_id is None,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
                supports_skip_assignment,
            )
        else:
            self._do_join_group(
                token,
                group,
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        self._maybe_forget_unused_group(group)
        return self._drain()

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        limit = self.group_config.group_max_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return (
                group.has(member_id) and group.get(member_id).is_awaiting_join
            ) or group.num_members_awaiting_join < limit
        return group.has(member_id) or len(group) < limit

    def _maybe_forget_unused_group(self, group: GroupMetadata) -> None:
        """A group created by a JoinGroup that was refused (bad protocol, ...) leaves no trace."""
        if (
            group.is_state(GroupState.EMPTY)
            and not group.members
            and not group.pending_members
            and not group.has_offsets()
            and group.generation_id == 0
            and self.groups.get(group.group_id) is group
        ):
            del self.groups[group.group_id]
            self._forget_settings(group.group_id)

    def _do_unknown_join_group(
        self,
        token,
        group,
        group_instance_id,
        require_known_member_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        session_timeout_ms,
        protocol_type,
        protocols,
        supports_skip_assignment,
    ) -> None:
        if group.is_state(GroupState.DEAD):
            self._respond(
                token, JoinGroupResult(NO_MEMBER_ID, error=ErrorCode.COORDINATOR_NOT_AVAILABLE)
            )
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            self._respond(
                token, JoinGroupResult(NO_MEMBER_ID, error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            )
            return
        new_member_id = group.generate_member_id(client_id, group_instance_id)
        if group.has_static_member(group_instance_id):
            self._update_static_member_and_rebalance(
                token,
                group,
                new_member_id,
                group_instance_id,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocols,
                supports_skip_assignment,
            )
        elif require_known_member_id:
            group.pending_members.add(new_member_id)
            self.timers.set(
                ("pending", group.group_id, new_member_id), self._now() + session_timeout_ms
            )
            self._respond(token, JoinGroupResult(new_member_id, error=ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(
                token,
                group,
                new_member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )

    def _do_join_group(
        self,
        token,
        group,
        member_id,
        group_instance_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        session_timeout_ms,
        protocol_type,
        protocols,
    ) -> None:
        if group.is_state(GroupState.DEAD):
            self._respond(
                token, JoinGroupResult(member_id, error=ErrorCode.COORDINATOR_NOT_AVAILABLE)
            )
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            self._respond(
                token, JoinGroupResult(member_id, error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            )
            return
        if member_id in group.pending_members:
            # a dynamic member coming back with the id we handed it (KIP-394)
            self._add_member_and_rebalance(
                token,
                group,
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )
            return
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            self._respond(token, JoinGroupResult(member_id, error=error))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(
                token, group, member, rebalance_timeout_ms, session_timeout_ms, protocols
            )
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # the member lost our JoinGroup response: give it the current generation again
                self._respond(token, self._join_result(group, member))
            else:
                self._update_member_and_rebalance(
                    token, group, member, rebalance_timeout_ms, session_timeout_ms, protocols
                )
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # metadata changed, or the leader asks for a rebalance (e.g. topic metadata changed)
                self._update_member_and_rebalance(
                    token, group, member, rebalance_timeout_ms, session_timeout_ms, protocols
                )
            else:
                self._respond(token, self._join_result(group, member, with_members=False))
        else:
            self._respond(token, JoinGroupResult(member_id, error=ErrorCode.UNKNOWN_MEMBER_ID))

    def _join_result(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        with_members: bool = True,
        skip_assignment: bool = False,
    ) -> JoinGroupResult:
        members = (
            tuple(group.current_member_metadata())
            if with_members and group.is_leader(member.member_id)
            else ()
        )
        return JoinGroupResult(
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or NO_LEADER,
            members=members,
            skip_assignment=skip_assignment,
        )

    def _set_awaiting_join(self, member: MemberMetadata, token: Token | None) -> None:
        if member.awaiting_join is not None and member.awaiting_join != token:
            # a second JoinGroup while the first still waits: the first is answered so nobody
            # waits forever; the client only listens to the latest
            self._respond(
                member.awaiting_join,
                JoinGroupResult(member.member_id, error=ErrorCode.REBALANCE_IN_PROGRESS),
            )
        member.awaiting_join = token

    def _add_member_and_rebalance(
        self,
        token,
        group,
        member_id,
        group_instance_id,
        client_id,
        client_host,
        rebalance_timeout_ms,
        session_timeout_ms,
        protocol_type,
        protocols,
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_id=group.group_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            supported_protocols=list(protocols),
            is_new=True,
        )
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        member.awaiting_join = token
        # A new member cannot heartbeat before it has its member id, and its JoinGroup may sit
        # here for a whole rebalance: time the join itself out instead (the client retries).
        self._schedule_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        if member.is_static_member:
            group.static_members[group_instance_id] = member_id
        else:
            group.pending_members.discard(member_id)
            self.timers.cancel(("pending", group.group_id, member_id))
        self._maybe_prepare_rebalance(group, "adding new member")

    def _update_member_and_rebalance(
        self, token, group, member, rebalance_timeout_ms, session_timeout_ms, protocols
    ) -> None:
        group.update_member(member, protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self._set_awaiting_join(member, token)
        self._maybe_prepare_rebalance(group, "updating member metadata")

    def _update_static_member_and_rebalance(
        self,
        token,
        group,
        new_member_id,
        group_instance_id,
        rebalance_timeout_ms,
        session_timeout_ms,
        protocols,
        supports_skip_assignment,
    ) -> None:
        old_member_id = group.static_member_id(group_instance_id)
        current_leader = group.leader_id or NO_LEADER
        old_member = group.get(old_member_id)
        old_protocols = list(old_member.supported_protocols)
        old_rebalance_timeout, old_session_timeout = (
            old_member.rebalance_timeout_ms,
            old_member.session_timeout_ms,
        )
        # the old incarnation is fenced: whatever it still waits for is answered
        if old_member.awaiting_join is not None:
            self._respond(
                old_member.awaiting_join,
                JoinGroupResult(old_member_id, error=ErrorCode.FENCED_INSTANCE_ID),
            )
            old_member.awaiting_join = None
        if old_member.awaiting_sync is not None:
            self._respond(
                old_member.awaiting_sync, SyncGroupResult(error=ErrorCode.FENCED_INSTANCE_ID)
            )
            old_member.awaiting_sync = None
        self.timers.cancel(("hb", group.group_id, old_member_id))
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group, member)
        group.update_member(member, protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        state = group.state
        if state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # nothing to reassign: persist the new member id, then answer without a rebalance.
                # A rejoining leader must not run its assignor (a Stable group would ignore the
                # result): v9+ clients are told so with skip_assignment (KIP-814), older ones
                # get the old leader id, so they do not see themselves as leader.
                member.awaiting_join = token
                generation = group.generation_id
                assignment = {m.member_id: m.assignment for m in group.members.values()}

                def on_stored(error: ErrorCode) -> None:
                    if member.awaiting_join != token:
                        return  # already answered (fenced again, or its group was unloaded)
                    unchanged = (
                        group.is_state(GroupState.STABLE) and group.generation_id == generation
                    )
                    if error is not ErrorCode.NONE:
                        if unchanged and group.has(new_member_id):
                            # the new member id is not durable: give the old one back
                            group.update_member(member, old_protocols)
                            member.rebalance_timeout_ms = old_rebalance_timeout
                            member.session_timeout_ms = old_session_timeout
                            self.timers.cancel(("hb", group.group_id, new_member_id))
                            restored = group.replace_static_member(
                                group_instance_id, new_member_id, old_member_id
                            )
                            self._schedule_heartbeat(group, restored)
                        member.awaiting_join = None
                        self._respond(
                            token,
                            JoinGroupResult(
                                NO_MEMBER_ID,
                                group.generation_id,
                                group.protocol_type,
                                group.protocol_name,
                                current_leader,
                                error=error,
                            ),
                        )
                        return
                    if not unchanged:
                        return  # a rebalance started meanwhile; it answers this JoinGroup
                    member.awaiting_join = None
                    is_leader = supports_skip_assignment and group.is_leader(new_member_id)
                    self._respond(
                        token,
                        JoinGroupResult(
                            member_id=new_member_id,
                            generation_id=group.generation_id,
                            protocol_type=group.protocol_type,
                            protocol_name=group.protocol_name,
                            leader_id=(group.leader_id or NO_LEADER)
                            if supports_skip_assignment
                            else current_leader,
                            members=tuple(group.current_member_metadata()) if is_leader else (),
                            skip_assignment=is_leader,
                        ),
                    )

                self._store_group(group, assignment, on_stored)
            else:
                member.awaiting_join = token
                self._maybe_prepare_rebalance(
                    group, "static member joined with different protocols"
                )
        elif state is GroupState.COMPLETING_REBALANCE:
            member.awaiting_join = token
            self._prepare_rebalance(group, "static member rejoined during CompletingRebalance")
        elif state is GroupState.PREPARING_REBALANCE:
            member.awaiting_join = token
        else:
            raise RuntimeError(f"group {group.group_id}: static member rejoined in state {state}")

    # ------------------------------------------------------------------ rebalance phases

    def _rebalance_timeout_ms(self, group: GroupMetadata) -> int:
        return max((m.rebalance_timeout_ms for m in group.members.values()), default=0)

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        log.info(
            "preparing to rebalance group",
            group=group.group_id,
            state=str(group.state),
            generation=group.generation_id,
            reason=reason,
        )
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self.timers.cancel(("sync", group.group_id))
        self._sync_generation.pop(group.group_id, None)
        group.pending_sync_members.clear()
        now = self._now()
        initial = group.is_state(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, now)
        if initial:
            # group.initial.rebalance.delay.ms: wait for more members before the first
            # generation; each newcomer extends the wait, up to the rebalance timeout
            delay = self.group_config.group_initial_rebalance_delay_ms
            remaining = max(self._rebalance_timeout_ms(group) - delay, 0)
            self._join_phase[group.group_id] = (True, remaining)
            self.timers.set(("join", group.group_id), now + delay)
        else:
            self._join_phase[group.group_id] = (False, 0)
            self.timers.set(
                ("join", group.group_id), now + max(self._rebalance_timeout_ms(group), 1)
            )
            self._maybe_complete_join(group)

    def _maybe_complete_join(self, group: GroupMetadata) -> None:
        """Kafka's DelayedJoin.tryComplete: done once every member rejoined (the initial delayed
        join never completes early)."""
        phase = self._join_phase.get(group.group_id)
        if phase is None or phase[0]:
            return
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    def _on_join_timer(self, group: GroupMetadata) -> None:
        phase = self._join_phase.get(group.group_id)
        if phase is None or not group.is_state(GroupState.PREPARING_REBALANCE):
            return
        initial, remaining = phase
        if initial and group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.group_config.group_initial_rebalance_delay_ms, remaining)
            self._join_phase[group.group_id] = (True, max(remaining - delay, 0))
            self.timers.set(("join", group.group_id), self._now() + max(delay, 1))
            return
        self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """Kafka's onCompleteJoin: drop dynamic members that did not rejoin, then start the next
        generation (or go Empty) and answer every waiting JoinGroup."""
        self.timers.cancel(("join", group.group_id))
        self._join_phase.pop(group.group_id, None)
        for failed in [m for m in group.not_yet_rejoined_members() if not m.is_static_member]:
            self._remove_member_quietly(group, failed)
        if group.is_state(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined yet: wait another rebalance timeout; session timeouts will clean up
            self._join_phase[group.group_id] = (False, 0)
            self.timers.set(
                ("join", group.group_id), self._now() + max(self._rebalance_timeout_ms(group), 1)
            )
            return
        group.init_next_generation(self._now())
        log.info(
            "group completed its join phase",
            group=group.group_id,
            generation=group.generation_id,
            state=str(group.state),
            members=len(group),
            protocol=group.protocol_name,
        )
        if group.is_state(GroupState.EMPTY):
            self._store_group(group, {}, lambda error: None)
            return
        for member in group.members.values():
            if member.awaiting_join is not None:
                self._respond(member.awaiting_join, self._join_result(group, member))
                member.awaiting_join = None
            self._schedule_heartbeat(group, member)
            member.is_new = False
        # Kafka's DelayedSync: every member must SyncGroup within the rebalance timeout
        self._sync_generation[group.group_id] = group.generation_id
        self.timers.set(
            ("sync", group.group_id), self._now() + max(self._rebalance_timeout_ms(group), 1)
        )

    def _on_sync_timer(self, group: GroupMetadata) -> None:
        generation = self._sync_generation.pop(group.group_id, None)
        if generation != group.generation_id or group.state not in (
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
        ):
            return
        if not group.pending_sync_members:
            return
        for member_id in list(group.pending_sync_members):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member_quietly(group, member)
        group.pending_sync_members.clear()
        if group.is_state(GroupState.DEAD):
            return
        self._prepare_rebalance(group, "members failed to SyncGroup within the rebalance timeout")

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            if member.awaiting_sync is not None:
                if error is ErrorCode.NONE:
                    result = SyncGroupResult(
                        member.assignment, group.protocol_type, group.protocol_name, error
                    )
                else:
                    result = SyncGroupResult(error=error)
                self._respond(member.awaiting_sync, result)
                member.awaiting_sync = None
                # the member may have gone quiet while waiting for the leader: restart its clock
                self._schedule_heartbeat(group, member)

    # ------------------------------------------------------------------ members and timers

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._schedule_expiration(group, member, member.session_timeout_ms)

    def _schedule_expiration(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int
    ) -> None:
        self.timers.set(("hb", group.group_id, member.member_id), self._now() + timeout_ms)

    def _remove_member_quietly(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Remove a member; answer its pending requests with UNKNOWN_MEMBER_ID."""
        if member.awaiting_join is not None:
            self._respond(
                member.awaiting_join,
                JoinGroupResult(NO_MEMBER_ID, error=ErrorCode.UNKNOWN_MEMBER_ID),
            )
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            self._respond(member.awaiting_sync, SyncGroupResult(error=ErrorCode.UNKNOWN_MEMBER_ID))
            member.awaiting_sync = None
        member.is_leaving = True
        self.timers.cancel(("hb", group.group_id, member.member_id))
        group.remove(member.member_id)

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        self._remove_member_quietly(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"{reason}: {member.member_id}")
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self.timers.cancel(("pending", group.group_id, member_id))
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        self._maybe_forget_unused_group(group)

    def _on_heartbeat_expired(self, group: GroupMetadata, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            # a member waiting in a rebalance cannot heartbeat: the join/sync phase deadline
            # covers it, and the session clock restarts when it is answered
            return
        log.info("member session expired", group=group.group_id, member=member_id)
        self._remove_member_and_update_group(group, member, "session expired")

    # ------------------------------------------------------------------ time

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def tick(self) -> Effects:
        """Fire every timer whose deadline has passed (by the injected clock)."""
        now = self._now()
        while True:
            key = self.timers.pop_one_due(now)
            if key is None:
                break
            kind = key[0]
            if kind == "expire-offsets":
                self._expire_offsets()
                self.timers.set(
                    _EXPIRE_OFFSETS_TIMER,
                    now + self.offset_config.offsets_retention_check_interval_ms,
                )
                continue
            group = self.groups.get(key[1])
            if group is None or group.is_state(GroupState.DEAD):
                continue
            if kind == "hb":
                self._on_heartbeat_expired(group, key[2])
            elif kind == "pending":
                if key[2] in group.pending_members:
                    self._remove_pending_member_and_update_group(group, key[2])
            elif kind == "join":
                self._on_join_timer(group)
            elif kind == "sync":
                self._on_sync_timer(group)
            elif kind in _CG_MEMBER_TIMERS and group.consumer is not None:
                log.info(
                    "consumer group member fenced",
                    group=group.group_id,
                    member=key[2],
                    reason=_CG_MEMBER_TIMERS[kind],
                )
                self._fence_consumer_member(group, key[2])
        return self._drain()

    # ------------------------------------------------------------------ SyncGroup

    def sync_group(
        self,
        token: Token,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> Effects:
        """SyncGroup. ``protocol_type``/``protocol_name`` are None before v5."""
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance state was lost with the old coordinator: make the member rejoin
            error = ErrorCode.REBALANCE_IN_PROGRESS
        group = self.groups.get(group_id) if error is None else None
        if error is None and group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is not None:
            self._respond(token, SyncGroupResult(error=error))
            return self._drain()
        assert group is not None
        if group.consumer is not None and not group.is_state(GroupState.DEAD):
            self._respond(
                token,
                self._classic_sync_to_consumer_group(
                    group, member_id, group_instance_id, generation_id, protocol_type, protocol_name
                ),
            )
            return self._drain()
        if group.is_state(GroupState.DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif (
            error := self._validate_current_member(group, member_id, group_instance_id)
        ) is not None:
            pass
        elif generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        elif (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        elif group.is_state(GroupState.EMPTY):
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            self._respond(token, SyncGroupResult(error=error))
            return self._drain()
        member = group.get(member_id)
        group.pending_sync_members.discard(member_id)
        if group.is_state(GroupState.STABLE):
            self._respond(
                token, SyncGroupResult(member.assignment, group.protocol_type, group.protocol_name)
            )
            self._schedule_heartbeat(group, member)
            return self._drain()
        # CompletingRebalance
        if member.awaiting_sync is not None and member.awaiting_sync != token:
            self._respond(
                member.awaiting_sync, SyncGroupResult(error=ErrorCode.REBALANCE_IN_PROGRESS)
            )
        member.awaiting_sync = token
        if group.is_leader(member_id):
            # members the leader left out get an empty assignment; unknown ids are ignored
            assignment = {mid: assignments.get(mid, b"") for mid in group.members}
            generation = group.generation_id

            def on_stored(error: ErrorCode) -> None:
                # another member may have joined meanwhile: only act on the same generation
                if (
                    group.is_state(GroupState.COMPLETING_REBALANCE)
                    and group.generation_id == generation
                ):
                    if error is not ErrorCode.NONE:
                        self._reset_and_propagate_assignment_error(group, error)
                        self._maybe_prepare_rebalance(group, "error storing the group assignment")
                    else:
                        for m in group.members.values():
                            m.assignment = assignment.get(m.member_id, b"")
                        self._propagate_assignment(group, ErrorCode.NONE)
                        group.transition_to(GroupState.STABLE, self._now())

            self._store_group(group, assignment, on_stored)
        return self._drain()

    # ------------------------------------------------------------------ Heartbeat

    def heartbeat(
        self,
        token: Token,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
    ) -> Effects:
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error is not None:
            # while loading, answer blindly: the member learns of trouble on its next request
            self._respond(
                token, ErrorCode.NONE if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else error
            )
            return self._drain()
        group = self.groups.get(group_id)
        if group is None:
            result = ErrorCode.UNKNOWN_MEMBER_ID
        elif group.is_state(GroupState.DEAD):
            result = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif group.consumer is not None:
            result = self._classic_heartbeat_to_consumer_group(
                group, member_id, group_instance_id, generation_id
            )
        elif (
            member_error := self._validate_current_member(group, member_id, group_instance_id)
        ) is not None:
            result = member_error
        elif generation_id != group.generation_id:
            result = ErrorCode.ILLEGAL_GENERATION
        elif group.is_state(GroupState.EMPTY):
            result = ErrorCode.UNKNOWN_MEMBER_ID
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self._schedule_heartbeat(group, group.get(member_id))
            result = ErrorCode.REBALANCE_IN_PROGRESS
        else:
            # Stable, or CompletingRebalance: consumers heartbeat once they have their JoinGroup
            # response, before SyncGroup completes
            self._schedule_heartbeat(group, group.get(member_id))
            result = ErrorCode.NONE
        self._respond(token, result)
        return self._drain()

    # ------------------------------------------------------------------ LeaveGroup

    def leave_group(
        self, token: Token, group_id: str, members: Iterable[MemberIdentity]
    ) -> Effects:
        members = list(members)
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error is not None:
            self._respond(token, LeaveGroupResult(error))
            return self._drain()
        group = self.groups.get(group_id)
        if group is None:
            self._respond(
                token,
                LeaveGroupResult(
                    ErrorCode.NONE,
                    tuple(
                        LeaveMemberResult(
                            m.member_id, m.group_instance_id, ErrorCode.UNKNOWN_MEMBER_ID
                        )
                        for m in members
                    ),
                ),
            )
            return self._drain()
        if group.is_state(GroupState.DEAD):
            self._respond(token, LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return self._drain()
        if group.consumer is not None:
            self._classic_leave_to_consumer_group(token, group, members)
            return self._drain()
        results = []
        for leaving in members:
            mid, gid = leaving.member_id, leaving.group_instance_id
            if mid == NO_MEMBER_ID:
                # administrative removal of a static member by its instance id (KIP-345)
                current = group.static_members.get(gid) if gid is not None else None
                if current is None:
                    err = ErrorCode.UNKNOWN_MEMBER_ID
                else:
                    self._remove_member_and_update_group(group, group.get(current), "member left")
                    err = ErrorCode.NONE
            elif mid in group.pending_members:
                self._remove_pending_member_and_update_group(group, mid)
                err = ErrorCode.NONE
            else:
                invalid = self._validate_current_member(group, mid, gid)
                if invalid is None:
                    self._remove_member_and_update_group(group, group.get(mid), "member left")
                err = ErrorCode.NONE if invalid is None else invalid
            results.append(LeaveMemberResult(mid, gid, err))
        self._respond(token, LeaveGroupResult(ErrorCode.NONE, tuple(results)))
        return self._drain()

    # ------------------------------------------------------------------ offsets

    def commit_offsets(
        self,
        token: Token,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        api_version: int = 8,
    ) -> Effects:
        """OffsetCommit; the response is ``dict[TopicPartition, ErrorCode]``. Commits with
        generation -1 from outside any group (simple consumers, admin tools) are accepted for a
        group that has no members; commit timestamps default to now. For a consumer group
        (KIP-848) ``generation_id`` is the member epoch: STALE_MEMBER_EPOCH when it is not the
        member's current one; its members must use OffsetCommit v9+ (``api_version``)."""
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            self._respond(token, dict.fromkeys(offsets, error))
            return self._drain()
        group = self.groups.get(group_id)
        if group is not None and group.consumer is not None and not group.is_state(GroupState.DEAD):
            error = group.consumer.validate_offset_commit(
                member_id, generation_id, False, api_version
            )
            if error is not None:
                self._respond(token, dict.fromkeys(offsets, error))
            else:
                self._store_offsets(token, group, offsets)
            return self._drain()
        if group is None:
            if generation_id < 0:
                # the group does not use Kafka's group management: just store offsets
                group = self.groups[group_id] = GroupMetadata(
                    group_id, current_state_timestamp=self._now()
                )
            else:
                # or the request comes from an older generation: either way, refuse
                self._respond(token, dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION))
                return self._drain()
        error = None
        if group.is_state(GroupState.DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif generation_id < 0 and group.is_state(GroupState.EMPTY):
            pass  # an admin tool or a consumer without group management, on an empty group
        elif generation_id >= 0 or member_id != NO_MEMBER_ID or group_instance_id is not None:
            error = self._validate_current_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
        elif not group.is_state(GroupState.EMPTY):
            error = ErrorCode.UNKNOWN_MEMBER_ID  # only members commit to a group with members
        if error is not None:
            pass
        elif group.is_state(GroupState.EMPTY):
            pass
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            # it has the new generation from JoinGroup but no assignment yet
            error = ErrorCode.REBALANCE_IN_PROGRESS
        else:
            # Stable or PreparingRebalance: commits during a rebalance are allowed; the
            # heartbeat tells the member to rejoin
            self._schedule_heartbeat(group, group.get(member_id))
        if error is not None:
            self._respond(token, dict.fromkeys(offsets, error))
            return self._drain()
        self._store_offsets(token, group, offsets)
        return self._drain()

    def _store_offsets(
        self, token: Token, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> None:
        now = self._now()
        max_size = self.offset_config.offset_metadata_max_bytes
        results: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if om.metadata is not None and _java_string_length(om.metadata) > max_size:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            if om.commit_timestamp < 0:
                om = OffsetAndMetadata(
                    om.offset, om.leader_epoch, om.metadata or "", now, om.expire_timestamp
                )
            elif om.metadata is None:
                om = OffsetAndMetadata(
                    om.offset, om.leader_epoch, "", om.commit_timestamp, om.expire_timestamp
                )
            valid[tp] = om
        if not valid:
            self._respond(token, results)
            return
        records = tuple(
            (
                encode_offset_commit_key(group.group_id, tp.topic, tp.partition),
                encode_offset_commit_value(
                    OffsetCommitValue(
                        om.offset,
                        om.metadata,
                        om.commit_timestamp,
                        om.leader_epoch,
                        om.expire_timestamp,
                    )
                ),
            )
            for tp, om in valid.items()
        )
        commit_id = next(self._commit_ids)
        for tp in valid:
            group.pending_offset_commits.setdefault(tp, set()).add(commit_id)

        def on_written(error: ErrorCode, base_offset: int | None) -> None:
            for i, (tp, om) in enumerate(valid.items()):
                # Kafka's onOffsetCommitAppend: only a commit still pending is installed (an
                # OffsetDelete, DeleteGroups or topic deletion meanwhile cancelled it), and
                # only over an offset written before it.
                pending = group.pending_offset_commits.get(tp, set())
                still_pending = commit_id in pending
                pending.discard(commit_id)
                if not pending:
                    group.pending_offset_commits.pop(tp, None)
                if error is ErrorCode.NONE:
                    append_offset = None if base_offset is None else base_offset + i
                    current = group.offsets.get(tp)
                    if (
                        still_pending
                        and not group.is_state(GroupState.DEAD)
                        and (current is None or _older(current.append_offset, append_offset))
                    ):
                        group.offsets[tp] = CommitRecordMetadataAndOffset(append_offset, om)
                    results[tp] = ErrorCode.NONE
                else:
                    results[tp] = _offset_error(error)
            if error is not ErrorCode.NONE:
                self._maybe_forget_unused_group(group)  # a simple group whose first commit failed
            self._respond(token, {tp: results[tp] for tp in offsets})

        self._append(self.partition_for(group.group_id), records, on_written)

    def commit_transactional_offsets(
        self,
        token: Token,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> Effects:
        """TxnOffsetCommit: the offsets are written as a transactional batch of the producer and
        kept pending; ``complete_transaction`` makes them visible (commit) or drops them. The
        member and generation are checked when given (KIP-447). Response as commit_offsets."""
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            self._respond(token, dict.fromkeys(offsets, error))
            return self._drain()
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(
                group_id, current_state_timestamp=self._now()
            )
        error = None
        if group.is_state(GroupState.DEAD):
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif group.consumer is not None:
            # a consumer group (KIP-848): the generation is the member epoch; TxnOffsetCommit
            # has no STALE_MEMBER_EPOCH, a stale epoch is ILLEGAL_GENERATION
            if generation_id >= 0 or member_id != NO_MEMBER_ID:
                error = group.consumer.validate_offset_commit(member_id, generation_id, True, 0)
                if error is ErrorCode.STALE_MEMBER_EPOCH:
                    error = ErrorCode.ILLEGAL_GENERATION
        elif generation_id >= 0 or member_id != NO_MEMBER_ID or group_instance_id is not None:
            if not group.is_state(GroupState.EMPTY) or member_id != NO_MEMBER_ID:
                error = self._validate_current_member(group, member_id, group_instance_id)
                if error is None and generation_id >= 0 and generation_id != group.generation_id:
                    error = ErrorCode.ILLEGAL_GENERATION
        if error is not None:
            self._respond(token, dict.fromkeys(offsets, error))
            return self._drain()
        now = self._now()
        max_size = self.offset_config.offset_metadata_max_bytes
        results: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if om.metadata is not None and _java_string_length(om.metadata) > max_size:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            valid[tp] = OffsetAndMetadata(
                om.offset,
                om.leader_epoch,
                om.metadata or "",
                now if om.commit_timestamp < 0 else om.commit_timestamp,
                om.expire_timestamp,
            )
        if not valid:
            self._respond(token, results)
            return self._drain()
        records = tuple(
            (
                encode_offset_commit_key(group.group_id, tp.topic, tp.partition),
                encode_offset_commit_value(
                    OffsetCommitValue(
                        om.offset,
                        om.metadata,
                        om.commit_timestamp,
                        om.leader_epoch,
                        om.expire_timestamp,
                    )
                ),
            )
            for tp, om in valid.items()
        )

        def on_written(error: ErrorCode, base_offset: int | None) -> None:
            for i, (tp, om) in enumerate(valid.items()):
                if error is ErrorCode.NONE:
                    append_offset = None if base_offset is None else base_offset + i
                    group.pending_txn_offsets.setdefault(producer_id, {})[tp] = (
                        CommitRecordMetadataAndOffset(append_offset, om)
                    )
                    results[tp] = ErrorCode.NONE
                elif error is ErrorCode.INVALID_PRODUCER_EPOCH:
                    results[tp] = ErrorCode.PRODUCER_FENCED
                else:
                    results[tp] = _offset_error(error)
            self._respond(token, {tp: results[tp] for tp in offsets})

        self._append(
            self.partition_for(group.group_id), records, on_written, producer_id, producer_epoch
        )
        return self._drain()

    def complete_transaction(
        self, producer_id: int, partitions: Iterable[int], commit: bool
    ) -> Effects:
        """A marker of ``producer_id`` was written to these ``__consumer_offsets`` partitions:
        its pending transactional offsets become committed or are dropped (Kafka's
        handleTxnCompletion). A committed offset replaces one written before it only."""
        wanted = set(partitions)
        for group in self.groups.values():
            if self.partition_for(group.group_id) not in wanted:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if not pending or not commit:
                continue
            for tp, entry in pending.items():
                current = group.offsets.get(tp)
                if current is None or _older(current.append_offset, entry.append_offset):
                    group.offsets[tp] = entry
        return self._drain()

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetFetchPartition]]:
        """OffsetFetch for one group; ``partitions`` None = all committed offsets. Offsets of
        any group are returned whatever its state (groups may only store offsets). With
        ``require_stable`` (KIP-447), a partition whose commit is still being written answers
        UNSTABLE_OFFSET_COMMIT (the client retries)."""
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, {}
        group = self.groups.get(group_id)
        if group is not None and group.consumer is not None and member_epoch >= 0:
            # OffsetFetch v9+ from a member of a consumer group: its epoch must be current
            error = group.consumer.validate_offset_fetch(member_id, member_epoch)
            if error is not None:
                return error, {}
        if group is None or group.is_state(GroupState.DEAD):
            if partitions is None:
                return ErrorCode.NONE, {}
            return ErrorCode.NONE, {tp: OffsetFetchPartition() for tp in partitions}
        if partitions is None:
            partitions = list(group.offsets)
        result = {}
        for tp in partitions:
            om = group.offset(tp)
            if require_stable and (
                group.pending_offset_commits.get(tp) or group.has_pending_txn_offset(tp)
            ):
                result[tp] = OffsetFetchPartition(error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
            elif om is None:
                result[tp] = OffsetFetchPartition()
            else:
                result[tp] = OffsetFetchPartition(om.offset, om.leader_epoch, om.metadata)
        return ErrorCode.NONE, result

    def delete_offsets(
        self, token: Token, group_id: str, partitions: Iterable[TopicPartition]
    ) -> Effects:
        """OffsetDelete (KIP-496); the response is ``OffsetDeleteResult``. Offsets of topics a
        live consumer group subscribes to are refused with GROUP_SUBSCRIBED_TO_TOPIC."""
        partitions = list(partitions)
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error is not None:
            self._respond(token, OffsetDeleteResult(error))
            return self._drain()
        group = self.groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            self._respond(token, OffsetDeleteResult(ErrorCode.GROUP_ID_NOT_FOUND))
            return self._drain()
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_state(GroupState.EMPTY):
            deletable = partitions
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            deletable = []
            for tp in partitions:
                subscribed = group.subscribed_topics is None or tp.topic in group.subscribed_topics
                if subscribed:
                    errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    deletable.append(tp)
        else:
            self._respond(token, OffsetDeleteResult(ErrorCode.NON_EMPTY_GROUP))
            return self._drain()
        removed = group.remove_offsets(deletable)
        for tp in deletable:
            errors[tp] = ErrorCode.NONE
        result = OffsetDeleteResult(ErrorCode.NONE, {tp: errors[tp] for tp in partitions})
        if not removed and not self._group_is_finished(group):
            self._respond(token, result)
            return self._drain()
        self._append_cleanup(group, removed, lambda error: self._respond(token, result))
        return self._drain()

    def _group_is_finished(self, group: GroupMetadata) -> bool:
        return group.is_state(GroupState.EMPTY) and not group.has_offsets()

    def _append_cleanup(
        self,
        group: GroupMetadata,
        removed: Iterable[TopicPartition],
        done: Callable[[ErrorCode], None],
        delete_group: bool | None = None,
    ) -> None:
        """Tombstones for removed offsets, and for the group itself when it is now Empty with no
        offsets left, or ``delete_group`` (DeleteGroups): it becomes Dead and is forgotten, as
        Kafka's cleanupGroupMetadata."""
        records = [
            (encode_offset_commit_key(group.group_id, tp.topic, tp.partition), None)
            for tp in removed
        ]
        if delete_group is None:
            delete_group = self._group_is_finished(group)
        if delete_group:
            group.transition_to(GroupState.DEAD, self._now())
            self._cancel_group_timers(group)
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
                self._forget_settings(group.group_id)
            if group.consumer is not None:
                records.extend(group.consumer.tombstones())
            else:
                records.append((encode_group_metadata_key(group.group_id), None))
        if records:
            self._append(
                self.partition_for(group.group_id),
                tuple(records),
                lambda error, _offset: done(error),
            )
        else:
            done(ErrorCode.NONE)

    def _expire_offsets(self) -> None:
        now = self._now()
        retention = self.offset_config.offsets_retention_ms
        for group in list(self.groups.values()):
            if not self.is_group_local(group.group_id) or group.is_state(GroupState.DEAD):
                continue
            expired = group.expired_offsets(now, retention)
            removed = group.remove_offsets(expired)
            if removed or self._group_is_finished(group):
                self._append_cleanup(group, removed, lambda error: None)

    # ------------------------------------------------------------------ consumer groups

    def consumer_group_heartbeat(
        self,
        token: Token,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        topics: TopicsView,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        subscribed_topic_names: list[str] | None = None,
        subscribed_topic_regex: str | None = None,
        server_assignor: str | None = None,
        owned: Assignment | None = None,
        client_id: str = "",
        client_host: str = "",
        assignment_interval_ms: int | None = None,
        assignor_offload: bool | None = None,
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
    ) -> Effects:
        """ConsumerGroupHeartbeat (KIP-848); the response is a ``HeartbeatResult``, sent once
        the records of the change are written. ``topics`` is the broker's view of topics
        (names, ids, partition counts) the subscriptions are resolved against.
        ``assignment_interval_ms``, ``assignor_offload``, ``session_timeout_ms`` and
        ``heartbeat_interval_ms`` are the group's own ``consumer.assignment.interval.ms``,
        ``consumer.assignor.offload.enable``, ``consumer.session.timeout.ms`` and
        ``consumer.heartbeat.interval.ms`` (None: the broker's ``group.consumer.*``
        settings)."""

        def fail(error: ErrorCode, message: str | None = None) -> Effects:
            self._respond(token, HeartbeatResult(error, message, member_id or None, member_epoch))
            return self._drain()

        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error is not None:
            return fail(error)
        if not member_id:
            return fail(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if instance_id == "":
            return fail(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
        if rack_id == "":
            return fail(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        if member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if rebalance_timeout_ms == -1:
                return fail(
                    ErrorCode.INVALID_REQUEST,
                    "RebalanceTimeoutMs must be provided in first request.",
                )
            if owned is None or any(owned.values()):
                return fail(
                    ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
                )
            if subscribed_topic_names is None and subscribed_topic_regex is None:
                return fail(
                    ErrorCode.INVALID_REQUEST,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        elif member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and instance_id is None:
            return fail(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
        elif member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return fail(ErrorCode.INVALID_REQUEST, f"MemberEpoch {member_epoch} is invalid.")
        group = self.groups.get(group_id)
        if group is not None and group.is_state(GroupState.DEAD):
            group = None
        if group is None:
            if member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                return fail(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group"
                )
            group = self.groups[group_id] = GroupMetadata(
                group_id, current_state_timestamp=self._now()
            )
            created = True
        else:
            created = False
        converted_from: tuple | None = None
        upgrade_records: list[Record] = []
        if group.consumer is None and (
            group.members or group.pending_members or not group.is_state(GroupState.EMPTY)
        ):
            refusal = self._online_upgrade_refusal(group, member_epoch)
            if refusal is not None:
                return fail(ErrorCode.GROUP_ID_NOT_FOUND, refusal)
            try:
                upgrade_records = self._convert_to_consumer_group(group, topics)
            except ConsumerGroupError as e:
                return fail(e.error, e.message)
        if group.consumer is None:
            if member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                return fail(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group"
                )
            # an empty classic group (or one that only stores offsets) becomes a consumer
            # group, keeping its offsets (Kafka's upgrade of an empty group)
            converted_from = (
                group.protocol_type,
                group.protocol_name,
                group.generation_id,
                group.leader_id,
                group.subscribed_topics,
            )
            self._attach_consumer_group(
                group, ConsumerGroup(group_id, self.group_config.consumer_assignors[0])
            )
        cg: ConsumerGroup = group.consumer
        epoch_before = cg.group_epoch
        self._topics = topics
        self._assignment_overrides[group_id] = (assignment_interval_ms, assignor_offload)
        self._session_overrides[group_id] = (session_timeout_ms, heartbeat_interval_ms)
        interval_ms, offload = self._assignment_policy(group_id)
        try:
            result, records = cg.heartbeat(
                topics,
                member_id,
                member_epoch,
                instance_id=instance_id,
                rack_id=rack_id,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout_ms=rebalance_timeout_ms,
                subscribed_topic_names=subscribed_topic_names,
                subscribed_topic_regex=subscribed_topic_regex,
                server_assignor=server_assignor,
                owned=owned,
                max_size=self.group_config.group_consumer_max_size,
                now_ms=self._now(),
                assignment_interval_ms=interval_ms,
                defer_assignment=offload,
            )
        except ConsumerGroupError as e:
            if created:
                del self.groups[group_id]  # a refused first heartbeat leaves no group behind
            elif converted_from is not None:
                group.consumer = None
                (
                    group.protocol_type,
                    group.protocol_name,
                    group.generation_id,
                    group.leader_id,
                    group.subscribed_topics,
                ) = converted_from
            return fail(e.error, e.message)
        if offload and cg.assignment_due(self._now(), interval_ms):
            # the offloaded assignor: it runs after the answer was computed (the member is
            # answered with the previous target) on the group as this heartbeat left it
            records.extend(cg.assign(topics, self._now()))
        # regular expressions resolve after the answer is computed (Kafka resolves them
        # asynchronously): this heartbeat saw only earlier resolutions, a later one sees these
        records.extend(cg.refresh_regexes(topics, self._now()))
        if converted_from is not None and (converted_from[0] or converted_from[2] > 0):
            # the classic group's record goes first
            records.insert(0, (encode_group_metadata_key(group_id), None))
        records[:0] = upgrade_records
        replaced = cg.take_replaced_member()
        if replaced is not None:
            self._cancel_consumer_timers(group_id, replaced)
        if result.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            self._cancel_consumer_timers(group_id, member_id)
            downgrade = self._maybe_downgrade(group, epoch_before)
            if downgrade is not None:
                # the records are written by the downgrade (the group's tombstones, then the
                # classic group): answer once they are
                self._write_then(group_id, records + downgrade[0], token, result, downgrade[1])
                return self._drain()
        else:
            member = cg.members.get(result.member_id or member_id)
            if member is not None:
                if member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    self._schedule_consumer_session(group_id, member.member_id)
                self._schedule_revocation_deadline(
                    group_id, member.member_id, member.state, member.rebalance_timeout_ms
                )
        self._sync_consumer_group_state(group)
        if cg.needs_snapshot:
            # an earlier write failed: what members were told since is written in full
            cg.needs_snapshot = False
            records = cg.snapshot_records() + records
        if not records:
            self._respond(token, result)
            return self._drain()

        def written(error: ErrorCode, _offset: int | None) -> None:
            if error is ErrorCode.NONE:
                self._respond(token, result)
            else:
                cg.needs_snapshot = True
                self._respond(
                    token, HeartbeatResult(_group_store_error(error), None, member_id, member_epoch)
                )

        self._append(self.partition_for(group_id), tuple(records), written)
        return self._drain()

    def _assignment_policy(self, group_id: str) -> tuple[int, bool]:
        """(assignment interval, offload) of a consumer group: its group-level settings, else
        the broker's."""
        gc = self.group_config
        interval, offload = self._assignment_overrides.get(group_id, (None, None))
        return (
            gc.group_consumer_assignment_interval_ms if interval is None else interval,
            gc.group_consumer_assignor_offload_enable if offload is None else offload,
        )

    def _assign_if_due(self, group: GroupMetadata, topics: TopicsView) -> None:
        """Run the assignor of a consumer group whose epoch is ahead of its target when the
        assignment interval has passed since its last run, and write the new target (a
        classic member's Heartbeat: Kafka computes the target there too)."""
        cg: ConsumerGroup | None = group.consumer
        interval_ms, _ = self._assignment_policy(group.group_id)
        if cg is None or not cg.assignment_due(self._now(), interval_ms):
            return
        records = cg.assign(topics, self._now())
        if not records:
            return
        if cg.needs_snapshot:
            cg.needs_snapshot = False
            records = cg.snapshot_records() + records

        def written(error: ErrorCode, _offset: int | None) -> None:
            if error is not ErrorCode.NONE:
                cg.needs_snapshot = True

        self._append(self.partition_for(group.group_id), tuple(records), written)

    def _attach_consumer_group(self, group: GroupMetadata, cg: ConsumerGroup) -> None:
        group.consumer = cg
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        group.protocol_name = None
        group.generation_id = 0
        group.leader_id = None
        self._sync_consumer_group_state(group)

    def _sync_consumer_group_state(self, group: GroupMetadata) -> None:
        """The classic view of a consumer group: Empty or Stable, and its subscribed topics
        (OffsetDelete refuses offsets of those while the group has members)."""
        cg: ConsumerGroup = group.consumer
        state = GroupState.EMPTY if cg.is_empty() else GroupState.STABLE
        if group.state is not state:
            group.state = state
            group.current_state_timestamp = self._now()
        group.subscribed_topics = cg.subscribed_topic_names()

    def _forget_settings(self, group_id: str) -> None:
        """Drop a removed group's group-level settings (the next heartbeat gives them again)."""
        self._assignment_overrides.pop(group_id, None)
        self._session_overrides.pop(group_id, None)

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        """A consumer group's session timeout: its ``consumer.session.timeout.ms``, else the
        broker's ``group.consumer.session.timeout.ms`` (Kafka's
        ``consumerGroupSessionTimeoutMs``)."""
        timeout, _ = self._session_overrides.get(group_id, (None, None))
        return self.group_config.group_consumer_session_timeout_ms if timeout is None else timeout

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        """The heartbeat interval a consumer group's members are told: its
        ``consumer.heartbeat.interval.ms``, else the broker's."""
        _, interval = self._session_overrides.get(group_id, (None, None))
        return (
            self.group_config.group_consumer_heartbeat_interval_ms if interval is None else interval
        )

    def _schedule_consumer_session(self, group_id: str, member_id: str) -> None:
        self.timers.set(
            ("cg-session", group_id, member_id),
            self._now() + self.consumer_session_timeout_ms(group_id),
        )

    def _schedule_revocation_deadline(
        self, group_id: str, member_id: str, state: MemberState, rebalance_timeout_ms: int
    ) -> None:
        """A member asked to revoke partitions must do so within its rebalance timeout."""
        key = ("cg-revoke", group_id, member_id)
        if state is not MemberState.UNREVOKED_PARTITIONS:
            self.timers.cancel(key)
        elif key not in self.timers:
            timeout = rebalance_timeout_ms if rebalance_timeout_ms > 0 else 300_000
            self.timers.set(key, self._now() + timeout)

    def _cancel_consumer_timers(self, group_id: str, member_id: str) -> None:
        for kind in _CG_MEMBER_TIMERS:
            self.timers.cancel((kind, group_id, member_id))

    def _schedule_classic_rejoin(self, group_id: str, member: Any) -> None:
        """Kafka's join timeout: a classic member told to rejoin must within its rebalance
        timeout, or it is fenced (the timer runs from the first time it is told)."""
        key = ("cg-join", group_id, member.member_id)
        if key not in self.timers:
            timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else 300_000
            self.timers.set(key, self._now() + timeout)

    def _fence_consumer_member(self, group: GroupMetadata, member_id: str) -> None:
        cg: ConsumerGroup = group.consumer
        self._cancel_consumer_timers(group.group_id, member_id)
        epoch_before = cg.group_epoch
        records = cg.remove_member(member_id)
        self._sync_consumer_group_state(group)
        if cg.needs_snapshot:
            cg.needs_snapshot = False
            records = cg.snapshot_records() + records
        downgrade = self._maybe_downgrade(group, epoch_before)
        if downgrade is not None:
            self._write_then(group.group_id, records + downgrade[0], None, None, downgrade[1])
            return
        if records:

            def written(error: ErrorCode, _offset: int | None) -> None:
                if error is not ErrorCode.NONE:
                    cg.needs_snapshot = True

            self._append(self.partition_for(group.group_id), tuple(records), written)

    # ------------------------------------------------------------------ online migration

    def _online_upgrade_refusal(self, group: GroupMetadata, member_epoch: int) -> str | None:
        """Kafka's validateOnlineUpgrade: why a consumer-protocol member may not convert this
        classic group with members (None: it may)."""
        gc = self.group_config
        if not gc.upgrade_enabled:
            return f"Group {group.group_id} is not a consumer group."
        if member_epoch != JOIN_GROUP_MEMBER_EPOCH:
            return f"Group {group.group_id} is not a consumer group."
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return (
                f"Cannot upgrade classic group {group.group_id} to consumer group because "
                "it is not a consumer group."
            )
        if len(group.members) > gc.group_consumer_max_size:
            return (
                f"Cannot upgrade classic group {group.group_id} to consumer group because "
                "its size exceeds the consumer group maximum size."
            )
        return None

    def _convert_to_consumer_group(self, group: GroupMetadata, topics: TopicsView) -> list[Record]:
        """Kafka's convertToConsumerGroup: the classic members become classic members of a
        consumer group with their current assignments; their pending JoinGroup/SyncGroup are
        answered REBALANCE_IN_PROGRESS (they rejoin into the consumer group). Returns the
        records: the classic group's tombstone, then the whole consumer group."""
        views = [
            ClassicMemberView(
                member_id=m.member_id,
                instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocols=tuple(m.supported_protocols),
                assignment=m.assignment,
            )
            for m in group.members.values()
        ]
        cg, records = from_classic_group(
            group.group_id,
            self.group_config.consumer_assignors[0],
            group.generation_id,
            group.protocol_name,
            views,
            topics,
        )
        gid = group.group_id
        for m in list(group.members.values()):
            if m.awaiting_join is not None:
                self._respond(
                    m.awaiting_join,
                    JoinGroupResult(m.member_id, error=ErrorCode.REBALANCE_IN_PROGRESS),
                )
            if m.awaiting_sync is not None:
                self._respond(
                    m.awaiting_sync, SyncGroupResult(error=ErrorCode.REBALANCE_IN_PROGRESS)
                )
            self.timers.cancel(("hb", gid, m.member_id))
        for pending in group.pending_members:
            self.timers.cancel(("pending", gid, pending))
        self.timers.cancel(("join", gid))
        self.timers.cancel(("sync", gid))
        self._join_phase.pop(gid, None)
        self._sync_generation.pop(gid, None)
        group.members.clear()
        group.pending_members.clear()
        group.static_members.clear()
        group.supported_protocols.clear()
        group.pending_sync_members.clear()
        group.new_member_added = False
        log.info(
            "classic group converted to a consumer group",
            group=gid,
            generation=cg.group_epoch,
            members=len(cg.members),
        )
        self._attach_consumer_group(group, cg)
        for member in cg.members.values():
            self._schedule_classic_session(gid, member)
        return [(encode_group_metadata_key(gid), None), *records]

    def _schedule_classic_session(self, group_id: str, member: Any) -> None:
        timeout = member.session_timeout_ms
        if timeout <= 0:
            timeout = self.consumer_session_timeout_ms(group_id)
        self.timers.set(("cg-session", group_id, member.member_id), self._now() + timeout)

    def _write_then(
        self,
        group_id: str,
        records: list[Record],
        token: Token | None,
        result: object,
        after: Callable[[ErrorCode], None] | None = None,
    ) -> None:
        """Write ``records``; then answer ``token`` with ``result`` (or the coordinator error
        the write failed with, for a consumer group's answer) and call ``after``."""
        group = self.groups.get(group_id)
        cg = group.consumer if group is not None else None

        def written(error: ErrorCode, _offset: int | None) -> None:
            if error is not ErrorCode.NONE and cg is not None:
                cg.needs_snapshot = True
            if token is not None:
                if error is ErrorCode.NONE:
                    self._respond(token, result)
                elif isinstance(result, HeartbeatResult):
                    self._respond(
                        token,
                        HeartbeatResult(
                            _group_store_error(error), None, result.member_id, result.member_epoch
                        ),
                    )
                elif isinstance(result, JoinGroupResult):
                    self._respond(
                        token, JoinGroupResult(result.member_id, error=_group_store_error(error))
                    )
                else:
                    self._respond(token, result)
            if after is not None:
                after(error)

        if not records:
            written(ErrorCode.NONE, None)
            return
        self._append(self.partition_for(group_id), tuple(records), written)

    def _classic_join_to_consumer_group(
        self,
        token: Token,
        topics: TopicsView,
        group: GroupMetadata,
        require_known_member_id: bool,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> None:
        cg: ConsumerGroup = group.consumer
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
            self._respond(
                token, JoinGroupResult(member_id, error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            )
            return
        if member_id == NO_MEMBER_ID:
            existing = (
                cg.static_members.get(group_instance_id) if group_instance_id is not None else None
            )
            member_id = existing or str(uuid.uuid4())
            if require_known_member_id and group_instance_id is None:
                # KIP-394, as for a classic group: the member rejoins with the id it is given
                self._respond(token, JoinGroupResult(member_id, error=ErrorCode.MEMBER_ID_REQUIRED))
                return
        try:
            member, records = cg.classic_join(
                topics,
                member_id,
                instance_id=group_instance_id,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout_ms=rebalance_timeout_ms,
                session_timeout_ms=session_timeout_ms,
                protocols=protocols,
                max_size=self.group_config.group_consumer_max_size,
                now_ms=self._now(),
                assignment_interval_ms=self._assignment_policy(group.group_id)[0],
                defer_assignment=self._assignment_policy(group.group_id)[1],
            )
        except ConsumerGroupError as e:
            self._respond(token, JoinGroupResult(member_id, error=e.error))
            return
        self._topics = topics
        replaced = cg.take_replaced_member()
        if replaced is not None:
            self._cancel_consumer_timers(group.group_id, replaced)
        self._schedule_classic_session(group.group_id, member)
        # it rejoined; it must now sync within its rebalance timeout (Kafka's sync timeout)
        self.timers.cancel(("cg-join", group.group_id, member.member_id))
        self.timers.set(
            ("cg-sync", group.group_id, member.member_id),
            self._now() + (rebalance_timeout_ms if rebalance_timeout_ms > 0 else 300_000),
        )
        self._schedule_revocation_deadline(
            group.group_id, member.member_id, member.state, member.rebalance_timeout_ms
        )
        self._sync_consumer_group_state(group)
        if cg.needs_snapshot:
            cg.needs_snapshot = False
            records = cg.snapshot_records() + records
        # Kafka answers with the member's first protocol and no leader: the member syncs as a
        # follower and gets the assignment the coordinator computed
        result = JoinGroupResult(
            member.member_id,
            generation_id=member.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocols[0][0],
        )
        self._write_then(group.group_id, records, token, result)

    def _replace_consumer_static_member(self, group: GroupMetadata, instance_id: str) -> None:
        cg: ConsumerGroup = group.consumer
        previous_id = cg.static_members.get(instance_id)
        previous = cg.members.get(previous_id) if previous_id is not None else None
        if previous is None or previous.is_classic:
            return
        epoch_before = cg.group_epoch
        self._cancel_consumer_timers(group.group_id, previous.member_id)
        records = cg.remove_member(previous.member_id)
        self._sync_consumer_group_state(group)
        downgrade = self._maybe_downgrade(group, epoch_before)
        if downgrade is not None:
            self._write_then(group.group_id, records + downgrade[0], None, None, downgrade[1])
        else:
            self._write_then(group.group_id, records, None, None)

    def _classic_sync_to_consumer_group(
        self,
        group: GroupMetadata,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncGroupResult:
        cg: ConsumerGroup = group.consumer
        try:
            member = cg.classic_member(member_id, instance_id, generation_id)
        except ConsumerGroupError as e:
            return SyncGroupResult(error=e.error)
        name = (member.classic_protocols or (("", b""),))[0][0]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != name
        ):
            return SyncGroupResult(error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if (
            cg.group_epoch > member.member_epoch
            and member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            # a new rebalance started since its JoinGroup: it rejoins to catch up (one that
            # must revoke first finishes that, then rejoins anyway)
            self._schedule_classic_rejoin(group.group_id, member)
            return SyncGroupResult(error=ErrorCode.REBALANCE_IN_PROGRESS)
        self.timers.cancel(("cg-sync", group.group_id, member.member_id))
        self._schedule_classic_session(group.group_id, member)
        return SyncGroupResult(cg.classic_assignment(member), CONSUMER_PROTOCOL_TYPE, name)

    def _classic_heartbeat_to_consumer_group(
        self, group: GroupMetadata, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        cg: ConsumerGroup = group.consumer
        try:
            member = cg.classic_member(member_id, instance_id, generation_id)
        except ConsumerGroupError as e:
            return e.error
        self._schedule_classic_session(group.group_id, member)
        offload = self._assignment_policy(group.group_id)[1]
        if self._topics is not None and not offload:
            self._assign_if_due(group, self._topics)
        must_rejoin = cg.classic_must_rejoin(member)
        if self._topics is not None and offload:
            self._assign_if_due(group, self._topics)  # after the answer was decided
        if must_rejoin:
            self._schedule_classic_rejoin(group.group_id, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _classic_leave_to_consumer_group(
        self, token: Token, group: GroupMetadata, members: list[MemberIdentity]
    ) -> None:
        cg: ConsumerGroup = group.consumer
        epoch_before = cg.group_epoch
        results = []
        records: list[Record] = []
        for leaving in members:
            # Kafka's classicGroupLeaveToConsumerGroup: a member id must name a classic member;
            # an instance id alone (an admin's removal) may name any static member
            mid, gid = leaving.member_id, leaving.group_instance_id
            member = cg.members.get(mid) if gid is None else None
            if gid is not None:
                static_id = cg.static_members.get(gid)
                member = cg.members.get(static_id) if static_id is not None else None
            if member is None:
                err = ErrorCode.UNKNOWN_MEMBER_ID
            elif gid is not None and mid != NO_MEMBER_ID and member.member_id != mid:
                err = ErrorCode.FENCED_INSTANCE_ID
            elif mid != NO_MEMBER_ID and not member.is_classic:
                err = ErrorCode.UNKNOWN_MEMBER_ID
            else:
                mid = member.member_id
                self._cancel_consumer_timers(group.group_id, mid)
                records.extend(cg.remove_member(mid))
                err = ErrorCode.NONE
            results.append(LeaveMemberResult(leaving.member_id, gid, err))
        self._sync_consumer_group_state(group)
        if records and cg.needs_snapshot:
            cg.needs_snapshot = False
            records = cg.snapshot_records() + records
        result = LeaveGroupResult(ErrorCode.NONE, tuple(results))
        downgrade = self._maybe_downgrade(group, epoch_before)
        if downgrade is not None:
            self._write_then(group.group_id, records + downgrade[0], token, result, downgrade[1])
        else:
            self._write_then(group.group_id, records, token, result)

    def _maybe_downgrade(
        self, group: GroupMetadata, generation: int
    ) -> tuple[list[Record], Callable[[ErrorCode], None]] | None:
        """Kafka's validateOnlineDowngrade + convertToClassicGroup: once the last member of the
        consumer protocol has left and classic members remain, the group becomes a classic
        group again at the group epoch, its members keeping their assignments, and a rebalance
        starts (they rejoin through JoinGroup). ``generation`` is the group epoch before the
        departure (Kafka converts instead of removing the member, so its members' epochs match
        the classic generation and their heartbeats are told REBALANCE_IN_PROGRESS). Returns the
        records (the consumer group's
        tombstones, then the classic group's record) and what to run once they are written;
        None when the group stays as it is."""
        cg: ConsumerGroup | None = group.consumer
        gc = self.group_config
        if (
            cg is None
            or not gc.downgrade_enabled
            or not cg.only_classic_members()
            or len(cg.members) > gc.group_max_size
        ):
            return None
        protocol_name = cg.classic_protocol_name()
        if protocol_name is None:
            return None
        gid = group.group_id
        records = cg.tombstones()
        members = list(cg.members.values())
        for m in members:
            self._cancel_consumer_timers(gid, m.member_id)
        group.consumer = None
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        group.generation_id = generation
        group.leader_id = None
        members_c: list[MemberMetadata] = []
        for m in members:
            classic = MemberMetadata(
                member_id=m.member_id,
                group_id=gid,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms
                if m.rebalance_timeout_ms > 0
                else max(m.session_timeout_ms, 1),
                session_timeout_ms=m.session_timeout_ms
                if m.session_timeout_ms > 0
                else gc.group_consumer_session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                supported_protocols=list(m.classic_protocols or ()),
                assignment=cg.classic_assignment(m),
            )
            group.add(classic)
            members_c.append(classic)
            if m.instance_id is not None:
                group.static_members[m.instance_id] = m.member_id
            self._schedule_heartbeat(group, classic)
        group.protocol_name = protocol_name
        group.subscribed_topics = group.compute_subscribed_topics()
        group.state = GroupState.STABLE
        group.current_state_timestamp = self._now()
        # the classic group as Kafka writes it on a downgrade: members with their assignments
        records.append(
            self._group_metadata_record(group, {m.member_id: m.assignment for m in members_c})
        )
        log.info(
            "consumer group converted to a classic group",
            group=gid,
            generation=group.generation_id,
            members=len(members),
        )

        def written(error: ErrorCode) -> None:
            current = self.groups.get(gid)
            if current is group and group.consumer is None and group.is_state(GroupState.STABLE):
                self._prepare_rebalance(group, "downgrade from a consumer group")

        return records, written

    def consumer_group_describe(self, group_id: str) -> tuple[ErrorCode, str | None, Any]:
        """ConsumerGroupDescribe for one group: (error, message, ConsumerGroup or None)."""
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, None, None
        group = self.groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        if group.consumer is None:
            return (
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Group {group_id} is not a consumer group.",
                None,
            )
        return ErrorCode.NONE, None, group.consumer

    # ------------------------------------------------------------------ groups

    def list_groups(
        self, states_filter: Iterable[str] | None = None, types_filter: Iterable[str] | None = None
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        """ListGroups. ``states_filter`` (v4+, KIP-518) matches state names case-insensitively;
        ``types_filter`` (v5+, KIP-848) names group *types* (``classic``, ``consumer``),
        case-insensitively."""
        if not self.is_active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        states = {s.lower() for s in states_filter} if states_filter else None
        types = {t.lower() for t in types_filter} if types_filter else None
        overviews = []
        for group in self.groups.values():
            if not self.is_group_local(group.group_id) or group.is_state(GroupState.DEAD):
                continue
            ov = group.overview()
            if states is not None and ov.state.lower() not in states:
                continue
            if types is not None and ov.group_type.lower() not in types:
                continue
            overviews.append(ov)
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.is_loading else ErrorCode.NONE
        return error, overviews

    def describe_group(self, group_id: str, api_version: int = 0) -> tuple[ErrorCode, GroupSummary]:
        """DescribeGroups for one group; an unknown group is described as Dead, or (v6+)
        answered GROUP_ID_NOT_FOUND."""
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error is not None:
            return error, GroupSummary("", "", NO_PROTOCOL, ())
        group = self.groups.get(group_id)
        if group is None:
            error = ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 6 else ErrorCode.NONE
            return error, GroupSummary(str(GroupState.DEAD), "", NO_PROTOCOL, ())
        if group.consumer is not None:
            # not a classic group: described as Kafka describes an unknown one (its members
            # are seen with ConsumerGroupDescribe)
            error = ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 6 else ErrorCode.NONE
            return error, GroupSummary(str(GroupState.DEAD), "", NO_PROTOCOL, ())
        return ErrorCode.NONE, group.summary()

    def delete_groups(self, token: Token, group_ids: Iterable[str]) -> Effects:
        """DeleteGroups; the response is ``dict[str, ErrorCode]``, sent once the tombstones of
        every deleted group are written."""
        results: dict[str, ErrorCode] = {}
        waiting: set[str] = set()
        group_ids = list(dict.fromkeys(group_ids))

        def finished(group_id: str, error: ErrorCode) -> None:
            waiting.discard(group_id)
            results[group_id] = (
                _offset_error(error) if error is not ErrorCode.NONE else ErrorCode.NONE
            )
            if not waiting:
                self._respond(token, {g: results[g] for g in group_ids})

        to_delete = []
        for group_id in group_ids:
            error = self._validate_group_status(group_id, allow_empty_id=True)
            if error is not None:
                results[group_id] = error
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_state(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_state(GroupState.EMPTY):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                to_delete.append(group)
        if not to_delete:
            self._respond(token, {g: results[g] for g in group_ids})
            return self._drain()
        waiting.update(g.group_id for g in to_delete)
        for group in to_delete:
            removed = group.remove_all_offsets()
            # An Empty group goes Dead whatever commits are still being written (Kafka's
            # handleDeleteGroups); their completion then installs nothing.
            self._append_cleanup(
                group,
                removed,
                functools.partial(finished, group.group_id),
                delete_group=True,
            )
        return self._drain()

    def delete_partitions(self, partitions: Iterable[TopicPartition]) -> Effects:
        """Topic partitions were deleted: forget every group's offsets for them."""
        partitions = list(partitions)
        for group in list(self.groups.values()):
            if not self.is_group_local(group.group_id) or group.is_state(GroupState.DEAD):
                continue
            removed = group.remove_offsets(partitions)
            if removed or self._group_is_finished(group):
                self._append_cleanup(group, removed, lambda error: None)
        return self._drain()

    # ------------------------------------------------------------------ writes

    def _store_group(
        self, group: GroupMetadata, assignment: dict[str, bytes], done: Callable[[ErrorCode], None]
    ) -> None:
        record = self._group_metadata_record(group, assignment)
        self._append(
            self.partition_for(group.group_id),
            (record,),
            lambda error, _offset: done(
                _group_store_error(error) if error is not ErrorCode.NONE else error
            ),
        )

    def _group_metadata_record(self, group: GroupMetadata, assignment: dict[str, bytes]) -> Record:
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.current_state_timestamp
            if group.current_state_timestamp is not None
            else -1,
            members=tuple(
                MemberMetadataValue(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(group.protocol_name) if group.protocol_name else b"",
                    assignment=assignment.get(m.member_id, b""),
                    rebalance_timeout=m.rebalance_timeout_ms,
                    group_instance_id=m.group_instance_id,
                )
                for m in group.members.values()
            ),
        )
        return (encode_group_metadata_key(group.group_id), encode_group_metadata_value(value))

    def _append(
        self,
        partition: int,
        records: tuple[Record, ...],
        callback: Callable[[ErrorCode, int | None], None],
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        append_id = self._next_append_id
        self._next_append_id += 1
        self._append_callbacks[append_id] = callback
        self._out.appends.append(Append(append_id, partition, records, producer_id, producer_epoch))

    def on_append_complete(
        self, append_id: int, error: ErrorCode, base_offset: int | None = None
    ) -> Effects:
        """The records of ``Append(append_id)`` were written (error NONE, first record at
        ``base_offset``) or not (error as ReplicaManager reported it)."""
        callback = self._append_callbacks.pop(append_id)
        callback(error, base_offset)
        return self._drain()

    @property
    def pending_appends(self) -> int:
        return len(self._append_callbacks)
