"""Settings of the transaction coordinator, with Kafka's broker property names and defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    transactional_id_expiration_ms: int = 604_800_000  # 7 days
    transaction_max_timeout_ms: int = 900_000  # 15 minutes
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_segment_bytes: int = 100 * 1024 * 1024
    transaction_state_log_load_buffer_size: int = 5 * 1024 * 1024
    transaction_state_log_min_isr: int = 2
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    request_timeout_ms: int = 30_000

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        """``__transaction_state``'s topic configuration (compacted, like Kafka). Its
        ``min.insync.replicas`` is ``transaction.state.log.min.isr`` capped at the replication
        factor the topic gets, so that a single broker works out of the box (as the offsets
        topic does)."""
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.transaction_state_log_segment_bytes),
            "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(
                max(1, min(self.transaction_state_log_min_isr, replication_factor))
            ),
        }


def from_broker_config(config: object) -> TransactionConfig:
    """Build from an object with attributes named after the properties (``BrokerConfig``)."""
    values = {}
    for f in fields(TransactionConfig):
        if hasattr(config, f.name):
            values[f.name] = int(getattr(config, f.name))
    return TransactionConfig(**values)
