"""Transaction markers: writing them into partitions, and sending them to partition leaders
(Kafka's WriteTxnMarkers handling in KafkaApis, and TransactionMarkerChannelManager).

``append_txn_markers`` is what a partition leader does with a WriteTxnMarkers request: each
marker becomes a control batch (one COMMIT or ABORT record, with the coordinator epoch) appended
as leader with ``AppendOrigin.COORDINATOR`` and acks=all to each of its partitions. The producer
state checks the producer epoch (an older one is INVALID_PRODUCER_EPOCH); the append ends the
producer's transaction in the partition, moves its last stable offset and, for an abort, adds
the transaction to the ``.txnindex``. Markers on ``__consumer_offsets`` partitions also tell the
group coordinator to make the transaction's offsets visible (commit) or drop them (abort).

``TransactionMarkerChannelManager`` is the coordinator's side: it groups a transaction's
partitions by leader and sends one WriteTxnMarkers per leader (the local broker's directly,
the others over the inter-broker listener), retrying what failed with a retriable error after a
short back-off, dropping partitions whose topic is gone, until every marker is written or the
coordinator lost the transaction's partition (``still_coordinator()``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog

from kafkalite.broker.producer_state import AppendOrigin
from kafkalite.client.connection import KafkaConnection
from kafkalite.client.errors import KafkaConnectionError, KafkaTimeoutError
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.records import build_end_txn_marker_batch
from kafkalite.protocol.types import TopicPartition

log = structlog.get_logger(__name__)

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
RETRY_BACKOFF_S = 0.1


@dataclass(frozen=True, slots=True)
class TxnMarker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


OffsetsTxnCompletion = Callable[[int, list[int], bool], None]
"""(producer_id, __consumer_offsets partitions, commit) -> None"""


async def append_txn_markers(
    replica_manager,
    markers: Iterable[TxnMarker],
    timeout_ms: int,
    on_offsets_txn_complete: OffsetsTxnCompletion | None = None,
) -> list[dict[TopicPartition, ErrorCode]]:
    """Write each marker to its partitions led here; one result map per marker."""
    results = []
    for marker in markers:
        batch = build_end_txn_marker_batch(
            producer_id=marker.producer_id,
            producer_epoch=marker.producer_epoch,
            commit=marker.commit,
            coordinator_epoch=marker.coordinator_epoch,
        )
        entries = {tp: bytearray(batch) for tp in marker.partitions}
        try:
            appended = await replica_manager.append_records(
                timeout_ms,
                -1,
                entries,
                origin=AppendOrigin.COORDINATOR,
                internal_topics_allowed=True,
            )
            errors = {tp: appended[tp].error_code for tp in marker.partitions}
        except KafkaError as e:
            errors = dict.fromkeys(marker.partitions, e.error_code)
        offsets_partitions = [
            tp.partition
            for tp, error in errors.items()
            if tp.topic == GROUP_METADATA_TOPIC_NAME
            and error in (ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        ]
        if offsets_partitions and on_offsets_txn_complete is not None:
            on_offsets_txn_complete(marker.producer_id, offsets_partitions, marker.commit)
        results.append(errors)
    return results


class TransactionMarkerChannelManager:
    def __init__(
        self,
        broker_id: int,
        metadata_cache,
        listener_name: str,
        write_locally: Callable,
        request_timeout_ms: int = 30_000,
    ) -> None:
        """``write_locally(markers) -> awaitable list of per-partition error maps`` writes to
        the partitions this broker leads (``append_txn_markers`` bound to its services)."""
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.listener_name = listener_name
        self.write_locally = write_locally
        self.request_timeout_ms = request_timeout_ms
        self._connections: dict[int, KafkaConnection] = {}

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()

    def _leader_of(self, tp: TopicPartition) -> int | None:
        """The leader's id; -1 while it has none; None when the topic is gone."""
        if not self.metadata_cache.contains_topic(tp.topic):
            return None
        info = self.metadata_cache.get_partition_info(tp.topic, tp.partition)
        if info is None:
            return None
        return info.leader

    async def write_markers(
        self,
        coordinator_epoch: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        partitions: Iterable[TopicPartition],
        still_coordinator: Callable[[], bool],
    ) -> bool:
        pending = set(partitions)
        while pending:
            if not still_coordinator():
                return False
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(pending):
                leader = self._leader_of(tp)
                if leader is None:
                    log.info("dropping marker for a deleted partition", partition=str(tp))
                    pending.discard(tp)
                elif leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            sends = [
                self._send(
                    leader,
                    TxnMarker(producer_id, producer_epoch, commit, coordinator_epoch, tuple(tps)),
                )
                for leader, tps in by_leader.items()
            ]
            for errors in await asyncio.gather(*sends):
                for tp, error in errors.items():
                    if error in (ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
                        pending.discard(tp)
                    elif error in (
                        ErrorCode.INVALID_PRODUCER_EPOCH,
                        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                    ):
                        # a newer epoch already ended the producer's transaction there
                        log.warning(
                            "marker refused", partition=str(tp), error=error.name, pid=producer_id
                        )
                        pending.discard(tp)
            if pending:
                await asyncio.sleep(RETRY_BACKOFF_S)
        return True

    async def _send(self, leader: int, marker: TxnMarker) -> dict[TopicPartition, ErrorCode]:
        if leader == self.broker_id:
            return (await self.write_locally([marker]))[0]
        try:
            connection = await self._connection(leader)
            response = await connection.send(
                ApiKey.WRITE_TXN_MARKERS,
                {
                    "markers": [
                        {
                            "producer_id": marker.producer_id,
                            "producer_epoch": marker.producer_epoch,
                            "transaction_result": marker.commit,
                            "coordinator_epoch": marker.coordinator_epoch,
                            "topics": [
                                {"name": topic, "partition_indexes": parts}
                                for topic, parts in _by_topic(marker.partitions).items()
                            ],
                        }
                    ]
                },
            )
        except (KafkaConnectionError, KafkaTimeoutError, KafkaError, OSError) as e:
            self._drop(leader)
            log.info("sending markers failed", broker=leader, error=str(e))
            return dict.fromkeys(marker.partitions, ErrorCode.NETWORK_EXCEPTION)
        errors: dict[TopicPartition, ErrorCode] = {}
        for m in response.markers:
            for topic in m.topics:
                for p in topic.partitions:
                    errors[TopicPartition(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        return {tp: errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in marker.partitions}

    async def _connection(self, broker_id: int) -> KafkaConnection:
        connection = self._connections.get(broker_id)
        if connection is not None and connection.connected:
            return connection
        endpoint = self.metadata_cache.get_alive_broker_node(broker_id, self.listener_name)
        if endpoint is None:
            raise KafkaConnectionError(f"broker {broker_id} has no live endpoint")
        connection = KafkaConnection(
            endpoint.host,
            endpoint.port,
            client_id=f"broker-{self.broker_id}-txn-markers",
            request_timeout=self.request_timeout_ms / 1000,
            node_id=broker_id,
        )
        await connection.connect()
        self._connections[broker_id] = connection
        return connection

    def _drop(self, broker_id: int) -> None:
        connection = self._connections.pop(broker_id, None)
        if connection is not None:
            asyncio.get_running_loop().create_task(connection.close())


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out
