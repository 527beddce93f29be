"""Replica assignment (kafkalite/zk/assignment.py) against Kafka's documented examples
and the properties its placement promises (even spread, shifted followers)."""

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.errors import (
    ErrorCode,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)
from kafkalite.zk.assignment import (
    AdminOperationError,
    BrokerMetadata,
    assign_replicas_to_brokers,
    broker_metadatas,
    rack_alternated_broker_list,
    validate_replica_assignment,
)


def brokers(*ids, racks=None):
    return [BrokerMetadata(i, None if racks is None else racks[i]) for i in ids]


def test_kafka_documented_rack_unaware_example():
    # AdminUtils' doc comment: 5 brokers, 10 partitions, 3 replicas, start index 0.
    result = assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 10, 3, start_index=0)
    first = {p: r[0] for p, r in result.items()}
    assert [first[p] for p in range(10)] == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]
    # 2nd replica row "p4 p0 p1 p2 p3" / "p8 p9 p5 p6 p7" by broker 0..4
    second = {p: r[1] for p, r in result.items()}
    assert [p for b in range(5) for p in range(5) if second[p] == b] == [4, 0, 1, 2, 3]
    assert [p for b in range(5) for p in range(5, 10) if second[p] == b] == [8, 9, 5, 6, 7]
    # 3rd replica row "p3 p4 p0 p1 p2" / "p7 p8 p9 p5 p6"
    third = {p: r[2] for p, r in result.items()}
    assert [p for b in range(5) for p in range(5) if third[p] == b] == [3, 4, 0, 1, 2]
    assert [p for b in range(5) for p in range(5, 10) if third[p] == b] == [7, 8, 9, 5, 6]


def test_kafka_documented_rack_aware_example():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    result = assign_replicas_to_brokers(brokers(*range(6), racks=racks), 7, 3, start_index=0)
    assert result == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],  # the followers shift once the first round is done
    }


def test_rack_alternated_list_takes_racks_in_turn():
    racks = {i: f"rack{i // 3 + 1}" for i in range(9)}
    assert rack_alternated_broker_list(racks) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_brokers_are_sorted_before_assignment():
    ordered = assign_replicas_to_brokers(brokers(1, 2, 3), 6, 2, start_index=1, replica_shift=0)
    shuffled = assign_replicas_to_brokers(brokers(3, 1, 2), 6, 2, start_index=1, replica_shift=0)
    assert ordered == shuffled
    assert ordered[0][0] == 2  # start index 1 in the sorted list [1, 2, 3]


def test_random_start_comes_from_the_given_rng():
    a = assign_replicas_to_brokers(brokers(0, 1, 2, 3), 8, 3, rng=random.Random(7))
    b = assign_replicas_to_brokers(brokers(0, 1, 2, 3), 8, 3, rng=random.Random(7))
    assert a == b
    starts = {
        assign_replicas_to_brokers(brokers(0, 1, 2, 3), 1, 1, rng=random.Random(s))[0][0]
        for s in range(40)
    }
    assert starts == {0, 1, 2, 3}


def test_start_partition_id_continues_the_round_robin():
    whole = assign_replicas_to_brokers(brokers(0, 1, 2), 9, 2, start_index=0)
    tail = assign_replicas_to_brokers(brokers(0, 1, 2), 4, 2, start_index=0, start_partition_id=5)
    # Leaders continue where partition 4 left off (Kafka does not replay the follower shift).
    assert sorted(tail) == [5, 6, 7, 8]
    assert [tail[p][0] for p in range(5, 9)] == [whole[p][0] for p in range(5, 9)]


@pytest.mark.parametrize(
    ("n_partitions", "rf", "error"),
    [
        (0, 1, InvalidPartitionsError),
        (-1, 1, InvalidPartitionsError),
        (1, 0, InvalidReplicationFactorError),
        (1, 4, InvalidReplicationFactorError),
    ],
)
def test_invalid_arguments_raise_kafka_errors(n_partitions, rf, error):
    with pytest.raises(error) as info:
        assign_replicas_to_brokers(brokers(0, 1, 2), n_partitions, rf)
    assert info.value.error_code in (
        ErrorCode.INVALID_PARTITIONS,
        ErrorCode.INVALID_REPLICATION_FACTOR,
    )


def test_replication_factor_larger_than_brokers_is_invalid_replication_factor():
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 1"):
        assign_replicas_to_brokers(brokers(0), 1, 2)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers([], 1, 1)


def test_partial_rack_information_is_refused_or_dropped():
    mixed = [BrokerMetadata(0, "a"), BrokerMetadata(1, None), BrokerMetadata(2, "b")]
    with pytest.raises(AdminOperationError):
        assign_replicas_to_brokers(mixed, 3, 2)
    with pytest.raises(AdminOperationError):
        broker_metadatas(mixed, "enforced")
    assert [b.rack for b in broker_metadatas(mixed, "safe")] == [None, None, None]
    assert [b.rack for b in broker_metadatas(brokers(2, 0, racks={0: "a", 2: "b"}), "safe")] == [
        "a",
        "b",
    ]
    assert [b.id for b in broker_metadatas(mixed, "disabled")] == [0, 1, 2]
    with pytest.raises(ValueError):
        broker_metadatas(mixed, "sometimes")


@settings(max_examples=150, deadline=None)
@given(
    n_brokers=st.integers(1, 10),
    n_partitions=st.integers(1, 40),
    data=st.data(),
)
def test_rack_unaware_properties(n_brokers, n_partitions, data):
    rf = data.draw(st.integers(1, n_brokers))
    start = data.draw(st.integers(0, n_brokers - 1))
    shift = data.draw(st.integers(0, n_brokers - 1))
    ids = data.draw(
        st.lists(st.integers(0, 1000), min_size=n_brokers, max_size=n_brokers, unique=True)
    )
    result = assign_replicas_to_brokers(
        [BrokerMetadata(i) for i in ids], n_partitions, rf, start_index=start, replica_shift=shift
    )
    assert sorted(result) == list(range(n_partitions))
    for replicas in result.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(ids)
    leaders = Counter(r[0] for r in result.values())
    counts = [leaders.get(b, 0) for b in ids]
    assert max(counts) - min(counts) <= 1  # preferred leaders round-robin
    if n_partitions % n_brokers == 0:
        hosted = Counter(b for r in result.values() for b in r)
        assert {hosted[b] for b in ids} == {rf * n_partitions // n_brokers}


@settings(max_examples=150, deadline=None)
@given(
    rack_of=st.lists(st.sampled_from("abcd"), min_size=1, max_size=10),
    n_partitions=st.integers(1, 30),
    data=st.data(),
)
def test_rack_aware_properties(rack_of, n_partitions, data):
    racks = dict(enumerate(rack_of))
    n_racks = len(set(rack_of))
    rf = data.draw(st.integers(1, len(racks)))
    start = data.draw(st.integers(0, len(racks) - 1))
    result = assign_replicas_to_brokers(
        brokers(*racks, racks=racks), n_partitions, rf, start_index=start
    )
    assert sorted(result) == list(range(n_partitions))
    for replicas in result.values():
        assert len(set(replicas)) == rf
        used = [racks[b] for b in replicas]
        if rf <= n_racks:
            assert len(set(used)) == rf  # at most one replica per rack
        else:
            assert set(used) == set(rack_of)  # every rack gets one


def test_validate_replica_assignment():
    validate_replica_assignment({0: [1, 2], 1: [2, 1]}, available_brokers=[1, 2])
    cases = [
        ({}, "must not be empty"),
        ({0: [1], 2: [1]}, "consecutive"),
        ({0: [1, 2], 1: [1]}, "same number of replicas"),
        ({0: [1, 1]}, "Duplicate replica"),
        ({0: []}, "at least one broker"),
        ({0: [1, 9]}, r"Unknown broker\(s\) in replica assignment: \[9\]"),
    ]
    for assignment, message in cases:
        with pytest.raises(InvalidReplicaAssignmentError, match=message):
            validate_replica_assignment(assignment, available_brokers=[1, 2])
