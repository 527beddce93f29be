"""Share-group membership (ShareGroupHeartbeat) and the simple assignor, as Kafka 4.1's group
coordinator does it for share groups.

Pure (an injected clock in milliseconds, topic metadata passed in). A member joins with epoch 0
(with the member id it chose, or an empty one the coordinator fills), heartbeats with its
current epoch, and leaves with -1. The group epoch moves when the membership, a subscription or
the subscribed topics' partitions change; the member then gets the new epoch and its assignment.
Share groups revoke nothing: the simple assignor (`simple_assignment`, Kafka 4.1's) splits the
partitions among the members while they are no more than the partitions and shares each
partition among several members when they are more, and a new assignment is handed out at once
(the records a member held on a partition it lost go back when its lock or session ends).

A member whose heartbeats stop for ``session_timeout_ms`` is removed (``expire``): the caller
releases the records it held and closes its share sessions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkalite.protocol.errors import ErrorCode

Assignment = dict[uuid.UUID, tuple[int, ...]]
"""topic id -> partitions."""

TopicLookup = Callable[[str], "tuple[uuid.UUID, int] | None"]
"""topic name -> (topic id, partition count), None when unknown."""


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    subscribed: tuple[str, ...] = ()
    assignment: Assignment = field(default_factory=dict)
    sent_assignment: Assignment | None = None
    deadline_ms: int = 0


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    topics: set[str] = field(default_factory=set)
    """Every topic a member subscribed to since the group was created: where it may hold
    share-partition state once empty (Kafka keeps its initialised topics in the group's
    records; here in memory, on the coordinator)."""

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None
    removed: str | None = None
    """A member that left (its records go back)."""


class ShareGroupManager:
    def __init__(
        self,
        *,
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 5000,
        max_size: int = 200,
        time_ms: Callable[[], int],
        session_timeout_for: Callable[[str], int] | None = None,
    ) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.session_timeout_for = session_timeout_for or (lambda group_id: session_timeout_ms)
        """A group's session timeout (its ``share.session.timeout.ms`` group config)."""
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_size = max_size
        self.time_ms = time_ms
        self.groups: dict[str, ShareGroup] = {}

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed: tuple[str, ...] | None,
        lookup: TopicLookup,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatResult:
        now = self.time_ms()
        group = self.groups.get(group_id)
        if member_epoch == -1:
            if group is None or member_id not in group.members:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            del group.members[member_id]
            group.group_epoch += 1
            self._reassign(group, lookup)
            return HeartbeatResult(ErrorCode.NONE, member_id, -1, removed=member_id)
        if member_epoch == 0:
            if not subscribed:
                return HeartbeatResult(ErrorCode.INVALID_REQUEST)
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            member = group.members.get(member_id) if member_id else None
            if member is None:
                if len(group.members) >= self.max_size:
                    return HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
                member = ShareMember(member_id or str(uuid.uuid4()))
                group.members[member.member_id] = member
            member.client_id, member.client_host, member.rack_id = client_id, client_host, rack_id
            member.subscribed = tuple(sorted(set(subscribed)))
            group.topics.update(member.subscribed)
            member.sent_assignment = None
            group.group_epoch += 1
        else:
            member = group.members.get(member_id) if group is not None else None
            if group is None or member is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            if member_epoch != member.member_epoch:
                return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH)
            if subscribed is not None and tuple(sorted(set(subscribed))) != member.subscribed:
                member.subscribed = tuple(sorted(set(subscribed)))
                group.topics.update(member.subscribed)
                group.group_epoch += 1
        member.deadline_ms = now + self.session_timeout_for(group_id)
        self._reassign(group, lookup)
        member.member_epoch = group.group_epoch
        changed = member.sent_assignment != member.assignment
        if changed:
            member.sent_assignment = dict(member.assignment)
        return HeartbeatResult(
            ErrorCode.NONE,
            member.member_id,
            member.member_epoch,
            dict(member.assignment) if changed else None,
        )

    def _reassign(self, group: ShareGroup, lookup: TopicLookup) -> None:
        """The simple assignor (`simple_assignment`) over the group's members and their
        subscribed topics' partitions. A change of anyone's assignment (a member joined or
        left, a topic created, partitions added) moves the group epoch."""
        targets: dict[str, list[tuple[uuid.UUID, int]]] = {}
        for member in group.members.values():
            wanted: list[tuple[uuid.UUID, int]] = []
            for topic in member.subscribed:
                found = lookup(topic)
                if found is not None:
                    topic_id, count = found
                    wanted.extend((topic_id, p) for p in range(count))
            targets[member.member_id] = wanted
        current = {
            m.member_id: {(t, p) for t, parts in m.assignment.items() for p in parts}
            for m in group.members.values()
        }
        assigned = simple_assignment(targets, current)
        changed = False
        for member in group.members.values():
            target: Assignment = {}
            for topic_id, partition in sorted(assigned[member.member_id]):
                target.setdefault(topic_id, ())
                target[topic_id] += (partition,)
            if target != member.assignment:
                member.assignment = target
                changed = True
        if changed and group.assignment_epoch == group.group_epoch:
            group.group_epoch += 1
        group.assignment_epoch = group.group_epoch

    def expire(self) -> list[tuple[str, str]]:
        """Remove the members whose session timed out; (group, member) of each."""
        now = self.time_ms()
        gone = []
        for group in self.groups.values():
            for member_id, member in list(group.members.items()):
                if member.deadline_ms <= now:
                    del group.members[member_id]
                    group.group_epoch += 1
                    gone.append((group.group_id, member_id))
        return gone

    def next_deadline(self) -> int | None:
        deadlines = [m.deadline_ms for g in self.groups.values() for m in g.members.values()]
        return min(deadlines) if deadlines else None

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members


TopicIdPartition = tuple[uuid.UUID, int]


def simple_assignment(
    targets: dict[str, list[TopicIdPartition]],
    current: dict[str, set[TopicIdPartition]],
) -> dict[str, set[TopicIdPartition]]:
    """Kafka 4.1's simple share assignor: balance first, then stickiness.

    ``targets``: each member (in the group's order) and the partitions of the topics it
    subscribes to; ``current``: what each holds now. Members subscribed to the same topics are
    assigned together: each of their partitions goes to ``ceil(members / partitions)`` of them
    (one member per partition while members <= partitions, so they split the partitions; more
    members than partitions share each one), and each member gets its share of those
    assignments, within one of any other's. A member keeps what it holds as far as that
    balance allows."""
    out: dict[str, set[TopicIdPartition]] = {m: set() for m in targets}
    pools: dict[tuple[TopicIdPartition, ...], list[str]] = {}
    for member, partitions in targets.items():
        if partitions:
            pools.setdefault(tuple(sorted(set(partitions))), []).append(member)
    for partitions, members in pools.items():
        _assign_pool(list(partitions), members, current, out)
    return out


def _assign_pool(
    partitions: list[TopicIdPartition],
    members: list[str],
    current: dict[str, set[TopicIdPartition]],
    out: dict[str, set[TopicIdPartition]],
) -> None:
    m, p = len(members), len(partitions)
    sharing = (m + p - 1) // p
    total = sharing * p
    low, extra = divmod(total, m)
    # every member gets `low` assignments and `extra` of them one more
    big = 0  # members holding low + 1

    def room(member: str) -> bool:
        n = len(out[member])
        return n < low or (n == low and big < extra)

    holders: dict[TopicIdPartition, set[str]] = {tp: set() for tp in partitions}

    def give(member: str, tp: TopicIdPartition) -> None:
        nonlocal big
        out[member].add(tp)
        holders[tp].add(member)
        if len(out[member]) == low + 1:
            big += 1

    # stickiness: what a member holds stays while its count and the partition's sharing allow
    for member in members:
        for tp in sorted(current.get(member, ()) & holders.keys()):
            if room(member) and len(holders[tp]) < sharing:
                give(member, tp)
    # the rest: each under-shared partition to the least-filled member that lacks it
    progress = True
    while progress:
        progress = False
        for tp in partitions:
            if len(holders[tp]) >= sharing:
                continue
            candidates = [mb for mb in members if room(mb) and mb not in holders[tp]]
            if not candidates:
                continue
            give(min(candidates, key=lambda mb: len(out[mb])), tp)
            progress = True
