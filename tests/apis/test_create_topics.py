"""CreateTopics against an in-process broker: the topics of one request are created in one
batch (a fixed number of store round trips, not about ten per topic), answered in request
order, those whose names collide as if created one after the other."""

from __future__ import annotations

from kafkalite.client.client import KafkaClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.zk import admin
from tests.server.support import started


async def test_a_request_is_created_in_one_batch_and_answered_in_order(tmp_path, monkeypatch):
    one_by_one = []
    create_topic = admin.create_topic

    async def counted_create_topic(*args, **kwargs):
        one_by_one.append(args[1])
        return await create_topic(*args, **kwargs)

    monkeypatch.setattr(admin, "create_topic", counted_create_topic)
    server = await started(tmp_path, **{"offsets.topic.replication.factor": "1"})
    store = server.services.store
    multis = []
    multi = store.multi

    async def counted_multi(ops):
        multis.append(len(ops))
        return await multi(ops)

    monkeypatch.setattr(store, "multi", counted_multi)
    client = KafkaClient(server.bound_endpoints[0].connection_string.split("//")[1])
    try:
        await client.start()
        names = [f"t{i}" for i in range(96)] + ["a.b", "a_b"]
        response = await client.create_topics(
            [
                {
                    "name": n,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "configs": [{"name": "cleanup.policy", "value": "compact"}]
                    if n == "t0"
                    else [],
                }
                for n in names
            ]
        )
        errors = {t.name: t.error_code for t in response.topics}
        assert [t.name for t in response.topics] == names  # answered in request order
        assert all(errors[f"t{i}"] == ErrorCode.NONE for i in range(96))
        # colliding names: the later one sees the earlier one
        assert errors["a.b"] == ErrorCode.NONE
        assert errors["a_b"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert one_by_one == []
        # config + assignment per topic (+ one change notification for t0's override), in
        # multis of at most 500 operations: one here, whatever the controller writes besides
        assert 2 * 97 + 1 in multis
        again = await client.create_topics(
            [{"name": "t5", "num_partitions": 1, "replication_factor": 1}]
        )
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    finally:
        await client.close()
        await server.shutdown()


async def test_a_batch_that_races_another_creator_is_answered_topic_by_topic(tmp_path):
    """Another client creates one of the batch's topics between the batch's reads and its
    multi: the multi fails as a whole, and each topic is created alone (the raced one answered
    TOPIC_ALREADY_EXISTS, the others created)."""
    server = await started(tmp_path, **{"offsets.topic.replication.factor": "1"})
    store = server.services.store
    get_children = store.get_children
    raced = False

    async def racing_get_children(path):
        nonlocal raced
        children = await get_children(path)
        if path == "/brokers/topics" and not raced:
            raced = True
            await admin.create_topic(store, "r1", 1, 1)  # lands after the batch read the list
        return children

    store.get_children = racing_get_children
    try:
        answers = await admin.create_topics(
            store, [admin.TopicToCreate(f"r{i}", 1, 1) for i in range(3)]
        )
    finally:
        del store.get_children
    assert isinstance(answers[1], Exception) and "already exists" in str(answers[1])
    assert all(isinstance(answers[i], str) for i in (0, 2))
    assert {"r0", "r1", "r2"} <= set(await store.get_children("/brokers/topics"))
    await server.shutdown()
