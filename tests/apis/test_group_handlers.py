"""The consumer-group handlers, through the dispatcher (frame in, frame out), over a real
GroupCoordinator on an in-memory ``__consumer_offsets`` and a fake metadata cache.

Version mapping (v0 vs v4+ JoinGroup, v0-v2 vs v3+ LeaveGroup, OffsetFetch v1 / v2+ / batched
v8), FindCoordinator (topic creation on first use, loading, batched keys, key types) and Kafka's
error codes for bad input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kafkalite.apis.base import BrokerServices, build
from kafkalite.apis.dispatcher import advertised_versions
from kafkalite.broker.clock import SYSTEM_TIME
from kafkalite.broker.metadata_cache import BrokerEndpoint, MetadataBroker, PartitionInfo
from kafkalite.config import BrokerConfig
from kafkalite.group import GroupCoordinator
from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME, GroupConfig, OffsetConfig
from kafkalite.protocol.api import GROUP_KEYS, ApiKey, request_class
from kafkalite.protocol.consumer_protocol import encode_subscription
from kafkalite.protocol.errors import ErrorCode
from tests.apis.support import MemoryWriter

OFFSETS_PARTITIONS = 4
SUBSCRIPTION = encode_subscription(["t"])
HOST, PORT = "broker0.example", 19092


@dataclass
class FakeMetadataCache:
    topics: dict[str, int] = field(default_factory=lambda: {"t": 3})
    alive: int = 1
    leader: int = 0

    def contains_topic(self, topic):
        return topic in self.topics

    def contains_partition(self, topic, partition):
        return 0 <= partition < self.topics.get(topic, 0)

    def get_partition_info(self, topic, partition):
        if not self.contains_partition(topic, partition):
            return None
        return PartitionInfo(topic, partition, self.leader, 0, (self.leader,), (self.leader,))

    def get_alive_brokers(self):
        endpoint = BrokerEndpoint("PLAINTEXT", HOST, PORT)
        return [MetadataBroker(i, {"PLAINTEXT": endpoint}) for i in range(self.alive)]

    def get_alive_broker_node(self, broker_id, listener):
        if broker_id >= self.alive:
            return None
        return BrokerEndpoint(listener, HOST, PORT)


@pytest.fixture
async def coordinator():
    c = GroupCoordinator(
        0,
        MemoryWriter(),
        GroupConfig(group_initial_rebalance_delay_ms=0),
        OffsetConfig(
            offsets_topic_num_partitions=OFFSETS_PARTITIONS, offsets_topic_replication_factor=3
        ),
        SYSTEM_TIME,
    )
    c.startup()
    for p in range(OFFSETS_PARTITIONS):
        await c.on_election(p, 0)
    yield c
    await c.shutdown()


@pytest.fixture
def services(coordinator):
    cache = FakeMetadataCache(topics={"t": 3, GROUP_METADATA_TOPIC_NAME: OFFSETS_PARTITIONS})
    return BrokerServices(
        config=BrokerConfig.load(environ={}),
        broker_id=0,
        metadata_cache=cache,
        group_coordinator=coordinator,
        store=object(),
    )


def req(api_key, version, **values):
    return build(request_class(api_key, version), values)


async def join(call, group, member_id="", version=9, **extra):
    values = dict(
        group_id=group,
        session_timeout=10_000,
        rebalance_timeout=10_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": SUBSCRIPTION}],
    )
    values.update(extra)
    return await call(ApiKey.JOIN_GROUP, version, req(ApiKey.JOIN_GROUP, version, **values))


async def form_group(call, group):
    """One member, Stable; returns (member_id, generation)."""
    first = await join(call, group)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joined = await join(call, group, first.member_id)
    assert joined.error_code == ErrorCode.NONE
    assert joined.leader == joined.member_id == first.member_id
    sync = await call(
        ApiKey.SYNC_GROUP,
        5,
        req(
            ApiKey.SYNC_GROUP,
            5,
            group_id=group,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[{"member_id": joined.member_id, "assignment": b"all of t"}],
        ),
    )
    assert sync.error_code == ErrorCode.NONE and sync.assignment == b"all of t"
    assert (sync.protocol_type, sync.protocol_name) == ("consumer", "range")
    return joined.member_id, joined.generation_id


async def commit(call, group, member_id, generation, offsets, version=8):
    """offsets: {(topic, partition): (offset, metadata)}; returns {(topic, partition): code}."""
    topics: dict[str, list] = {}
    for (topic, partition), (offset, metadata) in offsets.items():
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_metadata": metadata,
            }
        )
    response = await call(
        ApiKey.OFFSET_COMMIT,
        version,
        req(
            ApiKey.OFFSET_COMMIT,
            version,
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            retention_time=-1,
            topics=[{"name": n, "partitions": ps} for n, ps in topics.items()],
        ),
    )
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


async def fetch(call, group, partitions=None, version=7):
    topics = None
    if partitions is not None:
        topics = [{"name": "t", "partition_indexes": partitions}]
    response = await call(
        ApiKey.OFFSET_FETCH,
        version,
        req(ApiKey.OFFSET_FETCH, version, group_id=group, topics=topics),
    )
    return response


# ---------------------------------------------------------------------- advertised versions


def test_group_apis_are_advertised_with_their_ranges():
    versions = advertised_versions()
    for key in GROUP_KEYS:
        assert key in versions
    assert versions[ApiKey.FIND_COORDINATOR] == (0, 4)
    assert versions[ApiKey.JOIN_GROUP][1] >= 5  # static membership
    assert versions[ApiKey.OFFSET_FETCH][1] >= 8  # batched groups


# ---------------------------------------------------------------------- FindCoordinator


async def test_find_coordinator_every_version(call):
    for version in range(4):
        values = {"key": "g"} if version == 0 else {"key": "g", "key_type": 0}
        r = await call(
            ApiKey.FIND_COORDINATOR, version, req(ApiKey.FIND_COORDINATOR, version, **values)
        )
        assert (r.error_code, r.node_id, r.host, r.port) == (ErrorCode.NONE, 0, HOST, PORT)
    r = await call(
        ApiKey.FIND_COORDINATOR,
        4,
        req(ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["a", "b", "c"]),
    )
    assert [(c.key, c.error_code, c.node_id, c.port) for c in r.coordinators] == [
        (k, ErrorCode.NONE, 0, PORT) for k in "abc"
    ]


async def test_find_coordinator_transaction_and_unknown_key_types(call):
    r = await call(
        ApiKey.FIND_COORDINATOR, 3, req(ApiKey.FIND_COORDINATOR, 3, key="tx", key_type=1)
    )
    assert r.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE and r.node_id == -1
    r = await call(
        ApiKey.FIND_COORDINATOR,
        4,
        req(ApiKey.FIND_COORDINATOR, 4, key_type=7, coordinator_keys=["x"]),
    )
    assert r.coordinators[0].error_code == ErrorCode.INVALID_REQUEST


async def test_find_coordinator_creates_the_offsets_topic_on_first_use(call, services, monkeypatch):
    from kafkalite.protocol.errors import TopicAlreadyExistsError
    from kafkalite.zk import admin

    del services.metadata_cache.topics[GROUP_METADATA_TOPIC_NAME]
    services.metadata_cache.alive = 2
    created = []

    async def create_topic(store, name, partitions, replication_factor, configs=None, **kw):
        if created:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        created.append((store, name, partitions, replication_factor, dict(configs)))
        return "id"

    monkeypatch.setattr(admin, "create_topic", create_topic)
    for _ in range(2):
        r = await call(
            ApiKey.FIND_COORDINATOR, 3, req(ApiKey.FIND_COORDINATOR, 3, key="g", key_type=0)
        )
        assert r.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    [(store, name, partitions, rf, configs)] = created
    assert (store, name, partitions) == (
        services.store,
        GROUP_METADATA_TOPIC_NAME,
        OFFSETS_PARTITIONS,
    )
    assert rf == 2  # offsets.topic.replication.factor 3, capped at the 2 live brokers
    assert configs["cleanup.policy"] == "compact"


async def test_find_coordinator_waits_for_the_partition_to_load(call, coordinator):
    partition = coordinator.partition_for("g")
    coordinator.on_resignation(partition, None)
    r = await call(ApiKey.FIND_COORDINATOR, 1, req(ApiKey.FIND_COORDINATOR, 1, key="g", key_type=0))
    assert r.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    await coordinator.on_election(partition, 1)
    r = await call(ApiKey.FIND_COORDINATOR, 1, req(ApiKey.FIND_COORDINATOR, 1, key="g", key_type=0))
    assert r.error_code == ErrorCode.NONE


async def test_find_coordinator_without_a_leader(call, services):
    services.metadata_cache.leader = 5  # not alive
    r = await call(ApiKey.FIND_COORDINATOR, 2, req(ApiKey.FIND_COORDINATOR, 2, key="g", key_type=0))
    assert r.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


# ---------------------------------------------------------------------- membership


async def test_join_v0_needs_no_member_id_round_trip(call):
    r = await join(call, "old", version=0)
    assert r.error_code == ErrorCode.NONE and r.member_id and r.leader == r.member_id
    assert r.protocol_name == "range" and r.generation_id == 1
    assert [m.member_id for m in r.members] == [r.member_id]
    assert r.members[0].metadata == SUBSCRIPTION


async def test_join_errors(call):
    r = await join(call, "g", version=5, protocols=[])
    assert r.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    r = await join(call, "g", version=5, session_timeout=10)
    assert r.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    r = await join(call, "", version=5)
    assert r.error_code == ErrorCode.INVALID_GROUP_ID
    r = await join(call, "g", member_id="made-up", version=5)
    assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    r = await join(call, "g", version=6, protocols=[])
    assert r.protocol_name == ""  # not nullable before v7
    r = await join(call, "g", version=7, protocols=[])
    assert r.protocol_name is None


async def test_full_cycle_heartbeat_commit_fetch_leave(call):
    member, generation = await form_group(call, "g")
    for version in (0, 4):
        r = await call(
            ApiKey.HEARTBEAT,
            version,
            req(
                ApiKey.HEARTBEAT, version, group_id="g", generation_id=generation, member_id=member
            ),
        )
        assert r.error_code == ErrorCode.NONE
    r = await call(
        ApiKey.HEARTBEAT,
        4,
        req(ApiKey.HEARTBEAT, 4, group_id="g", generation_id=generation + 1, member_id=member),
    )
    assert r.error_code == ErrorCode.ILLEGAL_GENERATION

    results = await commit(
        call,
        "g",
        member,
        generation,
        {("t", 0): (5, "meta ünï"), ("t", 1): (7, None), ("nope", 0): (1, "")},
    )
    assert results == {
        ("t", 0): ErrorCode.NONE,
        ("t", 1): ErrorCode.NONE,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    r = await fetch(call, "g", [0, 1, 2], version=5)
    assert r.error_code == ErrorCode.NONE
    got = {
        p.partition_index: (p.committed_offset, p.metadata, p.error_code)
        for p in r.topics[0].partitions
    }
    assert got == {0: (5, "meta ünï", 0), 1: (7, "", 0), 2: (-1, "", 0)}
    r = await fetch(call, "g", None, version=7)  # every committed partition
    assert sorted((p.partition_index, p.committed_offset) for p in r.topics[0].partitions) == [
        (0, 5),
        (1, 7),
    ]

    r = await call(
        ApiKey.LEAVE_GROUP, 0, req(ApiKey.LEAVE_GROUP, 0, group_id="g", member_id="stranger")
    )
    assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    r = await call(
        ApiKey.LEAVE_GROUP, 1, req(ApiKey.LEAVE_GROUP, 1, group_id="g", member_id=member)
    )
    assert r.error_code == ErrorCode.NONE
    r = await call(ApiKey.DESCRIBE_GROUPS, 5, req(ApiKey.DESCRIBE_GROUPS, 5, groups=["g"]))
    assert (r.groups[0].group_state, len(r.groups[0].members)) == ("Empty", 0)
    # the offsets of an empty group stay
    r = await fetch(call, "g", [0], version=1)
    assert r.topics[0].partitions[0].committed_offset == 5


async def test_leave_group_batch(call):
    member, _ = await form_group(call, "g")
    r = await call(
        ApiKey.LEAVE_GROUP,
        5,
        req(
            ApiKey.LEAVE_GROUP,
            5,
            group_id="g",
            members=[
                {"member_id": member, "reason": "done"},
                {"member_id": "ghost"},
            ],
        ),
    )
    assert r.error_code == ErrorCode.NONE
    assert [(m.member_id, m.error_code) for m in r.members] == [
        (member, ErrorCode.NONE),
        ("ghost", ErrorCode.UNKNOWN_MEMBER_ID),
    ]


# ---------------------------------------------------------------------- offsets: bad input


async def test_commit_errors_leave_committed_offsets_alone(call):
    member, generation = await form_group(call, "g")
    assert await commit(call, "g", member, generation, {("t", 0): (10, "good")}) == {("t", 0): 0}
    assert await commit(call, "g", "stranger", generation, {("t", 0): (99, "x")}) == {
        ("t", 0): ErrorCode.UNKNOWN_MEMBER_ID
    }
    assert await commit(call, "g", member, generation - 1, {("t", 0): (99, "x")}) == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION
    }
    assert await commit(call, "g", member, generation, {("t", 0): (99, "m" * 4097)}) == {
        ("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE
    }
    assert await commit(call, "g", "", -1, {("t", 0): (99, "admin")}) == {
        ("t", 0): ErrorCode.UNKNOWN_MEMBER_ID  # simple commits only for groups without members
    }
    # Kafka accepts an empty group id for offset commits and fetches (old consumers used it)
    assert await commit(call, "", "", -1, {("t", 0): (1, "")}) == {("t", 0): ErrorCode.NONE}
    r = await fetch(call, "g", [0])
    assert (r.topics[0].partitions[0].committed_offset, r.topics[0].partitions[0].metadata) == (
        10,
        "good",
    )


async def test_simple_commit_without_a_group_and_v2_retention(call):
    assert await commit(call, "simple", "", -1, {("t", 2): (3, "s")}, version=2) == {("t", 2): 0}
    r = await fetch(call, "simple", [2], version=2)
    assert r.topics[0].partitions[0].committed_offset == 3


async def test_offset_fetch_batched_groups(call, coordinator):
    coordinator.on_resignation(coordinator.partition_for("g"), None)
    await commit(call, "a", "", -1, {("t", 0): (1, "a")})
    await commit(call, "b", "", -1, {("t", 0): (2, "b")})
    r = await call(
        ApiKey.OFFSET_FETCH,
        8,
        req(
            ApiKey.OFFSET_FETCH,
            8,
            groups=[
                {"group_id": "a", "topics": [{"name": "t", "partition_indexes": [0]}]},
                {"group_id": "b", "topics": None},
                {"group_id": "g", "topics": None},
            ],
            require_stable=True,
        ),
    )
    got = {
        g.group_id: (
            g.error_code,
            [(p.committed_offset, p.metadata) for t in g.topics for p in t.partitions],
        )
        for g in r.groups
    }
    assert got == {"a": (0, [(1, "a")]), "b": (0, [(2, "b")]), "g": (ErrorCode.NOT_COORDINATOR, [])}


async def test_offset_fetch_v1_puts_group_errors_on_partitions(call, coordinator):
    coordinator.on_resignation(coordinator.partition_for("g"), None)
    r = await call(
        ApiKey.OFFSET_FETCH,
        1,
        req(
            ApiKey.OFFSET_FETCH,
            1,
            group_id="g",
            topics=[{"name": "t", "partition_indexes": [0, 1]}],
        ),
    )
    assert [p.error_code for p in r.topics[0].partitions] == [ErrorCode.NOT_COORDINATOR] * 2


# ---------------------------------------------------------------------- admin APIs


async def test_list_describe_delete_groups_and_offset_delete(call):
    member, _ = await form_group(call, "live")
    await commit(call, "idle", "", -1, {("t", 0): (4, ""), ("t", 1): (6, "")})

    r = await call(ApiKey.LIST_GROUPS, 5, req(ApiKey.LIST_GROUPS, 5))
    assert sorted((g.group_id, g.group_state, g.group_type) for g in r.groups) == [
        ("idle", "Empty", "classic"),
        ("live", "Stable", "classic"),
    ]
    r = await call(ApiKey.LIST_GROUPS, 4, req(ApiKey.LIST_GROUPS, 4, states_filter=["Stable"]))
    assert [g.group_id for g in r.groups] == ["live"]

    r = await call(
        ApiKey.DESCRIBE_GROUPS, 3, req(ApiKey.DESCRIBE_GROUPS, 3, groups=["live", "unknown"])
    )
    live, unknown = r.groups
    assert (live.group_state, live.protocol_type, live.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    [m] = live.members
    assert (m.member_id, m.client_id, m.client_host) == (member, "test", "/127.0.0.1")
    assert (m.member_metadata, m.member_assignment) == (SUBSCRIPTION, b"all of t")
    assert live.authorized_operations == -(2**31)
    assert (unknown.error_code, unknown.group_state, unknown.members) == (0, "Dead", ())
    r = await call(
        ApiKey.DESCRIBE_GROUPS,
        5,
        req(ApiKey.DESCRIBE_GROUPS, 5, groups=["live"], include_authorized_operations=True),
    )
    # KIP-430 without an authorizer: every operation a GROUP supports (READ, DELETE, DESCRIBE)
    assert r.groups[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)

    r = await call(
        ApiKey.OFFSET_DELETE,
        0,
        req(
            ApiKey.OFFSET_DELETE,
            0,
            group_id="idle",
            topics=[
                {"name": "t", "partitions": [{"partition_index": 0}]},
                {"name": "gone", "partitions": [{"partition_index": 0}]},
            ],
        ),
    )
    assert r.error_code == 0
    assert {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions} == {
        ("t", 0): 0,
        ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    r = await call(
        ApiKey.OFFSET_DELETE,
        0,
        req(
            ApiKey.OFFSET_DELETE,
            0,
            group_id="nobody",
            topics=[{"name": "t", "partitions": [{"partition_index": 0}]}],
        ),
    )
    assert (r.error_code, r.topics) == (ErrorCode.GROUP_ID_NOT_FOUND, ())
    r = await fetch(call, "idle", None)
    assert [(p.partition_index, p.committed_offset) for p in r.topics[0].partitions] == [(1, 6)]

    r = await call(
        ApiKey.DELETE_GROUPS,
        2,
        req(ApiKey.DELETE_GROUPS, 2, groups_names=["idle", "live", "nobody"]),
    )
    assert {x.group_id: x.error_code for x in r.results} == {
        "idle": ErrorCode.NONE,
        "live": ErrorCode.NON_EMPTY_GROUP,
        "nobody": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    r = await fetch(call, "idle", None)
    assert r.topics == ()


async def test_requests_after_the_coordinator_moved_get_not_coordinator(call, coordinator):
    member, generation = await form_group(call, "g")
    coordinator.on_resignation(coordinator.partition_for("g"), None)
    r = await call(
        ApiKey.HEARTBEAT,
        4,
        req(ApiKey.HEARTBEAT, 4, group_id="g", generation_id=generation, member_id=member),
    )
    assert r.error_code == ErrorCode.NOT_COORDINATOR
    assert await commit(call, "g", member, generation, {("t", 0): (1, "")}) == {
        ("t", 0): ErrorCode.NOT_COORDINATOR
    }
