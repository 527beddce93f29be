"""zk/admin.py: the znodes topic administration writes, and its validation errors."""

import contextlib
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.protocol.errors import (
    ErrorCode,
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    KafkaError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kafkalite.zk import admin
from kafkalite.zk import client as zk_client
from kafkalite.zk import data as paths
from tests.controller.shell_support import register_broker


@pytest.fixture
async def session():
    store = EmbeddedStore(None)
    s = await store.open_session()
    for b in (0, 1, 2):
        await register_broker(store, b)
    yield s
    await store.close()


async def test_create_topic_writes_config_then_assignment(session):
    topic_id = await admin.create_topic(
        session, "orders", 6, 2, {"cleanup.policy": "compact"}, rng=random.Random(1)
    )
    data, _ = await session.get_data(paths.topic_path("orders"))
    node = json.loads(data)
    assert node["version"] == 3 and node["topic_id"] == topic_id
    assert sorted(node["partitions"]) == [str(p) for p in range(6)]
    assert all(len(set(r)) == 2 and set(r) <= {0, 1, 2} for r in node["partitions"].values())
    leaders = [node["partitions"][str(p)][0] for p in range(6)]
    assert sorted(leaders) == [0, 0, 1, 1, 2, 2]
    assert await zk_client.get_topic_config(session, "orders") == {"cleanup.policy": "compact"}
    assert len(paths.topic_id_bytes(topic_id)) == 16


async def test_create_topic_with_manual_assignment(session):
    await admin.create_topic(session, "manual", -1, -1, replica_assignment={0: [2, 1], 1: [1, 2]})
    _, assignment, _ = await zk_client.get_topic_assignment(session, "manual")
    assert {p: a.replicas for p, a in assignment.items()} == {0: (2, 1), 1: (1, 2)}


async def test_validate_only_writes_nothing(session):
    assert await admin.create_topic(session, "dry", 1, 1, validate_only=True) == admin.ZERO_TOPIC_ID
    assert await session.exists(paths.topic_path("dry")) is None
    assert await session.exists(paths.topic_config_path("dry")) is None


@pytest.mark.parametrize(
    ("name", "kwargs", "error", "code"),
    [
        ("", {}, InvalidTopicError, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("..", {}, InvalidTopicError, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("a/b", {}, InvalidTopicError, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("evt\n", {}, InvalidTopicError, ErrorCode.INVALID_TOPIC_EXCEPTION),  # not via '$'
        ("x" * 250, {}, InvalidTopicError, ErrorCode.INVALID_TOPIC_EXCEPTION),
        (
            "t",
            {"replication_factor": 4},
            InvalidReplicationFactorError,
            ErrorCode.INVALID_REPLICATION_FACTOR,
        ),
        (
            "t",
            {"replication_factor": 0},
            InvalidReplicationFactorError,
            ErrorCode.INVALID_REPLICATION_FACTOR,
        ),
        ("t", {"num_partitions": 0}, InvalidPartitionsError, ErrorCode.INVALID_PARTITIONS),
        (
            "t",
            {"configs": {"retention.ms": "soon"}},
            InvalidConfigurationError,
            ErrorCode.INVALID_CONFIG,
        ),
        (
            "t",
            {"replica_assignment": {0: [0, 0]}},
            InvalidReplicaAssignmentError,
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            "t",
            {"replica_assignment": {0: [7]}},
            InvalidReplicaAssignmentError,
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
    ],
)
async def test_create_topic_validation(session, name, kwargs, error, code):
    args = {"num_partitions": 1, "replication_factor": 1, **kwargs}
    with pytest.raises(error) as info:
        await admin.create_topic(
            session, name, args.pop("num_partitions"), args.pop("replication_factor"), **args
        )
    assert info.value.error_code == code
    assert await zk_client.get_all_topics(session) == set()


async def test_existing_colliding_and_deleting_topics(session):
    await admin.create_topic(session, "a.b", 1, 1)
    with pytest.raises(TopicAlreadyExistsError, match="already exists"):
        await admin.create_topic(session, "a.b", 1, 1)
    with pytest.raises(InvalidTopicError, match="collides with existing topics: a.b"):
        await admin.create_topic(session, "a_b", 1, 1)
    await admin.delete_topic(session, "a.b")
    assert await session.exists(paths.delete_topic_path("a.b")) is not None
    with pytest.raises(InvalidTopicError, match="queued for deletion"):
        await admin.add_partitions(session, "a.b", 3)
    with pytest.raises(UnknownTopicOrPartitionError):
        await admin.delete_topic(session, "nope")


async def test_add_partitions_rules(session):
    await admin.create_topic(session, "g", 3, 2)
    with pytest.raises(InvalidPartitionsError, match="already has 3 partitions"):
        await admin.add_partitions(session, "g", 3)
    with pytest.raises(InvalidPartitionsError, match="higher than the requested 2"):
        await admin.add_partitions(session, "g", 2)
    with pytest.raises(InvalidReplicaAssignmentError, match="by 2 but 1 assignments"):
        await admin.add_partitions(session, "g", 5, replica_assignment=[[0, 1]])
    with pytest.raises(InvalidReplicaAssignmentError, match="Inconsistent replication factor"):
        await admin.add_partitions(session, "g", 4, replica_assignment=[[0]])
    with pytest.raises(UnknownTopicOrPartitionError):
        await admin.add_partitions(session, "missing", 4)
    assert await admin.add_partitions(session, "g", 4, validate_only=True)
    _, assignment, version = await zk_client.get_topic_assignment(session, "g")
    assert len(assignment) == 3
    new = await admin.add_partitions(session, "g", 6)
    _, assignment, new_version = await zk_client.get_topic_assignment(session, "g")
    assert sorted(assignment) == list(range(6)) and new_version == version + 1
    assert {p: list(assignment[p].replicas) for p in (3, 4, 5)} == new


async def test_alter_topic_config_replaces_and_notifies(session):
    await admin.create_topic(session, "c", 1, 1, {"retention.ms": "1"})
    # A topic created with overrides is announced too (brokers refresh their cached configs).
    assert len(await session.get_children(paths.CONFIG_CHANGES)) == 1
    await admin.create_topic(session, "plain", 1, 1)
    assert len(await session.get_children(paths.CONFIG_CHANGES)) == 1
    await admin.alter_topic_config(session, "c", {"segment.bytes": "1048576"})
    assert await zk_client.get_topic_config(session, "c") == {"segment.bytes": "1048576"}
    changes = sorted(await session.get_children(paths.CONFIG_CHANGES))
    assert len(changes) == 2 and all(c.startswith(paths.CONFIG_CHANGE_PREFIX) for c in changes)
    for change in changes:
        data, _ = await session.get_data(f"{paths.CONFIG_CHANGES}/{change}")
        assert paths.decode_config_change(data) == "topics/c"
    with pytest.raises(UnknownTopicOrPartitionError):
        await admin.alter_topic_config(session, "nope", {})
    with pytest.raises(InvalidConfigurationError):
        await admin.alter_topic_config(session, "c", {"segment.bytes": "big"})


class ListingOnly:
    """A session that only lists /brokers/topics, counting the listings."""

    def __init__(self, topics: list[str]) -> None:
        self.topics = topics
        self.listings = 0

    async def get_children(self, path: str) -> list[str]:
        assert path == paths.BROKER_TOPICS
        self.listings += 1
        return self.topics


TOPIC_NAMES = st.text(alphabet="ab._-", min_size=1, max_size=4)


@settings(deadline=None)  # no timing assertion: a loaded machine makes an example slow
@given(existing=st.lists(TOPIC_NAMES, unique=True, max_size=12), name=TOPIC_NAMES)
async def test_colliding_topics_agrees_with_comparing_every_name(existing, name):
    """The fast path (a name without '.' or '_' lists nothing) finds exactly the collisions a
    comparison with every existing name finds."""
    session = ListingOnly(existing)
    found = await admin.colliding_topics(session, name)
    expected = sorted(
        t for t in existing if t != name and t.replace(".", "_") == name.replace(".", "_")
    )
    assert found == expected
    if "." not in name and "_" not in name:
        assert session.listings == 0


@pytest.fixture
async def wide_ids_session():
    """Brokers whose ids take ten digits each, so an assignment node grows fast."""
    store = EmbeddedStore(None)
    s = await store.open_session()
    for b in (2_000_000_001, 2_000_000_002, 2_000_000_003):
        await register_broker(store, b)
    yield s
    await store.close()


async def test_an_assignment_too_large_for_the_store_is_refused_and_nothing_is_written(
    wide_ids_session,
):
    """A topic whose assignment node is longer than jute.maxbuffer (1 MiB) is POLICY_VIOLATION,
    as a ZooKeeper-based Kafka cannot hold it either; not even its config node is left."""
    session = wide_ids_session
    with pytest.raises(PolicyViolationError, match="jute.maxbuffer"):
        await admin.create_topic(session, "wide", 30_000, 3, {"retention.ms": "1000"})
    assert await session.exists(paths.topic_path("wide")) is None
    assert await session.exists(paths.topic_config_path("wide")) is None

    await admin.create_topic(session, "grows", 20_000, 3)
    with pytest.raises(PolicyViolationError, match="jute.maxbuffer"):
        await admin.add_partitions(session, "grows", 30_000)
    _, assignment, _ = await zk_client.get_topic_assignment(session, "grows")
    assert len(assignment) == 20_000


async def test_configs_too_large_for_the_store_are_invalid(session):
    await admin.create_topic(session, "configured", 1, 1)
    with pytest.raises(InvalidConfigurationError, match="too large"):
        await admin.alter_topic_config(
            # valid (the controller refuses unknown names, as Kafka's LogConfig.validate does)
            session,
            "configured",
            {"retention.ms": "1000", "cleanup.policy": ",".join(["compact"] * 300_000)},
        )


BATCH_NAMES = st.text(alphabet="ab._", min_size=1, max_size=3)


@settings(deadline=None, max_examples=60)  # each example opens two stores
@given(
    existing=st.lists(BATCH_NAMES, unique=True, max_size=4),
    marked=st.lists(BATCH_NAMES, unique=True, max_size=2),
    batch=st.lists(
        st.tuples(
            BATCH_NAMES,
            st.integers(1, 3),
            st.integers(1, 3),
            st.sampled_from([{}, {"cleanup.policy": "compact"}, {"segment.bytes": "big"}]),
        ),
        max_size=8,
    ),
    validate_only=st.booleans(),
)
async def test_create_topics_answers_as_creating_them_one_by_one(
    existing, marked, batch, validate_only
):
    """The batch answers every topic as ``create_topic`` one after the other would (the same
    error kind, or success), and leaves the same topics, configs and change notifications."""

    async def run(batched: bool):
        store = EmbeddedStore(None)
        session = await store.open_session()
        for b in (1, 2):
            await register_broker(store, b)
        for name in existing:
            with contextlib.suppress(KafkaError):  # an invalid or colliding name
                await admin.create_topic(session, name, 1, 1)
        await session.ensure_path(paths.DELETE_TOPICS)
        for name in marked:
            if name not in existing and name not in (".", ".."):
                await session.create(paths.delete_topic_path(name))
        if batched:
            answers = await admin.create_topics(
                session,
                [admin.TopicToCreate(n, p, r, c) for n, p, r, c in batch],
                validate_only=validate_only,
            )
        else:
            answers = []
            for n, p, r, c in batch:
                try:
                    answers.append(
                        await admin.create_topic(session, n, p, r, c, validate_only=validate_only)
                    )
                except Exception as error:
                    answers.append(error)
        kinds = [type(a).__name__ if isinstance(a, Exception) else "ok" for a in answers]
        topics = sorted(await admin._children(session, paths.BROKER_TOPICS))
        configs = {
            t: paths.decode_entity_config((await session.get_data(paths.topic_config_path(t)))[0])
            for t in topics
        }
        changes = len(await admin._children(session, paths.CONFIG_CHANGES))
        await store.close()
        return kinds, topics, configs, changes

    assert await run(batched=True) == await run(batched=False)
