"""TransactionMarkerChannelManager with a fake metadata cache and a fake inter-broker channel:
one WriteTxnMarkers per destination broker per round, queued markers of concurrent
transactions sent together, retries, and the local broker's markers written directly."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition
from kafkalite.txn.markers import TransactionMarkerChannelManager, TxnMarker
from tests.broker.conftest import wait_until

LOCAL = 1


class FakeMetadata:
    def __init__(self, leaders: dict[TopicPartition, int]) -> None:
        self.leaders = leaders

    def contains_topic(self, topic):
        return any(tp.topic == topic for tp in self.leaders)

    def get_partition_info(self, topic, partition):
        leader = self.leaders.get(TopicPartition(topic, partition))
        return None if leader is None else SimpleNamespace(leader=leader)


class FakeConnection:
    """A remote broker: records each WriteTxnMarkers; answers once ``gate`` is open, with
    ``errors`` (per partition, used once) or NONE."""

    connected = True

    def __init__(self, broker_id: int, requests: list) -> None:
        self.broker_id = broker_id
        self.requests = requests
        self.gate = asyncio.Event()
        self.gate.set()
        self.errors: dict[TopicPartition, ErrorCode] = {}

    async def send(self, api_key, body):
        assert api_key is ApiKey.WRITE_TXN_MARKERS
        self.requests.append((self.broker_id, body["markers"]))
        await self.gate.wait()
        markers = []
        for m in body["markers"]:
            topics = []
            for t in m["topics"]:
                partitions = []
                for p in t["partition_indexes"]:
                    error = self.errors.pop(TopicPartition(t["name"], p), ErrorCode.NONE)
                    partitions.append(SimpleNamespace(partition_index=p, error_code=int(error)))
                topics.append(SimpleNamespace(name=t["name"], partitions=partitions))
            markers.append(SimpleNamespace(producer_id=m["producer_id"], topics=topics))
        return SimpleNamespace(markers=markers)

    async def close(self):
        pass


def channel(leaders):
    """(manager, requests: [(broker, markers)], local writes: [[TxnMarker]], connections)."""
    requests: list = []
    local: list[list[TxnMarker]] = []

    async def write_locally(markers):
        local.append(list(markers))
        return [dict.fromkeys(m.partitions, ErrorCode.NONE) for m in markers]

    manager = TransactionMarkerChannelManager(
        LOCAL, FakeMetadata(leaders), "PLAINTEXT", write_locally
    )
    connections = {b: FakeConnection(b, requests) for b in set(leaders.values()) if b != LOCAL}

    async def connection(broker_id):
        return connections[broker_id]

    manager._connection = connection  # type: ignore[method-assign]
    return manager, requests, local, connections


def tps(topic, *partitions):
    return [TopicPartition(topic, p) for p in partitions]


def requests_to(requests, broker):
    return [markers for b, markers in requests if b == broker]


def test_one_end_txn_over_two_remote_leaders_is_one_request_per_broker():
    leaders = {tp: 2 for tp in tps("a", 0, 1, 2)} | {tp: 3 for tp in tps("a", 3, 4)}

    async def scenario():
        manager, requests, local, _ = channel(leaders)
        done = await manager.write_markers(7, 1000, 0, True, list(leaders), lambda: True)
        assert done
        assert local == []
        assert sorted(b for b, _ in requests) == [2, 3]
        (to_2,) = requests_to(requests, 2)
        assert [
            (m["producer_id"], m["transaction_result"], m["coordinator_epoch"]) for m in to_2
        ] == [(1000, True, 7)]
        assert to_2[0]["topics"] == [{"name": "a", "partition_indexes": [0, 1, 2]}]
        (to_3,) = requests_to(requests, 3)
        assert to_3[0]["topics"] == [{"name": "a", "partition_indexes": [3, 4]}]
        assert manager.requests_sent == {2: 1, 3: 1}

    asyncio.run(scenario())


def test_the_local_leader_is_written_directly_once():
    leaders = {TopicPartition("a", 0): LOCAL, TopicPartition("b", 0): LOCAL}
    leaders[TopicPartition("a", 1)] = 2

    async def scenario():
        manager, requests, local, _ = channel(leaders)
        assert await manager.write_markers(1, 5, 3, False, list(leaders), lambda: True)
        assert [[m.partitions for m in call] for call in local] == [
            [(TopicPartition("a", 0), TopicPartition("b", 0))]
        ]
        assert local[0][0] == TxnMarker(5, 3, False, 1, local[0][0].partitions)
        assert len(requests_to(requests, 2)) == 1
        assert manager.requests_sent == {LOCAL: 1, 2: 1}

    asyncio.run(scenario())


def test_concurrent_transactions_share_a_request_while_one_is_in_flight():
    leaders = {tp: 2 for tp in tps("a", 0, 1, 2)}

    async def scenario():
        manager, requests, _, connections = channel(leaders)
        connections[2].gate.clear()  # the first request stays in flight
        first = asyncio.ensure_future(
            manager.write_markers(1, 50, 0, True, tps("a", 0), lambda: True)
        )
        await wait_until(lambda: requests)
        # queued meanwhile: two producers, and the second one's id again (another epoch)
        queued = [
            asyncio.ensure_future(manager.write_markers(1, pid, epoch, True, [tp], lambda: True))
            for pid, epoch, tp in (
                (200, 0, TopicPartition("a", 1)),
                (100, 0, TopicPartition("a", 2)),
                (100, 1, TopicPartition("a", 1)),
            )
        ]
        # all three wait in broker 2's queue behind the request in flight
        await wait_until(lambda: len(manager._queues.get(2, [])) == 3)
        assert len(requests) == 1  # one request in flight per broker
        connections[2].gate.set()
        assert all(await asyncio.gather(first, *queued))
        producers = [[m["producer_id"] for m in markers] for _, markers in requests]
        # the queued markers went together, but one producer id once per request
        assert producers == [[50], [200, 100], [100]]

    asyncio.run(scenario())


def test_retriable_errors_are_retried_and_fenced_ones_dropped():
    leaders = {tp: 2 for tp in tps("a", 0, 1, 2)}

    async def scenario():
        manager, requests, _, connections = channel(leaders)
        connections[2].errors = {
            TopicPartition("a", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER,
            TopicPartition("a", 1): ErrorCode.INVALID_PRODUCER_EPOCH,
        }
        assert await manager.write_markers(1, 9, 0, True, list(leaders), lambda: True)
        assert [m[0]["topics"] for _, m in requests] == [
            [{"name": "a", "partition_indexes": [0, 1, 2]}],
            [{"name": "a", "partition_indexes": [0]}],  # only the retriable one again
        ]

    asyncio.run(scenario())


def test_deleted_topics_are_dropped_and_a_lost_coordinator_gives_up():
    leaders = {TopicPartition("a", 0): 2}

    async def scenario():
        manager, requests, _, connections = channel(leaders)
        gone = TopicPartition("gone", 0)
        assert await manager.write_markers(1, 9, 0, True, [gone], lambda: True)
        assert requests == []
        connections[2].errors = {TopicPartition("a", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
        still = iter([True, False])
        assert not await manager.write_markers(1, 9, 0, True, list(leaders), lambda: next(still))
        assert len(requests) == 1

    asyncio.run(scenario())


def test_close_cancels_waiting_writers():
    leaders = {TopicPartition("a", 0): 2}

    async def scenario():
        manager, requests, _, connections = channel(leaders)
        connections[2].gate.clear()
        writer = asyncio.ensure_future(
            manager.write_markers(1, 9, 0, True, list(leaders), lambda: True)
        )
        await wait_until(lambda: requests)
        await manager.close()
        await asyncio.wait({writer}, timeout=5)
        assert writer.cancelled()
        assert manager._drainers == {}

    asyncio.run(scenario())
