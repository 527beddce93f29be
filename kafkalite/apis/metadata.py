"""Metadata (key 3, v0-v12): brokers, controller, topics with partitions, leaders and ISRs.

Answered from the MetadataCache (filled by the controller's UpdateMetadata), as Kafka does:
brokers are listed with their endpoint for the listener the request came in on; partitions
with leader, leader epoch (v7+), replicas, ISR and offline replicas (v5+); topics with their
topic id (v10+).

Unknown topics: with `auto.create.topics.enable` (default true) and the request allowing it
(v4+ `allow_auto_topic_creation`, implied before), a legal, non-internal name is created through
the controller's admin path (num.partitions, default.replication.factor) and answered
LEADER_NOT_AVAILABLE until the controller has elected its leaders; otherwise
UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name). Auto-creation is held to
the partition ceilings (controller/limits.py): past max.partitions.per.request partitions
auto-created by one request, or past max.partitions.per.topic / the cluster's max.partitions,
a topic is answered POLICY_VIOLATION (Kafka answers a failed auto-creation with its error). A partition whose
leader is not alive is LEADER_NOT_AVAILABLE with leader -1 (the cache's getTopicMetadata rules).
v12 topics asked by id: known ids are answered like their names, unknown ones UNKNOWN_TOPIC_ID.

Authorized operations (v8+, KIP-430): asked for with `include_topic_authorized_operations`
(every topic answered by name, as Kafka's handleTopicMetadataRequest sets them; not the unknown
ids) and `include_cluster_authorized_operations` (v8-10); with no authorizer they are every
operation the resource type supports (protocol/acl.py), otherwise Int.MinValue (omitted).

Encoding: the handler returns a ``MetadataAnswer``, which the dispatcher asks for its frame
(``encode_frame``). Each known topic's entry (error, name, id, is_internal and partitions) is
the cache's encoded bytes (broker/metadata_bytes.py: each partition encoded once per state and
response version family), so a topic of 10,000 partitions costs a lookup, not 10,000 entities;
brokers, cluster id, controller, the other topics and the authorised operations are written
per answer (protocol/metadata_response.py). The frame is byte for byte what kio's encoder
writes for ``to_response()`` (the kio entity the answer stands for, built from the cache's
per-partition metadata): tests/apis/test_metadata_bytes.py checks it for every version. The
authorizer filters and completes the answer as it does a kio response (its topics and fields
have the kio entity's names).
"""

# No ``from __future__ import annotations``: the authorizer reads the type of
# ``MetadataAnswer.topics`` to build the entries of refused topics.

import asyncio
import dataclasses
import uuid
from collections.abc import Iterable
from typing import Any

import structlog

from kafkalite.apis.base import RequestContext, build, handles
from kafkalite.apis.topic_names import invalid_topic_reason, is_internal
from kafkalite.broker.metadata_cache import PartitionMetadata
from kafkalite.protocol.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ResourceType,
    authorized_operations,
)
from kafkalite.protocol.api import ApiKey, response_class
from kafkalite.protocol.errors import ErrorCode, KafkaError, TopicAlreadyExistsError
from kafkalite.protocol.metadata_response import encode_response
from kafkalite.storage.loop_slices import LoopSlices

log = structlog.get_logger("kafkalite.apis")

ZERO_UUID = uuid.UUID(int=0)


@dataclasses.dataclass(slots=True)
class MetadataTopicAnswer:
    """One topic of a Metadata answer: the kio ``MetadataResponseTopic``'s fields, and for a
    known topic its entry up to its partitions already encoded (``encoded``: error, name, id,
    is_internal and the partitions array, as the cache's ``encoded_topics`` gives it;
    ``partitions`` is then empty). Not frozen: a frozen dataclass's ``__init__`` sets each
    field through ``object.__setattr__``, and an answer makes one per topic; nothing changes
    one in place (the authorizer replaces them)."""

    error_code: ErrorCode = dataclasses.field(
        default=ErrorCode.NONE, metadata={"kafka_type": "error_code"}
    )
    name: str | None = None
    topic_id: uuid.UUID | None = ZERO_UUID
    is_internal: bool = False
    partitions: tuple = ()
    topic_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED
    encoded: bytes | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class MetadataAnswer:
    """A Metadata response that encodes itself (``encode_frame``); ``to_response`` is the kio
    entity it stands for."""

    version: int
    brokers: tuple[dict[str, Any], ...]
    cluster_id: str | None
    controller_id: int
    topics: tuple[MetadataTopicAnswer, ...]
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED
    throttle_time: int = 0
    cache: Any = dataclasses.field(default=None, compare=False, repr=False)
    listener: str = ""

    def encode_frame(self, header: Any) -> bytes:
        """The whole response frame (size prefix, response header, body)."""
        return encode_response(
            header.correlation_id,
            self.version,
            throttle_time_ms=self.throttle_time,
            brokers=self.brokers,
            cluster_id=self.cluster_id,
            controller_id=self.controller_id,
            topics=self.topics,
            cluster_authorized_operations=self.cluster_authorized_operations,
        )

    def to_response(self) -> Any:
        """The kio entity this answer stands for, each known topic's partitions built from
        the cache's per-partition metadata (``get_topic_metadata``) and not from the encoded
        bytes: what ``encode_frame``'s bytes are checked against."""
        version = self.version
        topics = []
        for topic in self.topics:
            partitions: list[dict[str, Any]] = []
            if topic.encoded is not None:
                [metadata] = self.cache.get_topic_metadata(
                    [topic.name],
                    self.listener,
                    error_unavailable_endpoints=version == 0,
                    error_unavailable_listeners=version >= 6,
                )
                partitions = partition_entries(metadata.partitions)
            topics.append(
                {
                    "error_code": topic.error_code,
                    "name": topic.name,
                    "topic_id": topic.topic_id,
                    "is_internal": topic.is_internal,
                    "partitions": partitions,
                    "topic_authorized_operations": topic.topic_authorized_operations,
                }
            )
        return build(
            response_class(ApiKey.METADATA, version),
            {
                "throttle_time": self.throttle_time,
                "brokers": list(self.brokers),
                "cluster_id": self.cluster_id,
                "controller_id": self.controller_id,
                "topics": topics,
                "cluster_authorized_operations": self.cluster_authorized_operations,
            },
        )


def broker_entries(ctx: RequestContext) -> list[dict[str, Any]]:
    """Alive brokers with their endpoint on the listener of this connection."""
    listener = ctx.connection.listener_name
    out = []
    for broker in ctx.services.metadata_cache.get_alive_brokers():
        endpoint = broker.endpoint_for(listener)
        if endpoint is None:
            continue
        out.append(
            {
                "node_id": broker.id,
                "host": endpoint.host,
                "port": endpoint.port,
                "rack": broker.rack,
            }
        )
    return out


def partition_entries(partitions: Iterable[PartitionMetadata]) -> list[dict[str, Any]]:
    return [
        {
            "error_code": p.error_code,
            "partition_index": p.partition_index,
            "leader_id": p.leader_id,
            "leader_epoch": p.leader_epoch,
            "replica_nodes": list(p.replica_nodes),
            "isr_nodes": list(p.isr_nodes),
            "offline_replicas": list(p.offline_replicas),
        }
        for p in sorted(partitions, key=lambda p: p.partition_index)
    ]


async def auto_create_topic(ctx: RequestContext, name: str, created_so_far: int = 0) -> ErrorCode:
    """Create `name` with the broker defaults; the error code the Metadata answer carries.
    ``created_so_far``: the partitions this request has auto-created already; with this topic's
    they may not pass max.partitions.per.request, nor the cluster's max.partitions
    (POLICY_VIOLATION, as Kafka's auto-creation answers the creation's error)."""
    from kafkalite.controller.limits import PartitionLimits, partition_budget
    from kafkalite.zk import admin

    config = ctx.services.config
    limits = PartitionLimits.of(config)
    budget = partition_budget(ctx.services)
    if created_so_far + config.num_partitions > limits.per_request:
        return ErrorCode.POLICY_VIOLATION
    try:
        limits.check_topic(name, config.num_partitions)
        budget.reserve(name, config.num_partitions)
    except KafkaError as e:
        log.info("auto-creation refused", topic=name, error=str(e))
        return e.error_code
    try:
        await admin.create_topic(
            ctx.services.store,
            name,
            config.num_partitions,
            config.default_replication_factor,
            {},
        )
        log.info("auto-created topic", topic=name, client=ctx.connection.client_address)
    except TopicAlreadyExistsError:
        budget.release(name)
    except KafkaError as e:
        budget.release(name)
        log.info("auto-creation failed", topic=name, error=str(e))
        return e.error_code
    return ErrorCode.LEADER_NOT_AVAILABLE


@handles(ApiKey.METADATA)
async def handle_metadata(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    cache = services.metadata_cache
    version = ctx.api_version
    requested = request.topics
    topics: list[MetadataTopicAnswer] = []
    by_id: list = []
    if requested is not None:
        # v12 (KIP-516): a topic may be asked by id (name null); an unknown id is
        # UNKNOWN_TOPIC_ID, a known one is answered like its name (never auto-created).
        by_id = [t.topic_id for t in requested if t.name is None and _has_topic_id(t)]
        names = [t.name for t in requested if t.name is not None or not _has_topic_id(t)]
        for topic_id in dict.fromkeys(by_id):
            name = cache.get_topic_name(topic_id)
            if name is None:
                topics.append(
                    MetadataTopicAnswer(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id, False)
                )
            elif name not in names:
                names.append(name)
        if version == 0 and not names:
            names = None  # v0: an empty list means every topic
    else:
        names = None
    allow_auto = getattr(request, "allow_auto_topic_creation", True) and not by_id
    listener = ctx.connection.listener_name
    # What changed since the last answer is encoded in slices first (a failover changes
    # thousands of partitions); the answer is then read in one go, with no pause, from what
    # the cache holds then.
    await cache.encode_in_slices(
        cache.get_all_topics() if names is None else names, listener, version, LoopSlices()
    )
    known = cache.get_all_topics()
    wanted = sorted(known) if names is None else names
    # Kafka's getTopicMetadata: a dead leader is -1 with LEADER_NOT_AVAILABLE, a leader
    # without this listener LISTENER_NOT_FOUND (v6+), v0 lists only reachable replicas; the
    # partitions arrays come encoded from the cache.
    found = {
        name: (topic_id, array)
        for name, topic_id, array in cache.encoded_topics(
            [n for n in wanted if n in known], listener, version, is_internal
        )
    }
    auto_created = 0
    for name in wanted:
        entry = found.get(name)
        if entry is not None:
            topics.append(
                MetadataTopicAnswer(
                    ErrorCode.NONE,
                    name,
                    entry[0],
                    is_internal(name),
                    (),
                    encoded=entry[1],
                )
            )
            continue
        if name is None or invalid_topic_reason(name) is not None:
            error = ErrorCode.INVALID_TOPIC_EXCEPTION
        elif services.config.auto_create_topics_enable and allow_auto and not is_internal(name):
            error = await auto_create_topic(ctx, name, auto_created)
            if error == ErrorCode.LEADER_NOT_AVAILABLE:
                auto_created += services.config.num_partitions
            # The store's round trips need not suspend (the embedded store answers at once):
            # thousands of names would otherwise be created in one turn of the event loop.
            await asyncio.sleep(0)
        else:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        topics.append(MetadataTopicAnswer(error, name, ZERO_UUID, False))
    if getattr(request, "include_topic_authorized_operations", False):
        topic_operations = authorized_operations(ResourceType.TOPIC)
        topics = [
            t
            if t.name is None
            else dataclasses.replace(t, topic_authorized_operations=topic_operations)
            for t in topics
        ]
    cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
    if getattr(request, "include_cluster_authorized_operations", False):
        cluster_operations = authorized_operations(ResourceType.CLUSTER)
    controller_id = cache.get_controller_id()
    return MetadataAnswer(
        version,
        tuple(broker_entries(ctx)),
        services.cluster_id,
        -1 if controller_id is None else controller_id,
        tuple(topics),
        cluster_operations,
        cache=cache,
        listener=listener,
    )


def _has_topic_id(topic: Any) -> bool:
    return getattr(topic, "topic_id", None) not in (None, ZERO_UUID)
