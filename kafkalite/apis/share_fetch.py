"""ShareFetch (key 78, v1) and ShareAcknowledge (key 79, v1): records acquired from share-
partitions and acknowledged (kafkalite/share/manager.py has the share-session rules).

ShareFetch: acknowledgements first (ACCEPT 1, RELEASE 2, REJECT 3, GAP 0; a per-partition
``acknowledge_error_code``), then, unless the session epoch is -1 (the session closes) or
``max_records`` is 0, records are acquired from every partition of the session, up to
``max_records`` in all, from whole log batches while their total stays within ``max_bytes``
(the answer's first batch is returned whatever its size, as Kafka's log read does; with a
``max_bytes`` of 0 nothing is, and the request is answered empty after ``max_wait_ms``). Only the
share-partitions that are ready are served; the others are initialised in the background, and
when none is ready the request completes with the first to be. When no record is available the
request waits for new records (the fetch purgatory wakes it), then tries once more; all its
waits together stay within ``max_wait_ms``. A session epoch of 0 with
acknowledgements is INVALID_REQUEST. The response names the partitions with records, an error or
an acknowledgement result, and the acquisition lock duration.

ShareAcknowledge: acknowledgements only; epoch 0 is INVALID_SHARE_SESSION_EPOCH (only a
ShareFetch opens a session), -1 closes the session after them.

Authorisation as Kafka: READ on the group (GROUP_AUTHORIZATION_FAILED for the whole request),
READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions, before the topic's existence
is looked at).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.apis.share_group import allowed, share_service
from kafkalite.protocol.acl import AclOperation, ResourceType
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode

_NO_LEADER = {"leader_id": -1, "leader_epoch": -1}

NOT_READY = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
    }
)
"""A share-partition whose state cannot be read yet (the share coordinator's partition is being
created or loaded) is left out of the answer, as Kafka leaves an initialising one out."""
NOT_READY_PAUSE_MS = 100


def _topic_error(ctx: RequestContext, service: Any, topic_id: uuid.UUID) -> ErrorCode | None:
    """TOPIC_AUTHORIZATION_FAILED / UNKNOWN_TOPIC_ID for a partition of this topic, or None."""
    name = service.topic_name(topic_id) if service is not None else None
    if name is None:
        # an unknown id is refused as an unauthorised one: nothing is revealed
        if ctx.services.extra.get("authorizer") is not None:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return ErrorCode.UNKNOWN_TOPIC_ID
    if not allowed(ctx, AclOperation.READ, ResourceType.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return None


def _top_error(ctx: RequestContext, error: ErrorCode) -> Any:
    return ctx.response(error_code=error, error_message=error.message)


def _acks(partition: Any) -> list[tuple[int, int, list[int]]]:
    return [
        (b.first_offset, b.last_offset, list(b.acknowledge_types))
        for b in partition.acknowledgement_batches
    ]


async def _apply_acks(
    ctx: RequestContext, service: Any, group_id: str, member_id: str, topics: Any
) -> dict[tuple[uuid.UUID, int], ErrorCode]:
    results: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    for topic in topics:
        refused = _topic_error(ctx, service, topic.topic_id)
        for partition in topic.partitions:
            batches = _acks(partition)
            if not batches:
                continue
            key = (topic.topic_id, partition.partition_index)
            if refused is not None:
                results[key] = refused
                continue
            results[key] = await service.acknowledge(
                group_id, member_id, topic.topic_id, partition.partition_index, batches
            )
    return results


def _node_endpoints(ctx: RequestContext, leaders: set[int]) -> list[dict[str, Any]]:
    cache = ctx.services.metadata_cache
    out = []
    for broker_id in sorted(b for b in leaders if b >= 0):
        node = cache.get_alive_broker_node(broker_id, ctx.connection.listener_name)
        if node is not None:
            out.append({"node_id": broker_id, "host": node.host, "port": node.port})
    return out


def _current_leader(ctx: RequestContext, service: Any, topic_id: uuid.UUID, partition: int):
    name = service.topic_name(topic_id)
    info = ctx.services.metadata_cache.get_partition_info(name, partition) if name else None
    if info is None:
        return dict(_NO_LEADER)
    return {"leader_id": info.leader, "leader_epoch": info.leader_epoch}


async def _ready_partitions(
    service: Any, group_id: str, candidates: list[tuple[uuid.UUID, int]], wait_ms: int
) -> list[tuple[uuid.UUID, int]]:
    """The candidates a fetch acquires from now: those whose share-partition is ready. The
    others are initialised in the background and join a later fetch; when none is ready the
    fetch waits (up to ``wait_ms``) for the first to be, as Kafka's delayed share fetch
    completes as soon as a share-partition becomes acquirable."""
    ready = [c for c in candidates if service.is_ready(group_id, *c)]
    loading = {service.start_loading(group_id, *c): c for c in candidates if c not in ready}
    if ready or not loading or wait_ms <= 0:
        return ready
    # the fetch completes at the first initialisation, with what is ready at that moment:
    # that share-partition alone (the others finish in the background for the next fetch)
    first: asyncio.Future = asyncio.get_running_loop().create_future()

    def on_done(task: asyncio.Task) -> None:
        if not first.done():
            first.set_result(loading[task])

    for task in loading:
        task.add_done_callback(on_done)
    try:
        return [await asyncio.wait_for(first, wait_ms / 1000)]
    except TimeoutError:
        return []
    finally:
        for task in loading:
            task.remove_done_callback(on_done)


def _refusal(ctx: RequestContext, request: Any) -> Any | None:
    """What ShareFetch and ShareAcknowledge check first, in Kafka's order: both ids given, READ
    on the group, then a share-group service to answer."""
    if not request.group_id or not request.member_id:
        return _top_error(ctx, ErrorCode.INVALID_REQUEST)
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _top_error(ctx, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if share_service(ctx) is None:
        return _top_error(ctx, ErrorCode.UNKNOWN_SERVER_ERROR)
    return None


@handles(ApiKey.SHARE_FETCH)
async def handle_share_fetch(ctx: RequestContext, request: Any) -> Any:
    refused = _refusal(ctx, request)
    if refused is not None:
        return refused
    service = share_service(ctx)
    group_id, member_id = request.group_id, request.member_id
    epoch = request.share_session_epoch
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    if epoch == 0 and has_acks:
        return _top_error(ctx, ErrorCode.INVALID_REQUEST)
    add = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forget = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    if epoch == -1 and forget:
        return _top_error(ctx, ErrorCode.INVALID_REQUEST)
    error, session = service.open_session(group_id, member_id, epoch, add, forget)
    if error is not ErrorCode.NONE:
        return _top_error(ctx, error)
    ack_results = await _apply_acks(ctx, service, group_id, member_id, request.topics)

    fetched: dict[tuple[uuid.UUID, int], Any] = {}
    errors: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    if epoch == -1:
        service.close_session(group_id, member_id)
    elif request.max_bytes <= 0 and request.max_records != 0:
        # no byte may be returned, so no record: Kafka's delayed share fetch cannot reach its
        # minimum and answers, empty, when max_wait passes
        await asyncio.sleep(millis(request.max_wait) / 1000)
    elif request.max_records > 0 or request.max_records < 0:
        max_records = request.max_records if request.max_records > 0 else 500
        candidates = []
        for topic_id, partition in sorted(session.partitions, key=lambda k: (str(k[0]), k[1])):
            refused = _topic_error(ctx, service, topic_id)
            if refused is not None:
                errors[(topic_id, partition)] = refused
            else:
                candidates.append((topic_id, partition))
        # one budget of max_wait for the whole request (initialisation and new records)
        deadline = time.monotonic() + millis(request.max_wait) / 1000

        def left_ms() -> int:
            return max(0, int((deadline - time.monotonic()) * 1000))

        for attempt in range(2):
            remaining = max_records
            bytes_left = request.max_bytes
            ready = await _ready_partitions(service, group_id, candidates, left_ms())
            for topic_id, partition in ready:
                if remaining <= 0 or (bytes_left <= 0 and fetched):
                    break
                result = await service.acquire(
                    group_id,
                    member_id,
                    topic_id,
                    partition,
                    remaining,
                    bytes_left,
                    min_one_batch=not fetched,
                )
                if result.error in NOT_READY:
                    pass  # the share coordinator is still starting: nothing to give yet
                elif result.error is not ErrorCode.NONE:
                    errors[(topic_id, partition)] = result.error
                elif result.acquired:
                    fetched[(topic_id, partition)] = result
                    remaining -= sum(a.last_offset - a.first_offset + 1 for a in result.acquired)
                    bytes_left -= len(result.records)
            wait_ms = left_ms()
            if fetched or attempt == 1 or wait_ms <= 0 or not candidates:
                break
            waits = []
            for topic_id, partition in candidates:
                name = service.topic_name(topic_id)
                sp = service.partitions.get((group_id, name, partition))
                if sp is not None and (topic_id, partition) not in errors:
                    waits.append((name, partition, sp.end_offset))
            if not waits:
                # state still loading: a short pause, not a busy loop of empty answers
                await asyncio.sleep(min(wait_ms, NOT_READY_PAUSE_MS) / 1000)
                continue
            await service.wait_for_records(waits, wait_ms)

    keys = set(fetched) | set(errors) | set(ack_results)
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    leaders: set[int] = set()
    for topic_id, partition in sorted(keys, key=lambda k: (str(k[0]), k[1])):
        error = errors.get((topic_id, partition), ErrorCode.NONE)
        ack_error = ack_results.get((topic_id, partition), ErrorCode.NONE)
        result = fetched.get((topic_id, partition))
        refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED in (error, ack_error)
        leader = dict(_NO_LEADER) if refused else _current_leader(ctx, service, topic_id, partition)
        if error is ErrorCode.NOT_LEADER_OR_FOLLOWER:
            leaders.add(leader["leader_id"])
        entry = {
            "partition_index": partition,
            "error_code": error,
            "error_message": None if error is ErrorCode.NONE else error.message,
            "acknowledge_error_code": int(ack_error),
            "acknowledge_error_message": None if ack_error is ErrorCode.NONE else ack_error.message,
            "current_leader": leader,
            "records": result.records if result is not None else b"",
            "acquired_records": [
                {
                    "first_offset": a.first_offset,
                    "last_offset": a.last_offset,
                    "delivery_count": a.delivery_count,
                }
                for a in (result.acquired if result is not None else ())
            ],
        }
        by_topic.setdefault(topic_id, []).append(entry)
    return ctx.response(
        error_code=ErrorCode.NONE,
        acquisition_lock_timeout=service.lock_duration_ms(group_id),
        responses=[{"topic_id": t, "partitions": parts} for t, parts in by_topic.items()],
        node_endpoints=_node_endpoints(ctx, leaders),
    )


@handles(ApiKey.SHARE_ACKNOWLEDGE)
async def handle_share_acknowledge(ctx: RequestContext, request: Any) -> Any:
    refused = _refusal(ctx, request)
    if refused is not None:
        return refused
    service = share_service(ctx)
    group_id, member_id = request.group_id, request.member_id
    epoch = request.share_session_epoch
    if epoch == 0:
        return _top_error(ctx, ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    error, _ = service.open_session(group_id, member_id, epoch, (), ())
    if error is not ErrorCode.NONE:
        return _top_error(ctx, error)
    results = await _apply_acks(ctx, service, group_id, member_id, request.topics)
    if epoch == -1:
        service.close_session(group_id, member_id)
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, partition), code in sorted(
        results.items(), key=lambda k: (str(k[0][0]), k[0][1])
    ):
        by_topic.setdefault(topic_id, []).append(
            {
                "partition_index": partition,
                "error_code": code,
                "error_message": None if code is ErrorCode.NONE else code.message,
                "current_leader": dict(_NO_LEADER)
                if code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
                else _current_leader(ctx, service, topic_id, partition),
            }
        )
    return ctx.response(
        error_code=ErrorCode.NONE,
        responses=[{"topic_id": t, "partitions": parts} for t, parts in by_topic.items()],
        node_endpoints=[],
    )
