"""The server-side assignors of the consumer group protocol: every subscribed partition to
exactly one subscribed member; uniform balances (then keeps partitions where they are); range
hands out contiguous ranges; group.consumer.assignors is parsed as Kafka names them."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.group.assignors import parse_assignors, range_assign, uniform_assign

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def owners(result):
    out = {}
    for member, topics in result.items():
        for t, parts in topics.items():
            for p in parts:
                assert (t, p) not in out, f"{(t, p)} assigned twice"
                out[t, p] = member
    return out


@st.composite
def groups(draw):
    topics = {
        t: draw(st.integers(1, 8)) for t in draw(st.sets(st.sampled_from([T1, T2, T3]), min_size=1))
    }
    n = draw(st.integers(1, 7))
    members = {
        f"m{i}": draw(st.sets(st.sampled_from(sorted(topics, key=str)), min_size=1))
        for i in range(n)
    }
    return members, topics


@pytest.mark.parametrize("assign", [uniform_assign, range_assign])
@settings(max_examples=150, deadline=None)
@given(groups())
def test_every_subscribed_partition_goes_to_exactly_one_subscriber(assign, group):
    members, topics = group
    result = assign(members, topics, {})
    placed = owners(result)
    for t, n in topics.items():
        subscribed = any(t in subs for subs in members.values())
        for p in range(n):
            if subscribed:
                assert placed[t, p] in members and t in members[placed[t, p]]
            else:
                assert (t, p) not in placed
    assert len(placed) == sum(n for t, n in topics.items() if any(t in s for s in members.values()))


@settings(max_examples=150, deadline=None)
@given(groups())
def test_uniform_balances_homogeneous_groups_and_is_sticky(group):
    members, topics = group
    everything = set(topics)
    members = {m: everything for m in members}
    first = uniform_assign(members, topics, {})
    total = sum(topics.values())
    counts = sorted(sum(len(p) for p in a.values()) for a in first.values())
    assert counts[-1] - counts[0] <= 1 and sum(counts) == total
    # one more member: the others only give partitions up, never trade among themselves
    members2 = {**members, "new": everything}
    second = uniform_assign(members2, topics, first)
    counts2 = sorted(sum(len(p) for p in a.values()) for a in second.values())
    assert counts2[-1] - counts2[0] <= 1
    for m, a in first.items():
        for t, parts in second[m].items():
            assert parts <= a.get(t, frozenset()), "a partition moved between old members"


def test_uniform_moves_only_what_a_new_member_needs():
    members = {m: {T1} for m in ("a", "b", "c")}
    first = uniform_assign(members, {T1: 12}, {})
    assert sorted(len(a[T1]) for a in first.values()) == [4, 4, 4]
    second = uniform_assign({**members, "d": {T1}}, {T1: 12}, first)
    moved = sum(len(first[m][T1] - second[m].get(T1, frozenset())) for m in members)
    assert moved == 3 and len(second["d"][T1]) == 3


def test_range_gives_contiguous_ranges_in_member_order():
    result = range_assign({"b": {T1}, "a": {T1}, "c": {T1, T2}}, {T1: 7, T2: 2}, {})
    assert result["a"][T1] == frozenset({0, 1, 2})
    assert result["b"][T1] == frozenset({3, 4})
    assert result["c"][T1] == frozenset({5, 6})
    assert result["c"][T2] == frozenset({0, 1})


def test_assignor_names():
    assert parse_assignors("uniform,range") == ("uniform", "range")
    assert parse_assignors(" range ") == ("range",)
    assert parse_assignors("org.apache.kafka.coordinator.group.assignor.RangeAssignor") == (
        "range",
    )
    with pytest.raises(ValueError, match="sticky"):
        parse_assignors("sticky")
    with pytest.raises(ValueError):
        parse_assignors(" , ")
