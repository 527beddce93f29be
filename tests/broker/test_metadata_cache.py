"""MetadataCache fed with real UpdateMetadata v7 request objects."""

from __future__ import annotations

import uuid

import pytest

from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.protocol.errors import ErrorCode, StaleControllerEpochError
from kafkalite.protocol.messages.update_metadata.v7.request import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from kafkalite.protocol.types import TopicPartition
from tests.loop_turns import LoopTurns

TOPIC_ID = uuid.uuid4()


def broker(i, listeners=("PLAINTEXT",), rack=None):
    return UpdateMetadataBroker(
        id=i,
        endpoints=tuple(
            UpdateMetadataEndpoint(port=9092 + i, host=f"h{i}", listener=name, security_protocol=0)
            for name in listeners
        ),
        rack=rack,
    )


def pstate(p, leader, isr, replicas, epoch=0, offline=()):
    return UpdateMetadataPartitionState(
        partition_index=p,
        controller_epoch=1,
        leader=leader,
        leader_epoch=epoch,
        isr=tuple(isr),
        zk_version=0,
        replicas=tuple(replicas),
        offline_replicas=tuple(offline),
    )


def request(topic_states, brokers, controller_id=0, controller_epoch=1):
    return UpdateMetadataRequest(
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        topic_states=tuple(topic_states),
        live_brokers=tuple(brokers),
    )


def topic(name, partitions, topic_id=TOPIC_ID):
    return UpdateMetadataTopicState(
        topic_name=name, topic_id=topic_id, partition_states=tuple(partitions)
    )


def test_update_and_query():
    cache = MetadataCache(0)
    assert cache.get_controller_id() is None and cache.get_all_topics() == set()
    cache.update_metadata(
        request(
            [topic("t", [pstate(1, 1, (1, 0), (1, 0), epoch=3), pstate(0, 0, (0, 1), (0, 1))])],
            [broker(0, rack="r0"), broker(1, ("PLAINTEXT", "INTERNAL"))],
        )
    )
    assert cache.get_controller_id() == 0
    assert [b.id for b in cache.get_alive_brokers()] == [0, 1]
    assert cache.get_alive_broker(0).rack == "r0"
    assert cache.get_alive_broker_node(1, "INTERNAL").port == 9093
    assert cache.get_alive_broker_node(0, "INTERNAL") is None
    assert cache.get_all_topics() == {"t"}
    assert cache.get_topic_id("t") == TOPIC_ID and cache.get_topic_name(TOPIC_ID) == "t"
    assert cache.contains_partition("t", 1) and not cache.contains_partition("t", 2)
    infos = cache.get_partition_infos("t")
    assert [(p.partition_index, p.leader, p.leader_epoch, p.isr) for p in infos] == [
        (0, 0, 0, (0, 1)),
        (1, 1, 3, (1, 0)),
    ]
    assert cache.get_partition_leader_endpoint("t", 1, "PLAINTEXT").host == "h1"
    [meta] = cache.get_topic_metadata(["t", "missing"], "PLAINTEXT")
    assert meta.topic_id == TOPIC_ID
    assert [p.error_code for p in meta.partitions] == [ErrorCode.NONE, ErrorCode.NONE]


def test_dead_leader_and_missing_listener_and_dead_replica():
    cache = MetadataCache(0)
    cache.update_metadata(
        request(
            [
                topic(
                    "t",
                    [
                        pstate(0, 2, (2, 0), (2, 0)),  # leader 2 is not alive
                        pstate(1, 1, (1, 0), (1, 0)),  # leader alive, not on INTERNAL
                        pstate(2, 0, (0,), (0, 2), offline=(2,)),  # replica 2 dead
                    ],
                )
            ],
            [broker(0, ("PLAINTEXT", "INTERNAL")), broker(1)],
        )
    )
    parts = cache.get_topic_metadata(["t"], "INTERNAL", error_unavailable_listeners=True)[
        0
    ].partitions
    assert (parts[0].error_code, parts[0].leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
    assert parts[1].error_code is ErrorCode.LISTENER_NOT_FOUND
    assert parts[2].error_code is ErrorCode.NONE and parts[2].offline_replicas == (2,)
    parts = cache.get_topic_metadata(["t"], "INTERNAL")[0].partitions
    assert parts[1].error_code is ErrorCode.LEADER_NOT_AVAILABLE
    v0 = cache.get_topic_metadata(["t"], "PLAINTEXT", error_unavailable_endpoints=True)[
        0
    ].partitions
    assert (v0[2].error_code, v0[2].replica_nodes) == (ErrorCode.REPLICA_NOT_AVAILABLE, (0,))


def test_delete_partitions_and_stale_controller():
    cache = MetadataCache(0)
    cache.update_metadata(
        request([topic("t", [pstate(0, 0, (0,), (0,)), pstate(1, 0, (0,), (0,))])], [broker(0)])
    )
    deleted = cache.update_metadata(
        request([topic("t", [pstate(0, -2, (0,), (0,))])], [broker(0)], controller_epoch=2)
    )
    assert deleted == [TopicPartition("t", 0)]
    assert cache.num_partitions("t") == 1
    cache.update_metadata(
        request([topic("t", [pstate(1, -2, (0,), (0,))])], [broker(0)], controller_epoch=2)
    )
    assert not cache.contains_topic("t") and cache.get_topic_id("t") is None
    with pytest.raises(StaleControllerEpochError):
        cache.update_metadata(request([], [broker(0)], controller_epoch=1))
    # Brokers only: partitions kept, broker list replaced.
    cache.update_metadata(
        request([topic("u", [pstate(0, 0, (0,), (0,))])], [broker(0)], controller_epoch=3)
    )
    cache.update_metadata(request([], [broker(0), broker(5)], controller_epoch=3))
    assert cache.contains_topic("u") and [b.id for b in cache.get_alive_brokers()] == [0, 5]


def test_record_topic_ids_from_leader_and_isr():
    cache = MetadataCache(0)
    other = uuid.uuid4()
    cache.record_topic_ids({"a": TOPIC_ID, "b": uuid.UUID(int=0)})
    assert cache.get_topic_id("a") == TOPIC_ID and cache.get_topic_id("b") is None
    cache.record_topic_ids({"a": other})
    assert cache.get_topic_name(TOPIC_ID) is None and cache.get_topic_name(other) == "a"


async def test_bulk_update_is_read_in_slices_and_applied_at_once():
    """An UpdateMetadata for thousands of partitions yields to the loop while it is read, and
    a reader running between the slices sees the cache as before, never half of the update."""

    cache = MetadataCache(0)
    cache.update_metadata(request([topic("old", [pstate(0, 0, [0], [0])])], [broker(0)]))
    names = [f"t{i}" for i in range(3_000)]
    bulk = request(
        [topic(n, [pstate(0, 0, [0], [0])], topic_id=uuid.uuid4()) for n in names], [broker(0)]
    )
    seen: list[frozenset[str]] = []

    class Reader(LoopTurns):
        """Reads the cache at every turn of the loop (a call_soon chain, no task sleeping 0)."""

        def _turn(self) -> None:
            seen.append(cache.get_all_topics())
            super()._turn()

    with Reader():
        await cache.update_metadata_async(bulk, slice_size=100)
    assert len(seen) >= 3_000 // 100
    assert all(s == {"old"} for s in seen)
    assert cache.get_all_topics() == {"old", *names}
    assert cache.get_partition_info("t2999", 0).leader == 0


def test_all_topics_is_one_frozen_set_until_a_topic_comes_or_goes():
    cache = MetadataCache(0)
    cache.update_metadata(request([topic("a", [pstate(0, 0, [0], [0])])], [broker(0)]))
    first = cache.get_all_topics()
    assert first == {"a"} and isinstance(first, frozenset)
    # a partition change of a known topic keeps the same set
    cache.update_metadata(request([topic("a", [pstate(1, 0, [0], [0])])], [broker(0)]))
    assert cache.get_all_topics() is first
    # one topic gone and another come: the same size, a different set
    cache.update_metadata(
        request(
            [
                topic("a", [pstate(0, -2, [0], [0]), pstate(1, -2, [0], [0])]),
                topic("b", [pstate(0, 0, [0], [0])], topic_id=uuid.uuid4()),
            ],
            [broker(0)],
        )
    )
    assert cache.get_all_topics() == {"b"}
