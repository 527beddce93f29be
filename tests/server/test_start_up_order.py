"""Start-up order: the listener opens before the logs are loaded (a restarted broker with many
partitions answers ApiVersions at once); the replica manager exists before any controller
request is served, and client requests are served only once start-up has finished."""

from __future__ import annotations

import asyncio
import gc

from kafkalite.server import KafkaServer
from kafkalite.storage.log_manager import LogManager
from kafkalite.testing import free_port
from kafkalite.testing.wire import api_versions_ok
from tests.controller.shell_support import eventually
from tests.server.support import config, hold_log_loading


async def test_api_versions_is_answered_while_the_logs_load(tmp_path, monkeypatch):
    loading, release = hold_log_loading(monkeypatch)
    port = free_port()
    server = KafkaServer(config(tmp_path, port))
    starting = asyncio.create_task(server.startup())
    try:
        await eventually(lambda: loading.is_set(), message="log loading began")
        # The logs are still loading (the thread waits for `release`): ApiVersions is answered.
        assert await asyncio.to_thread(api_versions_ok, "127.0.0.1", port)
        assert server.replica_manager is None and not server.dispatcher.roles_ready.is_set()
        assert not server.dispatcher.ready.is_set()
        release.set()
        await starting
        assert server.dispatcher.roles_ready.is_set() and server.dispatcher.ready.is_set()
        assert await asyncio.to_thread(api_versions_ok, "127.0.0.1", port)
    finally:
        release.set()
        if not starting.done():
            await asyncio.gather(starting, return_exceptions=True)
        await server.shutdown()


async def test_a_start_that_fails_on_its_logs_closes_the_listener(tmp_path, monkeypatch):
    def failing_startup(self):
        raise OSError("disk gone")

    monkeypatch.setattr(LogManager, "startup", failing_startup)
    port = free_port()
    server = KafkaServer(config(tmp_path, port))
    try:
        await server.startup()
    except BaseException:
        pass
    else:
        raise AssertionError("start-up succeeded without its logs")
    assert not await asyncio.to_thread(api_versions_ok, "127.0.0.1", port)
    assert gc.isenabled()  # the start-up's pause of the collector ends with it


async def test_the_collector_is_paused_until_the_broker_serves(tmp_path, monkeypatch):
    seen: list[bool] = []
    original = KafkaServer._start_roles

    async def start_roles(self):
        seen.append(gc.isenabled())
        await original(self)

    monkeypatch.setattr(KafkaServer, "_start_roles", start_roles)
    server = KafkaServer(config(tmp_path))
    assert gc.isenabled()
    await server.startup()
    try:
        assert seen == [False]
        assert gc.isenabled()
    finally:
        await server.shutdown()
