"""ElectLeaders (key 43, v0-v2): preferred or unclean leader elections (KIP-183, KIP-460).

As Kafka's ZooKeeper-mode ``KafkaApis.handleElectLeaders`` / ``ReplicaManager.electLeaders`` /
``KafkaController.processReplicaLeaderElection``:

- The active controller decides (``KafkaController.elect_leaders``); a broker that is not the
  controller forwards the request to it (controller_forwarding.py), or answers NOT_CONTROLLER
  for every partition when it cannot.
- ``topic_partitions`` null: every partition in this broker's metadata, and partitions whose
  answer is ELECTION_NOT_NEEDED are left out of the response; named partitions are each
  answered (duplicates once).
- v0 has no ``election_type`` (preferred); 0 = PREFERRED (leadership back to the first assigned
  replica if it is live and in the ISR), 1 = UNCLEAN (a partition without a live leader gets one
  from the ISR, else any live assigned replica). Another value fails the whole request with
  UNKNOWN_SERVER_ERROR, as Kafka's ``ElectionType.valueOf`` throwing in the handler does.
- Per partition: NONE, ELECTION_NOT_NEEDED (with Errors' default message),
  UNKNOWN_TOPIC_OR_PARTITION ("The partition does not
  exist."), INVALID_TOPIC_EXCEPTION ("The topic is being deleted"),
  PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE (Kafka's
  StateChangeFailedException message), NOT_CONTROLLER.
- An elected partition is answered once this broker's metadata shows the elected leader
  (Kafka's DelayedElectLeader), or REQUEST_TIMED_OUT when ``timeout_ms`` (counted from the
  request's arrival) passes first; the election itself stands.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from kafkalite.apis.admin_common import wait_until
from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.apis.controller_forwarding import controller_is_active, forward_to_controller
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.types import TopicPartition

PREFERRED = 0
UNCLEAN = 1

STRATEGY_NAMES = {
    PREFERRED: "PreferredReplicaPartitionLeaderElectionStrategy",
    UNCLEAN: "OfflinePartitionLeaderElectionStrategy(true)",
}


def error_message(error: ErrorCode, tp: TopicPartition, election_type: int) -> str | None:
    """Kafka's message for a partition's election error (None where Kafka sends none)."""
    if error == ErrorCode.ELECTION_NOT_NEEDED:  # Kafka's ApiError(error): the default message
        return error.message
    if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return "The partition does not exist."
    if error == ErrorCode.INVALID_TOPIC_EXCEPTION:
        return "The topic is being deleted"
    if error in (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
    ):
        return (
            f"Failed to elect leader for partition {tp.topic}-{tp.partition} under strategy "
            f"{STRATEGY_NAMES[election_type]}"
        )
    return None


def requested_partitions(request: Any) -> list[TopicPartition] | None:
    if request.topic_partitions is None:
        return None
    seen = dict.fromkeys(
        TopicPartition(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions
    )
    return list(seen)


def election_results(
    answers: Mapping[TopicPartition, tuple[ErrorCode, str | None]], *, drop_not_needed: bool
) -> list[dict[str, Any]]:
    """``replica_election_results``: the answers grouped by topic, in first-seen order."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, (error, message) in answers.items():
        if drop_not_needed and error == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        by_topic.setdefault(tp.topic, []).append(
            {"partition_id": tp.partition, "error_code": error, "error_message": message}
        )
    return [{"topic": topic, "partition_result": parts} for topic, parts in by_topic.items()]


def all_partitions(cache: Any) -> list[TopicPartition]:
    return [
        TopicPartition(topic, info.partition_index)
        for topic in sorted(cache.get_all_topics())
        for info in sorted(cache.get_partition_infos(topic), key=lambda i: i.partition_index)
    ]


def leaders_shown(cache: Any, expected: Mapping[TopicPartition, int]) -> set[TopicPartition]:
    """The partitions whose leader in this broker's metadata is the expected one."""
    shown = set()
    for tp, leader in expected.items():
        info = cache.get_partition_info(tp.topic, tp.partition)
        if info is not None and info.leader == leader:
            shown.add(tp)
    return shown


def every_partition(
    partitions: Iterable[TopicPartition], error: ErrorCode, message: str | None = None
) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
    return {tp: (error, message) for tp in partitions}


@handles(ApiKey.ELECT_LEADERS)
async def handle_elect_leaders(ctx: RequestContext, request: Any) -> Any:
    deadline = time.monotonic() + max(0, millis(request.timeout)) / 1000
    requested = requested_partitions(request)
    cache = ctx.services.metadata_cache
    if not controller_is_active(ctx):
        forwarded = await forward_to_controller(ctx, request, millis(request.timeout))
        if forwarded is not None:
            return forwarded
        partitions = requested if requested is not None else all_partitions(cache)
        return respond(ctx, every_partition(partitions, ErrorCode.NOT_CONTROLLER), requested)
    election_type = int(getattr(request, "election_type", PREFERRED))
    if election_type not in STRATEGY_NAMES:
        message = f"Unknown election type byte {election_type}"
        return ctx.response(
            throttle_time=0,
            error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
            replica_election_results=election_results(
                every_partition(requested or (), ErrorCode.UNKNOWN_SERVER_ERROR, message),
                drop_not_needed=False,
            ),
        )
    partitions = requested if requested is not None else all_partitions(cache)
    try:
        outcomes = await ctx.services.controller.elect_leaders(
            partitions, unclean=election_type == UNCLEAN
        )
    except KafkaError as e:  # NOT_CONTROLLER: the controller moved while the request waited
        return respond(ctx, every_partition(partitions, e.error_code), requested)
    expected = {tp: o.leader for tp, o in outcomes.items() if o.error_code == ErrorCode.NONE}
    remaining_ms = max(0, round((deadline - time.monotonic()) * 1000))
    await wait_until(lambda: len(leaders_shown(cache, expected)) == len(expected), remaining_ms)
    shown = leaders_shown(cache, expected)
    answers: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
    for tp in partitions:
        outcome = outcomes[tp]  # the controller answers every partition it was given
        if outcome.error_code == ErrorCode.NONE:
            answers[tp] = (ErrorCode.NONE if tp in shown else ErrorCode.REQUEST_TIMED_OUT, None)
        else:
            answers[tp] = (
                outcome.error_code,
                error_message(outcome.error_code, tp, election_type),
            )
    return respond(ctx, answers, requested)


def respond(
    ctx: RequestContext,
    answers: Mapping[TopicPartition, tuple[ErrorCode, str | None]],
    requested: list[TopicPartition] | None,
) -> Any:
    return ctx.response(
        throttle_time=0,
        error_code=ErrorCode.NONE,
        replica_election_results=election_results(answers, drop_not_needed=requested is None),
    )
