"""Typed access to the znodes the controller and the brokers share (Kafka's ``KafkaZkClient``).

Everything here is I/O against a ``CoordSession`` and translation between the store's JSON
(``kafkalite.zk.data``: Kafka's exact layout) and the controller's types. Rules:

- Every write the controller makes goes through a multi that starts with a check of
  ``/controller_epoch``'s version (the version this controller set when it was elected), so a
  controller that lost its election can never change the store (``ControllerMovedError`` when
  the check fails; Kafka's ``checkControllerEpochZkVersion``): ``apply_writes`` puts all of a
  decision's writes in ONE multi; ``apply_partition_state_writes`` (partition states only:
  elections, ISR shrinks, new partitions) makes each partition's writes succeed or fail alone,
  in multis of at most ``MAX_MULTI_OPS`` operations, as Kafka's ``updateLeaderAndIsr`` does.
- The partition state node is written with compare-and-set on its version by both the
  controller (elections, ISR shrink on broker failure) and the partition leader
  (``update_leader_and_isr``, the broker ReplicaManager's ``alter_isr``: ISR expansion/shrink).
  The loser of a race sees ``BadVersion`` and re-reads; a stale leader learns this way that it is
  no longer leader (Kafka's zkVersion fencing in Partition.updateIsr).
- A leader that changed an ISR also creates ``/isr_change_notification/isr_change_<seq>`` in the
  same multi, which the controller watches to refresh its context and tell every broker.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterable, Sequence

from kafkalite.coord.base import (
    CheckOp,
    CoordSession,
    CreateOp,
    DeleteOp,
    Op,
    SetDataOp,
    SetDataResult,
)
from kafkalite.coord.errors import BadVersion, NodeExists, NoNode
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk import data as paths
from kafkalite.zk.types import (
    INITIAL_CONTROLLER_EPOCH,
    Broker,
    EndPoint,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from kafkalite.zk.writes import (
    CreatePartitionState,
    DeleteIsrChangeNotifications,
    DeleteLeaderElectionRequest,
    DeleteLogDirEventNotifications,
    DeleteTopic,
    DeleteTopicDeletions,
    SetTopicAssignment,
    StoreWrite,
    UpdatePartitionState,
    UpdateReassignPartitions,
)


class ControllerMovedError(KafkaError):
    """This broker is not (or no longer) the controller: the epoch check failed."""

    error_code = ErrorCode.NOT_CONTROLLER


# -- brokers --------------------------------------------------------------------------------------


def broker_from_info(info: paths.BrokerInfo) -> Broker:
    return Broker(
        info.id,
        tuple(
            EndPoint(e.host, e.port, e.listener_name, e.security_protocol) for e in info.endpoints
        ),
        info.rack,
    )


async def get_broker_and_epoch(session: CoordSession, broker_id: int) -> tuple[Broker, int] | None:
    try:
        data, stat = await session.get_data(paths.broker_path(broker_id))
    except NoNode:
        return None
    return broker_from_info(paths.decode_broker(broker_id, data)), stat.czxid


async def get_all_brokers_and_epochs(session: CoordSession) -> dict[int, tuple[Broker, int]]:
    """Registered brokers with their broker epoch (the czxid of the registration node)."""
    try:
        children = await session.get_children(paths.BROKER_IDS)
    except NoNode:
        return {}
    ids = sorted(int(c) for c in children if c.lstrip("-").isdigit())
    found = await session.get_data_many([paths.broker_path(i) for i in ids])
    return {
        i: (broker_from_info(paths.decode_broker(i, node[0])), node[1].czxid)
        for i, node in zip(ids, found, strict=True)
        if node is not None
    }


# -- topics ---------------------------------------------------------------------------------------


async def get_all_topics(session: CoordSession) -> set[str]:
    try:
        return set(await session.get_children(paths.BROKER_TOPICS))
    except NoNode:
        return set()


def assignment_from_node(node: paths.TopicAssignment) -> dict[int, ReplicaAssignment]:
    return {
        p: ReplicaAssignment(
            tuple(replicas),
            tuple(node.adding_replicas.get(p, ())),
            tuple(node.removing_replicas.get(p, ())),
        )
        for p, replicas in sorted(node.partitions.items())
    }


async def get_topic_assignment(
    session: CoordSession, topic: str
) -> tuple[str | None, dict[int, ReplicaAssignment], int] | None:
    """(topic id, partition -> assignment, node version), or None when the topic is gone."""
    try:
        data, stat = await session.get_data(paths.topic_path(topic))
    except NoNode:
        return None
    node = paths.decode_topic(topic, data)
    return node.topic_id, assignment_from_node(node), stat.version


# A topic node as ``paths.encode_topic`` writes it with an id and no reassignment under way
# (every topic a broker created): its partitions' JSON and its id. Nodes of this form that
# hold the same partitions' JSON have the same assignment.
_PLAIN_TOPIC_NODE = re.compile(
    rb'\{"partitions":(\{[^{}]*\}),"topic_id":"([A-Za-z0-9_-]+)",'
    rb'"adding_replicas":\{\},"removing_replicas":\{\},"version":3\}'
)


async def get_topic_assignments(
    session: CoordSession, topics: Iterable[str], raw: dict[str, bytes] | None = None
) -> dict[str, tuple[str | None, dict[int, ReplicaAssignment]]]:
    """The topics' ids and assignments (absent topics left out), read in one batch; ``raw``,
    when given, receives each topic node's data as read.

    A node in the form the brokers write (an id, no reassignment) is decoded once per distinct
    partitions' JSON: at 10,000 topics of one partition on one broker there is one such JSON,
    and the others take their id from the node and a copy of that assignment (its
    ``ReplicaAssignment`` values are frozen, so shared). Any other node is decoded in full."""
    topics = sorted(topics)
    found = await session.get_data_versions_many([paths.topic_path(t) for t in topics])
    out: dict[str, tuple[str | None, dict[int, ReplicaAssignment]]] = {}
    decoded_partitions: dict[bytes, dict[int, ReplicaAssignment]] = {}
    plain = _PLAIN_TOPIC_NODE.fullmatch
    for topic, node in zip(topics, found, strict=True):
        if node is None:
            continue
        data = node[0]
        if raw is not None:
            raw[topic] = data
        match = plain(data)
        if match is None:
            decoded = paths.decode_topic(topic, data)
            out[topic] = (decoded.topic_id, assignment_from_node(decoded))
            continue
        partitions_json, topic_id = match.groups()
        assignment = decoded_partitions.get(partitions_json)
        if assignment is None:
            decoded = paths.decode_topic(topic, data)
            assignment = decoded_partitions[partitions_json] = assignment_from_node(decoded)
        out[topic] = (topic_id.decode("ascii"), assignment.copy())
    return out


def encode_assignment(
    topic: str, topic_id: str | None, assignment: dict[int, ReplicaAssignment]
) -> bytes:
    return paths.encode_topic(
        paths.TopicAssignment(
            topic=topic,
            partitions={p: a.replicas for p, a in assignment.items()},
            topic_id=topic_id,
            adding_replicas={
                p: a.adding_replicas for p, a in assignment.items() if a.adding_replicas
            },
            removing_replicas={
                p: a.removing_replicas for p, a in assignment.items() if a.removing_replicas
            },
        )
    )


async def get_topic_deletions(session: CoordSession) -> list[str]:
    try:
        return await session.get_children(paths.DELETE_TOPICS)
    except NoNode:
        return []


async def get_topic_config(session: CoordSession, topic: str) -> dict[str, str]:
    try:
        data, _ = await session.get_data(paths.topic_config_path(topic))
    except NoNode:
        return {}
    return paths.decode_entity_config(data)


async def get_unclean_leader_election_topics(
    session: CoordSession, topics: Iterable[str], default: bool
) -> set[str]:
    """Topics whose ``unclean.leader.election.enable`` (override, else ``default``) is true."""
    topics = sorted(topics)
    found = await session.get_data_versions_many([paths.topic_config_path(t) for t in topics])
    enabled = set()
    # One decision per distinct node content: most topics hold the same (no override).
    decided: dict[bytes | None, bool] = {}
    for topic, node in zip(topics, found, strict=True):
        data = node[0] if node is not None else None
        on = decided.get(data)
        if on is None:
            config = paths.decode_entity_config(data) if data is not None else {}
            value = config.get("unclean.leader.election.enable")
            on = decided[data] = (value.strip().lower() == "true") if value is not None else default
        if on:
            enabled.add(topic)
    return enabled


# -- partition state ------------------------------------------------------------------------------


def encode_leader_isr_and_controller_epoch(info: LeaderIsrAndControllerEpoch) -> bytes:
    return paths.encode_partition_state(info)


async def get_partition_state(
    session: CoordSession, tp: TopicPartition
) -> LeaderIsrAndControllerEpoch | None:
    """The partition state node with its version as ``zk_version``, or None when absent."""
    try:
        data, stat = await session.get_data(paths.partition_state_path(tp.topic, tp.partition))
    except NoNode:
        return None
    return paths.decode_partition_state(data, stat.version)


async def get_partition_states(
    session: CoordSession, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, LeaderIsrAndControllerEpoch | None]:
    """The partition state nodes, read in one batch (``get_data_many``: one crossing to the
    coordination thread for all of them, not one per partition).

    Nodes with the same data and version are decoded once and share the decoded state (it is
    immutable by convention, a change being a new object; see ``LeaderAndIsr``): a broker's
    10,000 partitions after a clean restart hold a handful of distinct states."""
    partitions = sorted(set(partitions))
    found = await session.get_data_versions_many(
        [paths.partition_state_path(tp.topic, tp.partition) for tp in partitions]
    )
    decode = paths.decode_partition_state
    decoded: dict[tuple[bytes, int], LeaderIsrAndControllerEpoch] = {}
    out: dict[TopicPartition, LeaderIsrAndControllerEpoch | None] = {}
    for tp, node in zip(partitions, found, strict=True):
        if node is None:
            out[tp] = None
            continue
        state = decoded.get(node)
        if state is None:
            state = decoded[node] = decode(node[0], node[1])
        out[tp] = state
    return out


async def update_leader_and_isr(
    session: CoordSession, tp: TopicPartition, state: LeaderIsrAndControllerEpoch
) -> int | None:
    """The partition leader's ISR change (Kafka's ``ReplicationUtils.updateLeaderAndIsr``): in
    one multi, compare-and-set the partition state node on ``state.leader_and_isr.zk_version``
    and create ``/isr_change_notification/isr_change_<seq>`` naming ``tp``, so the controller
    refreshes the metadata it sends to the brokers.

    Returns the node's new version, or None if the compare-and-set failed because the node moved
    on (the controller elected another leader or changed the ISR: the caller stops acting as
    leader). A version mismatch whose stored data is exactly what we wrote counts as success: a
    write whose answer was lost (connection loss) had in fact been applied, notification
    included, and its retry must not fence the leader. Other store errors propagate."""
    path = paths.partition_state_path(tp.topic, tp.partition)
    data = paths.encode_partition_state(state)
    await session.ensure_path(paths.ISR_CHANGE_NOTIFICATION)
    ops: list[Op] = [
        SetDataOp(path, data, state.leader_and_isr.zk_version),
        CreateOp(paths.isr_change_sequence_path(), paths.encode_isr_change([tp]), sequential=True),
    ]
    try:
        results = await session.multi(ops)
    except NoNode:
        return None
    except BadVersion:
        try:
            stored, stat = await session.get_data(path)
        except NoNode:
            return None
        expected = state.leader_and_isr.zk_version
        return stat.version if paths.decode_partition_state(stored, expected) == state else None
    first = results[0]
    assert isinstance(first, SetDataResult)
    return first.stat.version


# -- ISR change notifications ---------------------------------------------------------------------


async def _sequence_numbers(session: CoordSession, parent: str, prefix: str) -> list[str]:
    """Sequence numbers of the ``<parent>/<prefix><seq>`` nodes, oldest first."""
    try:
        children = await session.get_children(parent)
    except NoNode:
        return []
    return sorted(paths.sequence_number(c, prefix) for c in children if c.startswith(prefix))


async def _delete_sequence_ops(
    session: CoordSession, parent: str, prefix: str, sequence_numbers: Iterable[str]
) -> list[Op]:
    """Deletes of those of the named ``<parent>/<prefix><seq>`` nodes that still exist."""
    existing = set(await _sequence_numbers(session, parent, prefix))
    return [DeleteOp(f"{parent}/{prefix}{seq}", -1) for seq in sequence_numbers if seq in existing]


async def get_isr_change_notifications(session: CoordSession) -> list[str]:
    """Sequence numbers of the pending notifications, oldest first."""
    return await _sequence_numbers(session, paths.ISR_CHANGE_NOTIFICATION, paths.ISR_CHANGE_PREFIX)


async def get_log_dir_event_notifications(session: CoordSession) -> list[str]:
    """Sequence numbers of the pending log directory failure events, oldest first."""
    return await _sequence_numbers(
        session, paths.LOG_DIR_EVENT_NOTIFICATION, paths.LOG_DIR_EVENT_PREFIX
    )


async def get_broker_ids_from_log_dir_events(
    session: CoordSession, sequence_numbers: Iterable[str]
) -> set[int]:
    """The brokers that reported a failed log directory (unreadable events are skipped)."""
    brokers: set[int] = set()
    for seq in sequence_numbers:
        try:
            data, _ = await session.get_data(
                f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{paths.LOG_DIR_EVENT_PREFIX}{seq}"
            )
            brokers.add(paths.decode_log_dir_event(data))
        except (NoNode, ValueError):
            continue
    return brokers


async def propagate_log_dir_event(session: CoordSession, broker_id: int) -> None:
    """A broker's log directory failed: tell the controller (Kafka's propagateLogDirEvent)."""
    await session.create(
        paths.log_dir_event_sequence_path(),
        paths.encode_log_dir_event(broker_id),
        sequential=True,
        makepath=True,
    )


async def get_partitions_from_isr_change_notifications(
    session: CoordSession, sequence_numbers: Iterable[str]
) -> set[TopicPartition]:
    """The partitions the named notifications list (read concurrently: a burst of ISR changes
    after a broker restart leaves hundreds of notifications, and one round trip each in turn
    held the controller's event queue for seconds)."""

    found = await session.get_data_many(
        [
            f"{paths.ISR_CHANGE_NOTIFICATION}/{paths.ISR_CHANGE_PREFIX}{seq}"
            for seq in sequence_numbers
        ]
    )
    partitions: set[TopicPartition] = set()
    for node in found:
        if node is not None:
            partitions |= paths.decode_isr_change(node[0])
    return partitions


# -- controller election --------------------------------------------------------------------------


async def get_controller_id(session: CoordSession) -> int | None:
    try:
        data, _ = await session.get_data(paths.CONTROLLER)
    except NoNode:
        return None
    return paths.decode_controller(data).broker_id


async def get_controller_epoch(session: CoordSession) -> tuple[int, int] | None:
    """(epoch, zk version of /controller_epoch), or None when the node does not exist."""
    try:
        data, stat = await session.get_data(paths.CONTROLLER_EPOCH)
    except NoNode:
        return None
    return paths.decode_controller_epoch(data), stat.version


async def register_controller_and_increment_controller_epoch(
    session: CoordSession, broker_id: int, now_ms: int | None = None
) -> tuple[int, int]:
    """Create the ephemeral ``/controller`` and bump ``/controller_epoch`` in one multi
    (Kafka's ``registerControllerAndIncrementControllerEpoch``).

    Returns (new epoch, its zk version). Raises ``ControllerMovedError`` when another broker won.
    """
    current = await get_controller_epoch(session)
    if current is None:
        try:
            await session.create(
                paths.CONTROLLER_EPOCH, paths.encode_controller_epoch(INITIAL_CONTROLLER_EPOCH)
            )
        except NodeExists:
            pass
        current = await get_controller_epoch(session)
        if current is None:
            raise ControllerMovedError("/controller_epoch vanished while electing")
    epoch, version = current
    new_epoch = epoch + 1
    timestamp = int(time.time() * 1000) if now_ms is None else now_ms
    try:
        results = await session.multi(
            [
                CreateOp(
                    paths.CONTROLLER, paths.encode_controller(broker_id, timestamp), ephemeral=True
                ),
                SetDataOp(
                    paths.CONTROLLER_EPOCH, paths.encode_controller_epoch(new_epoch), version
                ),
            ]
        )
    except (NodeExists, BadVersion) as error:
        # A retried multi may have been applied: then we are the controller with new_epoch.
        owner = await get_controller_id(session)
        now = await get_controller_epoch(session)
        if owner == broker_id and now is not None and now[0] == new_epoch:
            return now
        raise ControllerMovedError(f"broker {owner} is the controller") from error
    stat_result = results[1]
    assert isinstance(stat_result, SetDataResult)
    return new_epoch, stat_result.stat.version


# -- applying the controller's writes -------------------------------------------------------------


async def _delete_tree_ops(session: CoordSession, path: str) -> list[Op]:
    """Delete ops for ``path`` and its subtree, children first (nothing when absent)."""
    try:
        children = await session.get_children(path)
    except NoNode:
        return []
    ops: list[Op] = []
    for child in children:
        ops.extend(await _delete_tree_ops(session, f"{path}/{child}"))
    ops.append(DeleteOp(path, -1))
    return ops


async def _existing_partition_nodes(session: CoordSession, topic: str) -> set[int] | None:
    """The partitions of ``topic`` that have a ``/brokers/topics/<t>/partitions/<p>`` node;
    None when ``/brokers/topics/<t>/partitions`` itself is missing. One read per topic: a
    topic of thousands of partitions must not cost one round trip per partition."""
    try:
        children = await session.get_children(paths.topic_partitions_path(topic))
    except NoNode:
        return None
    return {int(c) for c in children if c.isdigit()}


async def ops_for_writes(session: CoordSession, writes: Sequence[StoreWrite]) -> list[Op]:
    """Translate the controller's writes into store operations (reads the trees to delete)."""
    return [op for _, ops in await _grouped_ops_for_writes(session, writes) for op in ops]


async def _grouped_ops_for_writes(
    session: CoordSession, writes: Sequence[StoreWrite]
) -> list[tuple[TopicPartition | str | None, list[Op]]]:
    """The store operations of each write, in order, with the partition a partition state
    write is about, the path of a topic's ``partitions`` node created for them, or None for
    the other writes."""
    grouped: list[tuple[TopicPartition | str | None, list[Op]]] = []
    existing_partitions: dict[str, set[int] | None] = {}
    reassign_exists: bool | None = None
    for write in writes:
        ops: list[Op] = []
        key: TopicPartition | str | None = None
        match write:
            case UpdatePartitionState(tp, info, expected_version):
                # first: the common write (every election and ISR shrink)
                key = tp
                ops.append(
                    SetDataOp(
                        paths.partition_state_path(tp.topic, tp.partition),
                        encode_leader_isr_and_controller_epoch(info),
                        expected_version,
                    )
                )
            case CreatePartitionState(tp, info):
                key = tp
                if tp.topic not in existing_partitions:
                    existing_partitions[tp.topic] = await _existing_partition_nodes(
                        session, tp.topic
                    )
                existing = existing_partitions[tp.topic]
                if existing is None:
                    # its own group: the topic's partitions need it whichever of them fails
                    parent = paths.topic_partitions_path(tp.topic)
                    grouped.append((parent, [CreateOp(parent)]))
                    existing = existing_partitions[tp.topic] = set()
                if tp.partition not in existing:
                    ops.append(CreateOp(paths.partition_path(tp.topic, tp.partition)))
                    existing.add(tp.partition)
                ops.append(
                    CreateOp(
                        paths.partition_state_path(tp.topic, tp.partition),
                        encode_leader_isr_and_controller_epoch(info),
                    )
                )
            case SetTopicAssignment(topic, topic_id, assignment):
                ops.append(
                    SetDataOp(
                        paths.topic_path(topic), encode_assignment(topic, topic_id, assignment), -1
                    )
                )
            case DeleteTopic(topic):
                ops.extend(await _delete_tree_ops(session, paths.topic_path(topic)))
                ops.extend(await _delete_tree_ops(session, paths.topic_config_path(topic)))
                ops.extend(await _delete_tree_ops(session, paths.delete_topic_path(topic)))
                existing_partitions.pop(topic, None)
            case DeleteTopicDeletions(topics):
                for topic in topics:
                    ops.extend(await _delete_tree_ops(session, paths.delete_topic_path(topic)))
            case DeleteLogDirEventNotifications(seqs):
                ops += await _delete_sequence_ops(
                    session, paths.LOG_DIR_EVENT_NOTIFICATION, paths.LOG_DIR_EVENT_PREFIX, seqs
                )
            case DeleteIsrChangeNotifications(seqs):
                ops += await _delete_sequence_ops(
                    session, paths.ISR_CHANGE_NOTIFICATION, paths.ISR_CHANGE_PREFIX, seqs
                )
            case UpdateReassignPartitions(remaining):
                # Several such writes in one batch: what the earlier ops did to the node counts.
                if reassign_exists is None:
                    reassign_exists = await session.exists(paths.REASSIGN_PARTITIONS) is not None
                if remaining:
                    data = paths.encode_reassignment(remaining)
                    ops.append(
                        SetDataOp(paths.REASSIGN_PARTITIONS, data, -1)
                        if reassign_exists
                        else CreateOp(paths.REASSIGN_PARTITIONS, data)
                    )
                    reassign_exists = True
                elif reassign_exists:
                    ops.append(DeleteOp(paths.REASSIGN_PARTITIONS, -1))
                    reassign_exists = False
            case DeleteLeaderElectionRequest(path):
                if await session.exists(path) is not None:
                    ops.append(DeleteOp(path, -1))
            case _:
                raise TypeError(f"unknown store write {write!r}")
        grouped.append((key, ops))
    return grouped


MAX_MULTI_OPS = 500
"""Operations per multi when partition states are written in chunks: a ZooKeeper request is
refused above ``jute.maxbuffer`` (1 MiB by default), which one multi for a topic of a few
thousand partitions (two or three nodes each) comes close to, and encoding a huge multi holds
the event loop."""

PARTITION_STATE_WRITES = (CreatePartitionState, UpdatePartitionState)
AFTER_PARTITION_STATES = (DeleteIsrChangeNotifications, DeleteLeaderElectionRequest)
"""Writes that may follow the partition states in a separate multi: they only clean up request
nodes whose work the partition state writes did."""


def split_partition_writes(
    writes: Sequence[StoreWrite], partitions: set[TopicPartition]
) -> tuple[list[StoreWrite], list[StoreWrite]]:
    """Partition state writes (``can_apply_per_partition``) in two lists: those of
    ``partitions``, and the others with the clean-ups, each in its order. A partition's writes
    all fall in one list (a failover may shrink an ISR and elect in two writes)."""
    chosen: list[StoreWrite] = []
    others: list[StoreWrite] = []
    for write in writes:
        if isinstance(write, PARTITION_STATE_WRITES) and write.topic_partition in partitions:
            chosen.append(write)
        else:
            others.append(write)
    return chosen, others


def can_apply_per_partition(writes: Sequence[StoreWrite]) -> bool:
    """Whether ``writes`` are partition state writes (plus clean-ups) only: those may be applied
    per partition (``apply_partition_state_writes``); anything else (assignments, deletions,
    reassignments) is applied in one atomic multi."""
    return all(isinstance(w, PARTITION_STATE_WRITES + AFTER_PARTITION_STATES) for w in writes)


async def apply_writes(
    session: CoordSession, writes: Sequence[StoreWrite], controller_epoch_zk_version: int
) -> None:
    """Apply ``writes`` atomically, fenced by the controller epoch's version.

    Raises ``ControllerMovedError`` when the epoch check fails, else the store's error of the
    first failing operation (``BadVersion``, ``NodeExists``, ``NoNode``: the context is stale).
    """
    if not writes:
        return
    ops: list[Op] = [CheckOp(paths.CONTROLLER_EPOCH, controller_epoch_zk_version)]
    ops.extend(await ops_for_writes(session, writes))
    await _fenced_multi(session, ops, controller_epoch_zk_version)


async def _fenced_multi(session: CoordSession, ops: list[Op], epoch_zk_version: int) -> None:
    try:
        await session.multi(ops)
    except (BadVersion, NoNode) as error:
        if error.failed_op_index == 0:
            raise ControllerMovedError(
                f"controller epoch zk version {epoch_zk_version} is no longer current"
            ) from error
        raise


async def apply_partition_state_writes(
    session: CoordSession,
    writes: Sequence[StoreWrite],
    controller_epoch_zk_version: int,
    max_ops: int = MAX_MULTI_OPS,
) -> set[TopicPartition]:
    """Apply partition state writes (``can_apply_per_partition``) each on its own, as Kafka's
    ``updateLeaderAndIsr`` / ``createTopicPartitionStatesRaw`` do: every partition's writes are
    fenced by the controller epoch and succeed or fail alone, so one partition whose state a
    leader changed meanwhile (its ISR) does not undo the elections of thousands of others.

    The writes go in multis of at most ``max_ops`` operations, each starting with the epoch
    check, sent without waiting for each other's answers; a multi that fails on one partition's operation (BadVersion, NodeExists, NoNode) is
    sent again without that partition. Returns the partitions whose writes failed (their
    context entries are stale: the caller re-reads them). The clean-up writes go last, in one
    multi, once every partition state was attempted. Raises ``ControllerMovedError`` when the
    epoch check fails, ``ConnectionLoss`` and session errors as the store raises them."""
    grouped = await _grouped_ops_for_writes(session, writes)
    by_key: dict[TopicPartition | str, list[Op]] = {}
    for key, ops in grouped:
        if key is not None and ops:
            by_key.setdefault(key, []).extend(ops)  # a partition's writes stay together
    per_partition = list(by_key.items())
    others = [op for key, ops in grouped if key is None for op in ops]
    check = CheckOp(paths.CONTROLLER_EPOCH, controller_epoch_zk_version)
    failed: set[TopicPartition] = set()
    chunk: list[tuple[TopicPartition | str, list[Op]]] = []
    chunks: list[list[tuple[TopicPartition | str, list[Op]]]] = []
    size = 0
    for tp, ops in per_partition:
        if chunk and size + len(ops) > max_ops:
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append((tp, ops))
        size += len(ops)
    if chunk:
        chunks.append(chunk)

    async def apply_chunk(
        pending: list[tuple[TopicPartition | str, list[Op]]],
    ) -> set[TopicPartition]:
        lost: set[TopicPartition] = set()
        while pending:
            ops = [check] + [op for _, group in pending for op in group]
            try:
                await _fenced_multi(session, ops, controller_epoch_zk_version)
                break
            except (BadVersion, NodeExists, NoNode) as error:
                index = error.failed_op_index
                if index is None:
                    raise
                culprit = _owner_of_op(pending, index - 1)
                if isinstance(culprit, TopicPartition):
                    lost.add(culprit)
                pending = [(key, group) for key, group in pending if key != culprit]
        return lost

    # Pipelined: the store applies one session's requests in order, and each chunk stands alone.
    for lost in await asyncio.gather(*(apply_chunk(chunk) for chunk in chunks)):
        failed |= lost
    if others:
        await _fenced_multi(session, [check, *others], controller_epoch_zk_version)
    return failed


def _owner_of_op(pending: list[tuple[TopicPartition, list[Op]]], index: int) -> TopicPartition:
    """The partition whose group holds the ``index``-th operation of the flattened groups."""
    for tp, group in pending:
        if index < len(group):
            return tp
        index -= len(group)
    raise IndexError(index)


async def get_partition_reassignments(
    session: CoordSession,
) -> dict[TopicPartition, tuple[int, ...]]:
    """The content of ``/admin/reassign_partitions`` (empty when absent)."""
    try:
        data, _ = await session.get_data(paths.REASSIGN_PARTITIONS)
    except NoNode:
        return {}
    return paths.decode_reassignment(data)


UNCLEAN_LEADER_ELECTION = "/admin/unclean_leader_election"
"""kafkalite's request node for unclean elections (the HTTP admin API writes it; ZooKeeper-era
Kafka had none and used the ElectLeaders API). Same JSON as ``/admin/preferred_replica_election``."""


async def get_leader_election_request(
    session: CoordSession, path: str
) -> set[TopicPartition] | None:
    """The partitions a leader election request node names, or None when absent."""
    try:
        data, _ = await session.get_data(path)
    except NoNode:
        return None
    return paths.decode_preferred_replica_election(data)
