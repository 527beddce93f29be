"""ControllerChannelManager: the controller's direct RPC to every live broker, itself included.

Kafka's ``ControllerChannelManager`` (one connection and one sender thread per broker, the
requests to one broker strictly in order): one queue and one sender task per broker. The
sender takes a request, sends it over the Kafka protocol (LeaderAndIsr / UpdateMetadata /
StopReplica, built here from the controller's ``ControllerRequest`` data at the version the
connection negotiated), waits for the response and hands it to ``on_response`` before taking
the next one, so one broker sees the controller's requests in order. A failed send is retried
over a new connection after ``retry_backoff`` seconds, forever, until the broker is removed
(its ``/brokers/ids`` registration went away) or the manager shuts down.

The transport is injected (CONTRIBUTING.md, convention 5): ``transport_factory(broker)`` returns an
object with ``async send(api_key, build)`` (``build``: version -> message) and ``async close()``.
The default, ``KafkaConnectionTransport``, uses ``kafkalite.client.KafkaConnection`` to the
broker's inter-broker listener; the controller's own broker is reached the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
import typing
import uuid
from collections.abc import Callable, Iterator, Mapping, ValuesView
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.encoder import Encoded
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.data import topic_id_bytes
from kafkalite.zk.types import Broker, EndPoint

from .broker_request_batch import (
    ControllerRequest,
    LeaderAndIsrRequestData,
    StopReplicaRequestData,
    UpdateMetadataRequestData,
)
from .wire import shared_topic_states

log = structlog.get_logger("kafkalite.controller.channel")

SLOW_REQUEST_SECONDS = 0.1
SLOW_REQUEST_PARTITIONS = 1000
"""A request answered later than this after it was queued, or naming at least this many
partitions, is logged at INFO with its stamps (queued, sent, answered); others at DEBUG."""

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""Kafka's ``SecurityProtocol`` ids, as UpdateMetadata carries them."""


class BrokerTransport(Protocol):
    async def send(self, api_key: int, build: Callable[[int], Any]) -> Any: ...

    async def close(self) -> None: ...


TransportFactory = Callable[[Broker], BrokerTransport]
ResponseCallback = Callable[[int, ControllerRequest, Any], None]


# -- requests as protocol messages ---------------------------------------------------------------


def api_key_of(request: ControllerRequest) -> ApiKey:
    if isinstance(request, LeaderAndIsrRequestData):
        return ApiKey.LEADER_AND_ISR
    if isinstance(request, UpdateMetadataRequestData):
        return ApiKey.UPDATE_METADATA
    if isinstance(request, StopReplicaRequestData):
        return ApiKey.STOP_REPLICA
    raise TypeError(f"not a controller request: {request!r}")


@functools.lru_cache(maxsize=1 << 17)
def _uuid(topic_id: str | None) -> uuid.UUID | None:
    """The topic id as a UUID (cached: every request names every topic it carries, 10,000
    conversions per failover at 10,000 topics)."""
    return uuid.UUID(bytes=topic_id_bytes(topic_id)) if topic_id else None


def _endpoint_for(broker: Broker, listener_name: str | None) -> EndPoint:
    try:
        return broker.endpoint(listener_name)
    except KeyError:
        return broker.endpoint()


@functools.cache
def _message_plan(cls: type) -> tuple[frozenset[str], dict[str, type], dict[str, Any]]:
    """For a message dataclass: its field names, the entity type of each field holding a tuple
    of nested structs, and the neutral value of each field without a default (taken from
    ``build_message`` once). Computed once per class: requests for thousands of partitions
    are built with plain constructor calls, not ``build_message``'s per-value introspection,
    which held the event loop for about a second per 3,000-partition LeaderAndIsr."""
    from kafkalite.client.messages import build_message

    hints = typing.get_type_hints(cls)
    names = frozenset(f.name for f in dataclasses.fields(cls))
    nested: dict[str, type] = {}
    for name in names:
        annotation = hints[name]
        if typing.get_origin(annotation) is tuple:
            args = typing.get_args(annotation)
            if args and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
                nested[name] = args[0]
    template = build_message(cls)
    fill = {
        f.name: getattr(template, f.name)
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    return names, nested, fill


def _make(cls: type, values: dict[str, Any]) -> Any:
    """``build_message(cls, **values)`` for the controller's requests (nested structs as dicts
    in lists), through the cached plan: values for fields ``cls`` lacks are dropped, missing
    ones take their neutral value."""
    names, nested, fill = _message_plan(cls)
    kwargs = dict(fill)
    for name, value in values.items():
        if name not in names:
            continue
        entity = nested.get(name)
        if entity is not None and value.__class__ is not Encoded:  # (Encoded: written as is)
            if not (isinstance(value, tuple) and value and isinstance(value[0], entity)):
                value = tuple(_make(entity, item) for item in value)  # else: built already
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


_TOPIC_STATES_BUILT: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_TOPIC_STATES_KEPT = 4
"""Built ``topic_states`` of the last few LeaderAndIsr / UpdateMetadata requests, by content:
one event sends every broker the same partition states (a failover's UpdateMetadata of every
partition, and at RF = brokers its LeaderAndIsr too), so each is built once, not once per
broker (building them is most of a failover's CPU at thousands of partitions). The key holds
the states themselves (equal content, not identity), so a hit is always the same message."""


def _topic_states(
    request: LeaderAndIsrRequestData | UpdateMetadataRequestData,
    version: int,
    cls: type,
    build: Callable[[], list[dict[str, Any]]],
) -> tuple[Any, ...]:
    key = (cls, version, request.partition_states, tuple(sorted(request.topic_ids.items())))
    built = _TOPIC_STATES_BUILT.get(key)
    if built is None:
        _names, nested, _fill = _message_plan(cls)
        entity = nested.get("topic_states")
        if entity is None:  # a version without topic_states: _make drops the field
            return ()
        built = tuple(_make(entity, item) for item in build())
        if len(_TOPIC_STATES_BUILT) >= _TOPIC_STATES_KEPT:
            _TOPIC_STATES_BUILT.pop(next(iter(_TOPIC_STATES_BUILT)))
        _TOPIC_STATES_BUILT[key] = built
    return built


def to_message(
    request: ControllerRequest,
    version: int,
    listener_name: str | None = None,
    *,
    encoded: bool = False,
) -> Any:
    """The protocol message of ``request`` at ``version`` (``request_class(api_key, version)``).

    With ``encoded``, a LeaderAndIsr's or UpdateMetadata's ``topic_states`` are their wire
    bytes (``wire.shared_topic_states``: encoded once for every broker the same states go to),
    which only the encoder reads; what is sent is the same, byte for byte."""
    key = api_key_of(request)
    cls = request_class(key, version)
    topic_states = None
    if encoded and not isinstance(request, StopReplicaRequestData):
        topic_states = shared_topic_states(
            key, version, request.partition_states, request.topic_ids, _uuid_bytes
        )
    if isinstance(request, LeaderAndIsrRequestData):
        return _leader_and_isr_message(request, version, cls, listener_name, topic_states)
    if isinstance(request, UpdateMetadataRequestData):
        return _update_metadata_message(request, version, cls, topic_states)
    return _stop_replica_message(request, version, cls)


@functools.lru_cache(maxsize=1 << 17)
def _uuid_bytes(topic_id: str | None) -> bytes | None:
    """The topic id's 16 bytes (cached as ``_uuid`` is: once per topic and request)."""
    return topic_id_bytes(topic_id) if topic_id else None


def _build(cls: type, **values: Any) -> Any:
    return _make(cls, values)


def _leader_and_isr_message(
    request: LeaderAndIsrRequestData,
    version: int,
    cls: type,
    listener_name: str | None,
    encoded: Encoded | None = None,
) -> Any:
    def topic_states() -> list[dict[str, Any]]:
        topics: dict[str, list] = {}
        for s in request.partition_states:
            topics.setdefault(s.topic_name, []).append(
                {
                    "partition_index": s.partition_index,
                    "controller_epoch": s.controller_epoch,
                    "leader": s.leader,
                    "leader_epoch": s.leader_epoch,
                    "isr": list(s.isr),
                    "zk_version": s.partition_epoch,
                    "replicas": list(s.replicas),
                    "adding_replicas": list(s.adding_replicas),
                    "removing_replicas": list(s.removing_replicas),
                    "is_new": s.is_new,
                }
            )
        return [
            {"topic_name": t, "topic_id": _uuid(request.topic_ids.get(t)), "partition_states": ps}
            for t, ps in topics.items()
        ]

    leaders = []
    for b in request.live_leaders:
        endpoint = _endpoint_for(b, listener_name)
        leaders.append({"broker_id": b.id, "host_name": endpoint.host, "port": endpoint.port})
    return _build(
        cls,
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        type=0,
        topic_states=encoded or _topic_states(request, version, cls, topic_states),
        live_leaders=leaders,
    )


def _update_metadata_message(
    request: UpdateMetadataRequestData, version: int, cls: type, encoded: Encoded | None = None
) -> Any:
    def topic_states() -> list[dict[str, Any]]:
        topics: dict[str, list] = {}
        for s in request.partition_states:
            topics.setdefault(s.topic_name, []).append(
                {
                    "partition_index": s.partition_index,
                    "controller_epoch": s.controller_epoch,
                    "leader": s.leader,
                    "leader_epoch": s.leader_epoch,
                    "isr": list(s.isr),
                    "zk_version": s.zk_version,
                    "replicas": list(s.replicas),
                    "offline_replicas": list(s.offline_replicas),
                }
            )
        return [
            {"topic_name": t, "topic_id": _uuid(request.topic_ids.get(t)), "partition_states": ps}
            for t, ps in topics.items()
        ]

    return _build(
        cls,
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        topic_states=encoded or _topic_states(request, version, cls, topic_states),
        live_brokers=[
            {
                "id": b.id,
                "endpoints": [
                    {
                        "port": e.port,
                        "host": e.host,
                        "listener": e.listener_name,
                        "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0),
                    }
                    for e in b.endpoints
                ],
                "rack": b.rack,
            }
            for b in request.live_brokers
        ],
    )


def _stop_replica_message(request: Any, version: int, cls: type) -> Any:
    if not isinstance(request, StopReplicaRequestData):
        raise TypeError(f"not a controller request: {request!r}")
    if version < 3:
        # v0-v2 carry one delete flag for the whole request.
        by_topic: dict[str, list[int]] = {}
        for s in request.partition_states:
            by_topic.setdefault(s.topic_name, []).append(s.partition_index)
        return _build(
            cls,
            controller_id=request.controller_id,
            controller_epoch=request.controller_epoch,
            broker_epoch=request.broker_epoch,
            delete_partitions=request.deletes_partitions,
            topics=[{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
        )
    topics: dict[str, list] = {}
    for s in request.partition_states:
        topics.setdefault(s.topic_name, []).append(
            {
                "partition_index": s.partition_index,
                "leader_epoch": s.leader_epoch,
                "delete_partition": s.delete_partition,
            }
        )
    return _build(
        cls,
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        topic_states=[{"topic_name": t, "partition_states": ps} for t, ps in topics.items()],
    )


def response_errors(
    request: ControllerRequest, response: Any
) -> tuple[int, dict[TopicPartition, int]]:
    """(top-level error code, per-partition error codes) of a LeaderAndIsr or StopReplica
    response, whatever its version."""
    error_code = int(getattr(response, "error_code", ErrorCode.NONE))
    errors: dict[TopicPartition, int] = {}
    if isinstance(request, LeaderAndIsrRequestData) and hasattr(response, "topics"):
        names = {_uuid(tid): name for name, tid in request.topic_ids.items()}
        requested = {s.topic_partition for s in request.partition_states}
        for topic in response.topics:
            name = names.get(topic.topic_id)
            for p in topic.partition_errors:
                if name is not None:
                    errors[TopicPartition(name, p.partition_index)] = int(p.error_code)
        # Topics sent without an id come back under the zero/None id: match by partition.
        for tp in requested - set(errors):
            errors.setdefault(tp, error_code)
        return error_code, errors
    for p in getattr(response, "partition_errors", ()):
        errors[TopicPartition(p.topic_name, p.partition_index)] = int(p.error_code)
    return error_code, errors


def leader_and_isr_errors(
    request: LeaderAndIsrRequestData, response: Any
) -> Mapping[TopicPartition, int]:
    """The per-partition error codes of a LeaderAndIsr response, every partition the request
    named included (``response_errors``'s second item). A v5+ response in which the request and
    every partition answered NONE, the usual answer after a start or a failover, gives an
    ``AnsweredNone`` instead of a dict: building the dict cost 30-80 ms per 10,000 partitions
    (a topic id's UUID and a TopicPartition each) on the controller, between the LeaderAndIsr
    answered and the UpdateMetadata sent after it."""
    topics = getattr(response, "topics", None)
    if topics is not None and not getattr(response, "error_code", ErrorCode.NONE):
        if not any(p.error_code for topic in topics for p in topic.partition_errors):
            return AnsweredNone(request.partition_states)
    return response_errors(request, response)[1]


class AnsweredNone(Mapping[TopicPartition, int]):
    """Every partition of ``states`` mapped to NONE, the partitions listed only when asked.
    A request names each partition once (the batch builds its states from a dict by
    partition), so the count and the values need no list."""

    __slots__ = ("_partitions", "_states")

    def __init__(self, states: tuple[Any, ...]) -> None:
        self._states = states
        self._partitions: frozenset[TopicPartition] | None = None

    def _listed(self) -> frozenset[TopicPartition]:
        if self._partitions is None:
            self._partitions = frozenset(s.topic_partition for s in self._states)
        return self._partitions

    def __getitem__(self, tp: TopicPartition) -> int:
        if tp in self._listed():
            return int(ErrorCode.NONE)
        raise KeyError(tp)

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._listed())

    def __len__(self) -> int:
        return len(self._states)

    def values(self) -> ValuesView[int]:
        return _Nones(self)


class _Nones(ValuesView[int]):
    """An ``AnsweredNone``'s values: NONE once per partition, without a lookup each."""

    def __iter__(self) -> Iterator[int]:
        none = int(ErrorCode.NONE)
        return (none for _ in range(len(self._mapping)))  # type: ignore[attr-defined]

    def __contains__(self, value: object) -> bool:
        return value == ErrorCode.NONE and len(self._mapping) > 0  # type: ignore[attr-defined]


# -- transports ---------------------------------------------------------------------------------


class KafkaConnectionTransport:
    """A ``KafkaConnection`` to one broker's listener, reopened after a failure."""

    def __init__(
        self,
        broker: Broker,
        *,
        listener_name: str | None = None,
        client_id: str = "controller",
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self.broker = broker
        self.endpoint = _endpoint_for(broker, listener_name)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self._connection: Any = None

    async def send(self, api_key: int, build: Callable[[int], Any]) -> Any:
        from kafkalite.client.connection import KafkaConnection

        if self._connection is None or not self._connection.connected:
            if self._connection is not None:
                await self._connection.close()
            self._connection = KafkaConnection(
                self.endpoint.host,
                self.endpoint.port,
                client_id=self.client_id,
                request_timeout=self.request_timeout,
                connect_timeout=self.connect_timeout,
                node_id=self.broker.id,
            )
            await self._connection.connect()
        return await self._connection.send(api_key, build)

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()


# -- the manager --------------------------------------------------------------------------------


@dataclass
class _BrokerChannel:
    broker: Broker
    queue: asyncio.Queue[tuple[ControllerRequest, asyncio.Future[Any], float]]
    transport: BrokerTransport
    task: asyncio.Task[None] | None = None
    in_flight: asyncio.Future[Any] | None = None


class ControllerChannelManager:
    """See the module docstring. Used only from the controller's event task."""

    def __init__(
        self,
        controller_id: int,
        transport_factory: TransportFactory,
        on_response: ResponseCallback,
        *,
        listener_name: str | None = None,
        retry_backoff: float = 0.1,
    ) -> None:
        self.controller_id = controller_id
        self.transport_factory = transport_factory
        self.on_response = on_response
        self.listener_name = listener_name
        self.retry_backoff = retry_backoff
        self._channels: dict[int, _BrokerChannel] = {}
        self.dropped = 0

    @property
    def broker_ids(self) -> set[int]:
        return set(self._channels)

    def startup(self, brokers: list[Broker]) -> None:
        for broker in brokers:
            self.add_broker(broker)

    async def shutdown(self) -> None:
        for broker_id in list(self._channels):
            await self.remove_broker(broker_id)

    def add_broker(self, broker: Broker) -> None:
        if broker.id in self._channels:
            return
        channel = _BrokerChannel(broker, asyncio.Queue(), self.transport_factory(broker))
        channel.task = asyncio.get_running_loop().create_task(
            self._send_loop(channel), name=f"controller-to-broker-{broker.id}-send-thread"
        )
        self._channels[broker.id] = channel

    async def remove_broker(self, broker_id: int) -> None:
        channel = self._channels.pop(broker_id, None)
        if channel is None:
            return
        task, channel.task = channel.task, None
        if task is not None:
            task.cancel()
            # asyncio.wait, not await: our own cancellation must not be swallowed
            await asyncio.wait([task])
            # The cancelled task keeps its CancelledError, whose traceback holds the send
            # loop's frame: with the channel no longer naming the task that is not a cycle,
            # and the last request and response it held go by reference counting (a
            # frozen cycle would keep them for the process's life; gc_freeze.py).
        _resolve(channel.in_flight, None)
        while not channel.queue.empty():
            _resolve(channel.queue.get_nowait()[1], None)
        with contextlib.suppress(Exception):
            await channel.transport.close()

    def send_request(self, request: ControllerRequest) -> asyncio.Future[Any]:
        """Queue ``request`` for its broker. The future returned is done once the broker
        answered (the response), or with None once the request is given up (no channel to
        that broker, or its channel removed): callers may wait for a decision to be known
        to the brokers, as a controlled shutdown does before answering."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        channel = self._channels.get(request.broker_id)
        if channel is None:
            # Kafka drops requests to brokers it has no channel for (dead or not yet added).
            self.dropped += 1
            log.debug(
                "request to unknown broker dropped",
                broker=request.broker_id,
                request=type(request).__name__,
            )
            future.set_result(None)
            return future
        channel.queue.put_nowait((request, future, time.monotonic()))
        return future

    def queued(self, broker_id: int) -> int:
        channel = self._channels.get(broker_id)
        return channel.queue.qsize() if channel is not None else 0

    async def _send_loop(self, channel: _BrokerChannel) -> None:
        broker_id = channel.broker.id
        while True:
            request, future, queued_at = await channel.queue.get()
            sent_at = time.monotonic()
            channel.in_flight = future
            api_key = api_key_of(request)
            attempts = 0
            while True:
                try:
                    response = await channel.transport.send(
                        api_key,
                        functools.partial(
                            to_message, request, listener_name=self.listener_name, encoded=True
                        ),
                    )
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as error:  # socket/protocol failures at the I/O boundary: retry
                    attempts += 1
                    # Once per request at warning level: a broker that died but whose
                    # registration has not expired yet would otherwise flood the log.
                    (log.warning if attempts == 1 else log.debug)(
                        "controller request failed, retrying",
                        broker=broker_id,
                        api=api_key.name,
                        attempt=attempts,
                        error=repr(error),
                    )
                    with contextlib.suppress(Exception):
                        await channel.transport.close()
                    await asyncio.sleep(self.retry_backoff)
            answered_at = time.monotonic()
            partitions = len(getattr(request, "partition_states", ()))
            # A bulk or slow request is logged with its stamps (``time.monotonic``: the host's
            # clock, so a benchmark lines them up with the controller's events and its clients).
            (
                log.info
                if partitions >= SLOW_REQUEST_PARTITIONS
                or answered_at - queued_at > SLOW_REQUEST_SECONDS
                else log.debug
            )(
                "controller request answered",
                broker=broker_id,
                api=api_key.name,
                partitions=partitions,
                queued_at=round(queued_at, 4),
                sent_at=round(sent_at, 4),
                answered_at=round(answered_at, 4),
            )
            self.on_response(broker_id, request, response)
            channel.in_flight = None
            _resolve(future, response)


def _resolve(future: asyncio.Future[Any] | None, value: Any) -> None:
    if future is not None and not future.done():
        future.set_result(value)
