"""Fetch (key 1, v4-v12): consumers and followers read record batches.

The handler turns the request into `FetchParams` + per-partition `FetchInfo`, asks the
ReplicaManager (which long-polls: it answers as soon as `min_bytes` are available or
`max_wait_ms` passes) and encodes the answer with the hand-written encoder
(protocol/fetch_response.py), so record slices from the log go to the socket without being copied.

Fetch sessions (KIP-227, v7+): when the broker has a FetchSessionCache it decides the context
(full, incremental, sessionless, or an error such as FETCH_SESSION_ID_NOT_FOUND). Without one,
every request is served sessionless: session id 0 in the response tells the client that no
session was created, which Kafka also answers when its cache is full, and a request naming a
session id gets FETCH_SESSION_ID_NOT_FOUND so the client starts over with a full fetch.

Follower fetching (KIP-392, v11+): a consumer fetch carries client metadata (its rack), so a
follower serves it (up to its HW) and a leader with `replica.selector.class` set to Kafka's
RackAwareReplicaSelector may answer it with a preferred read replica and no records
(broker/replica_selector.py, ReplicaManager.read_from_local_log).

A follower's incremental fetch reads only the partitions of its session with news (the
others are parked, broker/fetch_session.py); when there are none it waits for news up to its
max wait, then reads what has it.

A fetch of more than ``FETCH_SLICE_PARTITIONS`` partitions (a follower's first fetch of a
session, a consumer of many partitions) is read and, when it is answered with a session, its
session bookkeeping done in slices that yield to the loop (ReplicaManager's
``_fetch_messages_in_slices``; decision 0057); smaller ones are answered in one go, most of
them without a coroutine.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.broker.replica_manager import FETCH_SLICE_CHUNK, FETCH_SLICE_PARTITIONS
from kafkalite.broker.types import FetchInfo, FetchParams, FetchPartitionData, IsolationLevel
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.fetch_response import (
    encode_fetch_response,
    encode_fetch_response_in_steps,
)
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.loop_slices import SLICE_ITEMS, SLICE_SECONDS, LoopSlices

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@handles(ApiKey.FETCH)
def handle_fetch(
    ctx: RequestContext, request: Any, may_read: Callable[[str], bool] | None = None
) -> Any:
    """The encoded response, or (when the fetch waits in purgatory) an awaitable of it: most
    fetches are answered without a coroutine or a task.

    ``may_read`` (given by the authorizer, apis/authorization.py): whether a topic may be read.
    It is asked about every partition of the fetch context (a session's too, so an ACL removed
    during a session stops it), and the others are answered TOPIC_AUTHORIZATION_FAILED without
    reading the log, as Kafka's "erroneous" partitions."""
    version = ctx.api_version
    services = ctx.services
    session_id = getattr(request, "session_id", INVALID_SESSION_ID)
    session_epoch = getattr(request, "session_epoch", FINAL_EPOCH)
    fetch_infos: dict[TopicPartition, FetchInfo] = {}
    for topic in request.topics:
        for p in topic.partitions:
            fetch_infos[TopicPartition(topic.topic, p.partition)] = FetchInfo(
                fetch_offset=p.fetch_offset,
                max_bytes=p.partition_max_bytes,
                log_start_offset=getattr(p, "log_start_offset", -1),
                current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                last_fetched_epoch=getattr(p, "last_fetched_epoch", -1),
            )
    forgotten = [
        TopicPartition(t.topic, p)
        for t in getattr(request, "forgotten_topics_data", ())
        for p in t.partitions
    ]
    # Kafka's handleFetchRequest: fetch.max.bytes caps consumers and followers alike, and
    # min_bytes never exceeds the cap (it could never be met early).
    max_bytes = min(request.max_bytes, services.config.fetch_max_bytes)
    params = FetchParams(
        replica_id=request.replica_id,
        max_wait_ms=millis(request.max_wait),
        min_bytes=min(request.min_bytes, max_bytes),
        max_bytes=max_bytes,
        isolation_level=IsolationLevel(getattr(request, "isolation_level", 0)),
        # Kafka's client metadata: every v11+ fetch has it (rack_id "" when client.rack is
        # unset), which lets a consumer read from a follower (KIP-392).
        client_rack=(request.rack_id or "") if version >= 11 else None,
    )

    sessions = services.fetch_sessions
    if sessions is not None and version >= 7:
        context = sessions.new_context(
            session_id,
            session_epoch,
            fetch_infos,
            forgotten,
            is_follower=request.replica_id >= 0,
            replica_id=request.replica_id,
        )
        if context.error_code != ErrorCode.NONE:
            return encode_fetch_response(
                ctx.header.correlation_id, version, [], error_code=context.error_code
            )
        fetch_infos = context.fetch_infos
    elif version >= 7 and session_id != INVALID_SESSION_ID:
        error = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        return encode_fetch_response(ctx.header.correlation_id, version, [], error_code=error)
    else:
        context = None
    if context is not None and params.max_wait_ms > 0 and getattr(context, "waits_for_news", False):
        # A follower's session whose partitions are all parked: wait for news, then read.
        return _respond_after_news(ctx, version, context, params, may_read)
    return _read_and_respond(ctx, version, context, fetch_infos, params, may_read)


async def _respond_after_news(
    ctx: RequestContext,
    version: int,
    context: Any,
    params: FetchParams,
    may_read: Callable[[str], bool] | None,
) -> Any:
    replica_manager = ctx.services.replica_manager
    left = await replica_manager.wait_for_session_news(context.session, params.max_wait_ms)
    params = dataclasses.replace(params, max_wait_ms=left)
    response = _read_and_respond(ctx, version, context, context.fetch_infos, params, may_read)
    if inspect.isawaitable(response):
        return await response
    return response


def _read_and_respond(
    ctx: RequestContext,
    version: int,
    context: Any,
    fetch_infos: dict[TopicPartition, FetchInfo],
    params: FetchParams,
    may_read: Callable[[str], bool] | None,
) -> Any:
    services = ctx.services
    to_fetch = fetch_infos
    denied: dict[TopicPartition, FetchPartitionData] = {}
    if may_read is not None:
        readable: dict[str, bool] = {}
        for tp in fetch_infos:
            ok = readable.get(tp.topic)
            if ok is None:
                ok = readable[tp.topic] = may_read(tp.topic)
            if not ok:
                denied[tp] = _DENIED
        if denied:
            to_fetch = {tp: info for tp, info in fetch_infos.items() if tp not in denied}
    if denied and not to_fetch:
        results: Any = {}  # Kafka answers at once when nothing is left to wait for
    else:
        session = getattr(context, "session", None) if params.replica_id >= 0 else None
        if session is not None:  # a follower's session: its parked partitions' news wakes it
            results = services.replica_manager.fetch_messages_now_or_later(
                params, to_fetch, session
            )
        else:
            results = services.replica_manager.fetch_messages_now_or_later(params, to_fetch)
    if isinstance(results, dict):
        return _respond(ctx, version, context, fetch_infos, results, denied)
    return _respond_when_ready(ctx, version, context, fetch_infos, results, denied)


_DENIED = FetchPartitionData(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)


async def _respond_when_ready(
    ctx: RequestContext,
    version: int,
    context: Any,
    fetch_infos: dict[TopicPartition, FetchInfo],
    pending: Awaitable[dict[TopicPartition, Any]],
    denied: dict[TopicPartition, FetchPartitionData],
) -> Any:
    results = await pending
    threshold = getattr(
        ctx.services.replica_manager, "fetch_slice_partitions", FETCH_SLICE_PARTITIONS
    )
    if len(results) + len(denied) > threshold:
        return await _respond_in_slices(ctx, version, context, fetch_infos, results, denied)
    return _respond(ctx, version, context, fetch_infos, results, denied)


async def _respond_in_slices(
    ctx: RequestContext,
    version: int,
    context: Any,
    fetch_infos: dict[TopicPartition, FetchInfo],
    results: dict[TopicPartition, Any],
    denied: dict[TopicPartition, FetchPartitionData],
) -> Any:
    """``_respond`` for many partitions: the session's bookkeeping and the encoding in slices
    that yield to the loop, the first after the read's last slice."""
    if denied:
        results = {**results, **denied}
    slices = LoopSlices(max(1, SLICE_ITEMS // FETCH_SLICE_CHUNK), SLICE_SECONDS)
    await slices.pause()
    if context is not None:
        answer = await context.update_and_generate_response_in_slices(
            results, slices, FETCH_SLICE_CHUNK
        )
        response_partitions, response_session_id = answer
    else:
        response_partitions = [(tp, results[tp]) for tp in fetch_infos if tp in results]
        response_session_id = INVALID_SESSION_ID
    steps = encode_fetch_response_in_steps(
        ctx.header.correlation_id,
        version,
        _by_topic(response_partitions),
        step=FETCH_SLICE_CHUNK,
        session_id=response_session_id,
    )
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        if slices.due():
            await slices.pause()


def _respond(
    ctx: RequestContext,
    version: int,
    context: Any,
    fetch_infos: dict[TopicPartition, FetchInfo],
    results: dict[TopicPartition, Any],
    denied: dict[TopicPartition, FetchPartitionData],
) -> Any:
    if denied:
        results = {**results, **denied}
    if context is not None:
        response_partitions, response_session_id = context.update_and_generate_response(results)
    else:
        response_partitions = [(tp, results[tp]) for tp in fetch_infos if tp in results]
        response_session_id = INVALID_SESSION_ID
    return encode_fetch_response(
        ctx.header.correlation_id,
        version,
        _by_topic(response_partitions),
        session_id=response_session_id,
    )


def _by_topic(
    response_partitions: list[tuple[TopicPartition, Any]],
) -> list[tuple[str, list[tuple[int, Any]]]]:
    """The response's partitions grouped by topic, in their order (a topic whose partitions
    are not together appears once per run, as the encoder writes them)."""
    topics: list[tuple[str, list[tuple[int, Any]]]] = []
    for tp, data in response_partitions:
        if topics and topics[-1][0] == tp.topic:
            topics[-1][1].append((tp.partition, data))
        else:
            topics.append((tp.topic, [(tp.partition, data)]))
    return topics
