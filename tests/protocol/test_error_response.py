"""The error response of any request (Kafka's AbstractRequest.getErrorResponse)."""

import inspect

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import Records

from kafkalite.protocol.api import ADVERTISED_VERSIONS, ApiKey, request_class, response_class
from kafkalite.protocol.error_response import error_codes_in, error_response
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.frames import RequestHeader, decode_response, encode_response

st.register_type_strategy(Records, st.binary(max_size=16))

ADVERTISED = [
    (key, version) for key, (low, high) in ADVERTISED_VERSIONS.items() for version in (low, high)
]


@pytest.mark.parametrize("key,version", ADVERTISED, ids=lambda v: getattr(v, "name", str(v)))
def test_error_response_of_any_request_encodes_and_carries_only_the_error(key, version):
    @settings(
        max_examples=10,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.from_type(request_class(key, version)))
    def check(request):
        response = error_response(
            key, request, response_class(key, version), ErrorCode.UNKNOWN_SERVER_ERROR
        )
        frame = encode_response(RequestHeader(key, version, 3, None), response)
        correlation_id, decoded = decode_response(key, version, frame[4:], strict=True)
        assert (correlation_id, decoded) == (3, response)
        assert set(error_codes_in(response)) <= {ErrorCode.UNKNOWN_SERVER_ERROR}

    check()


def module_of(key, version, kind="request"):
    cls = request_class(key, version) if kind == "request" else response_class(key, version)
    return cls, inspect.getmodule(cls)


def test_every_partition_named_answers_the_error():
    cls, m = module_of(ApiKey.OFFSET_COMMIT, 8)
    request = cls(
        group_id="g",
        generation_id_or_member_epoch=1,
        member_id="m",
        group_instance_id=None,
        topics=tuple(
            m.OffsetCommitRequestTopic(
                name=name,
                partitions=tuple(
                    m.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=5,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    )
                    for p in (0, 2)
                ),
            )
            for name in ("a", "b")
        ),
    )
    response = error_response(
        ApiKey.OFFSET_COMMIT,
        request,
        response_class(ApiKey.OFFSET_COMMIT, 8),
        ErrorCode.INVALID_REQUEST,
    )
    assert [
        (t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions
    ] == [(t, p, ErrorCode.INVALID_REQUEST) for t in ("a", "b") for p in (0, 2)]


def test_flattened_and_plain_items():
    # StopReplica v4: one flat list of partitions from topic_states[].partition_states[]
    cls, m = module_of(ApiKey.STOP_REPLICA, 4)
    request = cls(
        controller_id=1,
        is_kraft_controller=False,
        controller_epoch=1,
        broker_epoch=1,
        topic_states=(
            m.StopReplicaTopicState(
                topic_name="t",
                partition_states=(
                    m.StopReplicaPartitionState(
                        partition_index=4, leader_epoch=1, delete_partition=False
                    ),
                ),
            ),
        ),
    )
    response = error_response(
        ApiKey.STOP_REPLICA,
        request,
        response_class(ApiKey.STOP_REPLICA, 4),
        ErrorCode.UNKNOWN_SERVER_ERROR,
    )
    assert [(p.topic_name, p.partition_index) for p in response.partition_errors] == [("t", 4)]
    assert response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    # DescribeGroups: the request's group ids are plain strings
    cls, _ = module_of(ApiKey.DESCRIBE_GROUPS, 5)
    request = cls(groups=("g1", "g2"), include_authorized_operations=True)
    response = error_response(
        ApiKey.DESCRIBE_GROUPS,
        request,
        response_class(ApiKey.DESCRIBE_GROUPS, 5),
        ErrorCode.INVALID_REQUEST,
    )
    assert [(g.group_id, g.error_code) for g in response.groups] == [
        ("g1", ErrorCode.INVALID_REQUEST),
        ("g2", ErrorCode.INVALID_REQUEST),
    ]
    assert {g.authorized_operations for g in response.groups} == {-(2**31)}


def test_unknown_values_are_kafkas():
    cls, m = module_of(ApiKey.LIST_OFFSETS, 9)
    request = cls(
        replica_id=-1,
        isolation_level=0,
        topics=(
            m.ListOffsetsTopic(
                name="t",
                partitions=(
                    m.ListOffsetsPartition(partition_index=0, current_leader_epoch=3, timestamp=77),
                ),
            ),
        ),
    )
    response = error_response(
        ApiKey.LIST_OFFSETS,
        request,
        response_class(ApiKey.LIST_OFFSETS, 9),
        ErrorCode.UNKNOWN_SERVER_ERROR,
    )
    (partition,) = response.topics[0].partitions
    assert (partition.timestamp, partition.offset, partition.leader_epoch) == (-1, -1, -1)
