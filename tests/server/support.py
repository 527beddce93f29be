"""A broker of this process for tests that need the composition root itself, and `running`:
a background task for the duration of a block (cancelled and awaited at its end)."""

from __future__ import annotations

import asyncio
import contextlib

from kafkalite.config import BrokerConfig
from kafkalite.server import KafkaServer
from kafkalite.testing import free_port


async def started(tmp_path, **overrides: str) -> KafkaServer:
    """A broker in this process on the embedded store, without the admin API."""
    config = BrokerConfig.load(
        overrides={
            "log.dirs": str(tmp_path / "data"),
            "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
            "admin.listener": "",
            **overrides,
        },
        environ={},
    )
    server = KafkaServer(config)
    await server.startup()
    return server


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
