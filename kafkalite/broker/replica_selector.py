"""Which replica a consumer should read from (KIP-392 follower fetching).

The leader asks this on a consumer fetch that carries client metadata (Fetch v11+) when
`replica.selector.class` names Kafka's RackAwareReplicaSelector; with the default (Kafka's
LeaderSelector, or the key unset) every consumer reads from the leader.

Invariants (Kafka's RackAwareReplicaSelector and ReplicaManager.findPreferredReadReplica):
- The candidates are the leader and the followers that are in the ISR, alive, and hold the
  fetch offset (log start <= offset <= log end): a lagging or dead replica is never named, so a
  consumer sent to one that has since failed comes back to the leader and is not sent again.
- A client without a rack, or whose rack has no candidate, reads from the leader; the leader
  wins when it is in the client's rack; otherwise the most caught-up candidate of that rack:
  highest log end offset, then shortest time since it was last caught up, then the highest
  broker id (Kafka's ReplicaView.comparator).
- The answer is a follower's broker id or None (read from the leader): the leader is never
  sent out as a preferred read replica.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafkalite.config import LEADER_SELECTOR, RACK_AWARE_REPLICA_SELECTOR

__all__ = [
    "LEADER_SELECTOR",
    "RACK_AWARE_REPLICA_SELECTOR",
    "ReplicaView",
    "preferred_read_replica",
    "select_rack_aware",
]


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """What the leader knows of one candidate replica."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int = 0


def _rank(replica: ReplicaView) -> tuple[int, int, int]:
    return (replica.log_end_offset, -replica.time_since_last_caught_up_ms, replica.broker_id)


def select_rack_aware(
    client_rack: str | None, leader: ReplicaView, followers: Iterable[ReplicaView]
) -> ReplicaView:
    """The replica RackAwareReplicaSelector picks among ``leader`` and ``followers``."""
    if not client_rack:
        return leader
    if leader.rack == client_rack:
        return leader
    same_rack = [r for r in followers if r.rack == client_rack]
    if not same_rack:
        return leader
    return max(same_rack, key=_rank)


def preferred_read_replica(
    selector_class: str | None,
    client_rack: str | None,
    leader: ReplicaView,
    followers: Iterable[ReplicaView],
) -> int | None:
    """The follower the client should read from, or None for the leader."""
    if selector_class != RACK_AWARE_REPLICA_SELECTOR:
        return None
    chosen = select_rack_aware(client_rack, leader, followers)
    return None if chosen.broker_id == leader.broker_id else chosen.broker_id
