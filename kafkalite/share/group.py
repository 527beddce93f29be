"""Share-group membership (ShareGroupHeartbeat) and the simple assignor, as Kafka 4.1's group
coordinator does it for share groups.

Pure (an injected clock in milliseconds, topic metadata passed in). A member joins with epoch 0
(with the member id it chose, or an empty one the coordinator fills), heartbeats with its
current epoch, and leaves with -1. The group epoch moves when the membership, a subscription or
the subscribed topics' partitions change; the member then gets the new epoch and its assignment.
Share groups revoke nothing: a partition is shared by every member subscribed to its topic (the
simple assignor gives each of them all its partitions), so the assignment is handed out at once.

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
    ) -> None:
        self.session_timeout_ms = session_timeout_ms
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
                group.group_epoch += 1
        member.deadline_ms = now + self.session_timeout_ms
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
        """The simple assignor: every member subscribed to a topic gets all its partitions. A
        change of the partitions (a topic created, partitions added) moves the group epoch."""
        changed = False
        for member in group.members.values():
            target: Assignment = {}
            for topic in member.subscribed:
                found = lookup(topic)
                if found is not None:
                    topic_id, count = found
                    target[topic_id] = tuple(range(count))
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
