"""Log-directory faults on a real filesystem: a full tmpfs (ENOSPC), a file where a directory
should be, and what is logged about them."""

from __future__ import annotations

import errno
import os
import shutil

import pytest
from structlog.testing import capture_logs

from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import LogDirFailure, LogOfflineError, StorageError
from kafkalite.storage.index import OffsetIndex, TimeIndex
from kafkalite.storage.log import Log
from kafkalite.storage.log_manager import LogManager
from tests.storage.conftest import make_batch
from tests.storage.tmpfs import fill, mounted_tmpfs


def is_sparse(stat: os.stat_result) -> bool:
    return stat.st_blocks * 512 < stat.st_size


@pytest.fixture
def full_fs(tmp_path):
    with mounted_tmpfs(tmp_path / "full", "1m") as path:
        yield path


@pytest.mark.parametrize("index_class", [OffsetIndex, TimeIndex])
def test_an_entry_on_a_full_filesystem_is_refused_with_enospc(full_fs, index_class):
    """The preallocated index is sparse: writing its first entry through the map would fault
    (SIGBUS) on a full filesystem. The space is reserved first, and refused with ENOSPC."""
    fill(full_fs)
    index = index_class(full_fs / "00000000000000000000.index", 0, 256 * 1024)
    with pytest.raises(OSError) as refused:
        add_entry(index, 5, 100)
    assert refused.value.errno == errno.ENOSPC
    assert index.entries == 0
    index.close_handler()


def add_entry(index, offset: int, value: int) -> None:
    if isinstance(index, TimeIndex):
        index.maybe_append(value, offset)
    else:
        index.append(offset, value)


def test_growing_an_index_on_a_full_filesystem_then_appending_raises_enospc(full_fs):
    index = OffsetIndex(full_fs / "00000000000000000000.index", 0, 4096)
    index.append(5, 100)
    index.trim_to_valid_size()
    fill(full_fs)
    index.resize(256 * 1024)
    with pytest.raises(OSError) as refused:
        index.append(6, 200)
    assert refused.value.errno == errno.ENOSPC
    assert index.entries == 1 and index.entry(0) == (5, 100), "the entries stay readable"
    index.close_handler()


def test_an_idle_index_costs_no_disk_and_entries_get_blocks_before_they_are_written(tmp_path):
    """10,000 idle partitions must not hold 20 GB of preallocated indexes: the file is sparse
    until entries are written, and the entries' space is reserved a chunk ahead of them."""
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 1024 * 1024)
    stat = os.stat(index.file)
    assert stat.st_size == 1024 * 1024 and stat.st_blocks == 0
    for n in range(1000):
        index.append(n, n * 10)
    stat = os.stat(index.file)
    assert 1000 * 8 <= stat.st_blocks * 512 < 1024 * 1024
    index.close()


def test_an_index_loaded_with_holes_reserves_before_its_first_entry(tmp_path):
    """An index left untrimmed by a crash is all holes past its entries: nothing of it counts
    as reserved, so the rebuild's first entry reserves first."""
    file = tmp_path / "00000000000000000000.index"
    fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, 1024 * 1024)
    os.close(fd)
    assert is_sparse(os.stat(file))
    index = OffsetIndex(file, 0, 1024 * 1024)
    index.reset()
    index.append(3, 0)
    assert os.stat(file).st_blocks > 0
    index.close()


def test_a_sparse_index_on_a_full_filesystem_takes_the_log_dir_offline(tmp_path, full_fs):
    """The issue's start-up crash, in-process: loading a crashed segment whose preallocated
    index is sparse, on a full filesystem, is a log-dir failure naming the directory."""
    log = Log(full_fs / "t-1", LogConfig(segment_index_bytes=4096))
    log.append_as_leader(make_batch(3), 0)
    log._close_quietly()  # a crash: the index is not trimmed, nothing is checkpointed
    index = full_fs / "t-1" / "00000000000000000000.index"
    index.write_bytes(b"")  # (a crash leaves none: the index had no entry yet)
    os.truncate(index, 256 * 1024)  # sparse, as the old preallocation made it
    fill(full_fs)
    good = tmp_path / "good"
    with capture_logs() as logs:
        manager = LogManager([good, full_fs], LogConfig())
        manager.startup()
    assert manager.offline_dirs == {str(full_fs.resolve())}
    errors = [e for e in logs if e["log_level"] == "error"]
    assert errors and errors[0]["log_dir"] == str(full_fs.resolve())
    assert errors[0]["errno"] == "ENOSPC" and errors[0]["phase"] == "startup"
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert warnings and warnings[0]["offline_log_dirs"] == [str(full_fs.resolve())]
    assert manager.get_or_create_log("t", 0).dir.parent == good.resolve()
    manager.shutdown()


def test_a_failure_while_running_is_logged_with_its_errno(tmp_path, full_fs):
    manager = LogManager([tmp_path / "good", full_fs], LogConfig(segment_index_bytes=4096))
    manager.startup()
    manager.get_or_create_log("t", 0)
    log = manager.get_or_create_log("t", 1)
    assert log.dir.parent == full_fs.resolve()
    fill(full_fs)
    with capture_logs() as logs:
        with pytest.raises(LogDirFailure):
            for _ in range(100):
                log.append_as_leader(make_batch(10, value_size=1000), 0)
    assert manager.offline_dirs == {str(full_fs.resolve())}
    [error] = [e for e in logs if e["log_level"] == "error"]
    assert error["log_dir"] == str(full_fs.resolve())
    assert error["errno"] == "ENOSPC" and "No space left" in error["error"]
    assert error["phase"] == "running"
    manager.shutdown()


def test_a_file_where_a_log_dir_should_be_is_a_logged_offline_dir(tmp_path):
    """EACCES-like failures cannot be made with chmod as root: a file in the way of the
    directory fails its creation the same way."""
    blocked = tmp_path / "blocked"
    blocked.write_text("not a directory")
    with capture_logs() as logs:
        manager = LogManager([tmp_path / "good", blocked], LogConfig())
        manager.startup()
    assert manager.offline_dirs == {str(blocked.resolve())}
    [error] = [e for e in logs if e["log_level"] == "error"]
    assert error["log_dir"] == str(blocked.resolve()) and error["errno"] == "EEXIST"
    [warning] = [e for e in logs if e["log_level"] == "warning"]
    assert warning["offline_log_dirs"] == [str(blocked.resolve())]
    manager.shutdown()


def test_recovery_logs_the_tail_it_truncates(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig())
    for _ in range(3):
        log.append_as_leader(make_batch(2), 0)
    segment_file = log.active_segment.log.file
    kept = log.active_segment.size
    log.close()
    with open(segment_file, "ab") as f:
        f.write(bytes(make_batch(4))[:50])  # a torn batch: the crash cut it
    with capture_logs() as logs:
        again = Log(tmp_path / "t-0", LogConfig(), recovery_point=0, had_clean_shutdown=False)
    assert again.log_end_offset == 6
    [warning] = [e for e in logs if e["event"] == "recovery truncated a torn or corrupt tail"]
    assert warning["partition"] == "t-0" and warning["bytes"] == 50
    assert warning["kept_up_to_offset"] == 6 and warning["position"] == kept
    again.close()


# ---------------------------------------------------------------- a partition directory vanishes


def test_a_partition_dir_missing_at_start_up_is_not_recreated_empty(tmp_path):
    manager = LogManager([tmp_path], LogConfig())
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    for _ in range(5):
        log.append_as_leader(make_batch(300), 0)
    manager.get_or_create_log("t", 1)
    manager.shutdown()
    shutil.rmtree(tmp_path / "t-0")  # an operator's mistake while the broker was down

    with capture_logs() as logs:
        again = LogManager([tmp_path], LogConfig())
        again.startup()
    assert again.get_log("t", 0) is None and again.is_missing("t", 0)
    assert again.offline_log_keys() == [("t", 0)]
    [error] = [e for e in logs if e["log_level"] == "error"]
    assert error["partition"] == "t-0" and error["checkpointed_recovery_point"] == 1500
    for is_new in (False, True):
        with pytest.raises(StorageError, match="missing") as refused:
            again.get_or_create_log("t", 0, is_new=is_new)
        assert refused.value.error_code.name == "KAFKA_STORAGE_ERROR"
    assert not (tmp_path / "t-0").exists(), "no empty stand-in was created"
    assert again.get_log("t", 1) is not None, "the other partitions serve"
    again.shutdown()

    third = LogManager([tmp_path], LogConfig())  # remembered across any number of restarts
    third.startup()
    assert third.is_missing("t", 0)
    third.delete_log("t", 0)  # deleting the partition accepts the loss
    assert not third.is_missing("t", 0)
    assert third.get_or_create_log("t", 0).log_end_offset == 0
    third.shutdown()


def test_a_partition_dir_deleted_while_running_goes_offline(tmp_path, clock):
    manager = LogManager([tmp_path], LogConfig(), log_dir_check_interval_ms=10_000, time_ms=clock)
    manager.startup()
    told = []
    manager.partition_failure_listeners.append(
        lambda topic, partition: told.append((topic, partition))
    )
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(make_batch(1500), 0)
    log.high_watermark = 1500
    other = manager.get_or_create_log("t", 1)
    shutil.rmtree(log.dir)
    clock.advance(10_000)
    with capture_logs() as logs:
        manager.maybe_run_periodic_tasks()  # nothing was written since: the check finds it
    assert told == [("t", 0)] and log.offline and manager.is_missing("t", 0)
    assert not manager.offline_dirs
    [error] = [e for e in logs if e["log_level"] == "error"]
    assert error["partition"] == "t-0" and error["high_watermark"] == 1500
    with pytest.raises(LogOfflineError):
        log.read(0, 100)
    other.append_as_leader(make_batch(1), 0)
    manager.shutdown()

    again = LogManager([tmp_path], LogConfig())
    again.startup()
    assert again.is_missing("t", 0) and again.get_log("t", 1) is not None
    with pytest.raises(StorageError):
        again.get_or_create_log("t", 0, is_new=False)
    again.shutdown()


def crash(manager: LogManager) -> None:
    """Drop the manager as a crash would: nothing flushed or checkpointed, locks released."""
    for log in manager.all_logs():
        log._close_quietly()
    for fd in manager._locks.values():
        os.close(fd)
    manager._locks.clear()


def test_a_deleted_partition_is_not_taken_for_a_vanished_one(tmp_path):
    manager = LogManager([tmp_path], LogConfig())
    manager.startup()
    for partition in (0, 1, 2):
        manager.get_or_create_log("t", partition).append_as_leader(make_batch(2), 0)
    manager.checkpoint_recovery_points()
    manager.delete_log("t", 0)
    # a deletion a crash interrupted after the rename: the checkpoint still names t-1
    interrupted = manager.get_log("t", 1)
    interrupted.rename_dir("t-1.0123456789abcdef0123456789abcdef-delete")
    crash(manager)

    with capture_logs() as logs:
        again = LogManager([tmp_path], LogConfig())
        again.startup()
    assert not again.is_missing("t", 0) and not again.is_missing("t", 1)
    assert again.offline_log_keys() == [] and not [e for e in logs if e["log_level"] == "error"]
    assert again.get_log("t", 2) is not None
    again.shutdown()


def test_a_whole_log_dir_vanishing_is_a_log_dir_failure(tmp_path):
    good, gone = tmp_path / "good", tmp_path / "gone"
    manager = LogManager([good, gone], LogConfig())
    manager.startup()
    told = []
    manager.partition_failure_listeners.append(lambda *key: told.append(key))
    failed = []
    manager.log_dir_failure_listeners.append(failed.append)
    logs = [manager.get_or_create_log("t", p) for p in range(4)]
    assert {str(log.dir.parent) for log in logs} == {str(good.resolve()), str(gone.resolve())}
    shutil.rmtree(gone)
    assert manager.check_partition_dirs() == []
    assert failed == [str(gone.resolve())] and told == [], "one dir failure, not one per log"
    assert manager.offline_dirs == {str(gone.resolve())}
    manager.shutdown()


def test_a_write_into_a_vanished_partition_dir_takes_only_that_partition_offline(tmp_path, clock):
    """The index's next entry needs its file (to reserve space): ENOENT. The partition
    directory is gone, the log directory is not: that partition goes offline at once, and the
    other partitions of the directory keep serving."""
    manager = LogManager([tmp_path], LogConfig(), time_ms=clock)
    manager.startup()
    told = []
    manager.partition_failure_listeners.append(
        lambda topic, partition: told.append((topic, partition))
    )
    log = manager.get_or_create_log("t", 0)
    other = manager.get_or_create_log("t", 1)
    shutil.rmtree(log.dir)
    with pytest.raises(StorageError):
        for _ in range(10):
            log.append_as_leader(make_batch(100, value_size=100), 0)
    assert told == [("t", 0)] and manager.is_missing("t", 0)
    assert not manager.offline_dirs
    other.append_as_leader(make_batch(1), 0)
    manager.shutdown()


def _log_with_index_entries(dir):
    log = Log(dir, LogConfig(index_interval_bytes=100))
    for _ in range(5):
        log.append_as_leader(make_batch(10, value_size=50), 0)
    assert log.active_segment.offset_index.entries > 0
    return log


@pytest.mark.parametrize("which", ["offset_index", "time_index"])
@pytest.mark.parametrize(("mapped", "cut_to"), [(True, 13), (False, 0), (False, 13)])
def test_an_index_cut_under_the_log_fails_the_append_as_a_log_dir_failure(
    tmp_path, which, mapped, cut_to
):
    """Before: an active index cut on disk while the broker ran made the append raise a
    ValueError after the bytes were written (UNKNOWN_SERVER_ERROR, log end left behind them,
    the retry wrote them again). An index failure after the log write is a log-dir failure:
    the log goes offline, nothing more is written. (A mapped index is cut inside its first
    page here: cut below a page a write would be a SIGBUS, which is what the check prevents.)"""
    dir = tmp_path / "t-0"
    log = _log_with_index_entries(dir)
    failures = []
    log.on_log_dir_failure = lambda d, e: failures.append((d, e))
    segment = log.active_segment
    if not mapped:
        segment.release_resources()
    index = getattr(segment, which)
    assert index.is_mapped is mapped
    os.truncate(index.file, cut_to)
    end = log.log_end_offset
    with pytest.raises(LogDirFailure) as failed:
        log.append_as_leader(make_batch(200, value_size=50), 0)
    assert failed.value.error_code.name == "KAFKA_STORAGE_ERROR"
    assert log.offline and [d for d, _ in failures] == [str(tmp_path)]
    assert log.log_end_offset == end
    with pytest.raises(LogOfflineError):
        log.append_as_leader(make_batch(1), 0)
    log.close()


def test_any_failure_after_the_log_write_takes_the_log_offline(tmp_path, monkeypatch):
    """Whatever fails once the bytes are in the log (here a time index refusing its entry),
    the append is not reported as refused: the log goes offline."""
    log = _log_with_index_entries(tmp_path / "t-0")

    def refuse(*args, **kwargs):
        raise ValueError("refused")

    monkeypatch.setattr(log.active_segment.time_index, "maybe_append", refuse)
    with pytest.raises(LogDirFailure) as failed:
        log.append_as_leader(make_batch(200, value_size=50), 0)
    assert "after the log write" in str(failed.value) and log.offline
    log.close()


async def test_deleted_dirs_are_removed_only_once_the_checkpoints_stop_naming_them(
    tmp_path, monkeypatch
):
    """A batch deletion removes the renamed directories only after every checkpoint of their
    log directory is on disk without them: a crash at any point never leaves a checkpoint
    naming a partition whose directory is gone (start-up would keep it offline as vanished)."""
    from kafkalite.storage import log_manager as module

    manager = LogManager([tmp_path], LogConfig())
    manager.startup()
    for partition in range(6):
        manager.get_or_create_log("t", partition).append_as_leader(make_batch(2), 0)
    manager.checkpoint_recovery_points()
    manager.checkpoint_high_watermarks()
    manager.checkpoint_log_start_offsets()
    seen_at_removal = []
    original = module._remove_dirs

    def checking(dirs):
        for name in (
            "recovery-point-offset-checkpoint",
            "replication-offset-checkpoint",
            "log-start-offset-checkpoint",
        ):
            seen_at_removal.append((tmp_path / name).read_text())
        original(dirs)

    monkeypatch.setattr(module, "_remove_dirs", checking)
    assert await manager.delete_logs([("t", p) for p in range(4)]) == {}
    assert seen_at_removal and not any("t 0 " in text for text in seen_at_removal)
    assert all("t 5 " in text for text in seen_at_removal)
    crash(manager)

    with capture_logs() as logs:
        again = LogManager([tmp_path], LogConfig())
        again.startup()
    assert again.offline_log_keys() == [] and not [e for e in logs if e["log_level"] == "error"]
    assert {log.partition for log in again.all_logs()} == {4, 5}
    again.shutdown()


async def test_a_failed_checkpoint_write_keeps_the_renamed_dirs_for_the_next_start(
    tmp_path, monkeypatch
):
    """The checkpoint write fails: the directory goes offline, the deletions are reported
    failed, and the ``-delete`` directories stay, so the next start-up takes the partitions
    for deleted (not vanished) and removes them."""
    from kafkalite.storage import checkpoint

    manager = LogManager([tmp_path], LogConfig())
    manager.startup()
    for partition in range(3):
        manager.get_or_create_log("t", partition).append_as_leader(make_batch(2), 0)
    manager.checkpoint_recovery_points()

    def failing(self, offsets):
        raise OSError(errno.EIO, "injected", str(self.path))

    monkeypatch.setattr(checkpoint.OffsetCheckpointFile, "write", failing)
    with capture_logs():
        failures = await manager.delete_logs([("t", 0), ("t", 1)])
    assert set(failures) == {("t", 0), ("t", 1)}
    assert manager.offline_dirs == {str(tmp_path.resolve())}
    assert len([n for n in os.listdir(tmp_path) if n.endswith("-delete")]) == 2
    monkeypatch.undo()
    crash(manager)

    with capture_logs() as logs:
        again = LogManager([tmp_path], LogConfig())
        again.startup()
    assert again.offline_log_keys() == [] and not [e for e in logs if e["log_level"] == "error"]
    assert [log.partition for log in again.all_logs()] == [2]
    assert not [n for n in os.listdir(tmp_path) if n.endswith("-delete")]
    again.shutdown()
