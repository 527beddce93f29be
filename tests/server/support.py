"""A broker of this process for tests that need the composition root itself."""

from __future__ import annotations

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
