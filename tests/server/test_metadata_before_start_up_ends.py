"""A restarted broker answers Metadata from its cache once the controller's UpdateMetadata has
filled it, before its start-up has finished (Kafka answers Metadata from its MetadataCache);
other client requests still wait for the end of start-up."""

from __future__ import annotations

import asyncio

from kafkalite.server import KafkaServer
from kafkalite.testing import free_port
from tests.controller.shell_support import eventually
from tests.server.support import config, first_start, metadata

TOPIC = "restarted"


async def test_metadata_is_served_from_the_cache_before_start_up_ends(tmp_path, monkeypatch):
    port = free_port()
    await first_start(tmp_path, port, TOPIC)

    release = asyncio.Event()
    original = KafkaServer._wait_for_initial_metadata

    async def held_wait_for_initial_metadata(self, *args, **kwargs):
        await original(self, *args, **kwargs)  # the controller's UpdateMetadata has arrived
        await release.wait()  # ... and start-up stops here until the test lets it go on

    monkeypatch.setattr(KafkaServer, "_wait_for_initial_metadata", held_wait_for_initial_metadata)
    server = KafkaServer(config(tmp_path, port))
    starting = asyncio.create_task(server.startup())
    try:
        await eventually(
            lambda: (
                server.metadata_cache is not None
                and TOPIC in server.metadata_cache.get_all_topics()
            ),
            message="the controller's metadata arrived",
        )
        response = await asyncio.wait_for(metadata(port, TOPIC), 30)
        assert not server.dispatcher.ready.is_set()  # still starting
        (topic,) = response.topics
        assert topic.name == TOPIC and topic.error_code == 0
        assert [p.leader_id for p in topic.partitions] == [server.broker_id]
        release.set()
        await starting
    finally:
        release.set()
        if not starting.done():
            await asyncio.gather(starting, return_exceptions=True)
        await server.shutdown()
