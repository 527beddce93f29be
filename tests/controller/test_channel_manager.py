"""ControllerChannelManager: the protocol messages it builds, response parsing, per-broker order
and retries, and the real KafkaConnection transport against a wire-level fake broker."""

import asyncio
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.client.messages import build_message
from kafkalite.controller.broker_request_batch import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequestData,
    StopReplicaPartitionState,
    StopReplicaRequestData,
    UpdateMetadataPartitionState,
    UpdateMetadataRequestData,
)
from kafkalite.controller.channel_manager import (
    AnsweredNone,
    ControllerChannelManager,
    KafkaConnectionTransport,
    api_key_of,
    leader_and_isr_errors,
    response_errors,
    to_message,
)
from kafkalite.protocol.api import CODEC_VERSIONS, ApiKey, response_class, supported_versions
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.data import new_topic_id
from kafkalite.zk.types import Broker, EndPoint
from tests.client.fake_broker import FakeBroker
from tests.collector import collector_off, cyclic_garbage

from .shell_support import eventually, round_trip

TOPIC_ID = new_topic_id()
BROKER = Broker(
    1,
    (
        EndPoint("127.0.0.1", 9093, "PLAINTEXT", "PLAINTEXT"),
        EndPoint("10.0.0.1", 9094, "INTERNAL", "SSL"),
    ),
    "r1",
)


def leader_and_isr(broker_id=1, partitions=((("t", 0)),)):
    return LeaderAndIsrRequestData(
        broker_id=broker_id,
        controller_id=0,
        controller_epoch=3,
        broker_epoch=77,
        partition_states=tuple(
            LeaderAndIsrPartitionState(t, p, 3, 1, 5, (1, 2), 9, (1, 2), (), (), True)
            for t, p in partitions
        ),
        topic_ids={"t": TOPIC_ID},
        live_leaders=(BROKER,),
    )


def update_metadata(broker_id=1):
    return UpdateMetadataRequestData(
        broker_id=broker_id,
        controller_id=0,
        controller_epoch=3,
        broker_epoch=77,
        partition_states=(
            UpdateMetadataPartitionState("t", 0, 3, -2, 5, (1, 2), 9, (1, 2, 3), (3,)),
        ),
        live_brokers=(BROKER,),
        topic_ids={"t": TOPIC_ID},
    )


def stop_replica(broker_id=1, delete=True):
    return StopReplicaRequestData(
        broker_id=broker_id,
        controller_id=0,
        controller_epoch=3,
        broker_epoch=77,
        partition_states=(
            StopReplicaPartitionState("t", 0, -2, delete),
            StopReplicaPartitionState("u", 1, 4, delete),
        ),
    )


@pytest.mark.parametrize(
    "version",
    range(CODEC_VERSIONS[ApiKey.LEADER_AND_ISR][0], CODEC_VERSIONS[ApiKey.LEADER_AND_ISR][1] + 1),
)
def test_leader_and_isr_message_round_trips(version):
    message = round_trip(
        ApiKey.LEADER_AND_ISR, version, to_message(leader_and_isr(), version, "INTERNAL")
    )
    assert (message.controller_id, message.controller_epoch, message.broker_epoch) == (0, 3, 77)
    [topic] = message.topic_states
    [p] = topic.partition_states
    assert topic.topic_name == "t"
    assert (
        p.partition_index,
        p.leader,
        p.leader_epoch,
        tuple(p.isr),
        p.zk_version,
        tuple(p.replicas),
        p.is_new,
    ) == (
        0,
        1,
        5,
        (1, 2),
        9,
        (1, 2),
        True,
    )
    if hasattr(topic, "topic_id"):
        assert topic.topic_id is not None
    [leader] = message.live_leaders
    assert (leader.broker_id, leader.host_name, leader.port) == (1, "10.0.0.1", 9094)


@pytest.mark.parametrize(
    "version",
    range(CODEC_VERSIONS[ApiKey.UPDATE_METADATA][0], CODEC_VERSIONS[ApiKey.UPDATE_METADATA][1] + 1),
)
def test_update_metadata_message_round_trips(version):
    message = round_trip(ApiKey.UPDATE_METADATA, version, to_message(update_metadata(), version))
    [topic] = message.topic_states
    [p] = topic.partition_states
    assert (p.leader, tuple(p.replicas), tuple(p.offline_replicas)) == (-2, (1, 2, 3), (3,))
    [broker] = message.live_brokers
    assert broker.id == 1 and broker.rack == "r1"
    assert [(e.host, e.port, e.listener, e.security_protocol) for e in broker.endpoints] == [
        ("127.0.0.1", 9093, "PLAINTEXT", 0),
        ("10.0.0.1", 9094, "INTERNAL", 1),
    ]


def test_the_same_partition_states_are_built_once_for_every_broker(monkeypatch):
    """One event sends every broker the same partition states: their message structs are
    built once (equal content, not the same request object) and shared; each broker's own
    fields (its epoch) stay its own, and other content is built anew."""
    from kafkalite.controller import channel_manager

    built = []
    make = channel_manager._make

    def counting(cls, values):
        if cls.__name__.endswith("PartitionState"):
            built.append(cls.__name__)
        return make(cls, values)

    monkeypatch.setattr(channel_manager, "_make", counting)
    channel_manager._TOPIC_STATES_BUILT.clear()
    version = CODEC_VERSIONS[ApiKey.UPDATE_METADATA][1]
    first = to_message(update_metadata(broker_id=1), version)
    again = update_metadata(broker_id=2)
    second = to_message(
        UpdateMetadataRequestData(**{**_fields(again), "broker_epoch": 78}), version
    )
    assert first.topic_states is second.topic_states and built == ["UpdateMetadataPartitionState"]
    assert (first.broker_epoch, second.broker_epoch) == (77, 78)
    lai_version = CODEC_VERSIONS[ApiKey.LEADER_AND_ISR][1]
    one = to_message(leader_and_isr(1), lai_version)
    two = to_message(leader_and_isr(2), lai_version)
    other = to_message(leader_and_isr(3, partitions=(("t", 1),)), lai_version)
    assert one.topic_states is two.topic_states
    assert other.topic_states is not one.topic_states
    assert other.topic_states[0].partition_states[0].partition_index == 1
    assert built.count("LeaderAndIsrPartitionState") == 2


def _fields(request):
    return {name: getattr(request, name) for name in request.__slots__}


@pytest.mark.parametrize(
    "version",
    range(CODEC_VERSIONS[ApiKey.STOP_REPLICA][0], CODEC_VERSIONS[ApiKey.STOP_REPLICA][1] + 1),
)
def test_stop_replica_message_round_trips(version):
    message = round_trip(ApiKey.STOP_REPLICA, version, to_message(stop_replica(), version))
    if version >= 3:
        got = {
            (t.topic_name, p.partition_index, p.leader_epoch, p.delete_partition)
            for t in message.topic_states
            for p in t.partition_states
        }
        assert got == {("t", 0, -2, True), ("u", 1, 4, True)}
    else:
        assert message.delete_partitions is True
        assert {(t.name, tuple(t.partition_indexes)) for t in message.topics} == {
            ("t", (0,)),
            ("u", (1,)),
        }


def test_response_errors_for_both_response_shapes():
    request = leader_and_isr(partitions=(("t", 0), ("t", 1)))
    v7 = build_message(
        response_class(ApiKey.LEADER_AND_ISR, 7),
        error_code=ErrorCode.NONE,
        topics=[
            {
                "topic_id": to_message(request, 7).topic_states[0].topic_id,
                "partition_errors": [
                    {"partition_index": 0, "error_code": ErrorCode.NONE},
                    {"partition_index": 1, "error_code": ErrorCode.KAFKA_STORAGE_ERROR},
                ],
            }
        ],
    )
    assert response_errors(request, v7) == (
        0,
        {TopicPartition("t", 0): 0, TopicPartition("t", 1): 56},
    )
    v4 = build_message(
        response_class(ApiKey.LEADER_AND_ISR, 4),
        error_code=ErrorCode.NONE,
        partition_errors=[
            {"topic_name": "t", "partition_index": 1, "error_code": ErrorCode.KAFKA_STORAGE_ERROR}
        ],
    )
    assert response_errors(request, v4) == (0, {TopicPartition("t", 1): 56})
    stop = build_message(
        response_class(ApiKey.STOP_REPLICA, 3),
        error_code=ErrorCode.STALE_CONTROLLER_EPOCH,
        partition_errors=[],
    )
    assert response_errors(stop_replica(), stop) == (ErrorCode.STALE_CONTROLLER_EPOCH, {})
    assert api_key_of(stop_replica()) is ApiKey.STOP_REPLICA


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("tuv"), st.integers(0, 3)), min_size=1, unique=True),
    st.sampled_from([ErrorCode.NONE, ErrorCode.STALE_CONTROLLER_EPOCH]),
    st.data(),
)
def test_leader_and_isr_errors_reads_a_response_as_response_errors_does(partitions, top, data):
    """Every partition NONE: an AnsweredNone equal to response_errors' dict (its values too);
    any error, at the top or on a partition: that dict itself. v7 and v4 shapes."""
    request = leader_and_isr(partitions=tuple(partitions))
    request = dataclasses.replace(request, topic_ids={t: new_topic_id() for t in "tuv"})
    codes = st.sampled_from([ErrorCode.NONE, ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR])
    errors = {tp: data.draw(codes) for tp in partitions}
    message = to_message(request, 7)
    v7 = build_message(
        response_class(ApiKey.LEADER_AND_ISR, 7),
        error_code=top,
        topics=[
            {
                "topic_id": topic.topic_id,
                "partition_errors": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": errors[(topic.topic_name, p.partition_index)],
                    }
                    for p in topic.partition_states
                ],
            }
            for topic in message.topic_states
        ],
    )
    v4 = build_message(
        response_class(ApiKey.LEADER_AND_ISR, 4),
        error_code=top,
        partition_errors=[
            {"topic_name": t, "partition_index": p, "error_code": errors[(t, p)]}
            for t, p in partitions
        ],
    )
    every_none = top == ErrorCode.NONE and not any(errors.values())
    for response in (v7, v4):
        got = leader_and_isr_errors(request, response)
        expected = response_errors(request, response)[1]
        assert dict(got) == expected
        assert isinstance(got, AnsweredNone) == (every_none and response is v7)
        assert sorted(got.values()) == sorted(expected.values())
        assert len(got) == len(expected)
        assert (ErrorCode.NONE in got.values()) == (ErrorCode.NONE in expected.values())
        assert all(got[tp] == code for tp, code in expected.items())
    with pytest.raises(KeyError):
        AnsweredNone(request.partition_states)[TopicPartition("absent", 0)]


class ScriptedTransport:
    def __init__(self, broker, log, failures):
        self.broker = broker
        self.log = log
        self.failures = failures
        self.closed = 0

    async def send(self, api_key, build):
        if self.failures.get(self.broker.id, 0):
            self.failures[self.broker.id] -= 1
            raise ConnectionError("boom")
        self.log.append(
            (self.broker.id, ApiKey(api_key), build(CODEC_VERSIONS[ApiKey(api_key)][1]))
        )
        return build_message(
            response_class(api_key, CODEC_VERSIONS[ApiKey(api_key)][1]), error_code=ErrorCode.NONE
        )

    async def close(self):
        self.closed += 1


async def test_requests_to_one_broker_keep_their_order_across_retries():
    sent, answered, failures = [], [], {1: 2}
    transports = {}

    def factory(broker):
        transports[broker.id] = ScriptedTransport(broker, sent, failures)
        return transports[broker.id]

    manager = ControllerChannelManager(
        0, factory, lambda b, req, resp: answered.append((b, type(req))), retry_backoff=0.001
    )
    manager.startup([BROKER, Broker(2, (EndPoint("127.0.0.1", 9095),))])
    for request in (leader_and_isr(), update_metadata(), stop_replica(), update_metadata(2)):
        manager.send_request(request)
    manager.send_request(update_metadata(9))  # no channel: dropped
    await eventually(lambda: len(answered) == 4, message="four answers")
    assert [k for b, k, _ in sent if b == 1] == [
        ApiKey.LEADER_AND_ISR,
        ApiKey.UPDATE_METADATA,
        ApiKey.STOP_REPLICA,
    ]
    assert transports[1].closed == 2 and failures[1] == 0
    assert manager.dropped == 1
    await manager.shutdown()
    assert manager.broker_ids == set()


async def test_kafka_connection_transport_talks_the_wire_protocol():
    received = []

    def on_leader_and_isr(header, request):
        received.append(request)
        return build_message(
            response_class(ApiKey.LEADER_AND_ISR, header.api_version),
            error_code=ErrorCode.NONE,
            topics=[],
        )

    versions = {
        int(k): v
        for k, v in supported_versions(
            [ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA]
        ).items()
    }
    fake = await FakeBroker(
        1, versions=versions, handlers={ApiKey.LEADER_AND_ISR: on_leader_and_isr}
    ).start()
    try:
        broker = Broker(1, (EndPoint("127.0.0.1", fake.port),))
        answers = []
        manager = ControllerChannelManager(
            0,
            lambda b: KafkaConnectionTransport(b, request_timeout=5),
            lambda b, req, resp: answers.append(resp),
        )
        manager.add_broker(broker)
        manager.send_request(leader_and_isr())
        await eventually(lambda: answers, message="a LeaderAndIsr response")
        assert received[0].controller_epoch == 3
        assert received[0].topic_states[0].partition_states[0].leader_epoch == 5
        await manager.shutdown()
    finally:
        await fake.stop()


async def test_removed_broker_stops_retrying():
    failures = {1: 10**9}
    manager = ControllerChannelManager(
        0, lambda b: ScriptedTransport(b, [], failures), lambda *a: None, retry_backoff=0.001
    )
    manager.add_broker(BROKER)
    manager.send_request(leader_and_isr())
    await eventually(lambda: failures[1] < 10**9 - 3, message="a few retries")
    await asyncio.wait_for(manager.remove_broker(1), 5)
    assert manager.broker_ids == set()


async def test_each_request_has_a_delivery_future():
    """Answered: the response; dropped (no channel) or abandoned (channel removed): None."""
    hold = asyncio.Event()

    class Held(ScriptedTransport):
        async def send(self, api_key, build):
            if self.broker.id == 2:
                await hold.wait()
            return await super().send(api_key, build)

    manager = ControllerChannelManager(
        0, lambda b: Held(b, [], {}), lambda *a: None, retry_backoff=0.001
    )
    manager.startup([BROKER, Broker(2, (EndPoint("127.0.0.1", 9095),))])
    answered = manager.send_request(leader_and_isr())
    dropped = manager.send_request(update_metadata(9))
    in_flight = manager.send_request(update_metadata(2))
    queued = manager.send_request(update_metadata(2))
    assert (await asyncio.wait_for(answered, 5)).error_code == ErrorCode.NONE
    assert dropped.done() and dropped.result() is None
    assert not in_flight.done() and not queued.done()
    await manager.remove_broker(2)
    assert in_flight.result() is None and queued.result() is None
    await manager.shutdown()


async def test_a_removed_channel_leaves_its_requests_to_reference_counting():
    """A channel removed while a request is in flight (its broker dead or gone) frees that
    request, and the last one answered, by reference counting: a broker process freezes what
    survives its full collections (gc_freeze.py), so a cycle through the cancelled send loop
    would keep a bulk request's thousands of partition states for the process's life."""
    hold = asyncio.Event()

    class Held(ScriptedTransport):
        async def send(self, api_key, build):
            if self.log:
                await hold.wait()
            return await super().send(api_key, build)

    with collector_off(collect_first=True):
        manager = ControllerChannelManager(0, lambda b: Held(b, [], {}), lambda *a: None)
        manager.add_broker(BROKER)
        answered = manager.send_request(leader_and_isr())
        await asyncio.wait_for(answered, 5)
        in_flight = manager.send_request(stop_replica())
        await eventually(lambda: manager.queued(1) == 0, message="the second request taken")
        await manager.remove_broker(1)
        assert in_flight.result() is None
        del answered, in_flight
        newest = CODEC_VERSIONS[ApiKey.LEADER_AND_ISR][1]
        kept = cyclic_garbage(
            LeaderAndIsrRequestData,
            StopReplicaRequestData,
            response_class(ApiKey.LEADER_AND_ISR, newest),
        )
    assert kept == []
