"""The composition root in-process: what start-up builds from the broker's configuration."""

from __future__ import annotations

from kafkalite.broker.isr_writer import ZkIsrChangeWriter
from kafkalite.config import BrokerConfig
from kafkalite.server import KafkaServer
from tests.harness.broker import free_port


async def test_cleaner_and_fetcher_settings_reach_the_running_roles(tmp_path):
    config = BrokerConfig.load(
        overrides={
            "log.dirs": str(tmp_path / "data"),
            "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
            "admin.listener": "",
            "log.cleaner.backoff.ms": "250",
            "log.cleaner.threads": "2",
            "log.cleaner.dedupe.buffer.size": "1048576",
            "log.cleaner.io.max.bytes.per.second": "5000000",
            "replica.socket.timeout.ms": "7000",
            "num.replica.fetchers": "3",
        },
        environ={},
    )
    server = KafkaServer(config)
    await server.startup()
    try:
        cleaner = server.log_manager.cleaner
        assert (cleaner.config.backoff_ms, cleaner.config.num_threads) == (250, 2)
        assert cleaner.config.dedupe_buffer_size == 1048576
        assert cleaner.throttler.desired_rate_per_second == 5_000_000
        fetchers = server.replica_manager.replica_fetcher_manager
        assert fetchers.endpoint_for_leader(1).client.request_timeout == 7.0
        assert fetchers.config.num_replica_fetchers == 3
        # ISR changes go through the writer that treats a lost-but-applied write as done
        assert isinstance(server.replica_manager.alter_isr, ZkIsrChangeWriter)
    finally:
        await server.shutdown()


async def test_a_listener_of_any_name_is_registered_as_plaintext(tmp_path):
    """Kafka's tooling decodes /brokers/ids/<id> with SecurityProtocol.forName: a listener named
    INTERNAL must be announced with protocol PLAINTEXT (and give the top-level host and port)."""
    import json

    port = free_port()
    config = BrokerConfig.load(
        overrides={
            "log.dirs": str(tmp_path / "data"),
            "listeners": f"INTERNAL://127.0.0.1:{port}",
            "inter.broker.listener.name": "INTERNAL",
            "admin.listener": "",
        },
        environ={},
    )
    server = KafkaServer(config)
    await server.startup()
    try:
        data, _ = await server.session.get_data("/brokers/ids/0")
        registration = json.loads(data)
        assert registration["listener_security_protocol_map"] == {"INTERNAL": "PLAINTEXT"}
        assert (registration["host"], registration["port"]) == ("127.0.0.1", port)
        assert registration["endpoints"] == [f"INTERNAL://127.0.0.1:{port}"]
    finally:
        await server.shutdown()
