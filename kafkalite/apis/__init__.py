"""Request handlers, one module per API key (see base.py for the registry).

`load_handlers()` imports every handler module, which registers it; the broker calls it once at
start-up. The consumer-group APIs (FindCoordinator, JoinGroup, ...) slot in by adding their
modules to HANDLER_MODULES: ApiVersions advertises exactly the registered keys.
"""

import importlib

HANDLER_MODULES = (
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "offset_for_leader_epoch",
    "init_producer_id",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "describe_cluster",
    "delete_records",
    "describe_log_dirs",
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "leader_and_isr",
    "update_metadata",
    "stop_replica",
    "controlled_shutdown",
    # security (kafkalite/security/)
    "sasl",
    "scram_credentials",
    "acls",
    "client_quotas",
    # consumer groups (kafkalite/group/)
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "offset_delete",
    "list_groups",
    "describe_groups",
    "delete_groups",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    # transactions (kafkalite/txn/)
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "txn_offset_commit",
    "write_txn_markers",
    "describe_transactions",
    "list_transactions",
    "describe_producers",
    # share groups (kafkalite/share/)
    "share_group",
    "share_fetch",
    "share_state",
    "share_group_offsets",
)


def load_handlers() -> None:
    for name in HANDLER_MODULES:
        importlib.import_module(f"{__name__}.{name}")
