"""The console consumer's group-member pieces that need no broker: Kafka's RangeAssignor and
the ConsumerProtocolAssignment encoding (checked against the coordinator's own decoder)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkalite.cli.group_member import encode_assignment, range_assignment
from kafkalite.protocol.consumer_protocol import assigned_partitions

topics = st.text(alphabet="abcxyz.-_", min_size=1, max_size=8)


@given(st.dictionaries(topics, st.lists(st.integers(0, 2**31 - 1), unique=True), max_size=5))
def test_assignment_encoding_round_trips_through_the_coordinators_decoder(assignment) -> None:
    decoded = assigned_partitions(encode_assignment(assignment))
    assert decoded == sorted((t, sorted(ps)) for t, ps in assignment.items())


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=6),
        st.sets(st.sampled_from(["t1", "t2", "t3"]), min_size=1),
        min_size=1,
        max_size=6,
    ),
    st.fixed_dictionaries({"t1": st.integers(0, 20), "t2": st.integers(0, 20)}),
)
def test_range_assignment_gives_every_partition_to_exactly_one_subscriber(
    subscriptions, counts
) -> None:
    plan = range_assignment(subscriptions, counts)
    for topic in ("t1", "t2", "t3"):
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        owned = [(m, p) for m in members for p in plan[m].get(topic, [])]
        expected = list(range(counts.get(topic, 0))) if members else []
        assert sorted(p for _, p in owned) == expected
        sizes = [len(plan[m].get(topic, [])) for m in members]
        if sizes:  # consecutive ranges, the first members one more
            assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
    for member, assignment in plan.items():
        assert set(assignment) <= subscriptions[member]


def test_range_assignment_matches_kafkas_example() -> None:
    # RangeAssignor's javadoc: two consumers, two topics of three partitions each
    plan = range_assignment({"C0": {"t0", "t1"}, "C1": {"t0", "t1"}}, {"t0": 3, "t1": 3})
    assert plan == {"C0": {"t0": [0, 1], "t1": [0, 1]}, "C1": {"t0": [2], "t1": [2]}}
