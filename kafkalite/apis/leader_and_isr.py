"""LeaderAndIsr (key 4, v4-v7): the controller tells this broker which replicas to lead/follow.

Applied by the ReplicaManager (`become_leader_or_follower_async`: in slices that yield to the
event loop, new logs created in a worker thread, so a request for thousands of partitions never
holds the loop for long): a stale controller epoch fails the whole request
(STALE_CONTROLLER_EPOCH), other failures are per partition. Response v4 lists partition errors
flat; v5+ groups them by topic id.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.broker.types import LeaderAndIsrPartitionState, LeaderAndIsrResult
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition
from kafkalite.txn.config import TRANSACTION_STATE_TOPIC_NAME


@handles(ApiKey.LEADER_AND_ISR)
async def handle_leader_and_isr(ctx: RequestContext, request: Any) -> Any:
    states = []
    topic_ids = {}
    for topic in request.topic_states:
        topic_ids[topic.topic_name] = getattr(topic, "topic_id", None)
        for p in topic.partition_states:
            states.append(
                LeaderAndIsrPartitionState(
                    topic=topic.topic_name,
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
            )
    services = ctx.services
    if ctx.broker_epoch_is_stale(request):
        stale = ErrorCode.STALE_BROKER_EPOCH
        result = LeaderAndIsrResult(
            stale, {TopicPartition(s.topic, s.partition): stale for s in states}
        )
    else:
        if services.metadata_cache is not None and hasattr(
            services.metadata_cache, "record_topic_ids"
        ):
            services.metadata_cache.record_topic_ids(
                {name: tid for name, tid in topic_ids.items() if tid is not None}
            )
        result = await services.replica_manager.become_leader_or_follower_async(
            request.controller_id, request.controller_epoch, states
        )
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
    if ctx.api_version < 5:
        return ctx.response(
            error_code=result.error_code,
            partition_errors=[
                {
                    "topic_name": s.topic,
                    "partition_index": s.partition,
                    "error_code": errors.get(TopicPartition(s.topic, s.partition), 0),
                }
                for s in states
            ],
        )
    topics = []
    for topic in request.topic_states:
        topics.append(
            {
                "topic_id": topic_ids.get(topic.topic_name),
                "partition_errors": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": errors.get(
                            TopicPartition(topic.topic_name, p.partition_index), 0
                        ),
                    }
                    for p in topic.partition_states
                ],
            }
        )
    return ctx.response(error_code=result.error_code, topics=topics)
