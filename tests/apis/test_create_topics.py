"""CreateTopics against an in-process broker: the topics of one request are created
concurrently, those whose names collide in turn."""

from __future__ import annotations

import asyncio

from kafkalite.client.client import KafkaClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.zk import admin
from tests.server.support import started


async def test_the_topics_of_one_request_are_created_concurrently(tmp_path, monkeypatch):
    in_flight = peak = 0
    create_topic = admin.create_topic

    async def slow_create_topic(*args, **kwargs):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0.05)  # a store round trip under load, not synchronisation
            return await create_topic(*args, **kwargs)
        finally:
            in_flight -= 1

    monkeypatch.setattr(admin, "create_topic", slow_create_topic)
    server = await started(tmp_path, **{"offsets.topic.replication.factor": "1"})
    client = KafkaClient(server.bound_endpoints[0].connection_string.split("//")[1])
    try:
        await client.start()
        names = [f"t{i}" for i in range(8)] + ["a.b", "a_b"]
        response = await client.create_topics(
            [{"name": n, "num_partitions": 1, "replication_factor": 1} for n in names]
        )
        errors = {t.name: t.error_code for t in response.topics}
        assert [t.name for t in response.topics] == names  # answered in request order
        assert all(errors[f"t{i}"] == ErrorCode.NONE for i in range(8))
        # colliding names are created in turn: the later one sees the earlier one
        assert errors["a.b"] == ErrorCode.NONE
        assert errors["a_b"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert peak >= 8
    finally:
        await client.close()
        await server.shutdown()


async def test_at_most_create_concurrency_topics_are_created_at_once(tmp_path, monkeypatch):
    """The event loop runs every ready task in one turn: 2,000 creations started together held
    it for 10 s (no other client, not even SIGTERM, was served). At most CREATE_CONCURRENCY
    topics of a request are in creation at once."""
    from kafkalite.apis.create_topics import CREATE_CONCURRENCY

    in_flight = peak = 0
    create_topic = admin.create_topic

    async def counting_create_topic(*args, **kwargs):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0)  # let every creation that may start, start
            return await create_topic(*args, **kwargs)
        finally:
            in_flight -= 1

    monkeypatch.setattr(admin, "create_topic", counting_create_topic)
    server = await started(tmp_path, **{"offsets.topic.replication.factor": "1"})
    client = KafkaClient(server.bound_endpoints[0].connection_string.split("//")[1])
    try:
        await client.start()
        count = CREATE_CONCURRENCY * 3
        response = await client.create_topics(
            [{"name": f"c{i}", "num_partitions": 1, "replication_factor": 1} for i in range(count)]
        )
        assert all(t.error_code == ErrorCode.NONE for t in response.topics)
        assert peak == CREATE_CONCURRENCY
    finally:
        await client.close()
        await server.shutdown()
