"""Group and member state of the classic group protocol (Kafka's GroupMetadata/MemberMetadata).

A group moves through five states; the legal moves are a table (``VALID_PREVIOUS_STATES``) and
``GroupMetadata.transition_to`` raises ``IllegalGroupStateTransition`` for any other move:

    Empty ---------------> PreparingRebalance <------------------+
      ^  (first member joins)   |        ^                       |
      |                         | all joined / rebalance timeout | member joins/leaves/changes,
      | last member gone        v        |                       | leader rejoins
      +---------------- CompletingRebalance ---leader's SyncGroup stored---> Stable
    any state -> Dead (group deleted, expired, or its partition unloaded)

Invariants kept here (and checked by the tests):
- ``generation_id`` never decreases; it grows by one at the end of each join phase.
- ``leader_id`` is None or the id of a member; a group with members in CompletingRebalance or
  Stable has a leader.
- ``protocol_name`` is set exactly when the group has members past the join phase; it is one of
  the protocols every member supports (``candidate_protocols``), chosen by vote.
- ``static_members`` maps each group.instance.id to the member id that currently owns it.

This module is pure data and bookkeeping: no clocks (timestamps are passed in), no I/O. Pending
requests are represented by opaque tokens the caller chose (``awaiting_join``/``awaiting_sync``);
the coordinator core turns state changes into responses for those tokens.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kafkalite.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from kafkalite.protocol.types import TopicPartition

NO_GENERATION = -1
NO_MEMBER_ID = ""
NO_PROTOCOL = ""
NO_LEADER = ""
#: How long a new member's JoinGroup may wait before it is timed out (Kafka's
#: GroupCoordinator.NewMemberJoinTimeoutMs); the member is expected to retry.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupStateTransition(RuntimeError):
    """A state move that the table forbids: a coordinator bug, never a client error."""


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset. ``leader_epoch`` -1 = unknown; ``commit_timestamp`` -1 = "now" (the
    coordinator fills it in); ``expire_timestamp`` -1 = the broker's retention applies."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1

    @classmethod
    def from_request(
        cls,
        offset: int,
        leader_epoch: int | None,
        metadata: str | None,
        now_ms: int,
        commit_timestamp: int = -1,
        retention_time_ms: int = -1,
    ) -> OffsetAndMetadata:
        """What Kafka's OffsetCommit handler stores for one partition: null metadata is "",
        commit timestamp (v1 only) defaults to now, and an explicit retention time (v2-v4)
        becomes an expire timestamp of now + retention."""
        return cls(
            offset=offset,
            leader_epoch=-1 if leader_epoch is None else leader_epoch,
            metadata=metadata or "",
            commit_timestamp=now_ms if commit_timestamp == -1 else commit_timestamp,
            expire_timestamp=-1 if retention_time_ms == -1 else now_ms + retention_time_ms,
        )


@dataclass(slots=True)
class CommitRecordMetadataAndOffset:
    """A committed offset and the ``__consumer_offsets`` offset of the record that holds it
    (None while loading is not needed: the load order already decides the winner)."""

    append_offset: int | None
    offset_and_metadata: OffsetAndMetadata


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class JoinGroupResponseMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(slots=True)
class MemberMetadata:
    member_id: str
    group_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: Hashable | None = None
    awaiting_sync: Hashable | None = None
    is_new: bool = False
    is_leaving: bool = False

    @property
    def is_static_member(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocols(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return list(protocols) == list(self.supported_protocols)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def summary(self, protocol: str | None) -> MemberSummary:
        return MemberSummary(
            self.member_id,
            self.group_instance_id,
            self.client_id,
            self.client_host,
            self.metadata(protocol) if protocol else b"",
            self.assignment,
        )


@dataclass(slots=True)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    current_state_timestamp: int | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)
    supported_protocols: Counter = field(default_factory=Counter)
    new_member_added: bool = False
    #: members that have not yet sent SyncGroup for the current generation (Kafka's
    #: pendingSyncMembers); emptied when the group leaves CompletingRebalance/Stable.
    pending_sync_members: set[str] = field(default_factory=set)
    subscribed_topics: set[str] | None = None
    offsets: dict[TopicPartition, CommitRecordMetadataAndOffset] = field(default_factory=dict)
    #: commits being written, per partition, by commit id (Kafka's
    #: pendingOffsetCommits); OffsetDelete and friends remove them to cancel those commits.
    pending_offset_commits: dict[TopicPartition, set[int]] = field(default_factory=dict)
    #: offsets written by TxnOffsetCommit, per producer id, visible only once the transaction
    #: commits (Kafka's pendingTransactionalOffsetCommits)
    pending_txn_offsets: dict[int, dict[TopicPartition, CommitRecordMetadataAndOffset]] = field(
        default_factory=dict
    )
    #: the consumer group protocol's state (group/consumer_group.py's ConsumerGroup) when this
    #: is a ``consumer`` group (KIP-848); None for a classic group. Such a group has nothing in
    #: ``members`` (classic-protocol members of a consumer group live in the ConsumerGroup): its
    #: ``state`` is only Empty (no members) or Stable (members), for the checks it shares with
    #: classic groups (DeleteGroups, offset expiry), and its offsets live here.
    consumer: Any = None

    # ------------------------------------------------------------------ state

    def is_state(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalGroupStateTransition(
                f"group {self.group_id}: cannot move from {self.state} to {state}"
            )
        self.state = state
        self.current_state_timestamp = now_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    # ------------------------------------------------------------------ members

    def __len__(self) -> int:
        return len(self.members)

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def num_members_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if member.group_id != self.group_id or member.protocol_type != self.protocol_type:
            raise ValueError(f"member {member.member_id} does not belong to group {self.group_id}")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocols())

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocols())
            self.supported_protocols += Counter()  # drop zero counts
            gid = member.group_instance_id
            if gid is not None and self.static_members.get(gid) == member_id:
                del self.static_members[gid]
        self.pending_sync_members.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]]) -> None:
        self.supported_protocols.subtract(member.protocols())
        member.supported_protocols = list(protocols)
        self.supported_protocols.update(member.protocols())
        self.supported_protocols += Counter()

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else hand leadership to a member that did (static
        members first, as they are likelier to stay); False if nobody rejoined."""
        if self.leader_id is not None and self.members[self.leader_id].is_awaiting_join:
            return True
        joined = [m for m in self.members.values() if m.is_awaiting_join]
        if not joined:
            return False
        joined.sort(key=lambda m: not m.is_static_member)
        self.leader_id = joined[0].member_id
        return True

    # ------------------------------------------------------------------ static members

    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def static_member_id(self, group_instance_id: str) -> str:
        return self.static_members[group_instance_id]

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A static member whose instance id now belongs to another member id (KIP-345)."""
        return (
            group_instance_id is not None
            and group_instance_id in self.static_members
            and self.static_members[group_instance_id] != member_id
        )

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Move a static member to a new member id, keeping its assignment and leadership.
        The caller answers the old member's pending requests (FENCED_INSTANCE_ID)."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    @staticmethod
    def generate_member_id(client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    # ------------------------------------------------------------------ protocols

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, member_protocol_type: str, member_protocols: set[str]) -> bool:
        if self.is_state(GroupState.EMPTY) and not self.members:
            return bool(member_protocol_type) and bool(member_protocols)
        return self.protocol_type == member_protocol_type and any(
            self.supported_protocols[p] == len(self.members) for p in member_protocols
        )

    def select_protocol(self) -> str:
        """Every member votes for its preferred candidate; most votes wins, ties broken by the
        leader's preference order so the choice is deterministic."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalGroupStateTransition(
                f"group {self.group_id}: no protocol supported by all members"
            )
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        order = self.members[self.leader_id].supported_protocols if self.leader_id else []
        for name, _ in order:
            if votes.get(name) == best:
                return name
        return sorted(n for n, c in votes.items() if c == best)[0]

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = subscribed_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def init_next_generation(self, now_ms: int) -> None:
        """End of a join phase: bump the generation, choose the protocol, and move to
        CompletingRebalance (members) or Empty (nobody left)."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
            self.pending_sync_members = set(self.members)
        else:
            self.protocol_name = None
            self.subscribed_topics = None
            self.transition_to(GroupState.EMPTY, now_ms)
            self.pending_sync_members = set()

    def current_member_metadata(self) -> list[JoinGroupResponseMember]:
        """What the leader's JoinGroup response carries: every member's chosen-protocol metadata."""
        if self.protocol_name is None or self.state in (
            GroupState.DEAD,
            GroupState.PREPARING_REBALANCE,
        ):
            raise IllegalGroupStateTransition(
                f"group {self.group_id} has no current member metadata"
            )
        return [
            JoinGroupResponseMember(
                m.member_id, m.group_instance_id, m.metadata(self.protocol_name)
            )
            for m in self.members.values()
        ]

    # ------------------------------------------------------------------ views

    def summary(self) -> GroupSummary:
        if self.is_state(GroupState.STABLE):
            protocol = self.protocol_name or NO_PROTOCOL
            members = tuple(m.summary(protocol) for m in self.members.values())
        else:
            protocol = NO_PROTOCOL
            members = tuple(
                MemberSummary(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b""
                )
                for m in self.members.values()
            )
        return GroupSummary(str(self.state), self.protocol_type or "", protocol, members)

    def overview(self) -> GroupOverview:
        if self.consumer is not None:
            return GroupOverview(self.group_id, "consumer", self.consumer.state, "consumer")
        return GroupOverview(self.group_id, self.protocol_type or "", str(self.state))

    # ------------------------------------------------------------------ offsets

    def has_offsets(self) -> bool:
        return (
            bool(self.offsets)
            or any(self.pending_offset_commits.values())
            or any(self.pending_txn_offsets.values())
        )

    def has_pending_txn_offset(self, tp: TopicPartition) -> bool:
        return any(tp in pending for pending in self.pending_txn_offsets.values())

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        entry = self.offsets.get(tp)
        return entry.offset_and_metadata if entry else None

    def remove_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Forget the committed offsets of ``partitions``; commits of them still being written
        are cancelled too (their completion installs nothing, as Kafka's removeOffsets drops
        them from pendingOffsetCommits). Returns the offsets that were committed."""
        removed = {}
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            entry = self.offsets.pop(tp, None)
            if entry is not None:
                removed[tp] = entry.offset_and_metadata
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Offsets past retention (Kafka's GroupMetadata.removeExpiredOffsets, KIP-211):
        - empty group with a protocol type: retention counts from when it became empty;
        - stable consumer group with known subscriptions: offsets of topics it no longer
          subscribes to, counted from their commit;
        - group without a protocol type (only commits offsets): counted from each commit;
        an explicit expire timestamp (OffsetCommit v1) always wins. Offsets with a commit in
        flight are kept."""
        if self.protocol_type and self.is_state(GroupState.EMPTY):

            def base(o: OffsetAndMetadata) -> int:
                return (
                    self.current_state_timestamp
                    if self.current_state_timestamp is not None
                    else o.commit_timestamp
                )

            subscribed: set[str] = set()
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_state(GroupState.STABLE)
        ):

            def base(o: OffsetAndMetadata) -> int:
                return o.commit_timestamp

            subscribed = self.subscribed_topics
        elif not self.protocol_type:

            def base(o: OffsetAndMetadata) -> int:
                return o.commit_timestamp

            subscribed = set()
        else:
            return []
        expired = []
        for tp, entry in self.offsets.items():
            if tp.topic in subscribed or self.pending_offset_commits.get(tp):
                continue
            o = entry.offset_and_metadata
            if o.expire_timestamp >= 0:
                if now_ms >= o.expire_timestamp:
                    expired.append(tp)
            elif now_ms - base(o) >= retention_ms:
                expired.append(tp)
        return expired
