"""Topic administration through the coordination store (Kafka's ``AdminZkClient``).

These functions never talk to brokers: they write the znodes the active controller watches,
and the controller does the rest (Kafka's AdminZkClient.createTopic):

- ``create_topic``: writes ``/config/topics/<t>`` (the overrides) first, then creates
  ``/brokers/topics/<t>`` with the replica assignment and a new topic id. The controller's
  watch on ``/brokers/topics`` sees the topic, moves its partitions New -> Online (leader and
  ISR written to each partition state node) and sends LeaderAndIsr + UpdateMetadata.
- ``delete_topic``: creates ``/admin/delete_topics/<t>``; the controller stops and deletes the
  replicas (StopReplica delete=true) and finally removes the topic's nodes.
- ``add_partitions``: rewrites ``/brokers/topics/<t>`` with more partitions (compare-and-set on
  the node's version); the controller's watch on that node starts the new ones.
- ``reassign_partitions``: creates ``/admin/reassign_partitions`` (Kafka's
  ``kafka-reassign-partitions.sh``); the controller moves the replicas and deletes the node
  when every partition is done.
- ``alter_topic_config``: replaces ``/config/topics/<t>`` and announces the change with a
  ``/config/changes/config_change_<seq>`` notification, as Kafka does.

Validation failures raise ``KafkaError`` subclasses whose ``error_code`` the request handlers put
in their responses: TopicAlreadyExistsError, InvalidTopicError, InvalidPartitionsError,
InvalidReplicationFactorError, InvalidReplicaAssignmentError, InvalidConfigurationError,
UnknownTopicOrPartitionError, and PolicyViolationError for a topic whose assignment node would be
longer than the coordination store takes (jute.maxbuffer; nothing is written). The partition
ceilings (``limits.py``) are the callers' to check, before calling. The assignment is Kafka's
``AdminUtils.assignReplicasToBrokers`` (``assignment.py``).
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafkalite.coord.base import CoordSession, CreateOp, Op, SetDataOp, check_request_length
from kafkalite.coord.errors import BadVersion, NodeExists, NoNode, RequestTooLarge
from kafkalite.protocol.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidTopicError,
    KafkaError,
    PolicyViolationError,
    ReassignmentInProgressError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import validate_topic_configs
from kafkalite.zk import client as zk_client
from kafkalite.zk import data as paths
from kafkalite.zk.assignment import (
    AdminOperationError,
    BrokerMetadata,
    assign_replicas_to_brokers,
    broker_metadatas,
    validate_replica_assignment,
)
from kafkalite.zk.client import (
    encode_assignment,
    get_all_brokers_and_epochs,
    get_topic_assignment,
)
from kafkalite.zk.types import ReplicaAssignment

ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
"""``Uuid.ZERO_UUID`` as Kafka prints it: returned for validate-only creations."""

MAX_NAME_LENGTH = 249
_LEGAL_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
_CAS_RETRIES = 5


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``. Raises ``InvalidTopicError``."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
        )
    if not _LEGAL_CHARS.fullmatch(name):  # not match(): '$' would accept a trailing newline
        raise InvalidTopicError(
            f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'"
        )


def collision_key(name: str) -> str:
    """Topics whose names differ only by '.' and '_' collide (their metric names would)."""
    return name.replace(".", "_")


def can_collide(name: str) -> bool:
    """Whether ``name`` can collide with another name: only one with '.' or '_' can (any other
    is its own collision key, which no other name has)."""
    return "." in name or "_" in name


async def colliding_topics(session: CoordSession, name: str) -> list[str]:
    """The existing topics whose names collide with ``name``. A name with neither '.' nor '_'
    can collide with no other name, so only the others list every topic (which costs O(topics)
    per creation: 10,000 topics created one by one read 50 million names)."""
    if not can_collide(name):
        return []
    try:
        existing = await session.get_children(paths.BROKER_TOPICS)
    except NoNode:
        return []
    key = collision_key(name)
    return sorted(t for t in existing if t != name and collision_key(t) == key)


def _collision_keys(names: set[str]) -> dict[str, set[str]]:
    """The names that can collide with another (those with '.' or '_'), by collision key."""
    keys: dict[str, set[str]] = {}
    for name in names:
        if can_collide(name):
            keys.setdefault(collision_key(name), set()).add(name)
    return keys


def _check_topic_configs(configs: Mapping[str, str]) -> None:
    """Raises ``InvalidConfigurationError`` unless ``configs`` are valid topic configs."""
    problem = validate_topic_configs(configs)
    if problem is not None:
        raise InvalidConfigurationError(problem)


async def registered_brokers(
    session: CoordSession, rack_aware_mode: str = "enforced"
) -> list[BrokerMetadata]:
    """The registered brokers, sorted, with racks as ``rack_aware_mode`` wants them."""
    found = await get_all_brokers_and_epochs(session)
    return broker_metadatas(
        [BrokerMetadata(b.id, b.rack) for b, _ in found.values()], rack_aware_mode
    )


async def topic_exists(session: CoordSession, name: str) -> bool:
    return await session.exists(paths.topic_path(name)) is not None


async def is_topic_marked_for_deletion(session: CoordSession, name: str) -> bool:
    return await session.exists(paths.delete_topic_path(name)) is not None


async def create_topic(
    session: CoordSession,
    name: str,
    num_partitions: int,
    replication_factor: int,
    configs: Mapping[str, str] | None = None,
    *,
    replica_assignment: Mapping[int, Sequence[int]] | None = None,
    validate_only: bool = False,
    rack_aware_mode: str = "enforced",
    rng: random.Random | None = None,
) -> str:
    """Create topic ``name``; returns its topic id (``ZERO_TOPIC_ID`` when ``validate_only``).

    With ``replica_assignment`` (partition -> broker ids) the counts are taken from it; else
    ``num_partitions`` x ``replication_factor`` replicas are assigned over the registered brokers.
    """
    configs = dict(configs or {})
    validate_topic_name(name)
    if await topic_exists(session, name):
        raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
    if await is_topic_marked_for_deletion(session, name):
        raise TopicAlreadyExistsError(f"Topic '{name}' is marked for deletion.")
    colliding = await colliding_topics(session, name)
    if colliding:
        raise InvalidTopicError(
            f"Topic '{name}' collides with existing topics: {', '.join(colliding)}"
        )

    brokers = await registered_brokers(session, rack_aware_mode)
    if replica_assignment:
        assignment = {int(p): [int(b) for b in r] for p, r in replica_assignment.items()}
        validate_replica_assignment(assignment, [b.id for b in brokers])
    else:
        assignment = assign_replicas_to_brokers(
            brokers, num_partitions, replication_factor, rng=rng
        )
    _check_topic_configs(configs)
    if validate_only:
        return ZERO_TOPIC_ID

    topic_id = paths.new_topic_id()
    full = {p: ReplicaAssignment(tuple(r)) for p, r in sorted(assignment.items())}
    data = encode_assignment(name, topic_id, full)
    # Measured before the config is written, so a refused topic leaves no config node behind.
    _check_node_size(name, paths.topic_path(name), data)
    # The config goes first, so the controller (and the brokers creating logs) never see the
    # topic without its overrides.
    await _set_or_create_entity_config(session, paths.topic_config_path(name), configs)
    await session.ensure_path(paths.BROKER_TOPICS)
    try:
        await session.create(paths.topic_path(name), data)
    except NodeExists:
        raise TopicAlreadyExistsError(f"Topic '{name}' already exists.") from None
    except RequestTooLarge as e:
        raise _too_large(name, e) from None
    if configs:
        # Brokers cache topic configs and refresh them on change notifications; without one a
        # broker would create the new topic's logs with its defaults (a compacted topic would
        # never be compacted). Kafka's brokers read the config node when creating a log.
        await _announce_config_change(session, name)
    return topic_id


@dataclass(frozen=True)
class TopicToCreate:
    """One topic of ``create_topics``: what ``create_topic`` takes."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)
    replica_assignment: Mapping[int, Sequence[int]] | None = None


MAX_CREATE_OPS = 500
MAX_CREATE_BYTES = 512 * 1024
"""Bounds of one ``create_topics`` multi: well under ZooKeeper's ``jute.maxbuffer`` (1 MiB)."""


async def create_topics(
    session: CoordSession,
    topics: Sequence[TopicToCreate],
    *,
    validate_only: bool = False,
    rack_aware_mode: str = "enforced",
    rng: random.Random | None = None,
) -> list[str | KafkaError]:
    """``create_topic`` for many topics at once, answered per topic (its id, or the error it
    would have raised), in a fixed number of store round trips instead of about ten per
    topic: the existing topics, the topics marked for deletion, the existing config nodes and
    the registered brokers are read once; each topic's config node and assignment node are
    then created in multis of at most ``MAX_CREATE_OPS`` operations / ``MAX_CREATE_BYTES``,
    sent without waiting for each other (a topic's config stays in the same multi as its
    assignment, before it: the controller never sees the topic without its overrides).

    The topics are checked in order, each against the store and the topics before it (a name
    colliding with an earlier one of the batch is refused, as one-by-one creation would). A
    multi that fails (another client created one of its topics meanwhile) is redone topic by
    topic with ``create_topic``, so every topic gets the answer it would have got alone."""
    answers: list[str | KafkaError] = [
        InvalidTopicError("not checked") for _ in topics
    ]  # every slot is replaced below
    # One generator for the batch: a new one per topic seeded itself from the OS each time
    # (a getrandom call and a seeding: 3% of the broker's CPU creating 1,000 topics a batch).
    rng = rng or random.Random()
    existing = set(await _children(session, paths.BROKER_TOPICS))
    marked = set(await _children(session, paths.DELETE_TOPICS))
    config_nodes = set(await _children(session, paths.CONFIG_TOPICS))
    brokers_error: KafkaError | None = None
    try:
        brokers = await registered_brokers(session, rack_aware_mode)
    except KafkaError as error:  # a mix of racked and unracked brokers: every topic is refused
        brokers, brokers_error = [], error
    broker_ids = [b.id for b in brokers]
    # The collision keys of the existing topics, made when the first name that can collide is
    # checked: only a name with '.' or '_' can collide with another (see colliding_topics), so
    # a batch of plain names does not walk every existing topic (9.8 ms a request at 10,000).
    keys: dict[str, set[str]] | None = None
    planned: list[tuple[int, TopicToCreate, list[Op]]] = []
    for index, topic in enumerate(topics):
        name = topic.name
        try:
            validate_topic_name(name)
            if name in existing:
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
            if name in marked:
                raise TopicAlreadyExistsError(f"Topic '{name}' is marked for deletion.")
            if can_collide(name):
                if keys is None:
                    keys = _collision_keys(existing)
                colliding = sorted(keys.get(collision_key(name), set()) - {name})
            else:
                colliding = []
            if colliding:
                raise InvalidTopicError(
                    f"Topic '{name}' collides with existing topics: {', '.join(colliding)}"
                )
            if brokers_error is not None:
                raise brokers_error
            if topic.replica_assignment:
                assignment = {
                    int(p): [int(b) for b in r] for p, r in topic.replica_assignment.items()
                }
                validate_replica_assignment(assignment, broker_ids)
            else:
                assignment = assign_replicas_to_brokers(
                    brokers, topic.num_partitions, topic.replication_factor, rng=rng
                )
            configs = dict(topic.configs or {})
            _check_topic_configs(configs)
            if validate_only:
                answers[index] = ZERO_TOPIC_ID
                continue
            topic_id = paths.new_topic_id()
            full = {p: ReplicaAssignment(tuple(r)) for p, r in sorted(assignment.items())}
            data = encode_assignment(name, topic_id, full)
            _check_node_size(name, paths.topic_path(name), data)
        except KafkaError as error:
            answers[index] = error
            continue
        config_path = paths.topic_config_path(name)
        config_data = paths.encode_entity_config(configs)
        ops: list[Op] = [
            SetDataOp(config_path, config_data, -1)
            if name in config_nodes
            else CreateOp(config_path, config_data),
            CreateOp(paths.topic_path(name), data),
        ]
        if configs:
            ops.append(
                CreateOp(
                    paths.config_change_sequence_path(),
                    paths.encode_config_change(f"topics/{name}"),
                    sequential=True,
                )
            )
        answers[index] = topic_id
        existing.add(name)
        if keys is not None and can_collide(name):
            keys.setdefault(collision_key(name), set()).add(name)
        planned.append((index, topic, ops))
    if not planned:
        return answers
    await session.ensure_path(paths.BROKER_TOPICS)
    await session.ensure_path(paths.CONFIG_TOPICS)
    await session.ensure_path(paths.CONFIG_CHANGES)
    chunks: list[list[tuple[int, TopicToCreate, list[Op]]]] = [[]]
    size = ops_count = 0
    for item in planned:
        item_bytes = sum(len(getattr(op, "data", b"") or b"") + 64 for op in item[2])
        if chunks[-1] and (
            ops_count + len(item[2]) > MAX_CREATE_OPS or size + item_bytes > MAX_CREATE_BYTES
        ):
            chunks.append([])
            size = ops_count = 0
        chunks[-1].append(item)
        size += item_bytes
        ops_count += len(item[2])

    async def create_chunk(chunk: list[tuple[int, TopicToCreate, list[Op]]]) -> None:
        try:
            await session.multi([op for _, _, ops in chunk for op in ops])
            return
        except (NodeExists, NoNode, BadVersion, RequestTooLarge):
            pass  # one of them raced another creator: each topic alone gets its own answer
        for index, topic, _ in chunk:
            try:
                answers[index] = await create_topic(
                    session,
                    topic.name,
                    topic.num_partitions,
                    topic.replication_factor,
                    topic.configs,
                    replica_assignment=topic.replica_assignment,
                    rack_aware_mode=rack_aware_mode,
                    rng=rng,
                )
            except KafkaError as error:
                answers[index] = error

    await asyncio.gather(*(create_chunk(chunk) for chunk in chunks))
    return answers


async def _children(session: CoordSession, path: str) -> list[str]:
    try:
        return await session.get_children(path)
    except NoNode:
        return []


async def delete_topic(session: CoordSession, name: str) -> None:
    """Mark ``name`` for deletion (``/admin/delete_topics/<t>``). Marking twice is harmless.

    Raises ``UnknownTopicOrPartitionError`` when the topic does not exist.
    """
    if not await topic_exists(session, name):
        raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
    await session.ensure_path(paths.DELETE_TOPICS)
    try:
        await session.create(paths.delete_topic_path(name))
    except NodeExists:
        pass  # already queued (Kafka's TopicAlreadyMarkedForDeletionException is swallowed)


async def add_partitions(
    session: CoordSession,
    name: str,
    count: int,
    *,
    replica_assignment: Sequence[Sequence[int]] | None = None,
    validate_only: bool = False,
    rack_aware_mode: str = "enforced",
) -> dict[int, list[int]]:
    """Grow ``name`` to ``count`` partitions; returns the assignment of the new partitions.

    ``replica_assignment`` lists the replicas of each new partition in order (CreatePartitions'
    ``assignments``); without it the new partitions continue the topic's round-robin.
    """
    for _ in range(_CAS_RETRIES):
        found = await get_topic_assignment(session, name)
        if found is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        topic_id, existing, version = found
        if await is_topic_marked_for_deletion(session, name):
            raise InvalidTopicError(f"The topic '{name}' is queued for deletion.")
        old_count = len(existing)
        if count < old_count:
            raise InvalidPartitionsError(
                f"Topic currently has {old_count} partitions, which is higher than the requested {count}."
            )
        if count == old_count:
            raise InvalidPartitionsError(f"Topic already has {old_count} partitions.")
        replication_factor = (
            len(existing[0].replicas)
            if 0 in existing
            else len(next(iter(existing.values())).replicas)
        )
        brokers = await registered_brokers(session, rack_aware_mode)
        increment = count - old_count
        if replica_assignment is not None:
            if len(replica_assignment) != increment:
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {increment} but {len(replica_assignment)} "
                    "assignments provided."
                )
            new = {old_count + i: [int(b) for b in r] for i, r in enumerate(replica_assignment)}
            wrong = {p: len(r) for p, r in new.items() if len(r) != replication_factor}
            if wrong:
                raise InvalidReplicaAssignmentError(
                    f"Inconsistent replication factor between partitions, partition 0 has {replication_factor} "
                    f"while partitions {sorted(wrong)} have replication factors {[wrong[p] for p in sorted(wrong)]}, "
                    "respectively."
                )
            validate_replica_assignment(
                {p - old_count: r for p, r in new.items()}, [b.id for b in brokers]
            )
        else:
            first_leader = existing[min(existing)].replicas[0]
            start_index = next((i for i, b in enumerate(brokers) if b.id >= first_leader), 0)
            new = assign_replicas_to_brokers(
                brokers, increment, replication_factor, start_index, start_partition_id=old_count
            )
        if validate_only:
            return new
        full = dict(existing)
        full.update({p: ReplicaAssignment(tuple(r)) for p, r in new.items()})
        try:
            await session.set_data(
                paths.topic_path(name), encode_assignment(name, topic_id, full), version
            )
        except RequestTooLarge as e:
            raise _too_large(name, e) from None
        except BadVersion:
            continue  # the assignment changed under us: decide again on the new one
        except NoNode:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.") from None
        return new
    raise InvalidPartitionsError(f"The assignment of topic '{name}' kept changing; try again.")


def _check_node_size(topic: str, path: str, data: bytes) -> None:
    try:
        check_request_length([CreateOp(path, data)], multi=False)
    except RequestTooLarge as e:
        raise _too_large(topic, e) from None


def _too_large(topic: str, error: RequestTooLarge) -> PolicyViolationError:
    """A topic whose assignment node would not fit in the coordination store (jute.maxbuffer,
    as a ZooKeeper-based Kafka is bounded): refused, as any other partition ceiling is."""
    return PolicyViolationError(
        f"The assignment of topic '{topic}' does not fit in the coordination store: {error}."
    )


async def alter_topic_config(session: CoordSession, topic: str, configs: Mapping[str, str]) -> None:
    """Replace the overrides of ``topic`` and announce the change (Kafka's ``changeTopicConfig``)."""
    if not await topic_exists(session, topic):
        raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")
    configs = {str(k): str(v) for k, v in configs.items()}
    _check_topic_configs(configs)
    await _set_or_create_entity_config(session, paths.topic_config_path(topic), configs)
    await _announce_config_change(session, topic)


async def _announce_config_change(session: CoordSession, topic: str) -> None:
    await session.ensure_path(paths.CONFIG_CHANGES)
    await session.create(
        paths.config_change_sequence_path(),
        paths.encode_config_change(f"topics/{topic}"),
        sequential=True,
    )


async def _set_or_create_entity_config(
    session: CoordSession, path: str, configs: Mapping[str, str]
) -> None:
    data = paths.encode_entity_config(configs)
    await session.ensure_path(path.rsplit("/", 1)[0])
    for _ in range(_CAS_RETRIES):
        stat = await session.exists(path)
        try:
            if stat is None:
                await session.multi([CreateOp(path, data)])
            else:
                await session.multi([SetDataOp(path, data, stat.version)])
            return
        except (NodeExists, BadVersion, NoNode):
            continue
        except RequestTooLarge as e:
            raise InvalidConfigurationError(f"{path}: the configs are too large: {e}.") from None
    raise InvalidConfigurationError(f"{path} kept changing; try again.")


async def reassign_partitions(
    session: CoordSession, reassignment: Mapping[TopicPartition, Sequence[int]]
) -> None:
    """Ask the controller to move ``reassignment`` (partition -> new replicas, first = preferred
    leader). Raises ``ReassignmentInProgressError`` while an earlier request is not finished,
    ``UnknownTopicOrPartitionError`` / ``InvalidReplicaAssignmentError`` for bad input."""
    if not reassignment:
        raise InvalidReplicaAssignmentError("No partitions to reassign.")
    brokers = {b.id for b in await registered_brokers(session, "disabled")}
    assignments: dict[str, dict[int, ReplicaAssignment]] = {}
    for tp, replicas in sorted(reassignment.items()):
        if tp.topic not in assignments:
            found = await get_topic_assignment(session, tp.topic)
            if found is None:
                raise UnknownTopicOrPartitionError(f"Topic '{tp.topic}' does not exist.")
            assignments[tp.topic] = found[1]
        if tp.partition not in assignments[tp.topic]:
            raise UnknownTopicOrPartitionError(f"Partition {tp} does not exist.")
        if not replicas or len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"Bad replica list for {tp}: {list(replicas)}.")
        unknown = sorted(set(replicas) - brokers)
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"Unknown broker(s) in replica assignment: {unknown}."
            )
    await session.ensure_path(paths.ADMIN)
    try:
        await session.create(
            paths.REASSIGN_PARTITIONS,
            paths.encode_reassignment({tp: tuple(r) for tp, r in reassignment.items()}),
        )
    except NodeExists:
        raise ReassignmentInProgressError("A partition reassignment is in progress.") from None


async def get_partition_reassignments(
    session: CoordSession,
) -> dict[TopicPartition, tuple[int, ...]]:
    """The reassignments not finished yet (what ``/admin/reassign_partitions`` still holds)."""
    return await zk_client.get_partition_reassignments(session)


async def request_preferred_replica_election(
    session: CoordSession, partitions: Sequence[TopicPartition]
) -> None:
    """Ask the controller to move leadership back to the preferred replicas of ``partitions``
    (Kafka's ``kafka-preferred-replica-election.sh``: ``/admin/preferred_replica_election``).
    Raises ``AdminOperationError`` while an earlier request is still being processed."""
    await session.ensure_path(paths.ADMIN)
    try:
        await session.create(
            paths.PREFERRED_REPLICA_ELECTION, paths.encode_preferred_replica_election(partitions)
        )
    except NodeExists:
        raise AdminOperationError(
            "Preferred replica leader election currently in progress."
        ) from None
