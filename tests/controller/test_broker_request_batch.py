"""broker_request_batch.py: coalescing the requests of one controller event, and leaving out
partitions whose store writes failed."""

from hypothesis import given
from hypothesis import strategies as st

from kafkalite.controller.broker_request_batch import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequestData,
    StopReplicaPartitionState,
    StopReplicaRequestData,
    UpdateMetadataPartitionState,
    UpdateMetadataRequestData,
    announced_versions,
    coalesce_requests,
    without_announced,
    without_partitions,
)
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import Broker, EndPoint

BROKERS = {b: Broker(b, (EndPoint("127.0.0.1", 9090 + b),)) for b in (1, 2, 3)}


def lai_state(topic, partition, leader, epoch, is_new=False):
    return LeaderAndIsrPartitionState(
        topic, partition, 1, leader, epoch, (1, 2, 3), epoch, (1, 2, 3), is_new=is_new
    )


def um_state(topic, partition, leader, epoch):
    return UpdateMetadataPartitionState(
        topic, partition, 1, leader, epoch, (1, 2, 3), epoch, (1, 2, 3)
    )


def lai(broker_id, states):
    return LeaderAndIsrRequestData(
        broker_id,
        0,
        1,
        77,
        tuple(states),
        {s.topic_name: f"id-{s.topic_name}" for s in states},
        tuple(BROKERS[b] for b in sorted({s.leader for s in states})),
    )


def um(broker_id, states):
    return UpdateMetadataRequestData(
        broker_id,
        0,
        1,
        77,
        tuple(states),
        tuple(BROKERS.values()),
        {s.topic_name: f"id-{s.topic_name}" for s in states},
    )


steps = st.lists(
    st.tuples(
        st.sampled_from(["lai", "um"]),
        st.sampled_from([1, 2, 3]),
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b"]),
                st.integers(0, 3),
                st.sampled_from([1, 2, 3]),
                st.booleans(),
            ),
            min_size=1,
            max_size=5,
        ),
    ),
    max_size=12,
)


@given(steps)
def test_coalesced_requests_carry_each_partitions_last_state(plan):
    """Oracle: per broker, the last state of each partition in order of the steps; is_new
    stays set once a step set it; one LeaderAndIsr then one UpdateMetadata per broker."""
    requests = []
    expected_lai: dict[int, dict] = {}
    expected_um: dict[int, dict] = {}
    for step, (kind, broker_id, parts) in enumerate(plan):
        if kind == "lai":
            states = {(t, p): lai_state(t, p, leader, step, new) for t, p, leader, new in parts}
            requests.append(lai(broker_id, states.values()))
            for key, s in states.items():
                previous = expected_lai.setdefault(broker_id, {}).get(key)
                expected_lai[broker_id][key] = (
                    s.leader,
                    s.leader_epoch,
                    s.is_new or bool(previous and previous[2]),
                )
        else:
            states = {(t, p): um_state(t, p, leader, step) for t, p, leader, _ in parts}
            requests.append(um(broker_id, states.values()))
            for key, s in states.items():
                expected_um.setdefault(broker_id, {})[key] = (s.leader, s.leader_epoch)
    merged = coalesce_requests(requests)
    kinds = [(type(r).__name__, r.broker_id) for r in merged]
    assert len(kinds) == len(set(kinds))
    for request in merged:
        if isinstance(request, LeaderAndIsrRequestData):
            got = {
                (s.topic_name, s.partition_index): (s.leader, s.leader_epoch, s.is_new)
                for s in request.partition_states
            }
            assert got == expected_lai[request.broker_id]
            assert {b.id for b in request.live_leaders} == {v[0] for v in got.values()}
            assert set(request.topic_ids) == {t for t, _ in got}
        else:
            got = {
                (s.topic_name, s.partition_index): (s.leader, s.leader_epoch)
                for s in request.partition_states
            }
            assert got == expected_um[request.broker_id]
    assert {r.broker_id for r in merged} == {b for _, b, _ in plan}
    for broker_id in {b for _, b, _ in plan}:
        mine = [type(r) for r in merged if r.broker_id == broker_id]
        assert mine == sorted(mine, key=lambda k: k is UpdateMetadataRequestData)


def test_an_event_that_stops_replicas_keeps_its_requests_as_they_are():
    requests = [
        lai(1, [lai_state("a", 0, 2, 1)]),
        StopReplicaRequestData(1, 0, 1, 77, (StopReplicaPartitionState("a", 0, 1, False),)),
        lai(1, [lai_state("a", 1, 2, 2)]),
    ]
    assert coalesce_requests(requests) == requests


def test_only_the_broker_whose_replicas_stop_keeps_its_requests_as_they_are():
    """A failover stops the dead broker's replicas: the live brokers' requests are still
    coalesced into one LeaderAndIsr and one UpdateMetadata each."""
    stop = StopReplicaRequestData(3, 0, 1, 77, (StopReplicaPartitionState("a", 0, 3, False),))
    requests = [
        lai(1, [lai_state("a", 0, 2, 1)]),
        um(1, [um_state("a", 0, 2, 1)]),
        lai(3, [lai_state("a", 1, 2, 1)]),
        stop,
        lai(1, [lai_state("a", 0, 1, 2)]),
        um(1, [um_state("a", 0, 1, 2)]),
        lai(3, [lai_state("a", 1, 2, 2)]),
    ]
    merged = coalesce_requests(requests)
    assert [r for r in merged if r.broker_id == 3] == [requests[2], stop, requests[6]]
    mine = [r for r in merged if r.broker_id == 1]
    assert [type(r) for r in mine] == [LeaderAndIsrRequestData, UpdateMetadataRequestData]
    assert [(s.leader, s.leader_epoch) for s in mine[0].partition_states] == [(1, 2)]
    assert [(s.leader, s.leader_epoch) for s in mine[1].partition_states] == [(1, 2)]


def test_partitions_whose_writes_failed_are_not_announced():
    requests = [
        lai(1, [lai_state("a", 0, 2, 1), lai_state("a", 1, 2, 1)]),
        lai(2, [lai_state("a", 1, 2, 1)]),
        um(3, [um_state("a", 1, 2, 1)]),
    ]
    kept = without_partitions(requests, {TopicPartition("a", 1)})
    assert [(type(r).__name__, r.broker_id) for r in kept] == [
        ("LeaderAndIsrRequestData", 1),
        ("UpdateMetadataRequestData", 3),
    ]
    assert [s.partition_index for s in kept[0].partition_states] == [0]
    assert kept[1].partition_states == () and kept[1].live_brokers == requests[2].live_brokers
    assert without_partitions(requests, set()) == requests


@given(steps, steps)
def test_what_follows_the_announced_elections_carries_only_newer_states(first, later):
    """without_announced(later, announced_versions(first)): a state is dropped exactly when
    the first requests carried that partition at the same or a newer version; every
    UpdateMetadata stays (it also carries the live brokers); nothing else changes."""

    def build(plan, offset):
        out = []
        for step, (kind, broker_id, parts) in enumerate(plan):
            epoch = step + offset
            if kind == "lai":
                states = {(t, p): lai_state(t, p, ld, epoch, new) for t, p, ld, new in parts}
                out.append(lai(broker_id, states.values()))
            else:
                states = {(t, p): um_state(t, p, ld, epoch) for t, p, ld, _ in parts}
                out.append(um(broker_id, states.values()))
        return out

    sent = build(first, 3)
    requests = build(later, 0)
    announced = announced_versions(sent)
    for r in sent:
        for s in r.partition_states:
            version = s.partition_epoch if isinstance(r, LeaderAndIsrRequestData) else s.zk_version
            assert announced[(s.topic_name, s.partition_index)] >= version
    kept = without_announced(requests, announced)

    def version(r, s):
        return s.partition_epoch if isinstance(r, LeaderAndIsrRequestData) else s.zk_version

    expected = [
        (r.broker_id, type(r).__name__, (s.topic_name, s.partition_index, version(r, s)))
        for r in requests
        for s in r.partition_states
        if announced.get((s.topic_name, s.partition_index), -1) < version(r, s)
    ]
    got = [
        (r.broker_id, type(r).__name__, (s.topic_name, s.partition_index, version(r, s)))
        for r in kept
        for s in r.partition_states
    ]
    assert got == expected
    assert [r.broker_id for r in kept if isinstance(r, UpdateMetadataRequestData)] == [
        r.broker_id for r in requests if isinstance(r, UpdateMetadataRequestData)
    ]


# -- the bulk adds (one call for a state machine's change) against one call per item ----------


def _context(partitions, dead, deleting):
    from kafkalite.controller.context import ControllerContext
    from kafkalite.zk.types import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment

    ctx = ControllerContext(epoch=3)
    ctx.add_live_brokers([(b, 100 + i) for i, b in BROKERS.items() if i not in dead])
    for topic, partition, replicas, leader, epoch in partitions:
        ctx.update_partition_full_replica_assignment(
            TopicPartition(topic, partition), ReplicaAssignment(replicas)
        )
        if leader is not None:
            ctx.put_partition_leadership_info(
                TopicPartition(topic, partition),
                LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, replicas, epoch), 2),
            )
    ctx.queue_topic_deletion(deleting)
    return ctx


_replicas = (
    st.permutations([1, 2, 3]).map(tuple).flatmap(lambda r: st.integers(1, 3).map(lambda n: r[:n]))
)
_partitions = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 5)),
    st.tuples(_replicas, st.one_of(st.none(), st.integers(-1, 3)), st.integers(0, 9)),
    max_size=12,
).map(lambda d: [(t, p, r, leader, e) for (t, p), (r, leader, e) in d.items()])


@given(
    partitions=_partitions,
    dead=st.sets(st.sampled_from([1, 2, 3]), max_size=2),
    deleting=st.sets(st.sampled_from(["a", "b"]), max_size=1),
    rounds=st.lists(
        st.tuples(st.lists(st.integers(-1, 3), max_size=3), st.booleans(), st.randoms()),
        min_size=1,
        max_size=3,
    ),
    stops=st.lists(st.tuples(st.integers(-1, 3), st.booleans()), max_size=3),
)
def test_bulk_adds_build_what_one_add_per_item_builds(partitions, dead, deleting, rounds, stops):
    from kafkalite.controller.broker_request_batch import ControllerBrokerRequestBatch

    built = []
    for bulk in (False, True):
        ctx = _context(partitions, dead, deleting)
        batch = ControllerBrokerRequestBatch(0, ctx)
        tps = sorted(TopicPartition(t, p) for t, p, *_ in partitions)
        for broker_ids, is_new, rng in rounds:
            items = [
                (
                    broker_ids,
                    tp,
                    ctx.partition_leadership_info[tp],
                    ctx.partition_full_replica_assignment(tp),
                )
                for tp in tps
                if tp in ctx.partition_leadership_info
            ]
            rng.shuffle(items)
            if bulk:
                batch.add_leader_and_isr_requests(items, is_new)
            else:
                for item in items:
                    batch.add_leader_and_isr_request_for_brokers(*item, is_new=is_new)
        for broker_id, delete in stops:
            if bulk:
                batch.add_stop_replica_requests(broker_id, tps, delete)
            else:
                for tp in tps:
                    batch.add_stop_replica_request_for_brokers([broker_id], tp, delete)
        built.append(batch.build_requests(ctx.epoch))
    assert built[0] == built[1]
