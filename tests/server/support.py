"""A broker of this process for tests that need the composition root itself (`config`,
`started`), `metadata` (a Metadata request that auto-creates its topic), `first_start` (a
broker whose topic exists and is led, stopped cleanly), `hold_log_loading`
(start-up's log loading held in its thread until released), and `running`: a background task
for the duration of a block (cancelled and awaited at its end)."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from kafkalite.client.connection import KafkaConnection, request_builder
from kafkalite.config import BrokerConfig
from kafkalite.protocol.api import ApiKey
from kafkalite.server import KafkaServer
from kafkalite.storage.log_manager import LogManager
from kafkalite.testing import free_port
from tests.controller.shell_support import eventually


def config(tmp_path, port: int | None = None, **overrides: str) -> BrokerConfig:
    """A broker's configuration on the embedded store under `tmp_path`, without the admin API,
    listening on `port` (one the OS picks if None)."""
    return BrokerConfig.load(
        overrides={
            "log.dirs": str(tmp_path / "data"),
            "listeners": f"PLAINTEXT://127.0.0.1:{port or free_port()}",
            "admin.listener": "",
            **overrides,
        },
        environ={},
    )


async def started(tmp_path, **overrides: str) -> KafkaServer:
    """A broker in this process on the embedded store, without the admin API."""
    server = KafkaServer(config(tmp_path, **overrides))
    await server.startup()
    return server


async def metadata(port: int, topic: str):
    """A Metadata v9 answer for `topic`, which it auto-creates."""
    async with KafkaConnection("127.0.0.1", port, client_id="t") as conn:
        return await conn.send(
            ApiKey.METADATA,
            request_builder(
                ApiKey.METADATA, topics=[{"name": topic}], allow_auto_topic_creation=True
            ),
            9,
        )


async def first_start(tmp_path, port: int, topic: str, partitions: int = 1) -> None:
    """A broker on `port` whose topic of `partitions` partitions (auto-created) exists and is
    led, then stopped cleanly: the data a restart test starts from."""
    first = KafkaServer(config(tmp_path, port, **{"num.partitions": str(partitions)}))
    await first.startup()
    try:
        await metadata(port, topic)
        cache = first.metadata_cache
        await eventually(
            lambda: (
                topic in cache.get_all_topics()
                and all(cache.get_partition_info(topic, p).leader >= 0 for p in range(partitions))
            ),
            message="topic created and led",
        )
    finally:
        await first.shutdown()


def hold_log_loading(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """(loading, release): `LogManager.startup` sets `loading` in its thread, then waits for
    `release` before it loads anything."""
    loading, release = threading.Event(), threading.Event()
    original = LogManager.startup

    def held_startup(self):
        loading.set()
        release.wait(60)
        original(self)

    monkeypatch.setattr(LogManager, "startup", held_startup)
    return loading, release


@contextlib.asynccontextmanager
async def running(coroutine):
    """`coroutine` as a task while the block runs; cancelled and awaited when it ends."""
    task = asyncio.create_task(coroutine)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
