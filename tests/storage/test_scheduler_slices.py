"""The LogManager's scheduler round works over its logs in slices, with the same effects.

One round (``_periodic_round_async``, what ``run_scheduler`` runs each tick) with every task due:
retention deletes what it deleted, flush.ms flushes, the checkpoints name every log, idle logs
release their files, a partition whose directory vanished goes offline; and the loop turns
between the logs (the slices' budget is zero here so every log ends a slice: the order of
events is deterministic, no timing is asserted; bench/broker_loop_bench.py measures the holds).
A log deleted while the round yields is skipped by the rest of it."""

from __future__ import annotations

import dataclasses
import shutil
import time

import pytest

import kafkalite.storage.log_manager as log_manager_module
from kafkalite.storage.checkpoint import OffsetCheckpointFile
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log_manager import LogManager
from kafkalite.storage.loop_slices import LoopSlices
from tests.loop_turns import LoopTurns
from tests.storage.conftest import make_batch

N = 120
CONFIG = LogConfig(segment_bytes=1024)


@pytest.fixture(autouse=True)
def every_log_ends_a_slice(monkeypatch):
    monkeypatch.setattr(log_manager_module, "LoopSlices", lambda: LoopSlices(1, 0.0), raising=False)


def fill(log, batches: int) -> None:
    for _ in range(batches):
        log.append_as_leader(make_batch(2, 100, time.time_ns() // 1_000_000), 0)
    log.high_watermark = log.log_end_offset


async def test_a_round_yields_between_logs_and_does_what_it_did(tmp_path):
    manager = LogManager(
        [tmp_path],
        CONFIG,
        retention_check_interval_ms=0,
        flush_check_interval_ms=0,
        flush_recovery_offset_checkpoint_interval_ms=0,
        flush_start_offset_checkpoint_interval_ms=0,
        high_watermark_checkpoint_interval_ms=0,
        log_dir_check_interval_ms=0,
        idle_release_interval_ms=0,
    )
    manager.startup()
    try:
        manager.update_topic_config("kept", dataclasses.replace(CONFIG, retention_bytes=1500))
        manager.update_topic_config("flushed", dataclasses.replace(CONFIG, flush_ms=0))
        kept = [manager.get_or_create_log("kept", p) for p in range(N // 3)]
        flushed = [manager.get_or_create_log("flushed", p) for p in range(N // 3)]
        plain = [manager.get_or_create_log("plain", p) for p in range(N // 3)]
        for log in kept + plain:
            fill(log, 12)  # several segments of 1 KiB
        for log in flushed:
            fill(log, 1)
        assert all(log.number_of_segments > 2 for log in kept)
        assert all(log.unflushed_messages > 0 for log in flushed)
        shutil.rmtree(plain[5].dir)  # its directory vanishes
        # plain-30 is deleted while the round is in progress (after its first passes started)
        with LoopTurns(N // 2, lambda: manager.delete_log("plain", 30)) as ticker:
            await manager._periodic_round_async()
        assert ticker.turns >= 4 * N  # a turn after every log of each pass over them
        assert all(log.size_bytes <= 1500 + 1024 for log in kept)  # retention by size
        alive = [log for log in plain if log not in (plain[5], plain[30])]
        assert all(log.number_of_segments > 2 for log in alive)
        assert all(log.unflushed_messages == 0 for log in flushed)  # flush.ms
        assert all(log.recovery_point == log.active_segment.base_offset for log in alive)
        assert manager.offline_log_keys() == [("plain", 5)]
        assert manager.get_log("plain", 30) is None
        for name in (
            "recovery-point-offset-checkpoint",
            "log-start-offset-checkpoint",
            "replication-offset-checkpoint",
        ):
            names = {key for key in OffsetCheckpointFile(tmp_path / name).read()}
            assert {(log.topic, log.partition) for log in kept + flushed} <= names
        # idle logs give their files back on the next round
        await manager._periodic_round_async()
        assert all(log.open_segment_count == 0 for log in kept + flushed)
    finally:
        manager.shutdown()
