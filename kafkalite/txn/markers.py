"""Transaction markers: writing them into partitions, and sending them to partition leaders
(Kafka's WriteTxnMarkers handling in KafkaApis, and TransactionMarkerChannelManager).

``append_txn_markers`` is what a partition leader does with a WriteTxnMarkers request: each
marker becomes a control batch (one COMMIT or ABORT record, with the coordinator epoch) appended
as leader with ``AppendOrigin.COORDINATOR`` and acks=all to each of its partitions. The producer
state checks the producer epoch (an older one is INVALID_PRODUCER_EPOCH); the append ends the
producer's transaction in the partition, moves its last stable offset and, for an abort, adds
the transaction to the ``.txnindex``. Markers on ``__consumer_offsets`` partitions also tell the
group coordinator to make the transaction's offsets visible (commit) or drop them (abort).

``TransactionMarkerChannelManager`` is the coordinator's side, as Kafka's marker channel: one
queue per destination broker, drained by completion, not by a timer. ``write_markers`` (one
transaction) groups its partitions by leader and queues one marker per other leader; a broker's
drainer sends everything queued for it as ONE WriteTxnMarkers, keeps one request in flight per
broker, and sends what queued up meanwhile as the next request the moment the answer arrives.
The coordinator's own partitions are written at once (``write_locally``: no request to batch,
and concurrent local appends keep their order). So a transaction spanning partitions led by two
brokers costs one request to each, and concurrent transactions share requests. Markers of one
producer id go in separate requests (the response is keyed by producer id, as Kafka's).
``write_markers`` retries what failed with a retriable error after a short back-off, drops
partitions whose topic is gone, and ends when every marker is written or the coordinator lost
the transaction's partition (``still_coordinator()``).
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
    """Write each marker to its partitions led here; one result map per marker, in order.

    All the markers' appends are started before any is waited for (each is in the log before
    its ``append_records`` first suspends, so they keep the request's order); their acks=all
    replication is waited for together."""
    markers = list(markers)
    if len(markers) == 1:  # the common case, without a task per marker
        return [
            await _append_marker(replica_manager, markers[0], timeout_ms, on_offsets_txn_complete)
        ]
    return list(
        await asyncio.gather(
            *(
                _append_marker(replica_manager, m, timeout_ms, on_offsets_txn_complete)
                for m in markers
            )
        )
    )


async def _append_marker(
    replica_manager,
    marker: TxnMarker,
    timeout_ms: int,
    on_offsets_txn_complete: OffsetsTxnCompletion | None,
) -> dict[TopicPartition, ErrorCode]:
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
    return errors


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
        # per destination broker: markers waiting for its next request, and its drainer
        self._queues: dict[int, list[tuple[TxnMarker, asyncio.Future]]] = {}
        self._drainers: dict[int, asyncio.Task] = {}
        self.requests_sent: dict[int, int] = {}  # per destination broker (local included)

    async def close(self) -> None:
        drainers = list(self._drainers.values())
        for task in drainers:
            task.cancel()
        if drainers:
            await asyncio.gather(*drainers, return_exceptions=True)
        for queue in self._queues.values():
            for _marker, future in queue:
                future.cancel()
        self._queues.clear()
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
            writes = [
                self._write(
                    leader,
                    TxnMarker(producer_id, producer_epoch, commit, coordinator_epoch, tuple(tps)),
                )
                for leader, tps in by_leader.items()
            ]
            for errors in await asyncio.gather(*writes):
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

    # -- the per-broker queues ------------------------------------------------------------------

    async def _write(self, broker_id: int, marker: TxnMarker) -> dict[TopicPartition, ErrorCode]:
        """This broker's partitions are written at once (no request, so nothing to batch:
        concurrent local appends keep their order); another broker's go through its queue."""
        if broker_id == self.broker_id:
            self.requests_sent[broker_id] = self.requests_sent.get(broker_id, 0) + 1
            return (await self.write_locally([marker]))[0]
        return await self._enqueue(broker_id, marker)

    def _enqueue(self, broker_id: int, marker: TxnMarker) -> asyncio.Future:
        """Queue ``marker`` for ``broker_id``'s next request; the future gets its error map."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._queues.setdefault(broker_id, []).append((marker, future))
        if broker_id not in self._drainers:
            task = asyncio.get_running_loop().create_task(self._drain(broker_id))
            self._drainers[broker_id] = task
        return future

    async def _drain(self, broker_id: int) -> None:
        """Send what is queued for ``broker_id``, one request at a time, until nothing is."""
        batch: list[tuple[TxnMarker, asyncio.Future]] = []
        try:
            while True:
                batch = self._take(broker_id)
                if not batch:
                    return
                markers = [marker for marker, _ in batch]
                try:
                    results = await self._send(broker_id, markers)
                except Exception:  # a bug: fail these markers (retried), keep the channel
                    log.exception("writing markers failed", broker=broker_id)
                    results = [
                        dict.fromkeys(m.partitions, ErrorCode.UNKNOWN_SERVER_ERROR) for m in markers
                    ]
                for (_marker, future), errors in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(errors)
        except asyncio.CancelledError:
            for _marker, future in batch:
                future.cancel()
            raise
        finally:
            # no await between the empty queue and here: nothing was queued unseen
            if self._drainers.get(broker_id) is asyncio.current_task():
                del self._drainers[broker_id]

    def _take(self, broker_id: int) -> list[tuple[TxnMarker, asyncio.Future]]:
        """Everything queued for the broker, except a second marker of one producer id (the
        response is keyed by producer id): that one waits for the next request."""
        queue = self._queues.pop(broker_id, [])
        batch, later, producers = [], [], set()
        for marker, future in queue:
            if future.done():  # its writer gave up (cancelled)
                continue
            if marker.producer_id in producers:
                later.append((marker, future))
            else:
                producers.add(marker.producer_id)
                batch.append((marker, future))
        if later:
            self._queues[broker_id] = later
        return batch

    async def _send(
        self, broker_id: int, markers: list[TxnMarker]
    ) -> list[dict[TopicPartition, ErrorCode]]:
        """One WriteTxnMarkers for ``markers``; an error map per marker."""
        self.requests_sent[broker_id] = self.requests_sent.get(broker_id, 0) + 1
        try:
            connection = await self._connection(broker_id)
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
                        for marker in markers
                    ]
                },
            )
        except (KafkaConnectionError, KafkaTimeoutError, KafkaError, OSError) as e:
            self._drop(broker_id)
            log.info("sending markers failed", broker=broker_id, error=str(e))
            return [dict.fromkeys(m.partitions, ErrorCode.NETWORK_EXCEPTION) for m in markers]
        by_producer: dict[int, dict[TopicPartition, ErrorCode]] = {}
        for m in response.markers:
            errors = by_producer.setdefault(m.producer_id, {})
            for topic in m.topics:
                for p in topic.partitions:
                    errors[TopicPartition(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        return [
            {
                tp: by_producer.get(marker.producer_id, {}).get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                for tp in marker.partitions
            }
            for marker in markers
        ]

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
