"""``TxnLogWriter`` on the broker's ReplicaManager: ``__transaction_state`` appends and reads.

Appends: one record per state change, an uncompressed v2 batch appended as leader with
``AppendOrigin.COORDINATOR`` (internal topic allowed) and acks=all, within
``request.timeout.ms``; ``append_records`` puts it in the log before it first suspends, so
writes keep the order of the calls. Reads (loading a partition after becoming its leader): batch
by batch from the log start to the log end seen when the load began,
``transaction.state.log.load.buffer.size`` bytes at a time, control batches skipped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from kafkalite.broker.clock import SYSTEM_TIME, Time
from kafkalite.broker.internal_log import iter_leader_batches
from kafkalite.broker.producer_state import AppendOrigin
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import Record, build_batch
from kafkalite.protocol.types import TopicPartition
from kafkalite.txn.config import TRANSACTION_STATE_TOPIC_NAME, TransactionConfig


class ReplicaManagerTxnLogWriter:
    def __init__(
        self, replica_manager, config: TransactionConfig | None = None, time: Time = SYSTEM_TIME
    ) -> None:
        self.replica_manager = replica_manager
        self.config = config or TransactionConfig()
        self.time = time

    @staticmethod
    def topic_partition(partition: int) -> TopicPartition:
        return TopicPartition(TRANSACTION_STATE_TOPIC_NAME, partition)

    async def append(self, partition: int, key: bytes, value: bytes | None) -> ErrorCode:
        tp = self.topic_partition(partition)
        batch = build_batch([Record(key=key, value=value)], base_timestamp=self.time.milliseconds())
        results = await self.replica_manager.append_records(
            self.config.request_timeout_ms,
            -1,
            {tp: bytearray(batch)},
            origin=AppendOrigin.COORDINATOR,
            internal_topics_allowed=True,
        )
        return results[tp].error_code

    async def read(self, partition: int) -> AsyncIterator[tuple[int, bytes, bytes | None]]:
        batches = iter_leader_batches(
            self.replica_manager,
            self.topic_partition(partition),
            self.config.transaction_state_log_load_buffer_size,
        )
        for header, batch_records in batches:
            if header.is_control:
                continue
            for record in batch_records:
                if record.key is not None:
                    yield header.base_offset + record.offset_delta, record.key, record.value
