"""All partition logs of one broker, across its log directories (Kafka's LogManager).

Layout of each directory in ``log.dirs``::

    <dir>/.lock                               held (flock) while this process uses the dir
    <dir>/.kafka_cleanshutdown                present only after a clean shutdown
    <dir>/recovery-point-offset-checkpoint    topic partition offset (see checkpoint.py)
    <dir>/replication-offset-checkpoint       high watermarks
    <dir>/log-start-offset-checkpoint         log start offsets
    <dir>/cleaner-offset-checkpoint           first dirty offset of compacted logs
    <dir>/<topic>-<partition>/                one Log (see log.py)
    <dir>/<topic>-<partition>.<uuid>-delete/  a log being deleted (removed on sight)

Start-up: per directory, the clean-shutdown marker is read and removed (a crash from now on
leaves none); each log is loaded with its checkpointed recovery point and log start offset, and
is only scanned past the recovery point if the marker was missing. The logs of a directory are
loaded by ``num.recovery.threads.per.data.dir`` threads, every directory at once (Kafka's
loadLogs); the broker runs the whole start-up in a worker thread, off its event loop. Shutdown
flushes every log, writes the checkpoints (once per directory) and then the marker.

Scale: nothing per log costs O(number of logs) (the directory of a new log is chosen from kept
counts); ``create_logs`` creates many logs in a worker thread, in batches, so a LeaderAndIsr for
thousands of new partitions does its file work off the event loop; a log idle for two
``release_idle_logs`` rounds closes its descriptors and unmaps its indexes (see Log.uses).

New logs go to the online directory holding the fewest logs. Checkpoint files are written
atomically (temp + fsync + rename).

A directory whose I/O fails (ENOSPC, EACCES, EIO, ...) goes offline: it is added to
``offline_dirs``, its logs are closed and marked offline (operations on them raise
``LogOfflineError``, Kafka's KAFKA_STORAGE_ERROR), listeners are told; the process keeps
serving the other directories. Nothing here raises an OSError to callers. Each failure is
logged once, as an error naming the directory and the OS error (errno name and message); a
start-up that leaves directories offline also logs a warning listing them.

A partition directory that vanished (deleted by hand, a botched cleanup) is never replaced by
an empty log: a partition named in a directory's recovery-point checkpoint whose directory is
missing at start-up, or an online log whose directory disappears while running (checked every
``log_dir_check_interval_ms``), is *missing*: offline (KAFKA_STORAGE_ERROR), reported as an
error, its checkpoint entries kept so a restart remembers it, and ``get_or_create_log`` refuses
to create it until the directory is back (a restart loads it) or the partition is deleted.
``partition_failure_listeners`` are told ``(topic, partition)`` so leadership moves to another
replica. Kafka recreates such a log empty and serves it, losing every acknowledged record.

The periodic work (retention, flush.ms, fsync of rolled segments, checkpoints) is done by
``run_scheduler()`` on the event loop, fsyncs and checkpoint files in a worker thread. Its passes
over the logs (retention, idle release; the rolled-segment fsyncs and flush.ms over only the
logs that rolled since their last fsync or have a finite flush.ms, kept as logs roll and change
config) work in slices of 5 ms or 500 logs with a yield between them
(``loop_slices.LoopSlices``), skipping a log removed meanwhile; the directory check's stat of
every log runs in a worker thread; each checkpoint snapshot is still taken in one go.
``maybe_run_periodic_tasks`` does one round synchronously (tests drive it with a fake clock).
``run_scheduler()`` also starts the log cleaner (``cleaner.py``, compaction of
``cleanup.policy=compact`` logs, when ``log.cleaner.enable``) and the segment verifier
(``verifier.py``: a throttled check of every closed segment's batches and indexes, once each)
and stops them when it ends; the cleaner keeps
``<dir>/cleaner-offset-checkpoint``, forgets deleted logs and moves its checkpoint back when a
log is truncated below it.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import gc
import itertools
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

import structlog

from kafkalite.storage.checkpoint import (
    HIGH_WATERMARK_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    OffsetCheckpointFile,
    sync_filesystem,
)
from kafkalite.storage.cleaner import CleanerConfig, LogCleaner
from kafkalite.storage.config import LONG_MAX, LogConfig
from kafkalite.storage.errors import LogDirFailure, StorageError
from kafkalite.storage.log import (
    _LOG_DIR_PATTERN,
    DELETE_DIR_SUFFIX,
    Log,
    log_delete_dir_name,
    log_dir_name,
    parse_topic_partition_name,
)
from kafkalite.storage.loop_slices import LoopSlices
from kafkalite.storage.verifier import SegmentVerifier

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOAD_CHUNK = 256
"""Logs loaded by one job of the loading threads (see ``_load_dirs``)."""
LOCK_FILE = ".lock"

TopicPartitionKey = tuple[str, int]

logger = structlog.get_logger("kafkalite.storage.log_manager")


def describe_os_error(cause: BaseException | None) -> dict[str, str]:
    """Log fields for the cause of a log-dir failure: ``errno`` (its name, e.g. ENOSPC) and
    ``error`` (the message); a LogDirFailure is unwrapped to the OS error it carries."""
    while isinstance(cause, LogDirFailure) and cause.cause is not None:
        cause = cause.cause
    if cause is None:
        return {"errno": "unknown", "error": "unknown cause"}
    if isinstance(cause, OSError) and cause.errno is not None:
        name = errno.errorcode.get(cause.errno, str(cause.errno))
        return {"errno": name, "error": str(cause)}
    return {"errno": "none", "error": f"{type(cause).__name__}: {cause}"}


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


_CHECKPOINT_TASKS = (
    ("hw", HIGH_WATERMARK_CHECKPOINT_FILE),
    ("recovery", RECOVERY_POINT_CHECKPOINT_FILE),
    ("start", LOG_START_OFFSET_CHECKPOINT_FILE),
)
"""The periodic tasks that write a checkpoint file, in the order the files are written."""


class LogManager:
    def __init__(
        self,
        log_dirs: list[str] | list[os.PathLike[str]],
        default_config: LogConfig,
        *,
        topic_configs: Mapping[str, LogConfig] | None = None,
        retention_check_interval_ms: int = 300_000,
        flush_check_interval_ms: int = LONG_MAX,
        flush_recovery_offset_checkpoint_interval_ms: int = 60_000,
        flush_start_offset_checkpoint_interval_ms: int = 60_000,
        high_watermark_checkpoint_interval_ms: int = 5_000,
        log_dir_check_interval_ms: int = 10_000,
        cleaner_config: CleanerConfig | None = None,
        time_ms: Callable[[], int] = _wall_clock_ms,
        num_recovery_threads_per_data_dir: int = 1,
        idle_release_interval_ms: int = 10_000,
    ) -> None:
        if not log_dirs:
            raise ValueError("log.dirs must name at least one directory")
        self.log_dirs = [str(Path(d).resolve()) for d in log_dirs]
        self.default_config = default_config
        self.topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self.retention_check_interval_ms = retention_check_interval_ms
        # Kafka's log.flush.scheduler.interval.ms; flush.ms is only checked this often (but at
        # least every scheduler tick when a log has a finite flush.ms).
        self.flush_check_interval_ms = flush_check_interval_ms
        self.flush_recovery_offset_checkpoint_interval_ms = (
            flush_recovery_offset_checkpoint_interval_ms
        )
        self.flush_start_offset_checkpoint_interval_ms = flush_start_offset_checkpoint_interval_ms
        self.high_watermark_checkpoint_interval_ms = high_watermark_checkpoint_interval_ms
        self.log_dir_check_interval_ms = log_dir_check_interval_ms
        self._time_ms = time_ms
        self.num_recovery_threads_per_data_dir = max(1, num_recovery_threads_per_data_dir)
        self.idle_release_interval_ms = idle_release_interval_ms
        # The two hooks every log of this manager is given, made once: a bound method (or a
        # closure) per log was one to five more objects per partition for every full garbage
        # collection to walk until frozen (the hooks are told which log).
        self._log_failure_hook = self._on_log_failure
        self._truncation_hook = self._on_log_truncated
        self._roll_hook = self._on_log_rolled
        self._config_hook = self._on_log_config
        # The logs a periodic pass has work for, kept as it appears (Kafka schedules a rolled
        # segment's flush when it rolls rather than scanning every log): those whose rolled
        # segments wait for their fsync, and those with a finite flush.ms. At 10,000 idle
        # partitions the two passes over every log each second were ~2% of a core.
        self._rolled: dict[TopicPartitionKey, Log] = {}
        self._timed_flush: dict[TopicPartitionKey, Log] = {}
        self._logs: dict[TopicPartitionKey, Log] = {}
        self._log_counts: dict[str, int] = {dir: 0 for dir in self.log_dirs}
        # The online logs by their log directory, kept as logs come and go: building it from
        # each log's path took ~20 ms per 1,000 logs, on every checkpoint.
        self._dir_logs: dict[str, dict[TopicPartitionKey, Log]] = {}
        self._uses_seen: dict[TopicPartitionKey, int] = {}
        self._offline_logs: dict[TopicPartitionKey, Log] = {}
        self.offline_dirs: set[str] = set()
        self.log_dir_failure_listeners: list[Callable[[str], None]] = []
        # Partitions whose own directory is missing: key -> (log dir, checkpointed offsets).
        self._missing_logs: dict[TopicPartitionKey, tuple[str, MissingLogOffsets]] = {}
        self.partition_failure_listeners: list[Callable[[str, int], None]] = []
        self._locks: dict[str, int] = {}
        # Checkpoint files are written from the loop and from worker threads (see
        # _write_offset_files): one writer at a time, the newest snapshot wins.
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_seq = itertools.count()
        self._checkpoint_written: dict[Path, int] = {}
        self._last_run: dict[str, int] = {}
        self._started = False
        self._scheduler_task: asyncio.Task[None] | None = None
        self.cleaner = LogCleaner(
            cleaner_config or CleanerConfig(),
            self.all_logs,
            time_ms,
            on_log_dir_failure=self._handle_log_dir_failure,
        )
        self._cleaner_task: asyncio.Task[None] | None = None
        self.verifier = SegmentVerifier(self.all_logs)
        self._verifier_task: asyncio.Task[None] | None = None

    # ================================================================= start-up and shutdown

    def startup(self) -> None:
        """Lock each directory, load and (if needed) recover every log in it.

        The cyclic garbage collector is paused while the logs load (and put back as it was):
        everything loading makes lives on, and with it running, each time the heap had grown
        by a quarter a full collection walked all of it again (10,000 logs: 0.8 s of CPU
        alone, 1.4-2.4 s with the collections; see decision 0054)."""
        collecting = gc.isenabled()
        if collecting:
            gc.disable()
        try:
            self._startup()
        finally:
            if collecting:
                gc.enable()

    def _startup(self) -> None:
        for dir in self.log_dirs:
            try:
                Path(dir).mkdir(parents=True, exist_ok=True)
                self._lock_dir(dir)  # another process on the directory: refuse to start
            except OSError as e:
                self._handle_log_dir_failure(dir, e)
        self._load_dirs([dir for dir in self.log_dirs if dir not in self.offline_dirs])
        if len(self.offline_dirs) == len(self.log_dirs):
            raise StorageError(f"All log directories failed: {sorted(self.offline_dirs)}")
        if self.offline_dirs:
            logger.warning(
                "starting with offline log directories",
                offline_log_dirs=sorted(self.offline_dirs),
                online_log_dirs=[d for d in self.log_dirs if d not in self.offline_dirs],
            )
        self.cleaner.load_checkpoints([d for d in self.log_dirs if d not in self.offline_dirs])
        now = self._time_ms()
        for task in ("retention", "flush", "recovery", "start", "hw", "idle", "dirs"):
            self._last_run[task] = now
        self._started = True

    def clean_shutdown_marked(self) -> bool:
        """Before ``startup``: True when every log directory holds the clean-shutdown marker,
        so loading reads no segment past its end (no recovery: it takes a bounded time)."""
        return all(os.path.exists(os.path.join(dir, CLEAN_SHUTDOWN_FILE)) for dir in self.log_dirs)

    def _load_dir(self, dir: str) -> None:
        self._load_dirs([dir])

    def _load_dirs(self, dirs: list[str]) -> None:
        """Load the logs of ``dirs``: ``num_recovery_threads_per_data_dir`` threads per
        directory, all directories at once. A directory whose loading fails goes offline."""
        from concurrent.futures import ThreadPoolExecutor

        threads = self.num_recovery_threads_per_data_dir
        with ThreadPoolExecutor(max_workers=threads * len(dirs)) as pool:
            jobs = []
            for dir in dirs:
                try:
                    jobs.append((dir, self._plan_dir(dir)))
                except LogDirFailure as e:
                    self._handle_log_dir_failure(dir, e.cause)
                except (OSError, StorageError) as e:
                    self._handle_log_dir_failure(dir, e)
            # One job per chunk of a directory's logs, a directory's chunks spread over its
            # threads: a future per log cost as much as a loaded log's own Python work.
            running = []
            for dir, plan in jobs:
                chunk = max(1, min(LOAD_CHUNK, -(-len(plan) // threads)))
                for start in range(0, len(plan), chunk):
                    part = plan[start : start + chunk]
                    running.append((dir, part, pool.submit(_load_chunk, part)))
            failed: set[str] = set()
            for dir, part, future in running:
                for key, outcome in zip((key for key, _ in part), future.result(), strict=True):
                    if isinstance(outcome, BaseException):
                        failed.add(dir)
                        if isinstance(outcome, LogDirFailure):
                            self._handle_log_dir_failure(dir, outcome.cause)
                        else:
                            # Kafka: a log that cannot be loaded takes its directory offline.
                            self._handle_log_dir_failure(dir, outcome)
                        continue
                    self._register_loaded(dir, key, outcome, failed)

    def _register_loaded(
        self, dir: str, key: TopicPartitionKey, log: Log, failed: set[str]
    ) -> None:
        """A log loaded from ``dir``: registered, unless its directory failed meanwhile or the
        partition is already loaded from another directory (which fails this one)."""
        if dir in failed or dir in self.offline_dirs:
            log._close_quietly()
            return
        if key in self._logs:
            failed.add(dir)
            self._handle_log_dir_failure(
                dir,
                StorageError(
                    f"Duplicate log directories for {key[0]}-{key[1]}: {log.dir} and "
                    f"{self._logs[key].dir}"
                ),
            )
            log._close_quietly()
            return
        log.on_log_dir_failure = self._log_failure_hook
        self._add_log(key, log, dir)

    def _plan_dir(self, dir: str) -> list[tuple[TopicPartitionKey, Callable[[], Log]]]:
        """Read the directory's checkpoints and marker (removed: from here on a crash must lead
        to recovery) and return one loader per log directory in it."""
        path = Path(dir)
        marker = path / CLEAN_SHUTDOWN_FILE
        had_clean_shutdown = marker.exists()
        recovery_points = self._read_checkpoint(path / RECOVERY_POINT_CHECKPOINT_FILE)
        start_offsets = self._read_checkpoint(path / LOG_START_OFFSET_CHECKPOINT_FILE)
        high_watermarks = self._read_checkpoint(path / HIGH_WATERMARK_CHECKPOINT_FILE)
        if had_clean_shutdown:
            marker.unlink()
        plan: list[tuple[TopicPartitionKey, Callable[[], Log]]] = []
        seen: dict[TopicPartitionKey, str] = {}
        being_deleted: set[TopicPartitionKey] = set()
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                try:  # a deletion a crash interrupted: that partition is gone on purpose
                    being_deleted.add(parse_topic_partition_name(entry.path))
                except ValueError:
                    pass
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            # ``parse_topic_partition_name`` without its basename and its "-delete" pattern
            # (such names were handled above): one regular expression on the entry's name.
            match = _LOG_DIR_PATTERN.fullmatch(entry.name)
            if match is None:
                continue  # not a log directory (e.g. another tool's files)
            topic, partition = match.group(1), int(match.group(2))
            key = (topic, partition)
            if key in seen:
                raise StorageError(
                    f"Duplicate log directories for {topic}-{partition}: {entry.path} and {seen[key]}"
                )
            seen[key] = entry.path

            def load(
                path: str = entry.path, key: TopicPartitionKey = key, topic: str = topic
            ) -> Log:
                log = Log(
                    path,
                    self.topic_configs.get(topic, self.default_config),
                    log_start_offset=start_offsets.get(key, 0),
                    recovery_point=recovery_points.get(key, 0),
                    had_clean_shutdown=had_clean_shutdown,
                    time_ms=self._time_ms,
                    existing=True,
                    topic_partition=key,
                )
                log.high_watermark = high_watermarks.get(key, log.log_start_offset)
                return log

            plan.append((key, load))
        for key in sorted(recovery_points.keys() - seen.keys() - being_deleted):
            if key in self._missing_logs:
                continue
            offsets = MissingLogOffsets(
                recovery_points[key], start_offsets.get(key, 0), high_watermarks.get(key, 0)
            )
            self._missing_logs[key] = (dir, offsets)
            logger.error(
                "partition directory missing, the partition stays offline (not recreated empty)",
                partition=f"{key[0]}-{key[1]}",
                log_dir=dir,
                partition_dir=str(path / log_dir_name(*key)),
                checkpointed_recovery_point=offsets.recovery_point,
                checkpointed_high_watermark=offsets.high_watermark,
            )
        return plan

    def _add_log(self, key: TopicPartitionKey, log: Log, parent: str | None = None) -> None:
        """Registers ``log``; ``parent`` is its log directory when the caller knows it (a
        ``Path.parent`` per log is a visible part of registering thousands on the loop)."""
        self._watch(key, log)
        self._logs[key] = log
        if parent is None:
            parent = os.path.dirname(log.dir_str)
        self._log_counts[parent] = self._log_counts.get(parent, 0) + 1
        self._dir_logs.setdefault(parent, {})[key] = log

    def _pop_log(self, key: TopicPartitionKey) -> Log | None:
        log = self._logs.pop(key, None)
        if log is not None:
            parent = str(log.dir.parent)
            self._log_counts[parent] = self._log_counts.get(parent, 1) - 1
            self._dir_logs.get(parent, {}).pop(key, None)
            self._uses_seen.pop(key, None)
            self._rolled.pop(key, None)
            self._timed_flush.pop(key, None)
        return log

    def _read_checkpoint(self, path: Path) -> dict[TopicPartitionKey, int]:
        try:
            return OffsetCheckpointFile(path).read()
        except StorageError:
            # A damaged checkpoint costs a full recovery (offsets default to 0), not the broker.
            return {}

    def _lock_dir(self, dir: str) -> None:
        fd = os.open(Path(dir) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise StorageError(
                    f"Failed to acquire lock on file .lock in {dir}. A Kafka instance in another "
                    "process or thread is using this directory."
                ) from e
            raise
        self._locks[dir] = fd

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown marker."""
        self._cancel_tasks()
        self._close_logs()

    async def shutdown_async(self) -> None:
        """``shutdown`` with the file work (flush, close, checkpoints) in a worker thread, so
        the event loop stays responsive while thousands of logs are closed."""
        self._cancel_tasks()
        # Listeners run on the event loop: failures met in the thread are told afterwards.
        listeners = self.log_dir_failure_listeners
        failed: list[str] = []
        self.log_dir_failure_listeners = [failed.append]
        try:
            await asyncio.to_thread(self._close_logs)
        finally:
            self.log_dir_failure_listeners = listeners
        for dir in failed:
            for listener in list(listeners):
                listener(dir)

    def _cancel_tasks(self) -> None:
        if self._scheduler_task is not None:
            self._scheduler_task.cancel()
            self._scheduler_task = None
        if self._cleaner_task is not None:
            self._cleaner_task.cancel()
            self._cleaner_task = None
        self.verifier.stop()
        if self._verifier_task is not None:
            self._verifier_task.cancel()
            self._verifier_task = None

    def _close_logs(self) -> None:
        """Close every log without an fsync each (the leader-epoch checkpoints written, the
        indexes trimmed), then per directory: one sync of the filesystem (every log's data,
        index and checkpoint is then on disk: each log counts as flushed to its end), the
        offset checkpoints, the clean-shutdown marker. A log or sync failing leaves its
        directory without marker: the next start recovers it."""
        failed_dirs: set[str] = set()
        for log in list(self._logs.values()):
            try:
                log.close(sync=False)
            except StorageError:
                failed_dirs.add(str(log.dir.parent))
        logs_by_dir = self.logs_by_dir()
        for dir in self.log_dirs:
            if dir in self.offline_dirs or dir in failed_dirs:
                continue
            try:
                sync_filesystem(dir)
                for log in logs_by_dir.get(dir, []):
                    log.mark_flushed()
                self._write_checkpoints(dir)
                path = Path(dir) / CLEAN_SHUTDOWN_FILE
                fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
                os.fsync(fd)
                os.close(fd)
            except OSError as e:
                self._handle_log_dir_failure(dir, e)
        for fd in self._locks.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._locks.clear()
        for log in self._offline_logs.values():
            log._close_quietly()
        self._logs.clear()
        self._log_counts = {dir: 0 for dir in self.log_dirs}
        self._dir_logs.clear()
        self._uses_seen.clear()
        self._started = False

    # ================================================================= logs

    def get_log(self, topic: str, partition: int) -> Log | None:
        """The log, or None if this broker has none. A log in a failed directory is returned
        offline (its operations raise LogOfflineError)."""
        key = (topic, partition)
        return self._logs.get(key) or self._offline_logs.get(key)

    def offline_log_keys(self) -> list[TopicPartitionKey]:
        """(topic, partition) of every log this manager holds offline, or knows is missing."""
        return sorted(self._offline_logs.keys() | self._missing_logs.keys())

    def is_missing(self, topic: str, partition: int) -> bool:
        """True if the partition's directory vanished (see the module docstring)."""
        return (topic, partition) in self._missing_logs

    def all_logs(self) -> list[Log]:
        """Every online log."""
        return list(self._logs.values())

    def logs_by_dir(self) -> dict[str, list[Log]]:
        result: dict[str, list[Log]] = {
            dir: [] for dir in self.log_dirs if dir not in self.offline_dirs
        }
        for dir, logs in self._dir_logs.items():
            if logs:
                result[dir] = list(logs.values())
        return result

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        is_new: bool = True,
    ) -> Log:
        """The existing log, or a new empty one in the least-loaded online directory.

        A log that should already exist (``is_new`` False: the controller says the replica is
        not new) is not created while a log directory is offline: its data may be there, and an
        empty log in its place would be served as the partition (Kafka's getOrCreateLog)."""
        existing = self.get_log(topic, partition)
        if existing is not None:
            if config is not None:
                existing.update_config(config)
            return existing
        missing = self._missing_logs.get((topic, partition))
        if missing is not None:
            raise StorageError(
                f"The log directory of {topic}-{partition} in {missing[0]} is missing: not "
                "recreated empty (restore it and restart, or move the replica elsewhere)"
            )
        if not is_new and self.offline_dirs:
            raise StorageError(
                f"Can not create log for {topic}-{partition} because log directories "
                f"{','.join(sorted(self.offline_dirs))} are offline"
            )
        if config is not None:
            self.topic_configs.setdefault(topic, config)
        config = config or self.topic_configs.get(topic, self.default_config)
        for dir in self._next_log_dirs():
            try:
                log = Log(
                    os.path.join(dir, log_dir_name(topic, partition)),
                    config,
                    had_clean_shutdown=True,
                    time_ms=self._time_ms,
                    on_log_dir_failure=self._log_failure_hook,
                )
            except LogDirFailure as e:
                self._handle_log_dir_failure(dir, e.cause)
                continue
            self._add_log((topic, partition), log)
            return log
        raise LogDirFailure(
            ",".join(self.log_dirs),
            OSError(errno.EIO, "no online log directory to create a log in"),
        )

    def _watch(self, key: TopicPartitionKey, log: Log) -> None:
        """The hooks of a log this manager holds: its truncations (below the cleaner's
        checkpoint they make those offsets dirty again: Kafka's LogManager.truncateTo ->
        maybeTruncateCheckpoint), its rolls and its config changes (which logs the periodic
        passes visit)."""
        log.on_truncation = self._truncation_hook
        log.on_roll = self._roll_hook
        log.on_config = self._config_hook
        if log.roll_flush_pending():
            self._rolled[key] = log
        if log.config.flush_ms != LONG_MAX:
            self._timed_flush[key] = log

    @staticmethod
    def _unwatch(log: Log) -> None:
        log.on_truncation = None
        log.on_roll = None
        log.on_config = None

    def _on_log_truncated(self, log: Log, offset: int) -> None:
        self.cleaner.maybe_truncate_checkpoint(log, offset)

    def _on_log_rolled(self, log: Log) -> None:
        self._rolled[log.topic_partition] = log

    def _on_log_config(self, log: Log) -> None:
        key = log.topic_partition
        if log.config.flush_ms != LONG_MAX:
            self._timed_flush[key] = log
        elif self._timed_flush.get(key) is log:
            del self._timed_flush[key]

    def _next_log_dirs(self) -> list[str]:
        """Online directories, fewest logs first (Kafka's nextLogDirs); from kept counts."""
        counts = self._log_counts
        online = [dir for dir in self.log_dirs if dir not in self.offline_dirs]
        return sorted(online, key=lambda d: (counts.get(d, 0), self.log_dirs.index(d)))

    async def create_logs(
        self,
        specs: list[tuple[str, int, LogConfig | None, bool]],
        batch_size: int = 500,
    ) -> dict[TopicPartitionKey, BaseException]:
        """``get_or_create_log`` for many ``(topic, partition, config, is_new)`` at once: the
        directories and files of the new logs are created in a worker thread, ``batch_size``
        logs per hand-off, and registered here on the event loop between batches. Returns the
        failures by partition (the others exist afterwards)."""
        errors: dict[TopicPartitionKey, BaseException] = {}
        for start in range(0, len(specs), batch_size):
            planned: list[tuple[TopicPartitionKey, str, LogConfig]] = []
            planned_keys: set[TopicPartitionKey] = set()
            for topic, partition, config, is_new in specs[start : start + batch_size]:
                key = (topic, partition)
                existing = self.get_log(topic, partition)
                if existing is not None:
                    if config is not None:
                        existing.update_config(config)
                    continue
                if not is_new and self.offline_dirs:
                    errors[key] = StorageError(
                        f"Can not create log for {topic}-{partition} because log directories "
                        f"{','.join(sorted(self.offline_dirs))} are offline"
                    )
                    continue
                if key in planned_keys:
                    continue
                planned_keys.add(key)
                if config is not None:
                    self.topic_configs.setdefault(topic, config)
                config = config or self.topic_configs.get(topic, self.default_config)
                dirs = self._next_log_dirs()
                if not dirs:
                    errors[key] = LogDirFailure(
                        ",".join(self.log_dirs),
                        OSError(errno.EIO, "no online log directory to create a log in"),
                    )
                    continue
                # Counted now so the batch spreads over the directories like single creations.
                self._log_counts[dirs[0]] = self._log_counts.get(dirs[0], 0) + 1
                planned.append((key, dirs[0], config))
            if not planned:
                continue
            results = await asyncio.to_thread(self._construct_logs, planned)
            for (key, dir, config), result in zip(planned, results, strict=True):
                self._log_counts[dir] -= 1
                if isinstance(result, Log):
                    if key in self._logs or dir in self.offline_dirs:
                        result._close_quietly()
                        if key in self._logs:
                            continue
                    else:
                        result.on_log_dir_failure = self._log_failure_hook
                        self._add_log(key, result, dir)
                        continue
                if isinstance(result, LogDirFailure):
                    self._handle_log_dir_failure(dir, result.cause)
                # Its directory failed: try the others the way a single creation does.
                try:
                    self.get_or_create_log(key[0], key[1], config, True)
                except (StorageError, OSError) as e:
                    errors[key] = e
        return errors

    def _construct_logs(
        self, planned: list[tuple[TopicPartitionKey, str, LogConfig]]
    ) -> list[Log | BaseException]:
        """In a worker thread: create the logs (their files only; nothing shared is touched)."""
        results: list[Log | BaseException] = []
        for (topic, partition), dir, config in planned:
            try:
                results.append(
                    Log(
                        os.path.join(dir, log_dir_name(topic, partition)),
                        config,
                        had_clean_shutdown=True,
                        time_ms=self._time_ms,
                    )
                )
            except (LogDirFailure, OSError, StorageError) as e:
                results.append(e)
        return results

    async def delete_logs(
        self, keys: list[TopicPartitionKey], batch_size: int = 500
    ) -> dict[TopicPartitionKey, BaseException]:
        """``delete_log`` for many logs (one StopReplica's deletions), with the event loop never
        waiting for a file: the logs are forgotten and closed here, ``batch_size`` per slice
        (each is gone for the broker at once); then, in worker threads, their directories are
        renamed to their ``-delete`` names, each affected log directory's checkpoints are
        written once (not once per log), and only then are the renamed directories removed.

        Crash-safety (why this order): a crash before the checkpoints are on disk leaves each
        partition's directory, under its own name or its ``-delete`` one, which start-up reads
        as present or deliberately deleted; once they are (the checkpoint write fsyncs the log
        directory, so the renames are durable too) no checkpoint names the partition. At no
        point does a checkpoint name a partition whose directory is gone, which start-up would
        take for a vanished partition and keep offline. Returns the partitions whose deletion
        failed (their log directory went offline), by partition."""
        failures: dict[TopicPartitionKey, BaseException] = {}
        dirs: set[str] = set()
        doomed: list[tuple[TopicPartitionKey, Log]] = []
        for start in range(0, len(keys), batch_size):
            for key in keys[start : start + batch_size]:
                log = self._forget_log(key, dirs)
                if log is not None and not log.offline:
                    doomed.append((key, log))
            await asyncio.sleep(0)
        self._forget_in_cleaner(doomed)
        renamed: list[Path] = []
        if doomed:
            results = await asyncio.to_thread(_rename_for_delete, [log for _, log in doomed])
            for (key, log), error in zip(doomed, results, strict=True):
                dir = str(log.dir.parent)
                if error is None:
                    renamed.append(log.dir)
                    dirs.add(dir)
                else:
                    failures[key] = LogDirFailure(dir, error)
                    self._handle_log_dir_failure(dir, error)
        failed_dirs = await self.write_checkpoints_async(dirs)
        for key, log in doomed:
            if str(log.dir.parent) in failed_dirs:
                failures.setdefault(key, LogDirFailure(str(log.dir.parent), None))
        kept = [path for path in renamed if str(path.parent) not in failed_dirs]
        if kept:
            # A failure here leaves a -delete directory that the next start-up removes.
            await asyncio.to_thread(_remove_dirs, kept)
        return failures

    def _forget_log(self, key: TopicPartitionKey, dirs: set[str]) -> Log | None:
        """Remove the log (or the missing partition) from this manager and close its files;
        the log directory whose checkpoints must stop naming it goes into ``dirs``."""
        missing = self._missing_logs.pop(key, None)  # deleting the partition accepts its loss
        if missing is not None:
            dirs.add(missing[0])
        log = self._pop_log(key) or self._offline_logs.pop(key, None)
        if log is None:
            return None
        log._close_quietly()
        self._unwatch(log)
        return log

    def _forget_in_cleaner(self, removed: list[tuple[TopicPartitionKey, Log]]) -> None:
        for key, log in removed:
            self.cleaner.remove_log(str(log.dir.parent), key)

    def delete_log(self, topic: str, partition: int, *, remove_files: bool = True) -> Log | None:
        """Remove the log: rename its directory to ``<topic>-<partition>.<uuid>-delete``,
        write its log directory's checkpoints (they stop naming it), then delete the renamed
        directory (unless ``remove_files`` is False: the caller removes it). Synchronously:
        many logs at once go through ``delete_logs``. Returns the removed log (None if there
        was none)."""
        key = (topic, partition)
        dirs: set[str] = set()
        log = self._forget_log(key, dirs)
        if log is None:
            for dir in dirs:
                self._checkpoint_after_delete(dir)
            return None
        self._forget_in_cleaner([(key, log)])
        if log.offline:
            return log
        try:
            log.rename_dir(log_delete_dir_name(topic, partition, uuid.uuid4().hex))
        except LogDirFailure:
            return log  # already handled: the directory is offline
        dir = str(log.dir.parent)
        if not self._checkpoint_after_delete(dir):
            return log  # the -delete directory stays for the next start-up
        if remove_files:
            try:
                log.delete()
            except LogDirFailure:
                pass  # already handled: the directory is offline
        return log

    def _checkpoint_after_delete(self, dir: str) -> bool:
        """The checkpoints stop naming a deleted partition at once (Kafka checkpoints on
        deletion too): one the checkpoint names without a directory is taken for vanished.
        False if the directory is (or went) offline."""
        if dir in self.offline_dirs:
            return False
        try:
            self._write_checkpoints(dir)
        except OSError as e:
            self._handle_log_dir_failure(dir, e)
            return False
        return True

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        self.topic_configs[topic] = config
        for (t, _), log in self._logs.items():
            if t == topic:
                log.update_config(config)

    # ================================================================= checkpoints

    def checkpoint_recovery_points(self) -> None:
        self._for_each_online_dir(
            lambda dir, logs: self._write_offset_files(
                [self._contents(dir, RECOVERY_POINT_CHECKPOINT_FILE, logs)]
            )
        )

    def checkpoint_log_start_offsets(self) -> None:
        self._for_each_online_dir(
            lambda dir, logs: self._write_offset_files(
                [self._contents(dir, LOG_START_OFFSET_CHECKPOINT_FILE, logs)]
            )
        )

    def _missing_offsets(self, dir: str, field: int) -> dict[TopicPartitionKey, int]:
        """A field of the checkpointed offsets of the missing partitions of ``dir``: they stay
        in the checkpoints, so a restart still knows the partition existed there."""
        return {
            key: offsets[field]
            for key, (missing_dir, offsets) in self._missing_logs.items()
            if missing_dir == dir
        }

    def checkpoint_high_watermarks(
        self, high_watermarks: Mapping[TopicPartitionKey, int] | None = None
    ) -> None:
        """Write replication-offset-checkpoint; ``high_watermarks`` overrides the logs' own."""

        def write(dir: str, logs: list[Log]) -> None:
            offsets = {}
            for log in logs:
                key = log.topic_partition
                offsets[key] = (
                    high_watermarks.get(key, log.high_watermark)
                    if high_watermarks
                    else log.high_watermark
                )
            path = Path(dir) / HIGH_WATERMARK_CHECKPOINT_FILE
            self._write_offset_files(
                [(path, offsets | self._missing_offsets(dir, 2), next(self._checkpoint_seq))]
            )

        self._for_each_online_dir(write)

    def _contents(self, dir: str, name: str, logs: list[Log]) -> _CheckpointContents:
        """What checkpoint ``name`` of ``dir`` says now (its logs' offsets and the missing
        partitions'), numbered so an older snapshot is never written over a newer one."""
        if name == RECOVERY_POINT_CHECKPOINT_FILE:
            offsets = {log.topic_partition: log.recovery_point for log in logs}
            field = 0
        elif name == LOG_START_OFFSET_CHECKPOINT_FILE:
            offsets = {log.topic_partition: log.log_start_offset for log in logs}
            field = 1
        else:
            offsets = {log.topic_partition: log.high_watermark for log in logs}
            field = 2
        return (
            Path(dir) / name,
            offsets | self._missing_offsets(dir, field),
            next(self._checkpoint_seq),
        )

    def _all_contents(self, dir: str, logs: list[Log]) -> list[_CheckpointContents]:
        return [
            self._contents(dir, name, logs)
            for name in (
                RECOVERY_POINT_CHECKPOINT_FILE,
                LOG_START_OFFSET_CHECKPOINT_FILE,
                HIGH_WATERMARK_CHECKPOINT_FILE,
            )
        ]

    def _write_offset_files(self, files: list[_CheckpointContents]) -> None:
        """Write checkpoint files (from any thread; raises OSError). Writers take turns (they
        share each file's temporary name), and a snapshot older than the one already written
        to a file is skipped: a newer snapshot never names a log removed before an older one
        was taken, so what is on disk only moves forward."""
        with self._checkpoint_lock:
            for path, offsets, seq in files:
                if self._checkpoint_written.get(path, -1) > seq:
                    continue
                OffsetCheckpointFile(path).write(offsets)
                self._checkpoint_written[path] = seq

    def _write_checkpoints(self, dir: str) -> None:
        self._write_offset_files(self._all_contents(dir, self.logs_by_dir().get(dir, [])))

    async def write_checkpoints_async(self, dirs: Iterable[str]) -> set[str]:
        """The offset checkpoints of each of ``dirs``, taken here and written (with their
        fsyncs) in a worker thread, so the event loop never waits for the disk. Returns those
        of ``dirs`` that are offline afterwards (a write failure takes its directory offline)."""
        dirs = set(dirs)
        online = sorted(d for d in dirs if d not in self.offline_dirs)
        if online:
            by_dir = self.logs_by_dir()
            jobs = [(dir, self._all_contents(dir, by_dir.get(dir, []))) for dir in online]
            errors = await asyncio.to_thread(self._write_checkpoint_jobs, jobs)
            for dir, error in errors.items():
                self._handle_log_dir_failure(dir, error)
        return dirs & self.offline_dirs

    def _write_checkpoint_jobs(
        self, jobs: list[tuple[str, list[_CheckpointContents]]]
    ) -> dict[str, OSError]:
        errors: dict[str, OSError] = {}
        for dir, files in jobs:
            try:
                self._write_offset_files(files)
            except OSError as e:
                errors[dir] = e
        return errors

    def _for_each_online_dir(self, action: Callable[[str, list[Log]], None]) -> None:
        for dir, logs in self.logs_by_dir().items():
            if dir in self.offline_dirs:
                continue
            try:
                action(dir, logs)
            except OSError as e:
                self._handle_log_dir_failure(dir, e)

    # ================================================================= failures

    def _on_log_failure(self, dir: str, cause: BaseException | None = None) -> None:
        """A log's I/O failed. A file missing because its partition directory vanished (the
        log dir itself still there) takes that partition offline, not the whole directory."""
        if (
            isinstance(cause, FileNotFoundError)
            and os.path.isdir(dir)
            and self.check_partition_dirs()
        ):
            return
        self._handle_log_dir_failure(dir, cause)

    def fail_log_dir(self, dir: str, cause: BaseException | None = None) -> None:
        """Take ``dir`` offline as a failed I/O in it would (fault injection in tests)."""
        self._handle_log_dir_failure(dir, cause)

    def _handle_log_dir_failure(self, dir: str, cause: BaseException | None) -> None:
        dir = str(Path(dir).resolve())
        if dir in self.offline_dirs:
            return
        self.offline_dirs.add(dir)
        logger.error(
            "log directory failed, it goes offline",
            log_dir=dir,
            phase="running" if self._started else "startup",
            **describe_os_error(cause),
        )
        for key, log in list(self._logs.items()):
            if str(log.dir.parent) == dir:
                log.offline = True
                log._close_quietly()
                self._offline_logs[key] = self._pop_log(key)  # type: ignore[assignment]
        fd = self._locks.pop(dir, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
        for listener in list(self.log_dir_failure_listeners):
            listener(dir)

    # ================================================================= periodic work

    def maybe_run_periodic_tasks(self) -> None:
        """One scheduler round: whatever is due of retention, flush.ms, checkpoints."""
        jobs = self._periodic_round()
        for dir, error in self._write_checkpoint_jobs(jobs).items():
            self._handle_log_dir_failure(dir, error)

    async def _periodic_round_async(self) -> None:
        """``maybe_run_periodic_tasks`` without holding the event loop, whatever the number of
        logs: the passes over the logs (retention, flush.ms, idle release) work in slices
        (``LoopSlices``: 5 ms or 500 logs, then a yield), the directory check's stats run in a
        worker thread, and the checkpoint files (and their fsyncs) are written in a worker
        thread; the checkpoint snapshots are taken here, each in one go (a snapshot never names
        a log removed before an older one was taken). A log removed or taken offline while a
        pass yields is skipped by the rest of the pass."""
        due = self._due_tasks()
        if "retention" in due:
            await self._each_log_sliced(self._cleanup_log)
        if "flush" in due:
            await self._each_log_sliced(self._flush_if_due, self._timed_flush)
        if "recovery" in due:
            await self._flush_rolled_segments_async()
        jobs = self._checkpoint_jobs(due)
        if jobs:
            errors = await asyncio.to_thread(self._write_checkpoint_jobs, jobs)
            for dir, error in errors.items():
                self._handle_log_dir_failure(dir, error)
        if "idle" in due:
            await self._release_idle_logs_sliced()
        if "dirs" in due:
            await self._check_partition_dirs_async()

    async def _each_log_sliced(
        self,
        action: Callable[[Log], object],
        among: Mapping[TopicPartitionKey, Log] | None = None,
    ) -> None:
        """``action`` on every online log (or those of ``among``), in slices; a log removed
        (or replaced) while the pass yielded is skipped."""
        slices = LoopSlices()
        logs = self._logs
        for key, log in list((logs if among is None else among).items()):
            if logs.get(key) is log:
                action(log)
            if slices.due():
                await slices.pause()

    @staticmethod
    def _cleanup_log(log: Log) -> int:
        try:
            return log.delete_old_segments()
        except StorageError:
            return 0

    @staticmethod
    def _flush_if_due(log: Log) -> None:
        if log.config.flush_ms == LONG_MAX:
            return
        if log.unflushed_messages > 0 and log.time_since_last_flush_ms() >= log.config.flush_ms:
            try:
                log.flush()
            except StorageError:
                pass

    async def _release_idle_logs_sliced(self) -> int:
        """``release_idle_logs`` in slices."""
        released = 0
        seen = self._uses_seen
        slices = LoopSlices()
        logs = self._logs
        for key, log in list(logs.items()):
            if logs.get(key) is log:
                released += self._release_if_idle(key, log, seen)
            if slices.due():
                await slices.pause()
        return released

    @staticmethod
    def _release_if_idle(
        key: TopicPartitionKey, log: Log, seen: dict[TopicPartitionKey, int]
    ) -> int:
        uses = log.uses
        if seen.get(key) == uses:
            if log.open_segment_count:
                log.release_resources()
                return 1
            return 0
        seen[key] = uses
        return 0

    async def _check_partition_dirs_async(self) -> list[TopicPartitionKey]:
        """``check_partition_dirs`` with the one stat per log in a worker thread: the logs
        whose directory it did not find are checked again here (a log renamed for deletion
        meanwhile is no longer registered) and taken offline as the synchronous check does."""
        logs = list(self._logs.items())
        gone = await asyncio.to_thread(
            lambda: [(key, log) for key, log in logs if not os.path.isdir(log.dir_str)]
        )
        return self.check_partition_dirs(
            [(key, log) for key, log in gone if self._logs.get(key) is log]
        )

    def _periodic_round(self) -> list[tuple[str, list[_CheckpointContents]]]:
        """Run what is due of the periodic tasks but the checkpoint writes: those are returned,
        as snapshots taken now, for the caller to write."""
        due = self._due_tasks()
        if "retention" in due:
            self.cleanup_logs()
        if "flush" in due:
            self.flush_dirty_logs()
        if "recovery" in due:
            self.flush_rolled_segments()
        jobs = self._checkpoint_jobs(due)
        if "idle" in due:
            self.release_idle_logs()
        if "dirs" in due:
            self.check_partition_dirs()
        return jobs

    def _due_tasks(self) -> set[str]:
        """The periodic tasks due now, their last run stamped now (a task without a stamp is
        not due: the stamps are set at start-up)."""
        now = self._time_ms()
        intervals = {
            "retention": self.retention_check_interval_ms,
            "flush": min(self.flush_check_interval_ms, 1_000),
            "hw": self.high_watermark_checkpoint_interval_ms,
            "recovery": self.flush_recovery_offset_checkpoint_interval_ms,
            "start": self.flush_start_offset_checkpoint_interval_ms,
            "idle": self.idle_release_interval_ms,
            "dirs": self.log_dir_check_interval_ms,
        }
        due = set()
        for task, interval in intervals.items():
            if now - self._last_run.get(task, now) >= interval:
                self._last_run[task] = now
                due.add(task)
        return due

    def _checkpoint_jobs(self, due: set[str]) -> list[tuple[str, list[_CheckpointContents]]]:
        """Snapshots of the checkpoint files due (per online directory), taken now."""
        names = [name for task, name in _CHECKPOINT_TASKS if task in due]
        if not names:
            return []
        return [
            (dir, [self._contents(dir, name, logs) for name in names])
            for dir, logs in self.logs_by_dir().items()
            if dir not in self.offline_dirs
        ]

    def release_idle_logs(self) -> int:
        """Close the files of every log not appended to or read since the previous call (its
        ``uses`` count did not move); returns how many logs were released. Run every
        ``idle_release_interval_ms`` by the scheduler: open descriptors and maps are bounded
        by the logs in use, not by the logs hosted."""
        released = 0
        seen = self._uses_seen
        for key, log in self._logs.items():
            released += self._release_if_idle(key, log, seen)
        return released

    def check_partition_dirs(
        self, candidates: list[tuple[TopicPartitionKey, Log]] | None = None
    ) -> list[TopicPartitionKey]:
        """Take offline every online log whose directory vanished (one stat per log); returns
        them. Writes to the open files of a deleted directory still succeed, so without this
        the loss would only show at the next restart. A log directory gone as a whole
        (unmounted, deleted) is a log-dir failure, not one missing partition per log."""
        for dir in self.log_dirs:
            if dir not in self.offline_dirs and not os.path.isdir(dir):
                self._handle_log_dir_failure(
                    dir, FileNotFoundError(errno.ENOENT, "log directory vanished", dir)
                )
        # ``candidates``: the logs a worker thread found without a directory (the caller's
        # async check), stat-ed again here; else every log.
        vanished = [
            key
            for key, log in (self._logs.items() if candidates is None else candidates)
            if not os.path.isdir(log.dir_str) and str(log.dir.parent) not in self.offline_dirs
        ]
        for key in vanished:
            log = self._pop_log(key)
            assert log is not None  # listed from self._logs just above
            dir = str(log.dir.parent)
            self._missing_logs[key] = (
                dir,
                MissingLogOffsets(log.recovery_point, log.log_start_offset, log.high_watermark),
            )
            log.offline = True
            log._close_quietly()
            self._offline_logs[key] = log
            logger.error(
                "partition directory vanished while running, the partition goes offline",
                partition=f"{key[0]}-{key[1]}",
                log_dir=dir,
                partition_dir=str(log.dir),
                log_end_offset=log.log_end_offset,
                high_watermark=log.high_watermark,
            )
            for listener in list(self.partition_failure_listeners):
                listener(*key)
        return vanished

    def cleanup_logs(self) -> int:
        """Retention for every log (cleanup.policy=delete). Returns segments deleted."""
        return sum(self._cleanup_log(log) for log in self.all_logs())

    def flush_dirty_logs(self) -> None:
        """Flush logs whose flush.ms has passed since their last flush."""
        for key, log in list(self._timed_flush.items()):
            if self._logs.get(key) is log:
                self._flush_if_due(log)

    def _take_pending_roll_flush(
        self, key: TopicPartitionKey, log: Log
    ) -> tuple[int, list[int], int] | None:
        """The work ``Log.pending_roll_flush`` gives for a log of ``_rolled``, which leaves
        that set (a roll from here on puts it back; ``_keep_if_pending`` after the fsync)."""
        if self._rolled.get(key) is log:
            del self._rolled[key]
        if self._logs.get(key) is not log:
            return None
        try:
            return log.pending_roll_flush()
        except StorageError:
            return None

    def _keep_if_pending(self, key: TopicPartitionKey, log: Log) -> None:
        """After a log's rolled-segment fsync: back in ``_rolled`` if work remains (a roll
        while the fsync ran, or a truncation that made its flush count for nothing)."""
        if self._logs.get(key) is log and log.roll_flush_pending():
            self._rolled.setdefault(key, log)

    def flush_rolled_segments(self) -> None:
        """fsync rolled segments now (synchronously) and advance recovery points."""
        for key, log in list(self._rolled.items()):
            pending = self._take_pending_roll_flush(key, log)
            if pending is None:
                continue
            target, fds, truncations = pending
            try:
                _fsync_and_close(fds)
            except OSError as e:
                self._handle_log_dir_failure(str(log.dir.parent), e)
                continue
            log.complete_roll_flush(target, truncations)
            self._keep_if_pending(key, log)

    async def _flush_rolled_segments_async(self) -> None:
        """``flush_rolled_segments`` with the fsyncs in a worker thread and the pass over the
        rolled logs in slices."""
        slices = LoopSlices()
        for key, log in list(self._rolled.items()):
            pending = self._take_pending_roll_flush(key, log)
            if pending is not None:
                target, fds, truncations = pending
                try:
                    await asyncio.to_thread(_fsync_and_close, fds)
                except OSError as e:
                    self._handle_log_dir_failure(str(log.dir.parent), e)
                    continue
                log.complete_roll_flush(target, truncations)
                self._keep_if_pending(key, log)
            if slices.due():
                await slices.pause()

    async def run_scheduler(self, tick_seconds: float = 1.0) -> None:
        """Run the periodic tasks until cancelled (start it with asyncio.create_task)."""
        self._scheduler_task = asyncio.current_task()
        if self.cleaner.config.enable and self._cleaner_task is None:
            self._cleaner_task = asyncio.create_task(self.cleaner.run(), name="log-cleaner")
        if self._verifier_task is None:
            self._verifier_task = asyncio.create_task(self.verifier.run(), name="log-verifier")
        try:
            while True:
                await self._flush_rolled_segments_async()
                await self._periodic_round_async()
                await asyncio.sleep(tick_seconds)
        finally:
            self._scheduler_task = None
            if self._cleaner_task is not None:
                self._cleaner_task.cancel()
                self._cleaner_task = None
            if self._verifier_task is not None:
                self._verifier_task.cancel()
                self._verifier_task = None


class MissingLogOffsets(NamedTuple):
    """The checkpointed offsets of a partition whose directory is missing."""

    recovery_point: int
    log_start_offset: int
    high_watermark: int


_CheckpointContents = tuple[Path, dict[TopicPartitionKey, int], int]
"""A checkpoint file's path, its offsets, and the number of the snapshot they were taken in."""


def _rename_for_delete(logs: list[Log]) -> list[OSError | None]:
    """In a worker thread: rename each log's directory to its ``-delete`` name (the logs are no
    longer the manager's: nothing else touches them). The error of each, None if renamed."""
    results: list[OSError | None] = []
    for log in logs:
        topic, partition = log.topic_partition
        try:
            log.rename_dir_quietly(log_delete_dir_name(topic, partition, uuid.uuid4().hex))
        except OSError as e:
            results.append(e)
        else:
            results.append(None)
    return results


def _remove_dirs(dirs: list[Path]) -> None:
    for dir in dirs:
        shutil.rmtree(dir, ignore_errors=True)


def _load_chunk(
    plan: list[tuple[TopicPartitionKey, Callable[[], Log]]],
) -> list[Log | BaseException]:
    """In a loading thread: each log of ``plan`` loaded, or the error that stopped it (the
    caller takes a directory with a failed log offline)."""
    results: list[Log | BaseException] = []
    for _, load in plan:
        try:
            results.append(load())
        except (OSError, StorageError) as e:
            results.append(e)
    return results


def _fsync_and_close(fds: list[int]) -> None:
    try:
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)
