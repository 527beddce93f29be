"""Replication over the Kafka protocol on loopback: the follower's RemoteLeaderEndPoint talks to
the leader's real request handlers (Fetch v12, OffsetForLeaderEpoch v4, ListOffsets v7) through
the project's socket server."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.apis import load_handlers
from kafkalite.apis.base import BrokerServices
from kafkalite.apis.dispatcher import ApiDispatcher
from kafkalite.broker.clock import SYSTEM_TIME
from kafkalite.broker.fetch_session import FetchSessionCache
from kafkalite.broker.metadata_cache import BrokerEndpoint, MetadataBroker, MetadataCache
from kafkalite.broker.replica_fetcher import (
    ReplicaFetcherConfig,
    remote_leader_endpoints,
)
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.config import BrokerConfig, Endpoint
from kafkalite.network.server import SocketServer
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import iter_batch_headers
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log_manager import LogManager

from .conftest import batch, leader_state, wait_until

TP = TopicPartition("t", 0)


def batches(log):
    info = log.read(log.log_start_offset, 1 << 30)
    return [
        (h.base_offset, h.partition_leader_epoch, h.crc)
        for _, h in iter_batch_headers(info.records.view())
    ]


class Brokers(dict):
    """Broker id -> ReplicaManager; ``sessions``: broker id -> its FetchSessionCache."""

    sessions: dict[int, FetchSessionCache]


@pytest.fixture
async def two_brokers(tmp_path):
    load_handlers()
    started = []
    brokers = Brokers()
    brokers.sessions = {}
    servers = []
    caches = {}
    for broker_id in (1, 2):
        lm = LogManager([str(tmp_path / f"b{broker_id}")], LogConfig())
        lm.startup()
        cache = MetadataCache(broker_id)
        rm = ReplicaManager(broker_id, lm, None, SYSTEM_TIME, metadata_cache=cache)
        services = BrokerServices(
            config=BrokerConfig.load(environ={}),
            broker_id=broker_id,
            replica_manager=rm,
            metadata_cache=cache,
            fetch_sessions=FetchSessionCache(10),
            log_manager=lm,
        )
        brokers.sessions[broker_id] = services.fetch_sessions
        dispatcher = ApiDispatcher(services)
        dispatcher.ready.set()
        server = SocketServer(
            [Endpoint("PLAINTEXT", "127.0.0.1", 0)], dispatcher, max_request_bytes=100 << 20
        )
        await server.start()
        servers.append(server)
        started.append(lm)
        brokers[broker_id] = rm
        caches[broker_id] = cache
    live = [
        MetadataBroker(
            i,
            {
                "PLAINTEXT": BrokerEndpoint(
                    "PLAINTEXT", "127.0.0.1", servers[i - 1].bound_endpoints[0].port
                )
            },
        )
        for i in (1, 2)
    ]
    for broker_id, rm in brokers.items():
        caches[broker_id].set_alive_brokers(live)
        rm.enable_replica_fetchers(
            remote_leader_endpoints(caches[broker_id], "PLAINTEXT", broker_id),
            ReplicaFetcherConfig(replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=50),
        )
    yield brokers
    for rm in brokers.values():
        await rm.shutdown()
    for server in servers:
        await server.stop_accepting()
        server.close_connections()
    for lm in started:
        lm.shutdown()


async def test_replication_and_truncation_over_the_wire(two_brokers):
    b1, b2 = two_brokers[1], two_brokers[2]
    state = leader_state(leader=1, leader_epoch=0, isr=(1, 2), replicas=(1, 2))
    await b1.become_leader_or_follower_async(0, 1, [state])
    await b2.become_leader_or_follower_async(0, 1, [state])
    for _ in range(3):
        result = (await asyncio.wait_for(b1.append_records(10_000, -1, {TP: batch(2)}), 10))[TP]
        assert result.error_code is ErrorCode.NONE
    log1 = b1.log_manager.get_log("t", 0)
    log2 = b2.log_manager.get_log("t", 0)
    assert log1.high_watermark == 6
    await wait_until(lambda: batches(log2) == batches(log1))

    # Broker 2 takes over (epoch 1) while broker 1 holds an unreplicated tail.
    b2.replica_fetcher_manager.remove_fetcher_for_partitions([TP])
    await b1.append_records(10_000, 1, {TP: batch(3)})
    new_state = leader_state(leader=2, leader_epoch=1, isr=(2,), replicas=(1, 2))
    await b2.become_leader_or_follower_async(0, 2, [new_state])
    await b2.append_records(10_000, 1, {TP: batch(1)})
    await b1.become_leader_or_follower_async(0, 2, [new_state])
    await wait_until(lambda: batches(log1) == batches(log2))
    assert log1.log_end_offset == 7
    await wait_until(lambda: b2.partitions[TP].isr == {1, 2})


async def test_the_follower_fetches_in_an_incremental_session(two_brokers):
    """After its first full fetch the follower sends incremental ones; when the leader loses the
    session (FETCH_SESSION_ID_NOT_FOUND) it starts a new one and replication goes on, and a
    partition it stops following leaves the leader's session."""
    b1, b2 = two_brokers[1], two_brokers[2]
    other = TopicPartition("t", 1)
    states = [
        leader_state(topic=tp.topic, partition=tp.partition, leader=1, isr=(1, 2), replicas=(1, 2))
        for tp in (TP, other)
    ]
    await b1.become_leader_or_follower_async(0, 1, states)
    await b2.become_leader_or_follower_async(0, 1, states)
    await asyncio.wait_for(b1.append_records(10_000, -1, {TP: batch(2), other: batch(1)}), 10)
    log1, log2 = b1.log_manager.get_log("t", 0), b2.log_manager.get_log("t", 0)
    await wait_until(lambda: batches(log2) == batches(log1))
    (fetcher,) = b2.replica_fetcher_manager.fetchers.values()
    assert fetcher.session is not None
    await wait_until(lambda: fetcher.session.incremental_requests > 0)
    leader_sessions = two_brokers.sessions[1]
    (session,) = leader_sessions.sessions.values()
    assert set(session.partitions) == {TP, other}

    for session_id in list(leader_sessions.sessions):
        leader_sessions.remove(session_id)
    fulls = fetcher.session.full_requests
    await asyncio.wait_for(b1.append_records(10_000, -1, {TP: batch(3)}), 10)
    await wait_until(lambda: batches(log2) == batches(log1))
    assert fetcher.session.full_requests > fulls
    await wait_until(lambda: log2.high_watermark == log1.high_watermark == 5)

    b2.replica_fetcher_manager.remove_fetcher_for_partitions([other])
    await wait_until(
        lambda: [set(s.partitions) for s in leader_sessions.sessions.values()] == [{TP}]
    )


def _fetch_values(replica: int) -> dict:
    """The fields of a follower's sessionless Fetch v12 besides its topics."""
    import datetime

    return dict(
        replica_id=replica,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=10 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        rack_id="",
    )


def _generic_fetch(values: dict, topics: dict, forgotten: dict):
    """The same Fetch v12 through the generic builder (``build_message``): the oracle."""
    from kafkalite.broker.replica_fetcher import _partition_dict
    from kafkalite.client.messages import build_message
    from kafkalite.protocol.api import ApiKey, request_class

    return build_message(
        request_class(ApiKey.FETCH, 12),
        **values,
        forgotten_topics_data=[{"topic": t, "partitions": ps} for t, ps in forgotten.items()],
        topics=[
            {"topic": t, "partitions": [_partition_dict(tp, i) for tp, i in ps]}
            for t, ps in topics.items()
        ],
    )


@given(
    st.dictionaries(
        st.tuples(st.sampled_from(["a", "b", "topic-c"]), st.integers(0, 2**31 - 1)),
        st.tuples(
            st.integers(0, 2**63 - 1),
            st.integers(0, 2**31 - 1),
            st.integers(-1, 2**63 - 1),
            st.integers(-1, 2**31 - 1),
            st.integers(-1, 2**31 - 1),
        ),
        max_size=30,
    ),
    st.integers(0, 2**31 - 1),
    st.dictionaries(
        st.sampled_from(["a", "b", "topic-c"]),
        st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=5),
        max_size=3,
    ),
)
def test_the_follower_fetch_request_is_the_message_the_generic_builder_makes(
    parts, replica, forgotten
):
    """The follower's Fetch v12 is built from kio's classes directly, its topics encoded
    straight from the partitions (the generic builder costs ~4x more per partition): the
    same bytes, and the same message once decoded."""
    from kafkalite.broker.replica_fetcher import _fetch_request_v12
    from kafkalite.broker.types import FetchInfo
    from kafkalite.protocol.frames import decode_request, encode_request, parse_request_header

    topics: dict = {}
    for (topic, p), (offset, max_bytes, start, epoch, last) in parts.items():
        info = FetchInfo(offset, max_bytes, start, epoch, last)
        topics.setdefault(topic, []).append((TopicPartition(topic, p), info))
    values = _fetch_values(replica)
    direct = _fetch_request_v12(values, topics, forgotten)
    generic = _generic_fetch(values, topics, forgotten)
    frame = encode_request(1, 12, 7, "f", direct)
    assert frame == encode_request(1, 12, 7, "f", generic)
    header, offset = parse_request_header(frame[4:])
    assert decode_request(header, frame[4:], offset, strict=True) == generic


def test_the_follower_fetch_request_with_long_names_and_many_partitions_has_the_same_bytes():
    """Lengths of two varint bytes (a 200-character name, 300 partitions of a topic, 130
    topics) are written as the generic builder's message writes them."""
    from kafkalite.broker.replica_fetcher import _fetch_request_v12
    from kafkalite.broker.types import FetchInfo
    from kafkalite.protocol.frames import encode_request

    names = ["é" * 100, *(f"t{i}" for i in range(129))]
    topics = {
        name: [
            (TopicPartition(name, p), FetchInfo(p * 1000, 1 << 20, p, 7, 6))
            for p in range(300 if i == 0 else 2)
        ]
        for i, name in enumerate(names)
    }
    values = _fetch_values(2)
    direct = _fetch_request_v12(values, topics, {})
    generic = _generic_fetch(values, topics, {})
    assert encode_request(1, 12, 7, "f", direct) == encode_request(1, 12, 7, "f", generic)
