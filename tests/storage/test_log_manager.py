"""LogManager: directory layout, least-loaded placement, checkpoints in Kafka's text format,
clean-shutdown marker, recovery limited to the unflushed tail, deletion, disk failures and the
scheduler."""

from __future__ import annotations

import asyncio
import errno
import os
import time

import pytest

from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import LogDirFailure, LogOfflineError, StorageError
from kafkalite.storage.log import log_delete_dir_name, parse_topic_partition_name
from kafkalite.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from tests.storage.conftest import FakeClock, make_batch


def fill(log, batches: int, records: int = 2, value_size: int = 100) -> None:
    for _ in range(batches):
        log.append_as_leader(make_batch(records, value_size), 0)
    log.high_watermark = log.log_end_offset


def test_logs_spread_over_dirs_and_checkpoints_in_kafka_format(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, LogConfig(segment_bytes=1000))
    manager.startup()
    logs = [manager.get_or_create_log("orders", p) for p in range(4)]
    assert sorted(str(log.dir.parent) for log in logs) == sorted(
        [str(d.resolve()) for d in dirs] * 2
    )
    assert all(log.dir.name == f"orders-{log.partition}" for log in logs)
    assert manager.get_or_create_log("orders", 1) is logs[1]
    fill(logs[0], 20)
    fill(logs[1], 3)
    logs[0].high_watermark = 30
    manager.shutdown()

    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
    hw_text = (logs[0].dir.parent / "replication-offset-checkpoint").read_text()
    lines = hw_text.splitlines()
    assert lines[0] == "0" and int(lines[1]) == len(lines) - 2 == 2
    assert f"orders {logs[0].partition} 30" in lines[2:]
    rp_lines = (logs[0].dir.parent / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert f"orders {logs[0].partition} 40" in rp_lines
    assert (logs[0].dir.parent / "log-start-offset-checkpoint").read_text().startswith("0\n2\n")

    again = LogManager(dirs, LogConfig(segment_bytes=1000))
    again.startup()
    for d in dirs:
        assert not (d / CLEAN_SHUTDOWN_FILE).exists(), "the marker is consumed at start-up"
    reloaded = again.get_log("orders", logs[0].partition)
    assert reloaded.log_end_offset == 40 and reloaded.high_watermark == 30
    assert reloaded.recovered_segments == 0, "nothing is re-read after a clean shutdown"
    assert again.get_log("orders", logs[1].partition).log_end_offset == 6
    again.shutdown()


def test_crash_recovers_only_past_recovery_point(tmp_path):
    manager = LogManager([tmp_path], LogConfig(segment_bytes=1000))
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    fill(log, 30)
    assert log.number_of_segments > 3
    manager.flush_rolled_segments()  # fsync rolled segments: recovery point = active base offset
    assert log.recovery_point == log.active_segment.base_offset
    manager.checkpoint_recovery_points()
    fill(log, 2)
    end = log.log_end_offset
    rp = log.recovery_point
    unflushed = [s for s in log.segments if s.base_offset >= rp]
    assert 1 <= len(unflushed) < log.number_of_segments
    # Crash: no shutdown, no marker; the lock goes with the process.
    for fd in manager._locks.values():
        os.close(fd)
    manager._locks.clear()

    again = LogManager([tmp_path], LogConfig(segment_bytes=1000))
    again.startup()
    recovered = again.get_log("t", 0)
    assert recovered.recovered_segments == len(unflushed)
    assert recovered.log_end_offset == end
    again.shutdown()


def test_loading_takes_the_directories_named_topic_partition_and_leaves_the_rest(tmp_path):
    """The load parses each directory's name as ``parse_topic_partition_name`` does: the
    last ``-<digits>`` is the partition; other directories and plain files are left alone."""
    manager = LogManager([tmp_path], LogConfig())
    manager.startup()
    fill(manager.get_or_create_log("a-b-3", 12), 1)
    fill(manager.get_or_create_log("orders", 0), 1)
    manager.shutdown()
    names = ["notes", "x-", "-1", "x-1a", "white space-0", "x-1.tmp"]
    for name in names:
        (tmp_path / name).mkdir()
    (tmp_path / "file-0").write_text("")
    for name in [*names, "a-b-3-12", "orders-0"]:
        try:
            parsed: object = parse_topic_partition_name(tmp_path / name)
        except ValueError:
            parsed = None
        assert parsed == {"a-b-3-12": ("a-b-3", 12), "orders-0": ("orders", 0)}.get(name)
    again = LogManager([tmp_path], LogConfig())
    again.startup()
    assert sorted(again._logs) == [("a-b-3", 12), ("orders", 0)]
    assert again.get_log("a-b-3", 12).log_end_offset == 2
    assert all((tmp_path / name).is_dir() for name in names) and (tmp_path / "file-0").is_file()
    again.shutdown()


def test_directory_lock_excludes_a_second_manager(tmp_path):
    manager = LogManager([tmp_path], LogConfig())
    manager.startup()
    with pytest.raises(StorageError):
        LogManager([tmp_path], LogConfig()).startup()
    manager.shutdown()


def test_delete_log_renames_then_removes(tmp_path):
    manager = LogManager([tmp_path], LogConfig())
    manager.startup()
    fill(manager.get_or_create_log("t", 0), 3)
    leftover = tmp_path / "t-1.0123456789abcdef0123456789abcdef-delete"
    leftover.mkdir()
    manager.delete_log("t", 0)
    assert manager.get_log("t", 0) is None
    assert not any(p.name.startswith("t-0") for p in tmp_path.iterdir())
    manager.shutdown()
    again = LogManager([tmp_path], LogConfig())
    again.startup()
    assert not leftover.exists(), "a half-deleted log is removed at start-up"
    assert again.all_logs() == []
    again.shutdown()


def test_deleting_the_log_of_a_249_character_topic_keeps_the_dir_online(tmp_path):
    """Renaming the log to ``<topic>-<partition>.<uuid>-delete`` uncut is over the 255 bytes a
    file name may have: ENAMETOOLONG took the log directory, and every other partition in it,
    offline. The topic is cut short in the name, as Kafka does."""
    manager = LogManager([tmp_path], LogConfig())
    manager.startup()
    long_topic = "x" * 249
    fill(manager.get_or_create_log(long_topic, 0), 3)
    other = manager.get_or_create_log("other", 0)
    manager.delete_log(long_topic, 0)
    assert not manager.offline_dirs
    assert manager.get_log(long_topic, 0) is None
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("x")] == []
    other.append_as_leader(make_batch(1), 0)
    manager.shutdown()


@pytest.mark.parametrize("topic", ["t", "x" * 249])
@pytest.mark.parametrize("partition", [0, 99_999])
def test_a_delete_dir_name_fits_in_a_file_name_and_names_its_partition(topic, partition):
    name = log_delete_dir_name(topic, partition, "0123456789abcdef0123456789abcdef")
    assert len(name.encode()) <= 255 and name.endswith("-delete")
    parsed_topic, parsed_partition = parse_topic_partition_name(name)
    assert topic.startswith(parsed_topic) and parsed_partition == partition


def test_disk_error_takes_only_that_dir_offline(tmp_path, monkeypatch):
    dirs = [tmp_path / "good", tmp_path / "full"]
    manager = LogManager(dirs, LogConfig())
    manager.startup()
    failed = []
    manager.log_dir_failure_listeners.append(failed.append)
    good = manager.get_or_create_log("t", 0)
    bad = manager.get_or_create_log("t", 1)
    assert good.dir.parent != bad.dir.parent
    broken_fds = {bad.active_segment.log.fd}
    real_write = os.write

    def write(fd, data):
        if fd in broken_fds:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(LogDirFailure) as failure:
        bad.append_as_leader(make_batch(1), 0)
    broken_fds.clear()  # the descriptor number is free for reuse once the dir is offline
    assert failure.value.dir == str(bad.dir.parent)
    assert failure.value.error_code.name == "KAFKA_STORAGE_ERROR"
    assert manager.offline_dirs == {str(bad.dir.parent)} and failed == [str(bad.dir.parent)]
    with pytest.raises(LogOfflineError):
        bad.read(0, 100)
    assert manager.get_log("t", 1) is bad and bad.offline
    good.append_as_leader(make_batch(1), 0)  # the other directory keeps working
    assert manager.get_or_create_log("t", 2).dir.parent == good.dir.parent
    # A replica that is not new may have its log in the offline directory: no empty stand-in
    # (Kafka's getOrCreateLog), so the controller elects elsewhere on KAFKA_STORAGE_ERROR.
    with pytest.raises(StorageError, match="offline") as refused:
        manager.get_or_create_log("t", 3, is_new=False)
    assert refused.value.error_code.name == "KAFKA_STORAGE_ERROR"
    assert manager.get_log("t", 3) is None
    manager.shutdown()
    assert (dirs[0] / CLEAN_SHUTDOWN_FILE).exists() and not (dirs[1] / CLEAN_SHUTDOWN_FILE).exists()


def test_periodic_tasks_apply_retention_and_flush_ms(tmp_path):
    clock = FakeClock()
    manager = LogManager(
        [tmp_path],
        LogConfig(segment_bytes=600, retention_bytes=700, flush_ms=5_000),
        retention_check_interval_ms=10_000,
        time_ms=clock,
    )
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    fill(log, 12)
    segments = log.number_of_segments
    assert log.recovery_point < log.log_end_offset
    clock.advance(10_000)
    manager.maybe_run_periodic_tasks()
    assert log.number_of_segments < segments
    assert log.size_bytes - log.segments[0].size < 700
    assert log.recovery_point == log.log_end_offset, "flush.ms elapsed: flushed"
    manager.shutdown()


async def test_run_scheduler_flushes_rolled_segments(tmp_path):
    manager = LogManager(
        [tmp_path], LogConfig(segment_bytes=600), flush_recovery_offset_checkpoint_interval_ms=0
    )
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    fill(log, 10)
    task = asyncio.create_task(manager.run_scheduler(tick_seconds=0.01))
    deadline = asyncio.get_running_loop().time() + 10
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    while log.recovery_point < log.active_segment.base_offset or not checkpoint.exists():
        # the checkpoint is written in a worker thread after the flush
        assert asyncio.get_running_loop().time() < deadline, "rolled segments never flushed"
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    manager.shutdown()


def test_unloadable_log_takes_its_dir_offline_not_the_broker(tmp_path):
    good, bad = tmp_path / "good", tmp_path / "bad"
    (good / "t-0").mkdir(parents=True)
    (bad / "t-1" / "00000000000000000000.log").mkdir(
        parents=True
    )  # a directory where a file must be
    manager = LogManager([good, bad], LogConfig())
    manager.startup()
    assert manager.offline_dirs == {str(bad.resolve())}
    assert manager.get_log("t", 0) is not None and manager.get_log("t", 1) is None
    assert manager.get_or_create_log("t", 2).dir.parent == good.resolve()
    manager.shutdown()


def test_a_rolled_segment_is_fsynced_with_its_indexes(tmp_path, monkeypatch):
    """The recovery point moves past a rolled segment only once its log and both indexes are
    on disk (Kafka's LogSegment.flush): recovery does not rebuild them below that point."""
    manager = LogManager([tmp_path], LogConfig(index_interval_bytes=0))
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    fill(log, 3)
    log.roll()
    synced = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    manager.flush_rolled_segments()
    base = str(tmp_path / "t-0" / "00000000000000000000")
    assert {base + ".log", base + ".index", base + ".timeindex"} <= set(synced)
    assert log.recovery_point == log.log_end_offset
    manager.shutdown()


def open_files_under(dir) -> int:
    """Descriptors of this process (mmaps keep one each) on files under ``dir``."""
    prefix = str(dir.resolve())
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(prefix):
                count += 1
        except OSError:
            continue
    return count


async def test_many_logs_hold_no_descriptors_until_used_and_again_when_idle(tmp_path):
    """Idle partitions cost no descriptor and no map (LazyIndex; files closed when idle): a
    broker with thousands of them stays far below its open-files limit."""
    manager = LogManager([tmp_path / "d"], LogConfig(), idle_release_interval_ms=1)
    manager.startup()
    errors = await manager.create_logs([(f"idle-{i}", 0, None, True) for i in range(300)])
    assert errors == {}
    assert len(manager.all_logs()) == 300
    assert open_files_under(tmp_path) <= 1  # the directory lock only
    busy = [manager.get_log(f"idle-{i}", 0) for i in range(20)]
    for log in busy:
        fill(log, 2)
        assert log.read(0, 1000).records.size > 0
    assert 20 <= open_files_under(tmp_path) <= 1 + 20 * 3  # .log and two index maps each
    # two idle checks with no use in between release them; a used log keeps its files
    manager.release_idle_logs()
    fill(busy[0], 1)
    assert manager.release_idle_logs() == 19
    assert busy[0].open_segment_count == 1 and busy[1].open_segment_count == 0
    assert manager.release_idle_logs() == 1
    assert open_files_under(tmp_path) <= 1
    # a released log reads and appends as before
    assert busy[1].read(0, 10_000).records.size > 0
    fill(busy[1], 1)
    assert busy[1].log_end_offset == 6
    manager.shutdown()
    assert open_files_under(tmp_path) == 0


def test_parallel_loading_finds_every_log_as_loaded(tmp_path):
    """num.recovery.threads.per.data.dir threads per directory load the same logs, with the
    same offsets, as one thread; after a crash (no marker) each log recovers its tail."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, LogConfig(segment_bytes=1000))
    manager.startup()
    ends = {}
    for p in range(40):
        log = manager.get_or_create_log("loaded", p)
        fill(log, p % 7)
        ends[("loaded", p)] = log.log_end_offset
    manager.shutdown()
    for threads in (1, 4):
        again = LogManager(
            dirs, LogConfig(segment_bytes=1000), num_recovery_threads_per_data_dir=threads
        )
        again.startup()
        assert {log.topic_partition: log.log_end_offset for log in again.all_logs()} == ends
        assert all(log.recovered_segments == 0 for log in again.all_logs())  # clean shutdown
        again.shutdown()
    for d in dirs:
        (d / CLEAN_SHUTDOWN_FILE).unlink()  # as after a crash
    crashed = LogManager(dirs, LogConfig(segment_bytes=1000), num_recovery_threads_per_data_dir=3)
    crashed.startup()
    assert {log.topic_partition: log.log_end_offset for log in crashed.all_logs()} == ends
    crashed.shutdown()


def test_duplicate_log_directory_takes_its_directory_offline_with_parallel_loading(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, LogConfig())
    manager.startup()
    for p in range(4):
        manager.get_or_create_log("dup", p)
    manager.shutdown()
    (tmp_path / "b" / "dup-0").mkdir(exist_ok=True)
    (tmp_path / "a" / "dup-0").mkdir(exist_ok=True)
    again = LogManager(dirs, LogConfig(), num_recovery_threads_per_data_dir=2)
    again.startup()
    assert len(again.offline_dirs) == 1
    again.shutdown()


def test_clean_shutdown_syncs_once_and_marks_every_log_flushed(tmp_path, monkeypatch):
    """Closing thousands of logs costs one filesystem sync per directory, not fsyncs per log;
    the recovery points written are the log ends, so the next start recovers nothing."""
    import kafkalite.storage.log_manager as log_manager_module

    syncs = []
    real_sync = log_manager_module.sync_filesystem
    monkeypatch.setattr(
        log_manager_module, "sync_filesystem", lambda d: syncs.append(d) or real_sync(d)
    )
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd) or real_fsync(fd))
    manager = LogManager([tmp_path / "d"], LogConfig())
    manager.startup()
    for p in range(50):
        log = manager.get_or_create_log("flushed", p)
        fill(log, 3)
        log.leader_epoch_cache.assign(2, 4)  # written at close, without an fsync of its own
    fsyncs.clear()
    manager.shutdown()
    assert len(syncs) == 1
    assert len(fsyncs) <= 7  # the three offset checkpoints (file and dir) and the marker
    again = LogManager([tmp_path / "d"], LogConfig())
    again.startup()
    logs = again.all_logs()
    assert len(logs) == 50
    assert all(log.recovery_point == log.log_end_offset == 6 for log in logs)
    assert all(log.leader_epoch_cache.epoch_entries == [(0, 0), (2, 4)] for log in logs)
    again.shutdown()


async def test_shutdown_in_a_thread_tells_failure_listeners_on_the_loop(tmp_path, monkeypatch):
    """A directory failing while the logs are closed in the worker thread is still reported
    to the listeners, on the event loop (they create tasks there)."""
    import threading

    import kafkalite.storage.log_manager as log_manager_module

    manager = LogManager([tmp_path / "ok", tmp_path / "bad"], LogConfig())
    manager.startup()
    for p in range(4):
        fill(manager.get_or_create_log("t", p), 1)
    bad = str((tmp_path / "bad").resolve())
    real_sync = log_manager_module.sync_filesystem

    def failing_sync(dir):
        if str(dir) == bad:
            raise OSError(errno.EIO, "injected")
        real_sync(dir)

    monkeypatch.setattr(log_manager_module, "sync_filesystem", failing_sync)
    told = []
    manager.log_dir_failure_listeners.append(
        lambda d: told.append((d, threading.current_thread() is threading.main_thread()))
    )
    await manager.shutdown_async()
    assert told == [(bad, True)]
    assert (tmp_path / "ok" / CLEAN_SHUTDOWN_FILE).exists()
    assert not (tmp_path / "bad" / CLEAN_SHUTDOWN_FILE).exists()


async def test_deleting_many_logs_writes_each_dirs_checkpoints_once(tmp_path, monkeypatch):
    """One batch of deletions (a StopReplica's) rewrites each log directory's checkpoints once,
    not once per deleted log (each write is three files with their fsyncs)."""
    from kafkalite.storage import checkpoint

    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, LogConfig())
    manager.startup()
    for p in range(40):
        fill(manager.get_or_create_log("gone", p), 1)
    kept = manager.get_or_create_log("kept", 0)
    written = []
    original = checkpoint.OffsetCheckpointFile.write

    def counting(self, offsets):
        written.append(self.path.name)
        original(self, offsets)

    monkeypatch.setattr(checkpoint.OffsetCheckpointFile, "write", counting)
    failures = await manager.delete_logs([("gone", p) for p in range(40)], batch_size=7)
    assert failures == {}
    assert sorted(written) == sorted(
        [
            "recovery-point-offset-checkpoint",
            "log-start-offset-checkpoint",
            "replication-offset-checkpoint",
        ]
        * 2
    ), "three files per log directory for the whole batch"
    assert [n for d in dirs for n in os.listdir(d) if n.startswith("gone")] == []
    assert manager.all_logs() == [kept]
    for d in dirs:
        names = (d / "recovery-point-offset-checkpoint").read_text()
        assert "gone" not in names
    manager.shutdown()


async def test_deleting_logs_leaves_the_event_loop_free_during_the_checkpoint_fsyncs(
    tmp_path, monkeypatch
):
    """The checkpoint write (with its fsyncs) happens in a worker thread: while it is held up,
    other coroutines on the loop keep running."""
    from kafkalite.storage import checkpoint

    manager = LogManager([tmp_path], LogConfig())
    manager.startup()
    for p in range(5):
        manager.get_or_create_log("gone", p)
    ticks = 0
    loop_ran_meanwhile = []
    original = checkpoint.OffsetCheckpointFile.write

    def held(self, offsets):
        # Wait (with a deadline) for the loop to tick while this write is in progress: it can
        # only if the write is not holding the loop.
        at_entry, deadline = ticks, time.monotonic() + 5
        while ticks == at_entry and time.monotonic() < deadline:
            time.sleep(0.001)
        loop_ran_meanwhile.append(ticks != at_entry)
        original(self, offsets)

    monkeypatch.setattr(checkpoint.OffsetCheckpointFile, "write", held)
    deletion = asyncio.create_task(manager.delete_logs([("gone", p) for p in range(5)]))
    while not deletion.done():
        ticks += 1
        await asyncio.sleep(0.001)
    assert deletion.result() == {}
    assert loop_ran_meanwhile and all(loop_ran_meanwhile)
    assert manager.get_log("gone", 0) is None
    assert not [n for n in os.listdir(tmp_path) if n.startswith("gone")]
    monkeypatch.undo()
    manager.shutdown()


async def test_a_snapshot_older_than_the_one_on_disk_is_never_written_over_it(tmp_path):
    """Checkpoints are written from worker threads and from the loop: a snapshot taken before
    the one already written is skipped, so what is on disk never goes back."""
    manager = LogManager([tmp_path], LogConfig())
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    path = tmp_path.resolve() / "replication-offset-checkpoint"
    old = manager._contents(str(tmp_path.resolve()), path.name, [log])
    log.append_as_leader(make_batch(3), 0)
    log.high_watermark = 3
    manager.checkpoint_high_watermarks()
    manager._write_offset_files([old])  # arrives late
    assert "t 0 3" in path.read_text().splitlines()
    manager.shutdown()


async def test_logs_by_dir_follows_creations_deletions_and_failures(tmp_path):
    """The kept index of logs by directory says what the logs' own paths say."""
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    manager = LogManager(dirs, LogConfig())
    manager.startup()

    def from_paths():
        out = {}
        for log in manager.all_logs():
            out.setdefault(str(log.dir.parent), set()).add(log.topic_partition)
        return out

    def kept():
        return {
            d: {log.topic_partition for log in logs}
            for d, logs in manager.logs_by_dir().items()
            if logs
        }

    for p in range(12):
        manager.get_or_create_log("t", p)
    await manager.create_logs([("u", p, None, True) for p in range(9)])
    assert kept() == from_paths()
    await manager.delete_logs([("t", p) for p in range(0, 12, 3)])
    manager.delete_log("u", 4)
    assert kept() == from_paths()
    manager.fail_log_dir(str(dirs[1].resolve()))
    assert kept() == from_paths() and str(dirs[1].resolve()) not in kept()
    manager.shutdown()
    again = LogManager(dirs[:1] + dirs[2:], LogConfig())
    again.startup()
    manager = again
    assert kept() == from_paths() and len(again.all_logs()) > 0
    again.shutdown()


async def test_periodic_passes_visit_only_rolled_logs_and_logs_with_a_flush_ms(tmp_path):
    """The rolled-segment fsync and the flush.ms check visit the logs that have work, kept as
    rolls and config changes happen, never every log held: a log that never rolled is never
    asked for its pending fsync, one with the default (infinite) flush.ms never checked."""
    manager = LogManager([tmp_path], LogConfig(segment_bytes=600))
    manager.startup()
    quiet = [manager.get_or_create_log("quiet", p) for p in range(20)]
    for log in quiet:
        fill(log, 1)  # one segment each: nothing to fsync at a roll
    busy = manager.get_or_create_log("busy", 0)
    timed = manager.get_or_create_log("timed", 0)
    asked: list[tuple[str, int]] = []
    flushed: list[tuple[str, int]] = []
    for log in [*quiet, busy, timed]:
        pending, flush = log.pending_roll_flush, log.flush

        def counted(log=log, pending=pending):
            asked.append(log.topic_partition)
            return pending()

        def flush_counted(*args, log=log, flush=flush, **kwargs):
            flushed.append(log.topic_partition)
            return flush(*args, **kwargs)

        log.pending_roll_flush = counted
        log.flush = flush_counted

    await manager._flush_rolled_segments_async()
    manager.flush_dirty_logs()
    assert asked == [] and flushed == []

    fill(busy, 10)
    assert busy.number_of_segments > 1 and busy.recovery_point < busy.active_segment.base_offset
    await manager._flush_rolled_segments_async()
    assert asked == [("busy", 0)]
    assert busy.recovery_point == busy.active_segment.base_offset
    await manager._flush_rolled_segments_async()  # done: it left the pass
    assert asked == [("busy", 0)]

    timed.update_config(LogConfig(segment_bytes=600, flush_ms=0))
    fill(timed, 1)
    manager.flush_dirty_logs()
    assert flushed == [("timed", 0)] and timed.recovery_point == timed.log_end_offset
    timed.update_config(LogConfig(segment_bytes=600))  # back to the default: never checked
    fill(timed, 1)
    manager.flush_dirty_logs()
    assert flushed == [("timed", 0)]
    manager.shutdown()


async def test_a_roll_during_the_fsync_keeps_the_log_for_the_next_pass(tmp_path, monkeypatch):
    """A log that rolls again while its rolled segments are being fsynced (in a worker thread)
    is visited by the next pass, whose fsync covers the new roll too; a deleted log leaves."""
    from kafkalite.storage import log_manager as module

    manager = LogManager([tmp_path], LogConfig(segment_bytes=600))
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    gone = manager.get_or_create_log("gone", 0)
    fill(log, 10)
    fill(gone, 10)
    first_base = log.active_segment.base_offset
    real = module._fsync_and_close
    rolls = []

    def fsync_and_roll(fds):
        real(fds)
        if not rolls:  # the first fsync: the log rolls meanwhile
            rolls.append(log.roll())

    monkeypatch.setattr(module, "_fsync_and_close", fsync_and_roll)
    await manager.delete_logs([("gone", 0)])
    await manager._flush_rolled_segments_async()
    assert rolls and log.recovery_point == first_base < log.active_segment.base_offset
    assert set(manager._rolled) == {("t", 0)}
    await manager._flush_rolled_segments_async()
    assert log.recovery_point == log.active_segment.base_offset
    assert manager._rolled == {}
    manager.shutdown()
