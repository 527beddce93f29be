"""LeaderAndIsr (key 4, v4-v7): the controller tells this broker which replicas to lead/follow.

Applied by the ReplicaManager (`become_leader_or_follower_async`) without holding the event
loop for long, whatever the partition count: the request's partition states are built as the
ReplicaManager reads them (a generator), every pass over them works in slices of a few
milliseconds with a yield to the loop between them, new logs are created in a worker thread,
and the answer's per-partition entities are made here in slices too (directly, not through the
generic `build`: 0.7 against 8 µs each). Requests are applied in the order they arrive: the
handler asks the ReplicaManager's state-change lock for its turn before anything yields. A
stale controller epoch fails the whole request (STALE_CONTROLLER_EPOCH), other failures are per
partition. Response v4 lists partition errors flat; v5+ groups them by topic id.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.broker.replica_manager import LEADER_AND_ISR_SLICE, LEADER_AND_ISR_SLICE_SECONDS
from kafkalite.broker.types import LeaderAndIsrPartitionState, LeaderAndIsrResult
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.loop_slices import LoopSlices
from kafkalite.txn.config import TRANSACTION_STATE_TOPIC_NAME


def element_class(cls: type, field_name: str) -> type:
    """The entity class of an array field of a kio entity class."""
    for f in dataclasses.fields(cls):
        if f.name == field_name:
            return typing.get_args(f.type)[0]  # type: ignore[no-any-return]
    raise KeyError(field_name)


@handles(ApiKey.LEADER_AND_ISR)
async def handle_leader_and_isr(ctx: RequestContext, request: Any) -> Any:
    states: list[LeaderAndIsrPartitionState] = []
    topic_ids = {}
    for topic in request.topic_states:
        topic_ids[topic.topic_name] = getattr(topic, "topic_id", None)

    def read_states() -> Iterator[LeaderAndIsrPartitionState]:
        # Built as the ReplicaManager reads them, in its slices (and kept for the answer).
        for topic in request.topic_states:
            name = topic.topic_name
            for p in topic.partition_states:
                state = LeaderAndIsrPartitionState(
                    topic=name,
                    partition=p.partition_index,
                    controller_epoch=p.controller_epoch,
                    leader=p.leader,
                    leader_epoch=p.leader_epoch,
                    isr=tuple(p.isr),
                    zk_version=p.zk_version,
                    replicas=tuple(p.replicas),
                    adding_replicas=tuple(p.adding_replicas),
                    removing_replicas=tuple(p.removing_replicas),
                    is_new=p.is_new,
                )
                states.append(state)
                yield state

    services = ctx.services
    if ctx.broker_epoch_is_stale(request):
        stale = ErrorCode.STALE_BROKER_EPOCH
        result = LeaderAndIsrResult(
            stale, {TopicPartition(s.topic, s.partition): stale for s in read_states()}
        )
    else:
        if services.metadata_cache is not None and hasattr(
            services.metadata_cache, "record_topic_ids"
        ):
            services.metadata_cache.record_topic_ids(
                {name: tid for name, tid in topic_ids.items() if tid is not None}
            )
        reading = read_states()
        result = await services.replica_manager.become_leader_or_follower_async(
            request.controller_id, request.controller_epoch, reading
        )
        for _ in reading:  # the states a replica manager did not read, for the answer
            pass
    errors = result.partition_errors
    if services.group_coordinator is not None and result.error_code == 0:
        # Kafka's onLeadershipChange: load/unload the __consumer_offsets partitions led here
        services.group_coordinator.on_leadership_change(services.broker_id, states, errors)
    if services.txn_coordinator is not None and result.error_code == 0:
        # the same for __transaction_state: the transaction coordinator follows its leadership
        services.txn_coordinator.on_leadership_change(
            services.broker_id, states, errors, TRANSACTION_STATE_TOPIC_NAME
        )
    if result.error_code == 0 and "share_coordinator" in services.extra:  # share groups
        services.extra["share_coordinator"].on_leadership_change(services.broker_id, states, errors)
    slices = LoopSlices(LEADER_AND_ISR_SLICE, LEADER_AND_ISR_SLICE_SECONDS)
    none = ErrorCode.NONE
    if ctx.api_version < 5:
        error_class = element_class(ctx.response_class, "partition_errors")
        flat = await answer_partition_errors(error_class, states, errors, slices)
        return ctx.response(error_code=result.error_code, partition_errors=flat)
    topic_class = element_class(ctx.response_class, "topics")
    error_class = element_class(topic_class, "partition_errors")
    topics = []
    for topic in request.topic_states:
        name = topic.topic_name
        partition_errors = []
        for p in topic.partition_states:
            index = p.partition_index
            partition_errors.append(
                error_class(
                    partition_index=index,
                    error_code=errors.get(TopicPartition(name, index), none),
                )
            )
            if slices.due():
                await slices.pause()
        topics.append(
            topic_class(topic_id=topic_ids.get(name), partition_errors=tuple(partition_errors))
        )
    return ctx.response(error_code=result.error_code, topics=topics)


async def answer_partition_errors(
    error_class: type, states: Any, errors: dict, slices: Any
) -> list:
    """The per-partition errors of a LeaderAndIsr (before v5) or StopReplica answer, one entity
    per state in its order (NONE where `errors` has none), made in `slices`."""
    none = ErrorCode.NONE
    out = []
    for s in states:
        out.append(
            error_class(
                topic_name=s.topic,
                partition_index=s.partition,
                error_code=errors.get(TopicPartition(s.topic, s.partition), none),
            )
        )
        if slices.due():
            await slices.pause()
    return out
