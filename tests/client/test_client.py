import asyncio

import pytest

from kafkalite.client.client import CONTROLLER, KafkaClient, parse_bootstrap
from kafkalite.client.errors import KafkaConnectionError, NoBrokersAvailableError
from kafkalite.client.messages import build_message
from kafkalite.protocol.api import ApiKey, response_class
from kafkalite.protocol.types import TopicPartition

from .fake_broker import FakeBroker

pytestmark = pytest.mark.timeout(30)


def answer_with_node(node_id):
    """Handlers that stamp the answering broker's id into the response."""

    def produce(header, request):
        return build_message(
            response_class(ApiKey.PRODUCE, header.api_version),
            responses=[
                {
                    "name": t.name,
                    "partition_responses": [
                        {"index": p.index, "base_offset": node_id * 100} for p in t.partition_data
                    ],
                }
                for t in request.topic_data
            ],
        )

    def list_offsets(header, request):
        return build_message(
            response_class(ApiKey.LIST_OFFSETS, header.api_version),
            topics=[
                {
                    "name": t.name,
                    "partitions": [
                        {"partition_index": p.partition_index, "offset": node_id, "timestamp": -1}
                        for p in t.partitions
                    ],
                }
                for t in request.topics
            ],
        )

    def fetch(header, request):
        return build_message(
            response_class(ApiKey.FETCH, header.api_version),
            responses=[
                {
                    "topic": t.topic,
                    "partitions": [
                        {
                            "partition_index": p.partition,
                            "high_watermark": node_id,
                            "records": b"batch-from-%d" % node_id,
                        }
                        for p in t.partitions
                    ],
                }
                for t in request.topics
            ],
        )

    def create_topics(header, request):
        return build_message(
            response_class(ApiKey.CREATE_TOPICS, header.api_version),
            topics=[
                {"name": t.name, "error_code": 0, "num_partitions": t.num_partitions}
                for t in request.topics
            ],
        )

    def delete_topics(header, request):
        return build_message(
            response_class(ApiKey.DELETE_TOPICS, header.api_version),
            responses=[{"name": t.name, "error_code": 0} for t in request.topics],
        )

    return {
        ApiKey.PRODUCE: produce,
        ApiKey.LIST_OFFSETS: list_offsets,
        ApiKey.FETCH: fetch,
        ApiKey.CREATE_TOPICS: create_topics,
        ApiKey.DELETE_TOPICS: delete_topics,
    }


@pytest.fixture
async def cluster():
    brokers = [await FakeBroker(node_id=n, handlers=answer_with_node(n)).start() for n in (1, 2)]
    members = [(b.node_id, b.port) for b in brokers]
    for b in brokers:
        b.cluster = members
        b.controller_id = 2
        b.topics = {"orders": [1, 2]}  # partition 0 led by 1, partition 1 by 2
    yield brokers
    for b in brokers:
        await b.stop()


def test_parse_bootstrap():
    assert parse_bootstrap("a:1, b ,[::1]:3") == [("a", 1), ("b", 9092), ("::1", 3)]
    assert parse_bootstrap(["h:5"]) == [("h", 5)]
    with pytest.raises(ValueError):
        parse_bootstrap(" , ")


async def _dead_port():
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return port


async def test_bootstrap_skips_dead_servers_and_loads_brokers(cluster):
    dead = await _dead_port()
    async with KafkaClient(f"127.0.0.1:{dead},127.0.0.1:{cluster[0].port}", "cli") as client:
        assert set(client.brokers) == {1, 2}
        assert client.controller_id == 2
        assert client.cluster_id == "fake"
        await client.metadata(["orders"])
        assert client.leader_for(TopicPartition("orders", 1)) == 2
        assert client.partitions[TopicPartition("orders", 0)].isr == (1,)


async def test_no_bootstrap_reachable():
    dead = await _dead_port()
    with pytest.raises(NoBrokersAvailableError):
        await KafkaClient(f"127.0.0.1:{dead}", connect_timeout=2).start()


async def test_send_routes_by_node_id_and_controller(cluster):
    async with KafkaClient(f"127.0.0.1:{cluster[0].port}") as client:
        r1 = await client.produce(TopicPartition("orders", 0), b"batch")
        r2 = await client.produce(TopicPartition("orders", 1), b"batch")
        assert r1.responses[0].partition_responses[0].base_offset == 100
        assert r2.responses[0].partition_responses[0].base_offset == 200
        offsets = await client.list_offsets(TopicPartition("orders", 1), -2)
        assert offsets.topics[0].partitions[0].offset == 2
        fetched = await client.fetch(TopicPartition("orders", 0), 0)
        assert fetched.responses[0].partitions[0].records == b"batch-from-1"
        created = await client.create_topics(
            [{"name": "new", "num_partitions": 3, "replication_factor": 1}]
        )
        assert created.topics[0].name == "new"
        deleted = await client.delete_topics(["new"])
        assert deleted.responses[0].name == "new"
        # CreateTopics and DeleteTopics went to the controller (broker 2).
        assert cluster[1].requests_of(ApiKey.CREATE_TOPICS)
        assert not cluster[0].requests_of(ApiKey.CREATE_TOPICS)
        assert cluster[1].requests_of(ApiKey.DELETE_TOPICS)
        response = await client.send(ApiKey.METADATA, {"topics": []}, node_id=CONTROLLER)
        assert {b.node_id for b in response.brokers} == {1, 2}
        with pytest.raises(NoBrokersAvailableError):
            await client.send(ApiKey.METADATA, {"topics": []}, node_id=7)


async def test_broken_connection_is_replaced(cluster):
    async with KafkaClient(f"127.0.0.1:{cluster[0].port}") as client:
        await client.send(ApiKey.METADATA, {"topics": []}, node_id=2)
        first = client._conns[2]
        cluster[1].drop_connections()
        deadline = asyncio.get_running_loop().time() + 5
        while first.connected:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.005)  # polling interval of the condition with a deadline
        await client.send(ApiKey.METADATA, {"topics": []}, node_id=2)
        assert client._conns[2] is not first and client._conns[2].connected


async def test_closed_client_refuses(cluster):
    client = KafkaClient(f"127.0.0.1:{cluster[0].port}")
    await client.start()
    await client.close()
    with pytest.raises(KafkaConnectionError):
        await client.send(ApiKey.METADATA, {"topics": []})


async def test_concurrent_sends_share_one_new_connection(cluster):
    async with KafkaClient(f"127.0.0.1:{cluster[0].port}") as client:
        await asyncio.gather(
            *(client.send(ApiKey.METADATA, {"topics": []}, node_id=2) for _ in range(10))
        )
        # one ApiVersions on broker 2: the ten sends waited for the same connection attempt
        assert len(cluster[1].requests_of(ApiKey.API_VERSIONS)) == 1


async def test_a_cancelled_connect_gives_the_other_waiters_an_error_not_a_cancellation(
    cluster, monkeypatch
):
    """Two callers wait for the same new connection; the first is cancelled. The second was
    not cancelled and must not see a CancelledError (the admin API shares one client between
    requests); a connect that finishes after close() is not kept."""
    from kafkalite.client.connection import KafkaConnection

    started = asyncio.Event()
    release = asyncio.Event()
    connect = KafkaConnection.connect

    async def held_connect(self):
        if self.node_id is not None:
            started.set()
            await release.wait()
        await connect(self)

    monkeypatch.setattr(KafkaConnection, "connect", held_connect)
    client = KafkaClient(f"127.0.0.1:{cluster[0].port}")
    await client.start()
    first = asyncio.create_task(client.connection(2))
    await asyncio.wait_for(started.wait(), 10)
    second = asyncio.create_task(client.connection(2))
    await asyncio.wait([second], timeout=0)  # let it join the attempt
    first.cancel()
    results = await asyncio.gather(first, second, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert isinstance(results[1], KafkaConnectionError) and not second.cancelled()
    started.clear()
    late = asyncio.create_task(client.connection(2))
    await asyncio.wait_for(started.wait(), 10)
    await client.close()
    release.set()
    with pytest.raises(KafkaConnectionError, match="closed"):
        await late
    assert client._conns == {}


async def test_an_answer_naming_a_stale_leader_refreshes_the_leader(cluster):
    """Leadership of orders-0 moves from broker 1 to 2: broker 1 answers NOT_LEADER_OR_FOLLOWER
    and the next call asks for metadata again and goes to broker 2 (the cached leader was
    asked for ever)."""
    tp = TopicPartition("orders", 0)

    def not_leader(header, request):
        return build_message(
            response_class(ApiKey.LIST_OFFSETS, header.api_version),
            topics=[
                {
                    "name": "orders",
                    "partitions": [{"partition_index": 0, "error_code": 6, "offset": -1}],
                }
            ],
        )

    async with KafkaClient(f"127.0.0.1:{cluster[0].port}") as client:
        assert (await client.list_offsets(tp)).topics[0].partitions[0].offset == 1
        cluster[0].handlers[ApiKey.LIST_OFFSETS] = not_leader
        for broker in cluster:
            broker.topics = {"orders": [2, 2]}
        stale = await client.list_offsets(tp)
        assert int(stale.topics[0].partitions[0].error_code) == 6
        assert (await client.list_offsets(tp)).topics[0].partitions[0].offset == 2
