"""Fixtures for the controller's I/O shell: an in-memory embedded store, broker registrations,
and fake broker transports that answer like kafkalite brokers and check persist-before-announce."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kafkalite.client.messages import build_message
from kafkalite.controller.kafka_controller import KafkaController
from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.protocol.api import CODEC_VERSIONS, ApiKey, response_class
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.frames import decode_request, encode_request, parse_request_header
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk import client as zk_data
from kafkalite.zk import data as paths
from kafkalite.zk.types import Broker


async def eventually(predicate, timeout: float = 10.0, message: str = "condition") -> None:
    """Wait until ``predicate()`` (sync or async) is true, failing after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        await asyncio.sleep(0.005)  # polling interval of the condition, not synchronisation


def round_trip(api_key: int, version: int, message: Any) -> Any:
    """Encode ``message`` as a request frame and decode it back, as the broker would."""
    frame = encode_request(api_key, version, 7, "controller", message)
    header, offset = parse_request_header(frame[4:])
    return decode_request(header, frame[4:], offset)


@dataclass
class Sent:
    broker_id: int
    api_key: ApiKey
    version: int
    message: Any


@dataclass
class FakeCluster:
    """Answers every controller request as a healthy broker would; records what was sent."""

    store: EmbeddedStore
    reader: Any = None
    sent: list[Sent] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    fail_next: dict[int, int] = field(default_factory=dict)
    stop_replica_error: int = 0
    hold: dict[int, asyncio.Event] = field(default_factory=dict)
    # awaited with (broker id, api key, message) before a request is answered: holds chosen ones
    gate: Any = None
    # partitions a broker answers KAFKA_STORAGE_ERROR for (their log dir failed)
    offline: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def transport_factory(self, broker: Broker) -> FakeTransport:
        return FakeTransport(self, broker)

    def of(self, api_key: ApiKey, broker_id: int | None = None) -> list[Sent]:
        return [
            s
            for s in self.sent
            if s.api_key == api_key and (broker_id is None or s.broker_id == broker_id)
        ]

    def leader_and_isr_partitions(
        self, broker_id: int | None = None
    ) -> list[tuple[int, TopicPartition, Any]]:
        out = []
        for s in self.of(ApiKey.LEADER_AND_ISR, broker_id):
            for topic in s.message.topic_states:
                for p in topic.partition_states:
                    out.append(
                        (s.broker_id, TopicPartition(topic.topic_name, p.partition_index), p)
                    )
        return out


class FakeTransport:
    def __init__(self, cluster: FakeCluster, broker: Broker) -> None:
        self.cluster = cluster
        self.broker = broker
        self.closed = 0

    async def send(self, api_key: int, build) -> Any:
        cluster = self.cluster
        if cluster.fail_next.get(self.broker.id, 0) > 0:
            cluster.fail_next[self.broker.id] -= 1
            raise ConnectionError("injected failure")
        hold = cluster.hold.get(self.broker.id)
        if hold is not None:
            await hold.wait()
        api_key = ApiKey(api_key)
        version = CODEC_VERSIONS[api_key][1]
        message = round_trip(api_key, version, build(version))
        if cluster.gate is not None:
            await cluster.gate(self.broker.id, api_key, message)
        cluster.sent.append(Sent(self.broker.id, api_key, version, message))
        if api_key == ApiKey.LEADER_AND_ISR:
            await self._check_persisted(message)
            return build_message(
                response_class(api_key, version),
                error_code=ErrorCode.NONE,
                topics=[
                    {
                        "topic_id": t.topic_id,
                        "partition_errors": [
                            {
                                "partition_index": p.partition_index,
                                "error_code": ErrorCode.KAFKA_STORAGE_ERROR
                                if TopicPartition(t.topic_name, p.partition_index)
                                in cluster.offline.get(self.broker.id, ())
                                else ErrorCode.NONE,
                            }
                            for p in t.partition_states
                        ],
                    }
                    for t in message.topic_states
                ],
            )
        if api_key == ApiKey.STOP_REPLICA:
            return build_message(
                response_class(api_key, version),
                error_code=ErrorCode.NONE,
                partition_errors=[
                    {
                        "topic_name": t.topic_name,
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.of(cluster.stop_replica_error),
                    }
                    for t in message.topic_states
                    for p in t.partition_states
                ],
            )
        return build_message(response_class(api_key, version), error_code=ErrorCode.NONE)

    async def _check_persisted(self, message: Any) -> None:
        """Persist before announce: the store must already hold what LeaderAndIsr says."""
        reader = self.cluster.reader
        for topic in message.topic_states:
            for p in topic.partition_states:
                tp = TopicPartition(topic.topic_name, p.partition_index)
                stored = await zk_data.get_partition_state(reader, tp)
                if stored is None:
                    self.cluster.violations.append(f"{tp}: announced before its state node existed")
                elif (stored.leader_and_isr.leader_epoch, stored.leader_and_isr.zk_version) < (
                    p.leader_epoch,
                    p.zk_version,
                ):
                    self.cluster.violations.append(
                        f"{tp}: announced epoch {p.leader_epoch} not yet stored"
                    )

    async def close(self) -> None:
        self.closed += 1


async def register_broker(store: EmbeddedStore, broker_id: int, rack: str | None = None):
    """A broker's session with its ``/brokers/ids/<id>`` registration."""
    session = await store.open_session()
    await session.ensure_path(paths.BROKER_IDS)
    info = paths.BrokerInfo(broker_id, (paths.EndPoint("127.0.0.1", 19092 + broker_id),), rack=rack)
    await session.create(paths.broker_path(broker_id), paths.encode_broker(info), ephemeral=True)
    return session


@dataclass
class Node:
    broker_id: int
    session: Any
    controller: KafkaController


async def start_node(store: EmbeddedStore, cluster: FakeCluster, broker_id: int, **kwargs) -> Node:
    session = await register_broker(store, broker_id)
    controller = KafkaController(
        broker_id,
        session,
        kwargs.pop("config", None),
        transport_factory=cluster.transport_factory,
        retry_backoff=0.001,
        **kwargs,
    )
    await controller.startup()
    return Node(broker_id, session, controller)


async def settle(*controllers: KafkaController) -> None:
    """Let every queued controller event be processed (twice: events enqueue events)."""
    for _ in range(3):
        for c in controllers:
            await c.event_manager.wait_idle()
