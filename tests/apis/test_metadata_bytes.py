"""Metadata answers from encoded partitions are byte for byte what kio's encoder writes for the
same answer built as a kio entity (``MetadataAnswer.to_response``: partitions from the cache's
per-partition metadata), for every version the broker advertises, random cluster states and
requests (unknown and illegal names, unknown ids, dead leaders, leaders without the client's
listener, v0's unreachable replicas, authorised operations, topics the authorizer refuses),
and after any sequence of cache updates (a stateful test)."""

import asyncio
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkalite.apis.authorization import BrokerAuthorizer, guard
from kafkalite.apis.base import BrokerServices, RequestContext, build
from kafkalite.apis.metadata import MetadataAnswer, handle_metadata
from kafkalite.broker import metadata_bytes as metadata_bytes_module
from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.config import BrokerConfig
from kafkalite.network.connection import ConnectionInfo
from kafkalite.protocol import frames
from kafkalite.protocol.acl import AclOperation, ResourceType
from kafkalite.protocol.api import ADVERTISED_VERSIONS, ApiKey, request_class, response_class
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.acl import AclEntry, PermissionType, ResourcePattern

ALICE = "User:alice"
ZERO_UUID = uuid.UUID(int=0)
LISTENERS = ("PLAINTEXT", "INTERNAL")
TOPICS = ("orders", "payments", "__consumer_offsets", "t.1", "x")
OTHER_NAMES = ("nope", "bad name!", "")
LOW, HIGH = ADVERTISED_VERSIONS[ApiKey.METADATA]
VERSIONS = range(LOW, HIGH + 1)
CONFIG = BrokerConfig.load(overrides={"auto.create.topics.enable": "false"}, environ={})


def update_request(controller_epoch, brokers, topics, controller_id=0):
    """UpdateMetadata v7: ``brokers`` {id: (rack, {listener: port})}, ``topics`` {name: (id,
    [(index, leader, epoch, isr, replicas, offline)])}."""
    return build(
        request_class(ApiKey.UPDATE_METADATA, 7),
        {
            "controller_id": controller_id,
            "controller_epoch": controller_epoch,
            "broker_epoch": -1,
            "topic_states": [
                {
                    "topic_name": name,
                    "topic_id": topic_id,
                    "partition_states": [
                        {
                            "topic_name": name,
                            "partition_index": index,
                            "controller_epoch": controller_epoch,
                            "leader": leader,
                            "leader_epoch": epoch,
                            "isr": isr,
                            "zk_version": 0,
                            "replicas": replicas,
                            "offline_replicas": offline,
                        }
                        for index, leader, epoch, isr, replicas, offline in states
                    ],
                }
                for name, (topic_id, states) in topics.items()
            ],
            "live_brokers": [
                {
                    "id": i,
                    "endpoints": [
                        {"port": port, "host": f"host-{i}", "listener": listener}
                        for listener, port in endpoints.items()
                    ],
                    "rack": rack,
                }
                for i, (rack, endpoints) in brokers.items()
            ],
        },
    )


broker_ids = st.integers(0, 4)
brokers = st.dictionaries(
    broker_ids,
    st.tuples(
        st.none() | st.sampled_from(["r1", "rack-2"]),
        st.dictionaries(st.sampled_from(LISTENERS), st.integers(1, 65535), max_size=2),
    ),
    max_size=4,
)


@st.composite
def partition_state(draw, index):
    replicas = draw(st.lists(broker_ids, unique=True, max_size=4))
    isr = draw(st.lists(st.sampled_from(replicas), unique=True) if replicas else st.just([]))
    leader = draw(st.sampled_from([-1, *replicas]) | broker_ids)
    offline = draw(st.lists(st.sampled_from(replicas), unique=True) if replicas else st.just([]))
    return (index, leader, draw(st.integers(0, 2**31 - 1)), isr, replicas, offline)


@st.composite
def topic_states(draw):
    count = draw(st.integers(1, 5))
    indexes = draw(st.lists(st.integers(0, 7), min_size=count, max_size=count, unique=True))
    return [draw(partition_state(i)) for i in indexes]


topic_ids = st.integers(1, 2**128 - 1).map(lambda i: uuid.UUID(int=i)) | st.just(None)
clusters = st.tuples(
    brokers,
    st.dictionaries(st.sampled_from(TOPICS), st.tuples(topic_ids, topic_states()), max_size=4),
    st.integers(-1, 4),
)


@st.composite
def requests(draw, cache_ids):
    version = draw(st.sampled_from(VERSIONS))
    fields = {"allow_auto_topic_creation": draw(st.booleans())}
    if draw(st.booleans()) and version >= 1:
        topics = None
    else:
        names = draw(st.lists(st.sampled_from(TOPICS + OTHER_NAMES), max_size=6))
        topics = [{"name": n, "topic_id": None} for n in names]
        if version >= 12:
            by_id = draw(
                st.lists(st.sampled_from(cache_ids) | topic_ids.filter(bool), max_size=3)
                if cache_ids
                else st.lists(topic_ids.filter(bool), max_size=3)
            )
            topics += [{"name": None, "topic_id": i} for i in by_id]
    fields["topics"] = topics
    fields["include_topic_authorized_operations"] = draw(st.booleans())
    fields["include_cluster_authorized_operations"] = draw(st.booleans())
    return version, build(request_class(ApiKey.METADATA, version), fields)


def services_for(cache, cluster_id):
    return BrokerServices(config=CONFIG, broker_id=0, metadata_cache=cache, cluster_id=cluster_id)


def authorizer_allowing(names):
    authorizer = BrokerAuthorizer()
    for name in names:
        pattern = ResourcePattern(ResourceType.TOPIC, name)
        authorizer.cache.set(
            pattern, {AclEntry(ALICE, "*", AclOperation.DESCRIBE, PermissionType.ALLOW)}
        )
    return authorizer


def answer(services, listener, version, request, authorizer=None):
    header = frames.RequestHeader(ApiKey.METADATA, version, 7, "test")
    connection = ConnectionInfo("127.0.0.1", 5555, listener, principal=ALICE)
    ctx = RequestContext(header, connection, services, response_class(ApiKey.METADATA, version))
    handler = handle_metadata
    if authorizer is not None:
        services.extra["authorizer"] = authorizer
        handler = guard(ApiKey.METADATA, handle_metadata)
    result = asyncio.run(handler(ctx, request))
    assert isinstance(result, MetadataAnswer)
    return header, result


def assert_same_bytes(header, result):
    expected = frames.encode_response(header, result.to_response())
    assert result.encode_frame(header) == expected
    correlation_id, _ = frames.decode_response(ApiKey.METADATA, header.api_version, expected[4:])
    assert correlation_id == header.correlation_id


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters,
    st.data(),
    st.sampled_from(LISTENERS),
    st.none() | st.sets(st.sampled_from(TOPICS + OTHER_NAMES)),
    st.sampled_from(["test-cluster", ""]),
)
def test_answer_bytes_equal_the_kio_encoding(cluster, data, listener, allowed, cluster_id):
    live, topics, controller = cluster
    cache = MetadataCache(0)
    cache.update_metadata(update_request(1, live, topics, controller))
    version, request = data.draw(requests(sorted(cache.topic_names)))
    services = services_for(cache, cluster_id)
    authorizer = None if allowed is None else authorizer_allowing(allowed)
    for _ in range(2):  # the first answer encodes the partitions, the second reuses them
        header, result = answer(services, listener, version, request, authorizer)
        assert_same_bytes(header, result)
        if allowed is not None:  # a refused topic reveals nothing, not even its existence
            for topic in result.topics:
                if topic.name is not None and topic.name not in allowed:
                    assert topic.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    assert topic.encoded is None and topic.topic_id in (None, ZERO_UUID)


class CacheUpdates(RuleBasedStateMachine):
    """Any sequence of UpdateMetadata deltas (leaders, ISRs, new partitions, deletions,
    re-creations with a new id, live brokers coming and going): every answer, for every
    version and listener, equals one built afresh from the cache's state."""

    def __init__(self):
        super().__init__()
        self.cache = MetadataCache(0)
        self.epoch = 1
        self.live = {0: (None, {"PLAINTEXT": 9092, "INTERNAL": 9093})}
        self.services = services_for(self.cache, "c")

    def _send(self, topics):
        self.cache.update_metadata(update_request(self.epoch, self.live, topics))

    @rule(name=st.sampled_from(TOPICS), topic_id=topic_ids, states=topic_states())
    def create_or_update(self, name, topic_id, states):
        self._send({name: (topic_id, states)})

    @rule(name=st.sampled_from(TOPICS), data=st.data())
    def change_one_partition(self, name, data):
        partitions = self.cache.partition_states.get(name)
        if not partitions:
            return
        index = data.draw(st.sampled_from(sorted(partitions)))
        self._send({name: (None, [data.draw(partition_state(index))])})

    @rule(name=st.sampled_from(TOPICS), data=st.data())
    def delete_some(self, name, data):
        partitions = self.cache.partition_states.get(name)
        if not partitions:
            return
        gone = data.draw(st.lists(st.sampled_from(sorted(partitions)), min_size=1, unique=True))
        self._send({name: (None, [(i, -2, 0, [], [], []) for i in gone])})

    @rule(name=st.sampled_from(TOPICS), topic_id=topic_ids.filter(bool), states=topic_states())
    def recreate(self, name, topic_id, states):
        partitions = self.cache.partition_states.get(name) or {}
        self._send({name: (None, [(i, -2, 0, [], [], []) for i in partitions])})
        self._send({name: (topic_id, states)})

    @rule(
        name=st.sampled_from(TOPICS), topic_id=topic_ids.filter(bool), leader_and_isr=st.booleans()
    )
    def id_alone_changes(self, name, topic_id, leader_and_isr):
        """A topic's id stated without any partition change (UpdateMetadata or LeaderAndIsr)."""
        if name not in self.cache.partition_states:
            return
        if leader_and_isr:
            self.cache.record_topic_ids({name: topic_id})
        else:
            self._send({name: (topic_id, [])})

    @rule(live=brokers)
    def brokers_change(self, live):
        self.live = live
        self._send({})

    @rule()
    def restate_everything(self):
        """A full UpdateMetadata of the same state (a new controller's)."""
        self.epoch += 1
        self._send(
            {
                name: (
                    self.cache.get_topic_id(name),
                    [
                        (
                            i.partition_index,
                            i.leader,
                            i.leader_epoch,
                            i.isr,
                            i.replicas,
                            i.offline_replicas,
                        )
                        for i in self.cache.get_partition_infos(name)
                    ],
                )
                for name in self.cache.partition_states
            }
        )

    @invariant()
    def answers_equal_fresh_ones(self):
        for version in (0, 1, 5, 6, 7, 9, 10, 12):
            if version not in VERSIONS:
                continue
            for listener in LISTENERS:
                request = build(
                    request_class(ApiKey.METADATA, version),
                    {"topics": None if version else [], "allow_auto_topic_creation": False},
                )
                header, result = answer(self.services, listener, version, request)
                assert_same_bytes(header, result)


CacheUpdates.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_cache_updates = CacheUpdates.TestCase


def test_long_arrays_in_every_version():
    """Arrays of more than 127 entries (a compact array's length takes two varint bytes): a
    topic of 300 partitions and 200 more topics."""
    topics = {
        "big": (uuid.UUID(int=1), [(p, p % 3, 1, [0, 1, 2], [0, 1, 2], []) for p in range(300)])
    }
    topics.update({f"t{i}": (uuid.UUID(int=i + 2), [(0, 1, 0, [1], [1], [])]) for i in range(200)})
    live = {i: (None, {"PLAINTEXT": 9092 + i}) for i in range(3)}
    cache = MetadataCache(0)
    cache.update_metadata(update_request(1, live, topics))
    services = services_for(cache, "c")
    for version in VERSIONS:
        request = build(
            request_class(ApiKey.METADATA, version),
            {"topics": None if version else [], "allow_auto_topic_creation": False},
        )
        header, result = answer(services, "PLAINTEXT", version, request)
        assert len(result.topics) == 201
        assert_same_bytes(header, result)


def test_a_large_answer_is_encoded_in_slices_and_shows_an_update_made_meanwhile(monkeypatch):
    """After thousands of partitions changed, the first answer encodes them in slices that
    yield to the loop; an UpdateMetadata applied during a pause is in that answer and the next,
    for a partition encoded before the pause and for one encoded after it."""
    count = 1200
    topic_id = uuid.UUID(int=1)
    live = {i: (None, {"PLAINTEXT": 9092 + i}) for i in range(3)}
    cache = MetadataCache(0)
    everyone = [0, 1, 2]
    initial = [(p, p % 3, 1, everyone, everyone, []) for p in range(count)]
    cache.update_metadata(update_request(1, live, {"big": (topic_id, initial)}))
    services = services_for(cache, "c")
    moved = [(p, 2, 2, [2], everyone, []) for p in (0, count - 1)]
    encoded: list[int] = []
    encoded_when_the_loop_ran: list[int] = []
    original = metadata_bytes_module.encode_partition

    def update_meanwhile() -> None:
        encoded_when_the_loop_ran.append(len(encoded))
        cache.update_metadata(update_request(1, live, {"big": (topic_id, moved)}))

    def counting(partition, family):
        if not encoded:
            asyncio.get_running_loop().call_soon(update_meanwhile)
        encoded.append(partition.partition_index)
        return original(partition, family)

    # every encoding, the slices' and the answer's own (for what is still missing)
    monkeypatch.setattr(metadata_bytes_module, "encode_partition", counting)
    request = build(
        request_class(ApiKey.METADATA, 12), {"topics": None, "allow_auto_topic_creation": False}
    )
    for _ in range(2):
        header, result = answer(services, "PLAINTEXT", 12, request)
        assert_same_bytes(header, result)  # against kio's encoding of the cache as it is now
        _, response = frames.decode_response(ApiKey.METADATA, 12, result.encode_frame(header)[4:])
        leaders = {p.partition_index: p.leader_id for p in response.topics[0].partitions}
        assert leaders[0] == leaders[count - 1] == 2 and leaders[1] == 1
    assert encoded_when_the_loop_ran and 0 < encoded_when_the_loop_ran[0] < count
    # partition 0 was encoded before the update and again after it, every other one once
    assert encoded[0] == 0 and encoded.count(0) == 2 and len(encoded) == count + 1
