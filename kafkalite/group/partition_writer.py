"""``GroupLogWriter`` on the broker's ReplicaManager (Kafka's CoordinatorPartitionWriter/Loader).

Appends: the coordinator's records become one uncompressed (or ``offsets.topic.compression.codec``)
v2 batch, appended to ``__consumer_offsets-<p>`` as leader with ``AppendOrigin.COORDINATOR``
(internal topic allowed), ``offsets.commit.required.acks`` (default -1: wait for the ISR) and
``offsets.commit.timeout.ms``. ``ReplicaManager.append_records`` puts the batch in the log before
it first suspends, so appends reach the log in call order.

Reads (loading a partition after becoming its leader): batch by batch from the log start up to
the log end offset seen when the load began, ``offsets.load.buffer.size`` bytes at a time.
Records of transactional batches (TxnOffsetCommit) come as ``TxnLoadRecord`` and transaction
markers as ``TxnLoadMarker``, so the core holds the former until the latter. Records written
after the load started are the coordinator's own and are already in its memory.

Transactional appends (TxnOffsetCommit) carry the producer's id and epoch and the
transactional flag, no sequence: the partition's producer state fences an older epoch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from kafkalite.broker.clock import SYSTEM_TIME, Time
from kafkalite.broker.internal_log import iter_leader_batches
from kafkalite.broker.producer_state import AppendOrigin
from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME, OffsetConfig
from kafkalite.group.coordinator import TxnLoadMarker, TxnLoadRecord
from kafkalite.protocol.errors import CorruptRecordError, ErrorCode
from kafkalite.protocol.records import (
    ControlRecordType,
    Record,
    build_batch,
    parse_end_txn_marker,
)
from kafkalite.protocol.types import TopicPartition


class ReplicaManagerLogWriter:
    def __init__(
        self, replica_manager, offset_config: OffsetConfig | None = None, time: Time = SYSTEM_TIME
    ) -> None:
        self.replica_manager = replica_manager
        self.offset_config = offset_config or OffsetConfig()
        self.time = time

    @staticmethod
    def topic_partition(partition: int) -> TopicPartition:
        return TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)

    async def append(
        self,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> tuple[ErrorCode, int | None]:
        """A producer id makes the batch transactional (TxnOffsetCommit): the partition's
        producer state checks its epoch and the marker ends it."""
        tp = self.topic_partition(partition)
        batch = build_batch(
            [Record(offset_delta=i, key=k, value=v) for i, (k, v) in enumerate(records)],
            compression=self.offset_config.offsets_topic_compression_codec,
            base_timestamp=self.time.milliseconds(),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            is_transactional=producer_id >= 0,
        )
        results = await self.replica_manager.append_records(
            self.offset_config.offsets_commit_timeout_ms,
            self.offset_config.offsets_commit_required_acks,
            {tp: bytearray(batch)},
            origin=AppendOrigin.COORDINATOR,
            internal_topics_allowed=True,
        )
        result = results[tp]
        if result.error_code is not ErrorCode.NONE:
            return result.error_code, None
        return ErrorCode.NONE, result.base_offset

    async def read(
        self, partition: int
    ) -> AsyncIterator[tuple[int, bytes, bytes | None] | TxnLoadRecord | TxnLoadMarker]:
        """Records in offset order: (offset, key, value); a transactional batch's records as
        ``TxnLoadRecord`` and a transaction marker as ``TxnLoadMarker``."""
        batches = iter_leader_batches(
            self.replica_manager,
            self.topic_partition(partition),
            self.offset_config.offsets_load_buffer_size,
        )
        for header, batch_records in batches:
            if header.is_control:
                if batch_records:
                    try:
                        marker, _ = parse_end_txn_marker(batch_records[0])
                    except CorruptRecordError:
                        continue
                    yield TxnLoadMarker(
                        header.base_offset,
                        header.producer_id,
                        marker is ControlRecordType.COMMIT,
                    )
                continue
            for record in batch_records:
                record_offset = header.base_offset + record.offset_delta
                if record.key is None:
                    continue  # not a coordinator record
                if header.is_transactional:
                    yield TxnLoadRecord(record_offset, record.key, record.value, header.producer_id)
                else:
                    yield record_offset, record.key, record.value
