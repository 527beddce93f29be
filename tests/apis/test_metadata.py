"""Metadata, DescribeCluster and UpdateMetadata over the real MetadataCache."""

import dataclasses
import sys
import uuid

import pytest
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest

from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.protocol.acl import from_32bit_field
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.errors import ErrorCode

TOPIC_ID = uuid.UUID(int=7)


def update_metadata_request(leader=0, controller_epoch=1):
    cls = request_class(ApiKey.UPDATE_METADATA, 7)
    m = sys.modules[cls.__module__]
    return cls(
        controller_id=0,
        controller_epoch=controller_epoch,
        broker_epoch=-1,
        topic_states=(
            m.UpdateMetadataTopicState(
                topic_name="orders",
                topic_id=TOPIC_ID,
                partition_states=tuple(
                    m.UpdateMetadataPartitionState(
                        topic_name="orders",
                        partition_index=p,
                        controller_epoch=controller_epoch,
                        leader=leader,
                        leader_epoch=3,
                        isr=(0,),
                        zk_version=0,
                        replicas=(0,),
                        offline_replicas=(),
                    )
                    if "topic_name" in m.UpdateMetadataPartitionState.__dataclass_fields__
                    else m.UpdateMetadataPartitionState(
                        partition_index=p,
                        controller_epoch=controller_epoch,
                        leader=leader,
                        leader_epoch=3,
                        isr=(0,),
                        zk_version=0,
                        replicas=(0,),
                        offline_replicas=(),
                    )
                    for p in range(3)
                ),
            ),
        ),
        live_brokers=(
            m.UpdateMetadataBroker(
                id=0,
                endpoints=(
                    m.UpdateMetadataEndpoint(
                        port=9092, host="h0", listener="PLAINTEXT", security_protocol=0
                    ),
                ),
                rack=None,
            ),
        ),
    )


@pytest.fixture
async def cache(services, call):
    services.metadata_cache = MetadataCache(0)
    response = await call(ApiKey.UPDATE_METADATA, 7, update_metadata_request())
    assert response.error_code.value == 0
    return services.metadata_cache


def metadata_request(version, topics, allow_auto=True):
    cls = request_class(ApiKey.METADATA, version)
    m = sys.modules[cls.__module__]
    fields = {
        "topics": None
        if topics is None
        else tuple(
            m.MetadataRequestTopic(name=t, topic_id=None)
            if "topic_id" in m.MetadataRequestTopic.__dataclass_fields__
            else m.MetadataRequestTopic(name=t)
            for t in topics
        )
    }
    names = cls.__dataclass_fields__
    if "allow_auto_topic_creation" in names:
        fields["allow_auto_topic_creation"] = allow_auto
    for flag in ("include_cluster_authorized_operations", "include_topic_authorized_operations"):
        if flag in names:
            fields[flag] = False
    return cls(**fields)


@pytest.mark.parametrize("version", [1, 5, 9, 12])
async def test_metadata_lists_brokers_topics_and_leaders(call, cache, version):
    response = await call(ApiKey.METADATA, version, metadata_request(version, None))
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(0, "h0", 9092)]
    assert response.controller_id == 0
    (topic,) = response.topics
    assert topic.name == "orders" and topic.error_code.value == 0
    assert [p.partition_index for p in topic.partitions] == [0, 1, 2]
    assert all(p.leader_id == 0 and list(p.isr_nodes) == [0] for p in topic.partitions)
    if version >= 7:
        assert topic.partitions[0].leader_epoch == 3
    if version >= 10:
        assert topic.topic_id == TOPIC_ID
    if version >= 2:
        assert response.cluster_id == "test-cluster"


async def test_unknown_and_invalid_topics_without_auto_creation(call, cache, services):
    response = await call(
        ApiKey.METADATA, 9, metadata_request(9, ["nope", "bad name!", "evt\n"], False)
    )
    errors = {t.name: t.error_code.value for t in response.topics}
    # a trailing newline is illegal too (a '$' regex let it through, and the topic it created
    # wedged the controller: its log directory name could not be parsed back)
    assert errors == {"nope": 3, "bad name!": 17, "evt\n": 17}


async def test_leader_not_available_when_leader_is_not_alive(call, services):
    services.metadata_cache = MetadataCache(0)
    await call(ApiKey.UPDATE_METADATA, 7, update_metadata_request(leader=5))
    response = await call(ApiKey.METADATA, 9, metadata_request(9, ["orders"]))
    assert {p.error_code.value for p in response.topics[0].partitions} == {5}
    assert {p.leader_id for p in response.topics[0].partitions} == {-1}  # Kafka's NO_LEADER_ID


async def test_v12_topics_asked_by_id(call, cache):
    cls = request_class(ApiKey.METADATA, 12)
    m = sys.modules[cls.__module__]
    unknown = uuid.uuid4()
    request = cls(
        topics=(
            m.MetadataRequestTopic(name=None, topic_id=TOPIC_ID),
            m.MetadataRequestTopic(name=None, topic_id=unknown),
        ),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    response = await call(ApiKey.METADATA, 12, request)
    answers = {t.topic_id: (t.error_code, t.name, len(t.partitions)) for t in response.topics}
    assert answers == {
        TOPIC_ID: (ErrorCode.NONE, "orders", 3),
        unknown: (ErrorCode.UNKNOWN_TOPIC_ID, None, 0),
    }


async def test_stale_update_metadata_is_refused(call, cache):
    await call(ApiKey.UPDATE_METADATA, 7, update_metadata_request(controller_epoch=5))
    response = await call(ApiKey.UPDATE_METADATA, 7, update_metadata_request(controller_epoch=4))
    assert response.error_code.value == 11  # STALE_CONTROLLER_EPOCH


async def test_describe_cluster(call, cache):
    response = await call(
        ApiKey.DESCRIBE_CLUSTER,
        1,
        DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1),
    )
    assert response.cluster_id == "test-cluster" and response.controller_id == 0
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(0, "h0", 9092)]


TOPIC_OPERATIONS = {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER"} | {
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
}
CLUSTER_OPERATIONS = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"} | {
    "IDEMPOTENT_WRITE",
    "ALTER",
    "DESCRIBE",
}


def operation_names(field):
    return {op.name for op in from_32bit_field(field)}


@pytest.mark.parametrize("version", [8, 10, 12])
async def test_metadata_authorized_operations_when_asked(call, cache, version):
    request = metadata_request(version, ["orders", "nope"], allow_auto=False)
    names = request.__dataclass_fields__
    request = dataclasses.replace(
        request,
        include_topic_authorized_operations=True,
        **(
            {"include_cluster_authorized_operations": True}
            if "include_cluster_authorized_operations" in names
            else {}
        ),
    )
    response = await call(ApiKey.METADATA, version, request)
    ops = {t.name: operation_names(t.topic_authorized_operations) for t in response.topics}
    assert ops == {"orders": TOPIC_OPERATIONS, "nope": TOPIC_OPERATIONS}
    if version <= 10:
        assert operation_names(response.cluster_authorized_operations) == CLUSTER_OPERATIONS
    else:  # v11 dropped the cluster field (DescribeCluster answers it)
        assert not hasattr(response, "cluster_authorized_operations")


async def test_metadata_authorized_operations_omitted_unless_asked(call, cache):
    response = await call(ApiKey.METADATA, 10, metadata_request(10, ["orders"]))
    assert response.cluster_authorized_operations == -(2**31)
    assert [t.topic_authorized_operations for t in response.topics] == [-(2**31)]


@pytest.mark.parametrize("asked", [True, False])
async def test_describe_cluster_authorized_operations(call, cache, asked):
    response = await call(
        ApiKey.DESCRIBE_CLUSTER,
        1,
        DescribeClusterRequest(include_cluster_authorized_operations=asked, endpoint_type=1),
    )
    if asked:
        assert operation_names(response.cluster_authorized_operations) == CLUSTER_OPERATIONS
    else:
        assert response.cluster_authorized_operations == -(2**31)
