"""The transaction coordinator (Kafka's ``kafka.coordinator.transaction``), layer 2.

- ``records``: the ``__transaction_state`` key and value formats, ``partition_for``;
- ``metadata``: a transactional id's state machine (sans I/O);
- ``coordinator``: ``TransactionCoordinator``, the requests and housekeeping around it;
- ``log_writer``: its ``__transaction_state`` reads and writes on the ReplicaManager;
- ``markers``: writing COMMIT/ABORT markers into partitions, and sending them to leaders.

May use ``kafkalite.broker`` (and layers 0-1); ``broker`` and ``group`` never import it.
"""

from kafkalite.txn.config import TRANSACTION_STATE_TOPIC_NAME, TransactionConfig
from kafkalite.txn.coordinator import TransactionCoordinator
from kafkalite.txn.log_writer import ReplicaManagerTxnLogWriter
from kafkalite.txn.markers import TransactionMarkerChannelManager, TxnMarker, append_txn_markers

__all__ = [
    "TRANSACTION_STATE_TOPIC_NAME",
    "ReplicaManagerTxnLogWriter",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionMarkerChannelManager",
    "TxnMarker",
    "append_txn_markers",
]
