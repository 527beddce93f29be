"""Replica assignment: which brokers host the replicas of a new topic's (or new) partitions.

Kafka's ``AdminUtils.assignReplicasToBrokers``, with and without racks. Goals: spread
replicas evenly over brokers; for the partitions led by one broker, spread their other
replicas over the other brokers; with racks, put a partition's replicas on distinct racks.

Without racks (every broker's rack is None):

- brokers are sorted by id (n of them);
- ``start_index`` and ``replica_shift`` are drawn at random in [0, n) unless given;
- the first replica (the preferred leader) of partition i is broker ``(start_index + i) mod n``:
  leaders round-robin over the brokers;
- the shift grows by one each time i passes a multiple of n, so the partitions led by one broker
  do not all have the same followers;
- replica j >= 1 of partition i is broker ``(first + 1 + (shift + j - 1) mod (n - 1)) mod n``
  (Kafka's ``replicaIndex``): never the first broker again, and distinct within a partition.

With racks (every broker declares one): the same round-robin over a *rack-alternated* broker
list (racks sorted, brokers of each rack sorted, taken one rack after another), and followers
skip brokers whose rack already holds a replica while some rack holds none, and brokers that
already hold one while some broker holds none. A mix of brokers with and without racks is an
error (``rack_aware_mode="enforced"``, Kafka's default) or makes the racks ignored ("safe").

``start_partition_id`` continues the round-robin when partitions are added to a topic.
Passing ``start_index`` (and optionally ``replica_shift``) makes the result deterministic; with
only ``start_index``, the shift equals it (Kafka's ``fixedStartIndex``).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafkalite.protocol.errors import (
    ErrorCode,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    KafkaError,
)


class AdminOperationError(KafkaError):
    """Kafka's ``AdminOperationException``: reported to clients as UNKNOWN_SERVER_ERROR."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    id: int
    rack: str | None = None


RACK_AWARE_MODES = ("enforced", "safe", "disabled")


def broker_metadatas(
    brokers: Iterable[BrokerMetadata], rack_aware_mode: str = "enforced"
) -> list[BrokerMetadata]:
    """Kafka's ``AdminZkClient.getBrokerMetadatas``: sorted by id, racks kept or dropped.

    ``enforced``: a mix of brokers with and without a rack raises ``AdminOperationError``;
    ``safe``: such a mix drops every rack; ``disabled``: racks are always dropped.
    """
    if rack_aware_mode not in RACK_AWARE_MODES:
        raise ValueError(
            f"rack_aware_mode must be one of {RACK_AWARE_MODES}, not {rack_aware_mode!r}"
        )
    result = sorted(brokers, key=lambda b: b.id)
    with_rack = [b for b in result if b.rack is not None]
    if rack_aware_mode == "enforced" and with_rack and len(with_rack) != len(result):
        raise AdminOperationError(
            "Not all brokers have rack information. Add --disable-rack-aware in command line to make "
            "replica assignment without rack information."
        )
    if rack_aware_mode == "disabled" or (
        rack_aware_mode == "safe" and len(with_rack) != len(result)
    ):
        result = [BrokerMetadata(b.id, None) for b in result]
    return result


def replica_index(
    first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int
) -> int:
    """Kafka's ``AdminUtils.replicaIndex``: position of follower ``replica_index`` (0-based)."""
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    start_index: int | None = None,
    start_partition_id: int = 0,
    *,
    replica_shift: int | None = None,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Partition id -> broker ids (first = preferred leader). See the module docstring.

    Raises ``InvalidPartitionsError`` (n_partitions < 1), ``InvalidReplicationFactorError``
    (replication_factor < 1 or more than the brokers), ``AdminOperationError`` (some brokers
    have a rack and some do not).
    """
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    ids = [b.id for b in brokers]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate broker ids in {ids}")
    rng = rng or random.Random()
    ordered = sorted(brokers, key=lambda b: b.id)
    if all(b.rack is None for b in ordered):
        return _assign_rack_unaware(
            n_partitions,
            replication_factor,
            [b.id for b in ordered],
            start_index,
            replica_shift,
            start_partition_id,
            rng,
        )
    if any(b.rack is None for b in ordered):
        raise AdminOperationError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    return _assign_rack_aware(
        n_partitions,
        replication_factor,
        {b.id: b.rack for b in ordered},  # type: ignore[misc]
        start_index,
        replica_shift,
        start_partition_id,
        rng,
    )


def _start_and_shift(
    n: int, start_index: int | None, replica_shift: int | None, rng: random.Random
) -> tuple[int, int]:
    start = start_index if start_index is not None and start_index >= 0 else rng.randrange(n)
    if replica_shift is not None and replica_shift >= 0:
        shift = replica_shift
    elif start_index is not None and start_index >= 0:
        shift = start_index
    else:
        shift = rng.randrange(n)
    return start, shift


def _assign_rack_unaware(
    n_partitions: int,
    replication_factor: int,
    broker_list: list[int],
    start_index: int | None,
    replica_shift: int | None,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    n = len(broker_list)
    start, next_replica_shift = _start_and_shift(n, start_index, replica_shift, rng)
    ret: dict[int, list[int]] = {}
    current_partition_id = max(0, start_partition_id)
    for _ in range(n_partitions):
        if current_partition_id > 0 and current_partition_id % n == 0:
            next_replica_shift += 1
        first_replica_index = (current_partition_id + start) % n
        replicas = [broker_list[first_replica_index]]
        for j in range(replication_factor - 1):
            replicas.append(
                broker_list[replica_index(first_replica_index, next_replica_shift, j, n)]
            )
        ret[current_partition_id] = replicas
        current_partition_id += 1
    return ret


def rack_alternated_broker_list(broker_rack_map: Mapping[int, str]) -> list[int]:
    """Brokers taken one rack after another (racks sorted, brokers sorted within a rack):
    rack1: 0,1,2 / rack2: 3,4,5 / rack3: 6,7,8 -> 0,3,6,1,4,7,2,5,8 (Kafka's
    ``getRackAlternatedBrokerList``)."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in broker_rack_map.items():
        by_rack.setdefault(rack, []).append(broker_id)
    iterators = {rack: iter(sorted(ids)) for rack, ids in by_rack.items()}
    racks = sorted(iterators)
    result: list[int] = []
    rack_index = 0
    while len(result) < len(broker_rack_map):
        broker = next(iterators[racks[rack_index]], None)
        if broker is not None:
            result.append(broker)
        rack_index = (rack_index + 1) % len(racks)
    return result


def _assign_rack_aware(
    n_partitions: int,
    replication_factor: int,
    broker_rack_map: dict[int, str],
    start_index: int | None,
    replica_shift: int | None,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    num_racks = len(set(broker_rack_map.values()))
    arranged = rack_alternated_broker_list(broker_rack_map)
    n = len(arranged)
    start, next_replica_shift = _start_and_shift(n, start_index, replica_shift, rng)
    ret: dict[int, list[int]] = {}
    current_partition_id = max(0, start_partition_id)
    for _ in range(n_partitions):
        if current_partition_id > 0 and current_partition_id % n == 0:
            next_replica_shift += 1
        first_replica_index = (current_partition_id + start) % n
        leader = arranged[first_replica_index]
        replicas = [leader]
        racks_with_replicas = {broker_rack_map[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[
                    replica_index(first_replica_index, next_replica_shift * num_racks, k, n)
                ]
                rack = broker_rack_map[broker]
                k += 1
                # Skip a broker whose rack already has a replica while some rack has none, and a
                # broker that already has a replica while some broker has none.
                if (rack not in racks_with_replicas or len(racks_with_replicas) == num_racks) and (
                    broker not in brokers_with_replicas or len(brokers_with_replicas) == n
                ):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        ret[current_partition_id] = replicas
        current_partition_id += 1
    return ret


def validate_replica_assignment(
    assignment: Mapping[int, Sequence[int]], available_brokers: Iterable[int] | None = None
) -> None:
    """Checks of a manual assignment (Kafka's ``AdminZkClient.validateTopicCreate`` and
    ``ZkAdminManager``): partitions 0..n-1, every partition the same number of replicas,
    no broker twice in a partition, every broker known. Raises ``InvalidReplicaAssignmentError``."""
    if not assignment:
        raise InvalidReplicaAssignmentError("Replica assignment must not be empty.")
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignmentError(
            f"Partitions should be a consecutive 0-based integer sequence: {sorted(assignment)}."
        )
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1:
        raise InvalidReplicaAssignmentError(
            "All partitions should have the same number of replicas."
        )
    if 0 in sizes:
        raise InvalidReplicaAssignmentError(
            "Replica assignment must name at least one broker per partition."
        )
    for partition, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"Duplicate replica assignment found for partition {partition}: {list(replicas)}."
            )
    if available_brokers is not None:
        known = set(available_brokers)
        unknown = sorted({b for replicas in assignment.values() for b in replicas} - known)
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"Unknown broker(s) in replica assignment: {unknown}."
            )
