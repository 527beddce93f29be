"""The simple share assignor (share/group.py, Kafka 4.1's): partitions split among the members
while they are no more than the partitions, shared when they are more; balanced; sticky."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.share.group import ShareGroupManager, simple_assignment

TOPIC = uuid.UUID(int=1)


def _targets(members: int, partitions: int):
    return {f"m{i}": [(TOPIC, p) for p in range(partitions)] for i in range(members)}


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.data())
def test_balanced_split_or_shared(members, partitions, data):
    targets = _targets(members, partitions)
    # any earlier assignment (sticky input) must not break balance
    current = {
        m: set(data.draw(st.lists(st.sampled_from(t), max_size=partitions)))
        for m, t in targets.items()
    }
    out = simple_assignment(targets, current)
    holders = {(TOPIC, p): [m for m in out if (TOPIC, p) in out[m]] for p in range(partitions)}
    sharing = -(-members // partitions)
    assert all(len(h) == sharing for h in holders.values()), holders
    counts = [len(v) for v in out.values()]
    assert max(counts) - min(counts) <= 1
    if members <= partitions:
        assert all(len(h) == 1 for h in holders.values()), "members <= partitions: disjoint"
    assert all(c >= 1 for c in counts), "every member gets something"


def test_sticky_when_a_member_joins():
    targets = _targets(2, 4)
    first = simple_assignment(targets, {})
    targets["m2"] = [(TOPIC, p) for p in range(4)]
    second = simple_assignment(targets, first)
    moved = sum(len(first[m] - second[m]) for m in first)
    assert moved == 1, (first, second)


def test_two_members_on_four_partitions_through_heartbeats():
    now = [0]
    groups = ShareGroupManager(time_ms=lambda: now[0])
    lookup = {"t": (TOPIC, 4)}.get
    a = groups.heartbeat("g", "a", 0, None, ("t",), lookup)
    b = groups.heartbeat("g", "b", 0, None, ("t",), lookup)
    assert sorted(b.assignment[TOPIC]) != [0, 1, 2, 3]
    a2 = groups.heartbeat("g", "a", a.member_epoch, None, None, lookup)
    assert a2.assignment is not None, "the first member is told its smaller assignment"
    assert set(a2.assignment[TOPIC]) | set(b.assignment[TOPIC]) == {0, 1, 2, 3}
    assert not set(a2.assignment[TOPIC]) & set(b.assignment[TOPIC])
