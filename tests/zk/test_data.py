"""Kafka's ZooKeeper payloads: the exact JSON Kafka's ZkData encoders produce, and round trips."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.types import TopicPartition
from kafkalite.zk import data as paths
from kafkalite.zk.data import (
    BrokerInfo,
    EndPoint,
    ProducerIdBlock,
    TopicAssignment,
)
from kafkalite.zk.types import LeaderAndIsr, LeaderIsrAndControllerEpoch

# Payloads as Kafka's ZkData encoders write them (apache/kafka core/src/main/scala/kafka/zk/
# ZkData.scala): same fields, values and types, compact JSON. The key order is the one commonly
# shown by zkCli.sh for Kafka nodes; Kafka's readers do not depend on it. The v3 registration is
# the example of Kafka's ZooKeeper-mode start-up walk-through.
KAFKA_BROKER_V5 = (
    b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
    b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,'
    b'"host":"localhost","version":5,"timestamp":"1650000000000"}'
)
KAFKA_BROKER_V3_FROM_SEED = (
    b'{"jmx_port":-1,"timestamp":"1477624160337","endpoints":["PLAINTEXT://10.123.81.11:9092"],'
    b'"host":"10.123.81.11","version":3,"port":9092}'
)
KAFKA_TOPIC_V3 = (
    b'{"partitions":{"0":[1,2],"1":[2,3]},"topic_id":"Gr1hAxRHRY2XF7-X3bOsWw",'
    b'"adding_replicas":{},"removing_replicas":{},"version":3}'
)
KAFKA_PARTITION_STATE = (
    b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2]}'
)


def test_paths_are_kafkas():
    assert paths.broker_path(3) == "/brokers/ids/3"
    assert paths.topic_path("orders") == "/brokers/topics/orders"
    assert paths.partition_state_path("orders", 2) == "/brokers/topics/orders/partitions/2/state"
    assert paths.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert paths.topic_config_path("orders") == "/config/topics/orders"
    assert paths.isr_change_sequence_path() == "/isr_change_notification/isr_change_"
    assert (
        paths.sequence_number("/isr_change_notification/isr_change_0000000042", "isr_change_")
        == "0000000042"
    )
    assert "/brokers/ids" in paths.PERSISTENT_PATHS and "/config/topics" in paths.PERSISTENT_PATHS


def test_broker_registration_is_byte_identical_to_kafka():
    info = BrokerInfo(id=0, endpoints=(EndPoint("localhost", 9092),), timestamp=1650000000000)
    assert paths.encode_broker(info) == KAFKA_BROKER_V5
    assert paths.decode_broker(0, KAFKA_BROKER_V5) == info


def test_broker_registration_with_rack_and_listeners():
    info = BrokerInfo(
        id=2,
        endpoints=(
            EndPoint("h2", 9093, "SSL", "SSL"),
            EndPoint("h2", 9092, "INTERNAL", "PLAINTEXT"),
        ),
        rack="rack-a",
        timestamp=7,
        features={"metadata.version": {"min_version": 1, "max_version": 7}},
    )
    obj = json.loads(paths.encode_broker(info))
    assert obj["rack"] == "rack-a"
    assert obj["host"] == "h2" and obj["port"] == 9092  # the first PLAINTEXT endpoint
    assert obj["endpoints"] == ["SSL://h2:9093", "INTERNAL://h2:9092"]
    assert obj["listener_security_protocol_map"] == {"SSL": "SSL", "INTERNAL": "PLAINTEXT"}
    assert paths.decode_broker(2, paths.encode_broker(info)) == info
    only_ssl = BrokerInfo(id=1, endpoints=(EndPoint("h", 1, "SSL", "SSL"),))
    obj = json.loads(paths.encode_broker(only_ssl))
    assert obj["host"] is None and obj["port"] == -1


def test_older_broker_registrations_decode():
    info = paths.decode_broker(1, KAFKA_BROKER_V3_FROM_SEED)
    assert info.endpoints == (EndPoint("10.123.81.11", 9092),)
    assert info.version == 3 and info.rack is None and info.timestamp == 1477624160337
    v1 = paths.decode_broker(1, b'{"version":1,"host":"h","port":1,"jmx_port":-1}')
    assert v1.endpoints == (EndPoint("h", 1),)
    with pytest.raises(ValueError):
        paths.decode_broker(1, b"not json")
    with pytest.raises(ValueError):
        paths.decode_broker(1, b'{"version":2}')


def test_topic_assignment_is_byte_identical_to_kafka():
    assignment = TopicAssignment(
        "orders", {0: (1, 2), 1: (2, 3)}, topic_id="Gr1hAxRHRY2XF7-X3bOsWw"
    )
    assert paths.encode_topic(assignment) == KAFKA_TOPIC_V3
    assert paths.decode_topic("orders", KAFKA_TOPIC_V3) == assignment
    legacy = paths.decode_topic("t", b'{"version":1,"partitions":{"0":[1]}}')
    assert legacy.partitions == {0: (1,)} and legacy.topic_id is None


def test_partition_state_is_byte_identical_to_kafka():
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader=1, leader_epoch=7, isr=(1, 2)), 3)
    assert paths.encode_partition_state(state) == KAFKA_PARTITION_STATE
    assert paths.decode_partition_state(KAFKA_PARTITION_STATE) == state
    assert paths.decode_partition_state(KAFKA_PARTITION_STATE, 4).leader_and_isr.zk_version == 4
    recovering = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 8, (1,), leader_recovery_state=1), 3)
    assert paths.decode_partition_state(paths.encode_partition_state(recovering)) == recovering


def test_small_payloads():
    assert paths.encode_controller(1, 1477624160337) == (
        b'{"version":1,"brokerid":1,"timestamp":"1477624160337"}'
    )
    assert paths.decode_controller(paths.encode_controller(4, 9)).broker_id == 4
    assert paths.encode_controller_epoch(12) == b"12"
    assert paths.decode_controller_epoch(b"12") == 12
    assert paths.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert paths.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    block = ProducerIdBlock(0, 1000, 1999)
    assert paths.encode_producer_id_block(block) == (
        b'{"version":1,"broker":0,"block_start":"1000","block_end":"1999"}'
    )
    assert paths.decode_producer_id_block(paths.encode_producer_id_block(block)) == block
    assert block.size == 1000
    assert paths.encode_entity_config({"retention.ms": "1000"}) == (
        b'{"version":1,"config":{"retention.ms":"1000"}}'
    )
    assert paths.decode_entity_config(b"") == {}
    assert paths.encode_config_change("topics/t") == b'{"version":2,"entity_path":"topics/t"}'
    assert (
        paths.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"t"}')
        == "topics/t"
    )
    assert paths.encode_log_dir_event(3) == b'{"version":1,"broker":3,"event":1}'
    assert paths.decode_log_dir_event(paths.encode_log_dir_event(3)) == 3


def test_partition_lists():
    tps = {TopicPartition("b", 1), TopicPartition("a", 0)}
    assert paths.encode_isr_change(tps) == (
        b'{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"b","partition":1}]}'
    )
    assert paths.decode_isr_change(paths.encode_isr_change(tps)) == tps
    assert (
        paths.decode_preferred_replica_election(paths.encode_preferred_replica_election(tps)) == tps
    )
    moves = {TopicPartition("a", 0): (3, 1)}
    assert paths.encode_reassignment(moves) == (
        b'{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[3,1]}]}'
    )
    assert paths.decode_reassignment(paths.encode_reassignment(moves)) == moves


def test_topic_ids_are_kafka_uuids():
    ids = {paths.new_topic_id() for _ in range(200)}
    assert len(ids) == 200
    for topic_id in ids:
        assert len(topic_id) == 22 and not topic_id.startswith("-")
        assert len(paths.topic_id_bytes(topic_id)) == 16


names = st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=20)
replica_lists = st.lists(st.integers(0, 1000), min_size=1, max_size=5).map(tuple)


@settings(max_examples=60, deadline=None)
@given(
    partitions=st.dictionaries(st.integers(0, 500), replica_lists, max_size=10),
    adding=st.dictionaries(st.integers(0, 500), replica_lists, max_size=3),
    topic_id=st.none() | st.just("Gr1hAxRHRY2XF7-X3bOsWw"),
)
def test_topic_assignment_round_trips(partitions, adding, topic_id):
    assignment = TopicAssignment("t", partitions, topic_id=topic_id, adding_replicas=adding)
    assert paths.decode_topic("t", paths.encode_topic(assignment)) == assignment


@settings(max_examples=60, deadline=None)
@given(
    host=names,
    ports=st.lists(st.integers(1, 65535), min_size=1, max_size=3),
    rack=st.none() | names,
    timestamp=st.integers(0, 2**62),
)
def test_broker_registration_round_trips(host, ports, rack, timestamp):
    endpoints = tuple(EndPoint(host, port, f"L{i}", "PLAINTEXT") for i, port in enumerate(ports))
    info = BrokerInfo(id=5, endpoints=endpoints, rack=rack, timestamp=timestamp)
    assert paths.decode_broker(5, paths.encode_broker(info)) == info


@settings(max_examples=60, deadline=None)
@given(
    leader=st.integers(-1, 1000),
    epochs=st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1)),
    isr=replica_lists,
)
def test_partition_state_round_trips(leader, epochs, isr):
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epochs[0], isr), epochs[1])
    assert paths.decode_partition_state(paths.encode_partition_state(state)) == state


def _json_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    """The partition state as the ``json`` module writes it (the encoder before it was written
    by hand): the oracle of the hand-written encoder."""
    lai = state.leader_and_isr
    obj: dict[str, object] = {
        "controller_epoch": state.controller_epoch,
        "leader": lai.leader,
        "version": 1,
        "leader_epoch": lai.leader_epoch,
        "isr": list(lai.isr),
    }
    if lai.leader_recovery_state:
        obj["leader_recovery_state"] = lai.leader_recovery_state
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _json_decoded(data: bytes, zk_version: int) -> LeaderIsrAndControllerEpoch:
    obj = json.loads(data)
    return LeaderIsrAndControllerEpoch(
        LeaderAndIsr(
            int(obj["leader"]),
            int(obj["leader_epoch"]),
            tuple(int(b) for b in obj["isr"]),
            zk_version,
            int(obj.get("leader_recovery_state", 0)),
        ),
        int(obj["controller_epoch"]),
    )


int32 = st.integers(-(2**31), 2**31 - 1)
partition_states = st.builds(
    lambda leader, epoch, isr, recovery, controller_epoch: LeaderIsrAndControllerEpoch(
        LeaderAndIsr(leader, epoch, tuple(isr), 0, recovery), controller_epoch
    ),
    int32,
    int32,
    st.lists(int32, max_size=8),
    st.sampled_from([0, 0, 1]),
    int32,
)


@settings(max_examples=200, deadline=None)
@given(partition_states, st.integers(0, 2**31 - 1))
def test_partition_state_encoder_writes_what_json_writes(state, zk_version):
    data = paths.encode_partition_state(state)
    assert data == _json_partition_state(state)
    decoded = paths.decode_partition_state(data, zk_version)
    assert decoded == _json_decoded(data, zk_version)
    assert decoded.leader_and_isr.with_zk_version(0) == state.leader_and_isr


@settings(max_examples=200, deadline=None)
@given(partition_states, st.randoms(use_true_random=False), st.sampled_from(["", " ", "\n"]))
def test_partition_state_in_any_json_layout_decodes_as_json_reads_it(state, random, space):
    """Other writers' layouts (key order, spacing, extra keys) take the ``json`` path, with the
    same result."""
    obj = json.loads(_json_partition_state(state))
    if random.random() < 0.5:
        obj["extra"] = {"a": [1]}
    items = list(obj.items())
    random.shuffle(items)
    data = json.dumps(dict(items), separators=("," + space, ":" + space)).encode()
    assert paths.decode_partition_state(data, 3) == _json_decoded(data, 3)


@pytest.mark.parametrize(
    "data",
    [
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,,2]}',
        b'{"controller_epoch":01,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}',
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1]',
        b'{"controller_epoch":1,"version":1,"leader_epoch":0,"isr":[1]}',
        b"",
    ],
)
def test_malformed_partition_states_are_refused(data):
    with pytest.raises(ValueError):
        paths.decode_partition_state(data)
