"""Start-up after a clean shutdown overlaps the log loading with the registration and the
controller's election: the broker registers and its controller is elected while the logs are
still loading, the controller's requests wait for the replica manager, and the partitions are
then led and writable. After an unclean stop (no clean-shutdown marker: recovery may take long)
the broker registers only once its logs are loaded, as Kafka's does."""

from __future__ import annotations

import asyncio
import os

from kafkalite.protocol.types import TopicPartition
from kafkalite.server import KafkaServer
from kafkalite.storage.log_manager import CLEAN_SHUTDOWN_FILE
from kafkalite.testing import free_port
from tests.controller.shell_support import eventually
from tests.server.support import config, first_start, hold_log_loading

TOPIC = "overlap"
THREE_PARTITIONS = {"num.partitions": "3"}
"""The auto-created topic's partition count."""


def _all_led(server: KafkaServer) -> bool:
    return all(
        (p := server.replica_manager.online_partition(TopicPartition(TOPIC, i))) is not None
        and p.is_leader
        for i in range(3)
    )


def _append(server: KafkaServer, partition: int) -> int:
    from kafkalite.protocol.records import Record, build_batch

    log = server.log_manager.get_log(TOPIC, partition)
    batch = bytearray(build_batch([Record(0, 0, None, b"v")], base_timestamp=1000))
    partition_state = server.replica_manager.online_partition(TopicPartition(TOPIC, partition))
    assert partition_state is not None and partition_state.is_leader
    log.append_as_leader(batch, partition_state.leader_epoch)
    return log.log_end_offset


async def test_after_a_clean_shutdown_it_registers_and_elects_while_the_logs_load(
    tmp_path, monkeypatch
):
    port = free_port()
    await first_start(tmp_path, port, TOPIC, 3)
    assert os.path.exists(tmp_path / "data" / CLEAN_SHUTDOWN_FILE)
    loading, release = hold_log_loading(monkeypatch)
    server = KafkaServer(config(tmp_path, port, **THREE_PARTITIONS))
    starting = asyncio.create_task(server.startup())
    try:
        await eventually(lambda: loading.is_set(), message="log loading began")

        async def registered_and_controller() -> bool:
            return (
                await server.session.exists(f"/brokers/ids/{server.broker_id}") is not None
                and server.controller is not None
                and server.controller.is_active
            )

        await eventually(registered_and_controller, timeout=30, message="registered while loading")
        # Still loading: no replica manager, so the controller's requests are waiting.
        assert server.replica_manager is None
        assert not server.dispatcher.roles_ready.is_set()
        release.set()
        await asyncio.wait_for(starting, 60)
        await eventually(lambda: _all_led(server), message="every partition led after the start")
        assert [_append(server, p) for p in range(3)] == [1, 1, 1]
    finally:
        release.set()
        if not starting.done():
            await asyncio.gather(starting, return_exceptions=True)
        await server.shutdown()


async def test_after_an_unclean_stop_it_registers_only_once_the_logs_are_loaded(
    tmp_path, monkeypatch
):
    port = free_port()
    await first_start(tmp_path, port, TOPIC, 3)
    os.unlink(tmp_path / "data" / CLEAN_SHUTDOWN_FILE)  # as a crash leaves it
    loading, release = hold_log_loading(monkeypatch)
    registering: list[bool] = []
    original_register = KafkaServer._register_broker

    async def register(self):
        registering.append(True)
        await original_register(self)

    monkeypatch.setattr(KafkaServer, "_register_broker", register)
    server = KafkaServer(config(tmp_path, port, **THREE_PARTITIONS))
    starting = asyncio.create_task(server.startup())
    try:
        await eventually(lambda: loading.is_set(), message="log loading began")
        # The loading is held in its thread. After a clean shutdown the registration has begun
        # by now (it is called before the loading's task first runs); here it has not.
        assert registering == [] and server.controller is None
        release.set()
        await asyncio.wait_for(starting, 60)
        assert registering == [True]
        assert await server.session.exists(f"/brokers/ids/{server.broker_id}") is not None
        await eventually(lambda: _all_led(server), message="every partition led after the start")
    finally:
        release.set()
        if not starting.done():
            await asyncio.gather(starting, return_exceptions=True)
        await server.shutdown()
