"""The consumer group protocol (KIP-848), sans I/O: group epoch, target assignment, members'
epochs and their incremental reconciliation (Kafka's ConsumerGroup, TargetAssignmentBuilder,
CurrentAssignmentBuilder and GroupMetadataManager.consumerGroupHeartbeat).

A ``ConsumerGroup`` is driven by ``heartbeat(...)``, ``remove_member(...)`` and
``fence_member(...)``; each returns the ``__consumer_offsets`` records that describe the change
(the caller writes them before it answers, and replays them with ``load(...)`` after a
coordinator failover). Time, sockets and timers belong to the caller (group/core.py).

The protocol, as the coordinator runs it:

- **Group epoch** goes up whenever what the assignment depends on changes: a member joins or
  leaves, a subscription or assignor changes, a subscribed topic appears or changes its
  partition count.
- **Target assignment**: computed by the assignor when the group epoch is ahead of the
  assignment epoch, from the members' subscriptions and the previous target (stickiness); it
  then takes the group epoch as its assignment epoch. As in Kafka 4.3, at most once per
  assignment interval (counted from the last run, ``assignment_timestamp_ms``) and, when the
  caller offloads it, not within the heartbeat that triggers it (``assign`` after the answer);
  meanwhile members reconcile toward the previous target. A new group starts at epoch 1 with
  an empty target, so a member never gets the joining epoch 0 back.
- **Member epoch and reconciliation**: each member converges to its target one heartbeat at a
  time. Partitions it keeps stay; partitions it must give up are first *revoked* (the member
  stays at its epoch, in UNREVOKED_PARTITIONS, until a heartbeat's owned partitions no longer
  include them); partitions coming from another member are given only once no other member
  holds them (UNRELEASED_PARTITIONS until then); then the member takes the assignment epoch.

Invariants (tests/group/test_consumer_group_properties.py checks them under random schedules):

- a partition is held (assigned or pending revocation) by at most one member at any time, so
  no two members ever own it together, whatever their epochs;
- once heartbeats stop changing the group, every partition of a subscribed topic is assigned
  to a member subscribed to it;
- ``partition_owner`` is exactly the union of the members' assigned and pending-revocation
  partitions.

Classic members (online migration, Kafka's ClassicMemberMetadata): a member with
``classic_protocols`` speaks JoinGroup/SyncGroup/Heartbeat. ``classic_join`` is a heartbeat
whose subscription and owned partitions come from its JoinGroup metadata, so it reconciles
under the same invariants; it learns of a change only by rejoining (``classic_must_rejoin``).
``from_classic_group`` converts a classic group: every member at the classic generation, its
current assignment as its target (a partition two members claim stays with the first), so
the partition-owner invariant holds from the first moment.

Subscriptions are topic names or one regular expression. Regular expressions are resolved
*asynchronously*, as Kafka's coordinator does: a heartbeat uses only the group's last
resolution of a member's regex (none for a regex the group has not resolved yet, so the
member's literal topics are assigned at once and the regex's topics come at a later heartbeat);
``refresh_regexes`` (run by the caller after the heartbeat is answered) resolves new regexes and
re-resolves every regex when the broker's topic names changed, writes the result as Kafka's
ConsumerGroupRegularExpression record and bumps the group epoch if the subscribed topics
changed. A resolution no member uses any more is deleted (tombstone) when its last user leaves
or changes its regex. Kafka evaluates RE2J patterns, a Java port of
RE2; here RE2 itself (google-re2) evaluates them, with a full match (RE2J's ``matches()``), so
the same patterns are accepted (no backreferences, no lookarounds: INVALID_REGULAR_EXPRESSION)
and every match takes linear time. Internal topics (``__consumer_offsets`` ...) never match a
pattern.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import re2

from kafkalite.group.assignors import ASSIGNORS
from kafkalite.group.migration import encode_assignment, parse_subscription
from kafkalite.group.records import (
    CG_CURRENT_MEMBER_ASSIGNMENT,
    CG_MEMBER_METADATA,
    CG_METADATA,
    CG_PARTITION_METADATA,
    CG_REGULAR_EXPRESSION,
    CG_TARGET_ASSIGNMENT_MEMBER,
    CG_TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    consumer_group_record,
    encode_consumer_group_key,
)
from kafkalite.protocol.consumer_protocol import assigned_partitions
from kafkalite.protocol.errors import ErrorCode

TopicId = uuid.UUID
Assignment = dict[TopicId, frozenset[int]]
Record = tuple[bytes, bytes | None]

#: member epochs with a meaning (Kafka's ConsumerGroupHeartbeatRequest constants)
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class MemberState(enum.IntEnum):
    """Kafka's MemberState values, as stored in CurrentMemberAssignment."""

    UNREVOKED_PARTITIONS = 0
    UNRELEASED_PARTITIONS = 1
    STABLE = 2
    UNKNOWN = 127


class TopicsView(Protocol):
    """What the group needs to know about topics (the broker's MetadataCache has these)."""

    def get_all_topics(self) -> Iterable[str]: ...

    def get_topic_id(self, topic: str) -> uuid.UUID | None: ...

    def num_partitions(self, topic: str) -> int | None: ...


class ConsumerGroupError(Exception):
    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


@dataclass(slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    #: a member of the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) inside a
    #: consumer group: its JoinGroup protocols (name, metadata); None for a consumer member
    classic_protocols: tuple[tuple[str, bytes], ...] | None = None
    #: the classic member's JoinGroup session timeout (ClassicMemberMetadata's)
    session_timeout_ms: int = -1

    @property
    def is_classic(self) -> bool:
        return self.classic_protocols is not None

    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
            self.classic_protocols,
            self.session_timeout_ms if self.classic_protocols is not None else -1,
        )

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            self.member_epoch,
            self.previous_member_epoch,
            int(self.state),
            dict(self.assigned),
            dict(self.pending_revocation),
        )


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    #: None: unchanged since the member's last heartbeat (not sent)
    assignment: Assignment | None = None


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Does the member (by its reported ``owned`` partitions; None: it did not say, so assume
    it does) still own any of ``partitions``?"""
    if owned is None:
        return bool(partitions)
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def _is_subset(owned: Assignment | None, of: Assignment) -> bool:
    if owned is None:
        return True
    return all(ps <= of.get(t, frozenset()) for t, ps in owned.items())


def _clean(a: Mapping[TopicId, Iterable[int]]) -> Assignment:
    return {t: frozenset(ps) for t, ps in a.items() if ps}


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a client's bad pattern is answered, not logged by RE2


def compile_regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (its ``fullmatch`` is RE2J's ``matches()``)."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as e:
        reason = e.args[0] if e.args else "invalid"
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        raise ConsumerGroupError(
            ErrorCode.INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {reason}.",
        ) from None


class ConsumerGroup:
    """One consumer group of the new protocol; see the module docstring."""

    def __init__(self, group_id: str, default_assignor: str = "uniform") -> None:
        self.group_id = group_id
        self.default_assignor = default_assignor
        self.group_epoch = 0
        self.assignment_epoch = 0
        #: when the assignor run that produced the current target finished (Kafka 4.3's
        #: AssignmentTimestamp; 0: never), in ms; the assignment interval counts from it
        self.assignment_timestamp_ms = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, Assignment] = {}
        self.partition_owner: dict[tuple[TopicId, int], str] = {}
        #: topic name -> (topic id, partitions) of every subscribed topic, as last computed
        self.subscription_metadata: dict[str, tuple[TopicId, int]] = {}
        self._regex_cache: dict[str, Any] = {}
        #: regex -> its last resolution (the topics it matched), as written to the log
        self.resolved_regexes: dict[str, ConsumerGroupRegularExpressionValue] = {}
        #: the broker's topic names the resolutions were computed against (None: not yet)
        self._regexes_resolved_against: frozenset[str] | None = None
        self._pending_replacement: str | None = None
        #: a write of this group's records failed: the next change rewrites the whole group
        self.needs_snapshot = False

    # ------------------------------------------------------------------ views

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroupState names."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topic_names(self) -> set[str]:
        return set(self.subscription_metadata)

    def preferred_assignor(self) -> str:
        """The server assignor most members asked for (ties: by name), else the default."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return self.default_assignor
        return min(votes, key=lambda a: (-votes[a], a))

    # ------------------------------------------------------------------ subscriptions

    def _pattern(self, regex: str) -> Any:
        pattern = self._regex_cache.get(regex)
        if pattern is None:
            pattern = self._regex_cache[regex] = compile_regex(regex)
        return pattern

    def member_topics(self, member: ConsumerGroupMember, topics: TopicsView) -> set[str]:
        """The member's literal topics and its regex's last resolution (an unresolved regex
        contributes nothing yet)."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            resolved = self.resolved_regexes.get(member.subscribed_topic_regex)
            if resolved is not None:
                names.update(resolved.topics)
        return names

    def regexes_in_use(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}

    def refresh_regexes(self, topics: TopicsView, now_ms: int) -> list[Record]:
        """Resolve the regexes no resolution exists for, and all of them again if the broker's
        topic names changed since the last resolution; Kafka's refreshRegularExpressions and
        the group epoch bump when it completes. Returns the records of what changed."""
        in_use = self.regexes_in_use()
        if not in_use:
            return []
        unresolved = in_use - set(self.resolved_regexes)
        names = frozenset(topics.get_all_topics())
        if not unresolved and names == self._regexes_resolved_against:
            return []
        self._regexes_resolved_against = names
        records: list[Record] = []
        version = max((v.version for v in self.resolved_regexes.values()), default=0) + 1
        for regex in sorted(in_use):
            pattern = self._pattern(regex)
            matched = tuple(
                sorted(t for t in names if t not in INTERNAL_TOPICS and pattern.fullmatch(t))
            )
            old = self.resolved_regexes.get(regex)
            if old is not None and old.topics == matched:
                continue
            value = ConsumerGroupRegularExpressionValue(matched, version, now_ms)
            self.resolved_regexes[regex] = value
            records.append(consumer_group_record(self.group_id, value, regex))
        if records:
            metadata = self.compute_subscription_metadata(topics)
            if metadata != self.subscription_metadata:
                self.subscription_metadata = metadata
                records.extend(self._records_partition_metadata())
                self.group_epoch += 1
                records.extend(self._records_epoch())
        return records

    def _drop_unused_regex(self, regex: str | None) -> list[Record]:
        """Delete the resolution of ``regex`` if no member subscribes with it any more."""
        if not regex or regex in self.regexes_in_use() or regex not in self.resolved_regexes:
            return []
        del self.resolved_regexes[regex]
        return [(encode_consumer_group_key(CG_REGULAR_EXPRESSION, self.group_id, regex), None)]

    def compute_subscription_metadata(
        self, topics: TopicsView, members: Iterable[ConsumerGroupMember] | None = None
    ) -> dict[str, tuple[TopicId, int]]:
        out: dict[str, tuple[TopicId, int]] = {}
        for m in self.members.values() if members is None else members:
            for name in self.member_topics(m, topics):
                if name in out:
                    continue
                topic_id = topics.get_topic_id(name)
                n = topics.num_partitions(name)
                if topic_id is not None and n:
                    out[name] = (topic_id, n)
        return out

    # ------------------------------------------------------------------ ownership

    def _release(self, member: ConsumerGroupMember) -> None:
        for a in (member.assigned, member.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    if self.partition_owner.get((t, p)) == member.member_id:
                        del self.partition_owner[t, p]

    def _hold(self, member: ConsumerGroupMember) -> None:
        for a in (member.assigned, member.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    self.partition_owner[t, p] = member.member_id

    def _set_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        self._hold(member)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    # ------------------------------------------------------------------ target assignment

    def _records_epoch(self) -> list[Record]:
        return [consumer_group_record(self.group_id, ConsumerGroupMetadataValue(self.group_epoch))]

    def _records_partition_metadata(self) -> list[Record]:
        topics = tuple(
            (tid, name, n) for name, (tid, n) in sorted(self.subscription_metadata.items())
        )
        value = ConsumerGroupPartitionMetadataValue(self.group_epoch, topics)
        return [consumer_group_record(self.group_id, value)]

    def _records_target_metadata(self) -> list[Record]:
        value = ConsumerGroupTargetAssignmentMetadataValue(
            self.assignment_epoch, self.assignment_timestamp_ms
        )
        return [consumer_group_record(self.group_id, value)]

    def assignment_due(self, now_ms: int, interval_ms: int) -> bool:
        """A new target may be computed now: the group epoch is ahead of the assignment epoch
        and ``interval_ms`` passed since the last assignor run finished (Kafka 4.3's
        ``group.consumer.assignment.interval.ms``)."""
        return (
            self.group_epoch > self.assignment_epoch
            and now_ms - self.assignment_timestamp_ms >= interval_ms
        )

    def assign(self, topics: TopicsView, now_ms: int) -> list[Record]:
        """Run the assignor for the current group epoch (a deferred assignment: the heartbeat
        that bumped the epoch was answered with the previous target). The members reconcile
        toward it at their next heartbeats. Returns the records, none if nothing is pending."""
        if self.group_epoch <= self.assignment_epoch or not self.members:
            return []
        return self._update_target(topics, now_ms)

    def _update_target(self, topics: TopicsView, now_ms: int = 0) -> list[Record]:
        """Kafka's TargetAssignmentBuilder: a new target for every member at the group epoch;
        records for the members whose target changed, then the assignment epoch."""
        records: list[Record] = []
        subscriptions: dict[str, set[TopicId]] = {}
        for m in self.members.values():
            subscriptions[m.member_id] = {
                self.subscription_metadata[name][0]
                for name in self.member_topics(m, topics)
                if name in self.subscription_metadata
            }
        partitions = {tid: n for tid, n in self.subscription_metadata.values()}
        assign = ASSIGNORS[self.preferred_assignor()]
        new_target = assign(subscriptions, partitions, self.target)
        for member_id, a in new_target.items():
            if self.target.get(member_id) != a:
                records.append(
                    consumer_group_record(
                        self.group_id, ConsumerGroupTargetAssignmentMemberValue(a), member_id
                    )
                )
        self.target = dict(new_target)
        self.assignment_epoch = self.group_epoch
        self.assignment_timestamp_ms = now_ms
        records.extend(self._records_target_metadata())
        return records

    # ------------------------------------------------------------------ reconciliation

    def reconcile(
        self, member: ConsumerGroupMember, owned: Assignment | None
    ) -> ConsumerGroupMember:
        """Kafka's CurrentAssignmentBuilder: the member's next state toward its target."""
        target = self.target.get(member.member_id, {})
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if _owns_any(owned, member.pending_revocation):
                return member
        elif member.state is MemberState.STABLE and member.member_epoch == self.assignment_epoch:
            return member
        return self._next_assignment(member, target, owned)

    def _next_assignment(
        self, member: ConsumerGroupMember, target: Assignment, owned: Assignment | None
    ) -> ConsumerGroupMember:
        kept: dict[TopicId, set[int]] = {}
        revoke: dict[TopicId, set[int]] = {}
        incoming: dict[TopicId, set[int]] = {}
        unreleased = False
        # a member in UNREVOKED_PARTITIONS that acked holds only its kept partitions now
        current = member.assigned
        for t in set(target) | set(current):
            want = target.get(t, frozenset())
            have = current.get(t, frozenset())
            kept[t] = set(have & want)
            revoke[t] = set(have - want)
            for p in want - have:
                holder = self.partition_owner.get((t, p))
                if holder is None or holder == member.member_id:
                    incoming.setdefault(t, set()).add(p)
                else:
                    unreleased = True
        revoke_c = _clean(revoke)
        if revoke_c and _owns_any(owned, revoke_c):
            return replace(
                member,
                state=MemberState.UNREVOKED_PARTITIONS,
                assigned=_clean(kept),
                pending_revocation=revoke_c,
            )
        for t, ps in incoming.items():
            kept.setdefault(t, set()).update(ps)
        epoch = self.assignment_epoch
        return replace(
            member,
            state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
            previous_member_epoch=member.member_epoch
            if member.member_epoch != epoch
            else member.previous_member_epoch,
            member_epoch=epoch,
            assigned=_clean(kept),
            pending_revocation={},
        )

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(
        self,
        topics: TopicsView,
        member_id: str,
        member_epoch: int,
        *,
        instance_id: str | None = None,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
        rebalance_timeout_ms: int = -1,
        subscribed_topic_names: Iterable[str] | None = None,
        subscribed_topic_regex: str | None = None,
        server_assignor: str | None = None,
        owned: Assignment | None = None,
        max_size: int | None = None,
        classic_protocols: tuple[tuple[str, bytes], ...] | None = None,
        session_timeout_ms: int = -1,
        now_ms: int = 0,
        assignment_interval_ms: int = 0,
        defer_assignment: bool = False,
    ) -> tuple[HeartbeatResult, list[Record]]:
        """One ConsumerGroupHeartbeat (validated by the caller: ids, required fields). Raises
        ConsumerGroupError for UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID,
        INVALID_REGULAR_EXPRESSION, UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED.

        The new target is computed within the heartbeat only when the group epoch moved past
        the assignment epoch, ``assignment_interval_ms`` passed since the last assignor run
        (``assignment_due``) and ``defer_assignment`` (the assignor offloaded) is off;
        otherwise the member reconciles toward the previous target and the caller runs
        ``assign`` later (Kafka 4.3's assignment batching and offload). With the defaults
        (interval 0, not deferred) every heartbeat that changes the group gets its target."""
        if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(member_id, member_epoch, instance_id)
        if server_assignor is not None and server_assignor not in ASSIGNORS:
            raise ConsumerGroupError(
                ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {server_assignor} is not supported"
            )
        if subscribed_topic_regex is not None:
            self._pattern(subscribed_topic_regex)
        records: list[Record] = []
        bump = False
        owned_c = _clean(owned) if owned is not None else None
        replaced: str | None = None
        if member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            member = self._join(member_id, instance_id, max_size)
            replaced = self._pending_replacement
            is_new = member.member_id not in self.members
            if is_new:
                bump = True
            if replaced is not None:
                records.extend(self._member_tombstones(replaced))
                target = self.target.get(member.member_id)
                if target is not None:
                    records.append(
                        consumer_group_record(
                            self.group_id,
                            ConsumerGroupTargetAssignmentMemberValue(target),
                            member.member_id,
                        )
                    )
        else:
            member = self.members.get(member_id)
            if member is None:
                raise ConsumerGroupError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group"
                )
            if instance_id is not None and self.static_members.get(instance_id) != member_id:
                raise ConsumerGroupError(ErrorCode.FENCED_INSTANCE_ID)
            if member_epoch > member.member_epoch or (
                member_epoch < member.member_epoch
                and (
                    member_epoch != member.previous_member_epoch
                    or not _is_subset(owned_c, member.assigned)
                )
            ):
                raise ConsumerGroupError(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a smaller member epoch ({member_epoch}) "
                    f"than the one known by the group coordinator ({member.member_epoch})",
                )
            is_new = False
        updated = replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=rack_id if rack_id is not None else member.rack_id,
            client_id=client_id or member.client_id,
            client_host=client_host or member.client_host,
            rebalance_timeout_ms=rebalance_timeout_ms
            if rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            subscribed_topic_names=tuple(subscribed_topic_names)
            if subscribed_topic_names is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=(subscribed_topic_regex or None)
            if subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            server_assignor=server_assignor
            if server_assignor is not None
            else member.server_assignor,
            classic_protocols=classic_protocols
            if classic_protocols is not None
            else member.classic_protocols,
            session_timeout_ms=session_timeout_ms
            if session_timeout_ms != -1
            else member.session_timeout_ms,
        )
        if is_new or replaced or updated.metadata_value() != member.metadata_value():
            records.append(
                consumer_group_record(self.group_id, updated.metadata_value(), updated.member_id)
            )
            if (
                is_new
                or updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
                or updated.server_assignor != member.server_assignor
            ):
                bump = True
        # the subscribed topics as they are now (a topic may have appeared or grown)
        others = [m for m in self.members.values() if m.member_id != updated.member_id]
        metadata = self.compute_subscription_metadata(topics, [*others, updated])
        if metadata != self.subscription_metadata:
            self.subscription_metadata = metadata
            records.extend(self._records_partition_metadata())
            bump = True
        self._set_member(updated)
        if updated.subscribed_topic_regex != member.subscribed_topic_regex:
            records.extend(self._drop_unused_regex(member.subscribed_topic_regex))
        if bump:
            if self.group_epoch == 0:
                # a new group starts at epoch 1 with an empty target at assignment epoch 1
                # (Kafka 4.3): members joining before the first assignor run reconcile toward
                # it and get epoch 1, never the joining epoch 0
                self.group_epoch = self.assignment_epoch = 1
                records.extend(self._records_target_metadata())
            self.group_epoch += 1
            records.extend(self._records_epoch())
        if not defer_assignment and self.assignment_due(now_ms, assignment_interval_ms):
            records.extend(self._update_target(topics, now_ms))
        reconciled = self.reconcile(updated, owned_c)
        if reconciled is not updated:
            self._set_member(reconciled)
        if is_new or replaced or reconciled.assignment_value() != member.assignment_value():
            records.append(
                consumer_group_record(
                    self.group_id, reconciled.assignment_value(), reconciled.member_id
                )
            )
        send = (
            is_new
            or replaced is not None
            or reconciled.assigned != member.assigned
            or (owned_c is not None and owned_c != reconciled.assigned)
        )
        return (
            HeartbeatResult(
                member_id=reconciled.member_id,
                member_epoch=reconciled.member_epoch,
                assignment=dict(reconciled.assigned) if send else None,
            ),
            records,
        )

    def _join(
        self, member_id: str, instance_id: str | None, max_size: int | None
    ) -> ConsumerGroupMember:
        if instance_id is not None:
            previous_id = self.static_members.get(instance_id)
            if previous_id is not None and previous_id != member_id:
                previous = self.members.get(previous_id)
                if (
                    previous is not None
                    and previous.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
                ):
                    raise ConsumerGroupError(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"Static member {previous_id} with instance id {instance_id} is not "
                        "released yet",
                    )
                if previous is not None:
                    return self._replace_static_member(previous, member_id)
        existing = self.members.get(member_id)
        if existing is not None:
            # a member rejoining with epoch 0 (it lost its state): start over, same id
            return existing
        if max_size is not None and len(self.members) >= max_size:
            raise ConsumerGroupError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {max_size} members",
            )
        return ConsumerGroupMember(member_id=member_id, instance_id=instance_id)

    def _replace_static_member(
        self, previous: ConsumerGroupMember, member_id: str
    ) -> ConsumerGroupMember:
        """A static member came back (new member id, same instance id): it takes over the
        previous incarnation's epoch and assignment; the group epoch does not move."""
        self._release(previous)
        del self.members[previous.member_id]
        target = self.target.pop(previous.member_id, None)
        if target is not None:
            self.target[member_id] = target
        member = replace(
            previous,
            member_id=member_id,
            member_epoch=previous.previous_member_epoch
            if previous.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
            else previous.member_epoch,
        )
        self.members[member_id] = member
        self._hold(member)
        self.static_members[member.instance_id or ""] = member_id
        self._pending_replacement = previous.member_id
        return member

    def take_replaced_member(self) -> str | None:
        """The member id a static member's rejoin just replaced (its timers must go)."""
        replaced, self._pending_replacement = self._pending_replacement, None
        return replaced

    def _member_tombstones(self, member_id: str) -> list[Record]:
        return [
            (encode_consumer_group_key(t, self.group_id, member_id), None)
            for t in (CG_CURRENT_MEMBER_ASSIGNMENT, CG_TARGET_ASSIGNMENT_MEMBER, CG_MEMBER_METADATA)
        ]

    def _leave(
        self, member_id: str, member_epoch: int, instance_id: str | None
    ) -> tuple[HeartbeatResult, list[Record]]:
        member = self.members.get(member_id)
        if member is None:
            if instance_id is not None and instance_id in self.static_members:
                raise ConsumerGroupError(ErrorCode.FENCED_INSTANCE_ID)
            raise ConsumerGroupError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group"
            )
        if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and member.instance_id is not None:
            # a static member leaves for now: it keeps its assignment for the session timeout
            left = replace(
                member,
                previous_member_epoch=member.member_epoch,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
            )
            self._set_member(left)
            records: list[Record] = [
                consumer_group_record(self.group_id, left.assignment_value(), member_id)
            ]
            return HeartbeatResult(member_id=member_id, member_epoch=member_epoch), records
        return (
            HeartbeatResult(member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH),
            self.remove_member(member_id),
        )

    def remove_member(self, member_id: str) -> list[Record]:
        """The member left, was fenced or its session expired: its partitions are free, the
        group epoch goes up (tombstones, then the new epoch)."""
        member = self.members.pop(member_id, None)
        if member is None:
            return []
        self._release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == (
            member_id
        ):
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        records = self._member_tombstones(member_id)
        records.extend(self._drop_unused_regex(member.subscribed_topic_regex))
        self.group_epoch += 1
        records.extend(self._records_epoch())
        if not self.members:
            # an empty group has nothing to assign: its assignment epoch catches up (Kafka)
            self.assignment_epoch = self.group_epoch
            records.extend(self._records_target_metadata())
        return records

    def snapshot_records(self) -> list[Record]:
        """The whole group as records (after a failed write, so the log catches up with what
        members may have been told since)."""
        records: list[Record] = []
        for m in self.members.values():
            records.append(consumer_group_record(self.group_id, m.metadata_value(), m.member_id))
        for regex, resolved in sorted(self.resolved_regexes.items()):
            records.append(consumer_group_record(self.group_id, resolved, regex))
        records.extend(self._records_partition_metadata())
        records.extend(self._records_epoch())
        for member_id, a in self.target.items():
            records.append(
                consumer_group_record(
                    self.group_id, ConsumerGroupTargetAssignmentMemberValue(a), member_id
                )
            )
        records.extend(self._records_target_metadata())
        for m in self.members.values():
            records.append(consumer_group_record(self.group_id, m.assignment_value(), m.member_id))
        return records

    def tombstones(self) -> list[Record]:
        """Every record of the group deleted (DeleteGroups of an empty group)."""
        records: list[Record] = []
        for member_id in self.members:
            records.extend(self._member_tombstones(member_id))
        for regex in sorted(self.resolved_regexes):
            records.append(
                (encode_consumer_group_key(CG_REGULAR_EXPRESSION, self.group_id, regex), None)
            )
        for t in (CG_TARGET_ASSIGNMENT_METADATA, CG_PARTITION_METADATA, CG_METADATA):
            records.append((encode_consumer_group_key(t, self.group_id), None))
        return records

    # ------------------------------------------------------------------ classic members

    def has_consumer_protocol_members(self) -> bool:
        return any(not m.is_classic for m in self.members.values())

    def only_classic_members(self) -> bool:
        """Members remain and all of them speak the classic protocol (a downgrade candidate)."""
        return bool(self.members) and not self.has_consumer_protocol_members()

    def supports_classic_protocols(self, protocols: Iterable[str]) -> bool:
        """Kafka's supportsClassicProtocols: a joining classic member must share a protocol
        with every classic member already in the group."""
        classic = [m for m in self.members.values() if m.is_classic]
        names = list(protocols)
        if not names:
            return False
        if not classic:
            return True
        return any(
            all(any(n == p for p, _ in m.classic_protocols or ()) for m in classic) for n in names
        )

    def classic_protocol_name(self, preferred: Iterable[str] = ()) -> str | None:
        """The protocol every classic member supports: the first of ``preferred`` that all do,
        else in the first classic member's order."""
        classic = [m for m in self.members.values() if m.is_classic]
        if not classic:
            return None
        common = set.intersection(*({p for p, _ in m.classic_protocols or ()} for m in classic))
        for name in [*preferred, *(p for p, _ in classic[0].classic_protocols or ())]:
            if name in common:
                return name
        return None

    def topic_names_by_id(self) -> dict[TopicId, str]:
        return {tid: name for name, (tid, _) in self.subscription_metadata.items()}

    def classic_join(
        self,
        topics: TopicsView,
        member_id: str,
        *,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocols: Iterable[tuple[str, bytes]],
        max_size: int | None = None,
        now_ms: int = 0,
        assignment_interval_ms: int = 0,
        defer_assignment: bool = False,
    ) -> tuple[ConsumerGroupMember, list[Record]]:
        """A JoinGroup of a classic member (new or rejoining) into this consumer group (Kafka's
        classicGroupJoinToConsumerGroup): its subscription and the partitions it still owns come
        from its first protocol's metadata, and it reconciles as a heartbeat would. Raises
        ConsumerGroupError (INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
        GROUP_MAX_SIZE_REACHED, ...)."""
        protocols = tuple((n, bytes(m)) for n, m in protocols)
        if not self.supports_classic_protocols(n for n, _ in protocols):
            raise ConsumerGroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        subscription = parse_subscription(protocols[0][1])
        if subscription is None:
            raise ConsumerGroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        owned: dict[TopicId, set[int]] = {}
        for topic, ps in subscription.owned:
            topic_id = topics.get_topic_id(topic)
            if topic_id is not None:
                owned.setdefault(topic_id, set()).update(ps)
        existing = self.members.get(member_id)
        if existing is not None and not existing.is_classic:
            raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        epoch = existing.member_epoch if existing is not None else JOIN_GROUP_MEMBER_EPOCH
        result, records = self.heartbeat(
            topics,
            member_id,
            epoch,
            instance_id=instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=subscription.topics,
            owned=_clean(owned),
            max_size=max_size,
            classic_protocols=protocols,
            session_timeout_ms=session_timeout_ms,
            now_ms=now_ms,
            assignment_interval_ms=assignment_interval_ms,
            defer_assignment=defer_assignment,
        )
        return self.members[result.member_id or member_id], records

    def classic_member(
        self, member_id: str, instance_id: str | None, generation_id: int | None
    ) -> ConsumerGroupMember:
        """Kafka's validateClassicGroupHeartbeat / validateSyncGroup: the classic member named,
        at its member epoch. Raises UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION."""
        member = self.members.get(member_id)
        if member is None or not member.is_classic:
            raise ConsumerGroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        if instance_id is not None and member.instance_id != instance_id:
            raise ConsumerGroupError(ErrorCode.FENCED_INSTANCE_ID)
        if generation_id is not None and generation_id != member.member_epoch:
            raise ConsumerGroupError(ErrorCode.ILLEGAL_GENERATION)
        return member

    def classic_must_rejoin(self, member: ConsumerGroupMember) -> bool:
        """A classic member learns of a new assignment only by rejoining (Kafka's rule): when
        a newer target than its epoch is computed (not merely a newer group epoch: the target
        may lag behind it, Kafka 4.3), when it has partitions to revoke, or when the
        partitions it waits for have all been released."""
        if member.member_epoch < self.assignment_epoch:
            return True
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            return True
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            target = self.target.get(member.member_id, {})
            for t, ps in target.items():
                for p in ps - member.assigned.get(t, frozenset()):
                    if self.partition_owner.get((t, p)) not in (None, member.member_id):
                        return False
            return True
        return False

    def classic_assignment(self, member: ConsumerGroupMember) -> bytes:
        """SyncGroup's answer to a classic member: its assigned partitions by topic name."""
        names = self.topic_names_by_id()
        version = 0
        if member.classic_protocols:
            sub = parse_subscription(member.classic_protocols[0][1])
            version = sub.version if sub is not None else 0
        return encode_assignment(
            ((names[t], ps) for t, ps in member.assigned.items() if t in names), version
        )

    # ------------------------------------------------------------------ offsets

    def validate_offset_commit(
        self, member_id: str, member_epoch: int, is_transactional: bool, api_version: int
    ) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetCommit: an admin/simple commit (epoch < 0) only
        on an empty group; otherwise the member's current epoch (STALE_MEMBER_EPOCH)."""
        if member_epoch < 0 and not self.members:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.is_classic:
            # a classic member commits with its generation (its member epoch), any version
            return ErrorCode.ILLEGAL_GENERATION if member_epoch != member.member_epoch else None
        if not is_transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """Kafka's validateOffsetFetch: epoch -1 (an admin client) may always fetch."""
        if member_epoch < 0 or member_id is None:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return (
                ErrorCode.ILLEGAL_GENERATION if member.is_classic else ErrorCode.STALE_MEMBER_EPOCH
            )
        return None


@dataclass(slots=True)
class ConsumerGroupLoader:
    """Collects a group's records while its ``__consumer_offsets`` partition is replayed;
    ``build()`` returns the group as it was last written (later records win, tombstones
    delete)."""

    group_id: str
    epoch: int | None = None
    assignment_epoch: int = 0
    assignment_timestamp: int = 0
    metadata: dict[str, tuple[TopicId, int]] = field(default_factory=dict)
    members: dict[str, ConsumerGroupMemberMetadataValue] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    current: dict[str, ConsumerGroupCurrentMemberAssignmentValue] = field(default_factory=dict)
    regexes: dict[str, ConsumerGroupRegularExpressionValue] = field(default_factory=dict)

    def apply(self, key: ConsumerGroupKey, value: object | None) -> None:
        t, member = key.record_type, key.member_id or ""
        if t == CG_METADATA:
            self.epoch = value.epoch if isinstance(value, ConsumerGroupMetadataValue) else None
        elif t == CG_PARTITION_METADATA:
            self.metadata = (
                {name: (tid, n) for tid, name, n in value.topics}
                if isinstance(value, ConsumerGroupPartitionMetadataValue)
                else {}
            )
        elif t == CG_MEMBER_METADATA:
            if isinstance(value, ConsumerGroupMemberMetadataValue):
                self.members[member] = value
            else:
                self.members.pop(member, None)
        elif t == CG_TARGET_ASSIGNMENT_METADATA:
            if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
                self.assignment_epoch = value.assignment_epoch
                self.assignment_timestamp = value.assignment_timestamp
            else:
                self.assignment_epoch = self.assignment_timestamp = 0
        elif t == CG_TARGET_ASSIGNMENT_MEMBER:
            if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
                self.targets[member] = dict(value.partitions)
            else:
                self.targets.pop(member, None)
        elif t == CG_CURRENT_MEMBER_ASSIGNMENT:
            if isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
                self.current[member] = value
            else:
                self.current.pop(member, None)
        elif t == CG_REGULAR_EXPRESSION:
            if isinstance(value, ConsumerGroupRegularExpressionValue):
                self.regexes[member] = value
            else:
                self.regexes.pop(member, None)

    def build(self, default_assignor: str) -> ConsumerGroup | None:
        if self.epoch is None:
            return None
        group = ConsumerGroup(self.group_id, default_assignor)
        group.group_epoch = self.epoch
        group.assignment_epoch = self.assignment_epoch
        group.assignment_timestamp_ms = self.assignment_timestamp
        group.subscription_metadata = dict(self.metadata)
        group.target = {m: a for m, a in self.targets.items() if m in self.members}
        group.resolved_regexes = dict(self.regexes)
        for member_id, meta in self.members.items():
            cur = self.current.get(member_id)
            member = ConsumerGroupMember(
                member_id=member_id,
                instance_id=meta.instance_id,
                rack_id=meta.rack_id,
                client_id=meta.client_id,
                client_host=meta.client_host,
                subscribed_topic_names=meta.subscribed_topic_names,
                subscribed_topic_regex=meta.subscribed_topic_regex,
                rebalance_timeout_ms=meta.rebalance_timeout_ms,
                server_assignor=meta.server_assignor,
                classic_protocols=meta.classic_protocols,
                session_timeout_ms=meta.classic_session_timeout_ms,
            )
            if cur is not None:
                member.member_epoch = cur.member_epoch
                member.previous_member_epoch = cur.previous_member_epoch
                try:
                    member.state = MemberState(cur.state)
                except ValueError:
                    member.state = MemberState.UNKNOWN
                member.assigned = dict(cur.assigned)
                member.pending_revocation = dict(cur.pending_revocation)
            group._set_member(member)
        return group


@dataclass(frozen=True, slots=True)
class ClassicMemberView:
    """What an upgrade needs of a member of the classic group being converted."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes


def from_classic_group(
    group_id: str,
    default_assignor: str,
    generation_id: int,
    protocol_name: str | None,
    members: Iterable[ClassicMemberView],
    topics: TopicsView,
) -> tuple[ConsumerGroup, list[Record]]:
    """Kafka's ConsumerGroup.fromClassicGroup: the classic group's members become classic
    members of a consumer group at the classic generation (group, assignment and member epochs),
    each keeping its current assignment as its target; returns the group and its records (the
    caller writes the classic group's tombstone first). A partition two members claim (a
    leader's bad assignment) stays with the first. Raises ConsumerGroupError
    (GROUP_ID_NOT_FOUND) when a member's subscription does not parse."""
    group = ConsumerGroup(group_id, default_assignor)
    group.group_epoch = group.assignment_epoch = generation_id
    for view in members:
        metadata = dict(view.protocols).get(protocol_name or "", None)
        if metadata is None and view.protocols:
            metadata = view.protocols[0][1]
        subscription = parse_subscription(metadata or b"")
        if subscription is None:
            raise ConsumerGroupError(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {group_id}: member {view.member_id}'s "
                "subscription does not parse.",
            )
        assigned: dict[TopicId, set[int]] = {}
        for topic, ps in assigned_partitions(view.assignment) or []:
            topic_id = topics.get_topic_id(topic)
            n = topics.num_partitions(topic)
            if topic_id is None or not n:
                continue
            for p in ps:
                if 0 <= p < n and (topic_id, p) not in group.partition_owner:
                    assigned.setdefault(topic_id, set()).add(p)
        member = ConsumerGroupMember(
            member_id=view.member_id,
            instance_id=view.instance_id,
            client_id=view.client_id,
            client_host=view.client_host,
            subscribed_topic_names=subscription.topics,
            rebalance_timeout_ms=view.rebalance_timeout_ms,
            member_epoch=generation_id,
            previous_member_epoch=generation_id,
            state=MemberState.STABLE,
            assigned=_clean(assigned),
            classic_protocols=tuple(view.protocols),
            session_timeout_ms=view.session_timeout_ms,
        )
        group._set_member(member)
        group.target[member.member_id] = dict(member.assigned)
    group.subscription_metadata = group.compute_subscription_metadata(topics)
    return group, group.snapshot_records()
