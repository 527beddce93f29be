"""What this broker knows of its own storage faults, for /metrics, /brokers and the console.

``offline_log_dirs``: the directories taken offline after a failure (full, unreadable, gone).
``offline_partitions``: the partitions this broker hosts that are offline because of storage
(their directory failed, or their own directory vanished): Kafka's OfflineReplicaCount for
storage. A broker only knows its own: /brokers reports these for the broker that answers, and
null for the others.
"""

from __future__ import annotations

from typing import Any


def offline_log_dirs(server: Any) -> list[str]:
    log_manager = getattr(server, "log_manager", None)
    if log_manager is None:
        return []
    return sorted(getattr(log_manager, "offline_dirs", ()))


def offline_storage_partitions(server: Any) -> list[tuple[str, int]]:
    """(topic, partition) of every hosted partition that storage took offline."""
    found: set[tuple[str, int]] = set()
    replica_manager = getattr(server, "replica_manager", None)
    if replica_manager is not None:
        found.update(
            (tp.topic, tp.partition) for tp in getattr(replica_manager, "offline_partitions", ())
        )
    log_manager = getattr(server, "log_manager", None)
    if log_manager is not None:
        found.update(getattr(log_manager, "offline_log_keys", lambda: ())())
    return sorted(found)


def broker_storage_fields(server: Any, broker_id: int) -> dict[str, Any]:
    """The fields /brokers adds to a broker: known for this broker, null for the others."""
    if broker_id != getattr(server, "broker_id", None):
        return {"offline_log_dirs": None, "offline_partitions": None}
    return {
        "offline_log_dirs": offline_log_dirs(server),
        "offline_partitions": len(offline_storage_partitions(server)),
    }
