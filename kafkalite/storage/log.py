"""A partition's log: ordered segments, offsets, reads, truncation, retention and recovery
(Kafka's UnifiedLog + LocalLog + LogLoader, local storage only).

Directory ``<log.dirs>/<topic>-<partition>/`` holds the segments (see ``segment.py``) and the
``leader-epoch-checkpoint`` (see ``leader_epoch.py``).

Offsets and invariants:

* ``log_start_offset <= high_watermark <= log_end_offset``; ``log_end_offset`` is the next
  offset to assign. ``log_start_offset`` may lie inside the first segment (after
  ``delete_records_before``); reads below it are out of range.
* ``recovery_point``: every offset below it is fsynced. After a crash only segments at or past
  the recovery point are scanned (``LogSegment.recover``); nothing before it is re-read. After a
  clean shutdown nothing is scanned at all (only the cheap index sanity checks, on the first
  and last entries each index's open read): a segment's max timestamp is its time index's last
  entry, and only the active segment's batches after its last offset-index entry are read
  (to find the log end offset).
* Files: a new log is its directory and an empty ``.log``; a segment's index files are made by
  their first entry, and a segment holding data keeps an offset index on disk once it is
  closed, rolled or recovered (``LogSegment.keep_index_files``). The loader accepts what
  Kafka's LogLoader accepts: a missing ``.index`` is rebuilt by recovering the segment (for a
  segment holding data; an empty one has nothing to index), a missing ``.timeindex`` is an
  empty time index (the segment is still recovered if its batches hold a timestamp the index
  does not end with, as for any incomplete time index). One ``os.scandir`` per log answers
  which files exist and the ``.log`` sizes.
* Segments are contiguous in offset order; the last one is the *active* segment, the only one
  appended to; retention never deletes it.
* The leader numbers batches by patching baseOffset and partitionLeaderEpoch in place in the
  request's buffer (``append_as_leader``); a follower keeps the leader's offsets
  (``append_as_follower``). Either way each batch's bytes hit the file exactly as received.

Durability is Kafka's: no fsync per append unless ``flush.messages`` / ``flush.ms`` ask for it;
a rolled segment is fsynced soon after the roll (``LogManager`` does it off the event loop
through ``pending_roll_flush``), which moves the recovery point.

I/O errors are converted into ``LogDirFailure`` naming the log directory; the log is then offline
(every further operation raises ``LogOfflineError``) and ``on_log_dir_failure`` is told.

An append either fails before anything is written or is taken whole: the checks (validation,
sizes, timestamps, relative offsets) come first; then the segment writes the batches, adds
their index entries, and the log moves ``log_end_offset`` past them. Whatever fails after the
write started (a short write, an index cut on disk under the broker, any error of the index
update) is a log-dir failure (KAFKA_STORAGE_ERROR, the directory offline, as Kafka's
LogDirFailureChannel): never a refused append whose records are in the file, which a
producer's retry would write a second time behind a log end that did not move.

Not safe for concurrent use: the broker drives a Log from one event loop.
"""

from __future__ import annotations

import bisect
import os
import random
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, Protocol

import structlog

from kafkalite.protocol.errors import (
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from kafkalite.protocol.records import (
    BATCH_HEADER_SIZE,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    RecordBatchHeader,
    TimestampType,
    complete_batches_length,
    decode_batch,
    parse_batch_header,
    record_offset,
    record_timestamp,
    set_base_offset,
    set_max_timestamp_and_type,
    set_partition_leader_epoch,
    validate_batches,
)
from kafkalite.storage.checkpoint import LEADER_EPOCH_CHECKPOINT_FILE, fsync_dir
from kafkalite.storage.config import LONG_MAX, LogConfig
from kafkalite.storage.errors import (
    LogDirFailure,
    LogOfflineError,
    OffsetsOutOfOrderError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from kafkalite.storage.file_records import EMPTY_RECORDS, FileRecordsSlice
from kafkalite.storage.index import NO_TIMESTAMP
from kafkalite.storage.leader_epoch import LeaderEpochFileCache
from kafkalite.storage.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    FetchDataInfo,
    LogOffsetMetadata,
    LogSegment,
    batch_summaries,
    check_index_files,
    filename_prefix_from_offset,
    log_file,
    offset_from_file_name,
    offset_index_file,
    time_index_file,
)
from kafkalite.storage.txn_index import TXN_INDEX_FILE_SUFFIX, AbortedTxn

# ListOffsets special timestamps (the caller maps -1/-2; -3 is KIP-734's max timestamp).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

logger = structlog.get_logger("kafkalite.storage.log")

DELETE_DIR_SUFFIX = "-delete"
_DELETE_DIR_PATTERN = re.compile(r"(\S+)-(\d+)\.([0-9a-f]{32})-delete")
_LOG_DIR_PATTERN = re.compile(r"(\S+)-(\d+)")


def parse_topic_partition_name(dir: str | os.PathLike[str]) -> tuple[str, int]:
    """``<topic>-<partition>`` (or its ``.<uuid>-delete`` form) -> (topic, partition)."""
    name = os.path.basename(os.fspath(dir))
    match = _DELETE_DIR_PATTERN.fullmatch(name) or _LOG_DIR_PATTERN.fullmatch(name)
    if match is None:
        raise ValueError(f"Found directory {dir}, '{name}' is not in the form of topic-partition")
    return match.group(1), int(match.group(2))


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def log_delete_dir_name(topic: str, partition: int, unique_id: str) -> str:
    """``<topic>-<partition>.<unique id>-delete``, the topic cut short so that the name fits in
    the 255 bytes a file name may have (Kafka's logDirNameWithSuffixCappedLength: a topic name
    may have 249 characters, and renaming its log to the uncut name failed with ENAMETOOLONG,
    which took the whole log directory offline)."""
    suffix = f"-{partition}.{unique_id}{DELETE_DIR_SUFFIX}"
    return topic[: max(0, 255 - len(suffix))] + suffix


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogAppendInfo(NamedTuple):
    """What an append did (Kafka's LogAppendInfo).

    ``batches`` are the validated headers as they were *before* offset assignment (a leader's
    batch i starts at ``first_offset`` + the record counts before it).
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    record_count: int
    batch_count: int
    valid_bytes: int
    batches: list[RecordBatchHeader]


def _empty_append_info(log_start_offset: int) -> LogAppendInfo:
    return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, -1, log_start_offset, 0, 0, 0, [])


PRODUCER_SNAPSHOT_SUFFIX = ".snapshot"
"""The producer state's snapshot files in a log's directory (kafkalite/broker/producer_state.py)."""


class NewsListener(Protocol):
    """What a log tells that its offsets moved (the broker's Partition)."""

    def notify_news(self) -> None: ...


class Log:
    """One partition's log. See the module docstring for the invariants."""

    def __init__(
        self,
        dir: str | os.PathLike[str],
        config: LogConfig,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = False,
        time_ms: Callable[[], int] = _wall_clock_ms,
        on_log_dir_failure: Callable[[str, BaseException], None] | None = None,
        existing: bool = False,
        topic_partition: tuple[str, int] | None = None,
    ) -> None:
        """``existing``: the caller found the directory (a LogManager loading its logs): it
        is loaded, not made (no ``mkdir`` that fails). ``topic_partition``: the directory's
        name already parsed by the caller (``parse_topic_partition_name``)."""
        # The directory as a str for the load's os calls and the files' paths, its Path made
        # when first asked for (``dir``): a Path's construction, joins and __fspath__ were a
        # visible part of loading thousands of logs.
        dir_str = self._dir_str = os.fspath(dir)
        self._dir: Path | None = dir if isinstance(dir, Path) else None
        self.topic, self.partition = topic_partition or parse_topic_partition_name(dir_str)
        self.config = config
        self._time_ms = time_ms
        self.on_log_dir_failure = on_log_dir_failure
        self.offline = False
        self._segments: list[LogSegment] = []
        # A tuple of ints, rebuilt when the segment list changes (a roll, a deletion, a
        # truncation): CPython stops tracking it once a collection has seen it.
        self._base_offsets: tuple[int, ...] = ()
        self._closed_size: int | None = None
        """The bytes of every segment but the active one (only the active one grows), summed
        when first asked after the segment list changed: ``size_bytes`` is then a number read,
        not a walk of the segments (Kafka's UnifiedLog.size)."""
        self.log_start_offset = log_start_offset
        self.log_end_offset = 0
        self.recovery_point = recovery_point
        self._high_watermark = 0
        self.last_flush_ms = time_ms()
        # Offset up to which rolled segments still need an fsync (LogManager does it).
        self._roll_flush_offset = -1
        # Bumped on every truncation so an fsync finished in the background can tell whether
        # the offsets it flushed are still the ones in the log.
        self._truncation_count = 0
        self._dir_needs_flush = True  # a segment file was created since the last dir fsync
        # Told this log and the offset of every truncation (the LogManager moves the cleaner's
        # checkpoint): one callable shared by every log of a manager, not a closure per log.
        self.on_truncation: Callable[[Log, int], None] | None = None
        # Told this log when a roll leaves segments waiting for their fsync, and when its
        # config is replaced: the LogManager's passes then visit these logs only, not every
        # log it holds (shared callables, as ``on_truncation``).
        self.on_roll: Callable[[Log], None] | None = None
        self.on_config: Callable[[Log], None] | None = None
        # Its ``notify_news()`` is called whenever log_end_offset, the high watermark or
        # log_start_offset moves after the load (the partition wakes the followers' fetch
        # sessions that stopped reading it). The listener itself, not its bound method: a
        # method object per log is one more object for the collector to walk.
        self.news_listener: NewsListener | None = None
        # Bumped by appends and reads: the LogManager releases the files of logs whose count
        # did not move between two of its idle checks (release_resources).
        self.uses = 0
        self.recovered_segments = 0  # how many segments the last load scanned (for tests, metrics)
        self.truncated_bytes_on_load = 0
        # True when this object created the directory: it holds nothing to load or recover.
        self.newly_created = False
        # True when the log held no batch and no producer snapshot (``*.snapshot``) when this
        # object made or loaded it: the partition has no producer state to rebuild (no listing
        # of the directory for snapshots, on the loop, per partition of a LeaderAndIsr).
        self.empty_without_snapshots = False
        try:
            if not existing:
                try:
                    os.makedirs(dir_str)
                    self.newly_created = True
                except FileExistsError:
                    pass
            epoch_checkpoint = os.path.join(dir_str, LEADER_EPOCH_CHECKPOINT_FILE)
            if self.newly_created:
                # A new log is its directory and an empty .log: the indexes are created by
                # their first entry (or the close of a segment holding data), the epoch
                # checkpoint by the first epoch.
                self.leader_epoch_cache = LeaderEpochFileCache(
                    epoch_checkpoint, deferred=True, read=False
                )
                segment = self._open_segment(self.log_start_offset, preallocate=False, new=True)
                segment.defer_index_growth(self.config.segment_index_bytes)
                self._add_segment(segment)
                self.log_end_offset = self.log_start_offset
                self.recovery_point = self.log_start_offset
                self._high_watermark = self.log_start_offset
                self.empty_without_snapshots = True
                return
            # One listing of the directory answers every "does this file exist" of the load
            # (a broker loads thousands of logs: no stat or failing open per file).
            listing = {entry.name: entry for entry in os.scandir(dir_str)}
            try:
                self.leader_epoch_cache = LeaderEpochFileCache(
                    epoch_checkpoint,
                    deferred=True,
                    read=LEADER_EPOCH_CHECKPOINT_FILE in listing,
                )
                epochs_lost = False
            except StorageError:
                # A malformed checkpoint: rebuild the epochs from the batches (full scan).
                os.unlink(epoch_checkpoint)
                self.leader_epoch_cache = LeaderEpochFileCache(epoch_checkpoint, deferred=True)
                epochs_lost = True
            self._load(had_clean_shutdown, recover_all=epochs_lost, listing=listing)
            self.empty_without_snapshots = self.log_end_offset == self.log_start_offset and not any(
                name.endswith(PRODUCER_SNAPSHOT_SUFFIX) for name in listing
            )
        except OSError as e:
            self._close_quietly()
            raise LogDirFailure(str(self.dir.parent), e) from e

    @property
    def dir(self) -> Path:
        """The partition's directory."""
        path = self._dir
        if path is None:
            path = self._dir = Path(self._dir_str)
        return path

    @dir.setter
    def dir(self, path: str | os.PathLike[str]) -> None:
        self._dir = path if isinstance(path, Path) else Path(path)
        self._dir_str = os.fspath(path)

    @property
    def dir_str(self) -> str:
        """The partition's directory as a str (no Path made)."""
        return self._dir_str

    # ================================================================= loading (LogLoader)

    def _load(
        self,
        had_clean_shutdown: bool,
        recover_all: bool = False,
        listing: dict[str, os.DirEntry[str]] | None = None,
    ) -> None:
        config = self.config
        bases: list[int] = []
        index_missing: set[int] = set()
        dir_str = self._dir_str
        if listing is None:
            listing = {entry.name: entry for entry in os.scandir(dir_str)}
        names = set(listing)
        if any(name.endswith(SWAP_FILE_SUFFIX) for name in names):
            self._complete_interrupted_swaps()
            listing = {entry.name: entry for entry in os.scandir(dir_str)}
            names = set(listing)
        for name in list(names):
            if name.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, ".tmp")):
                os.unlink(os.path.join(dir_str, name))  # leftovers: interrupted delete/clean/write
                names.discard(name)
                continue
            if name.endswith(LOG_FILE_SUFFIX):
                bases.append(offset_from_file_name(name))
            elif name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX)):
                if name.rsplit(".", 1)[0] + LOG_FILE_SUFFIX not in names:
                    os.unlink(os.path.join(dir_str, name))  # an orphan index: its log is gone
                    names.discard(name)
        bases.sort()
        needs_recovery: set[int] = set()
        # After a clean shutdown every segment's time index ends with its max timestamp:
        # nothing of the logs is read to find it (see LogSegment).
        trust_time_index = had_clean_shutdown and not recover_all
        for base in bases:
            prefix = filename_prefix_from_offset(base)
            log_size = listing[prefix + LOG_FILE_SUFFIX].stat().st_size
            # What Kafka's loader accepts: a missing offset index is rebuilt (here only for a
            # segment holding data: an empty one has nothing to index), a missing time index
            # is an empty one (rebuilt below if the segment's timestamps say it misses some).
            if log_size and prefix + INDEX_FILE_SUFFIX not in names:
                index_missing.add(base)
            segment = self._open_segment(
                base, names=names, log_size=log_size, trust_time_index=trust_time_index
            )
            self._add_segment(segment)
            if (
                base in index_missing
                or not check_index_files(segment)
                or not segment.time_index_is_complete()
            ):
                needs_recovery.add(base)

        if recover_all:
            needs_recovery.update(self._base_offsets)
        elif not had_clean_shutdown and self._segments:
            # Everything from the segment holding the recovery point on may be torn.
            first = max(0, bisect.bisect_right(self._base_offsets, self.recovery_point) - 1)
            needs_recovery.update(self._base_offsets[first:])

        for base in sorted(needs_recovery):
            i = bisect.bisect_left(self._base_offsets, base)
            if i >= len(self._segments) or self._base_offsets[i] != base:
                continue  # deleted because an earlier segment was truncated
            segment = self._segments[i]
            truncated = self._recover_segment(segment)
            # Kafka's LogLoader.recoverLog: a segment recovery had to truncate was torn, and
            # everything after it was written later and cannot be trusted (a follower re-fetches
            # whatever is dropped here). A segment that merely ends before the next one starts
            # is no evidence of damage: compaction leaves such gaps, and they outlive a later
            # change of cleanup.policy, so offset gaps never discard segments (as in Kafka). An
            # overlap with the next segment does: offsets would no longer be unique.
            broken = truncated > 0
            if not broken and i + 1 < len(self._segments):
                broken = segment.read_next_offset() > self._base_offsets[i + 1]
            if truncated:
                logger.warning(
                    "recovery truncated a torn or corrupt tail",
                    partition=f"{self.topic}-{self.partition}",
                    segment=segment.base_offset,
                    kept_up_to_offset=segment.read_next_offset(),
                    position=segment.size,
                    bytes=truncated,
                )
            if broken:
                later_segments = self._segments[i + 1 :]
                if later_segments:
                    logger.warning(
                        "recovery deleted the segments after a damaged one",
                        partition=f"{self.topic}-{self.partition}",
                        segments=[later.base_offset for later in later_segments],
                        from_offset=later_segments[0].base_offset,
                        bytes=sum(later.size for later in later_segments),
                    )
                for later in later_segments:
                    later.delete()
                del self._segments[i + 1 :]
                self._base_offsets = self._base_offsets[: i + 1]
                self._closed_size = None  # the segment list changed

        if not self._segments:
            self._add_segment(self._open_segment(self.log_start_offset))
        active = self._segments[-1]
        active.defer_index_growth(config.segment_index_bytes)
        self.log_end_offset = active.read_next_offset()
        if self.log_start_offset > self.log_end_offset:
            # The checkpointed start is past what survived (a crash lost unflushed records
            # behind a DeleteRecords): start over there rather than hand out those offsets
            # again (Kafka's deleteSegmentsIfLogStartGreaterThanLogEnd).
            self._truncate_fully_and_start_at(self.log_start_offset)
            active = self._segments[-1]
        self.log_start_offset = min(
            max(self.log_start_offset, self._segments[0].base_offset), self.log_end_offset
        )
        if had_clean_shutdown and not needs_recovery:
            self.recovery_point = self.log_end_offset
        else:
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._high_watermark = self.log_start_offset
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        # Loaded: no descriptor or map stays open until the log is used (see LazyIndex).
        for segment in self._segments:
            segment.release_resources()
        # A closed segment counts only the checks of its reads from now on, not recovery's
        # (see segment.py: damage done to it while the broker runs is found by its first read).
        for segment in self._segments[:-1]:
            segment.forget_verification()

    def _complete_interrupted_swaps(self) -> None:
        """Finish a cleaner swap a crash interrupted (Kafka's LogLoader, swap files).

        A ``.log.swap`` exists only once its cleaned segment was completely written and
        fsynced: the swap is committed. The segments it replaces (those whose base offset lies
        in ``[swap base, swap next offset)``) are deleted and the ``.swap`` suffix dropped (of
        the ``.txnindex`` too); an offset or time index still named ``.cleaned``/``.swap`` is
        deleted and rebuilt by the load. Index swap
        files without their log swap file belong to no committed swap and are deleted.
        """
        swaps: list[tuple[int, int, str]] = []  # (base, next offset, path)
        for entry in os.scandir(self.dir):
            name = entry.name
            if not name.endswith(SWAP_FILE_SUFFIX):
                continue
            if name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX):
                base = offset_from_file_name(name)
                swaps.append((base, _next_offset_of_file(entry.path, base), entry.path))
            elif not os.path.exists(
                self.dir / (name.split(".", 1)[0] + LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX)
            ):
                os.unlink(entry.path)
        if not swaps:
            return
        low = min(base for base, _, _ in swaps)
        high = max(next_offset for _, next_offset, _ in swaps)
        swap_bases = {base for base, _, _ in swaps}
        for entry in os.scandir(self.dir):
            name = entry.name
            if name.endswith(SWAP_FILE_SUFFIX) or not name[:1].isdigit():
                continue
            if name.endswith(
                (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
            ):
                offset = offset_from_file_name(name)
                if low <= offset < high or offset in swap_bases:
                    os.unlink(entry.path)  # replaced by the swap, not yet deleted
        for entry in os.scandir(self.dir):
            name = entry.name
            if name.endswith(SWAP_FILE_SUFFIX):
                if name.endswith(
                    (LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX + SWAP_FILE_SUFFIX)
                ):
                    # the aborted-transaction index cannot be rebuilt from the segment alone
                    os.replace(entry.path, entry.path[: -len(SWAP_FILE_SUFFIX)])
                else:
                    os.unlink(entry.path)  # the index is rebuilt from the log
        fsync_dir(self.dir)

    def _recover_segment(self, segment: LogSegment) -> int:
        def on_batch(header: RecordBatchHeader) -> None:
            self._assign_epoch_if_newer(header.partition_leader_epoch, header.base_offset)

        self.recovered_segments += 1
        truncated = segment.recover(on_batch)
        self.truncated_bytes_on_load += truncated
        return truncated

    def _open_segment(
        self,
        base_offset: int,
        preallocate: bool = True,
        *,
        new: bool = False,
        names: set[str] | None = None,
        log_size: int | None = None,
        trust_time_index: bool = False,
    ) -> LogSegment:
        return LogSegment.open(
            self._dir_str,
            base_offset,
            preallocate=preallocate,
            new=new,
            names=names,
            log_size=log_size,
            trust_time_index=trust_time_index,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            # Kafka: a random jitter in [0, segment.jitter.ms) so logs do not all roll at once.
            rolling_jitter_ms=(
                random.randrange(self.config.segment_jitter_ms)
                if self.config.segment_jitter_ms > 0
                else 0
            ),
            time_ms=self._time_ms,
        )

    def _add_segment(self, segment: LogSegment) -> None:
        self._dir_needs_flush = True
        self._segments.append(segment)
        self._base_offsets = (*self._base_offsets, segment.base_offset)
        self._closed_size = None  # the segment list changed

    # ================================================================= properties

    @property
    def topic_partition(self) -> tuple[str, int]:
        return self.topic, self.partition

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def number_of_segments(self) -> int:
        return len(self._segments)

    def segment_size_changed(self) -> None:
        """A closed segment's file changed size outside the log's own paths (the segment
        verifier's rebuild): ``size_bytes`` sums the closed segments again when next asked."""
        self._closed_size = None

    @property
    def size_bytes(self) -> int:
        """Bytes of all segments: the closed ones' sum, kept until the segment list changes
        (roll, retention, truncation, cleaning, deletion), plus the active segment's size."""
        segments = self._segments
        if not segments:
            return 0
        closed = self._closed_size
        if closed is None:
            closed = self._closed_size = sum(segment.size for segment in segments[:-1])
        return closed + segments[-1].size

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        new = min(max(offset, self.log_start_offset), self.log_end_offset)
        if new != self._high_watermark:
            self._high_watermark = new
            self._news()

    def _news(self) -> None:
        listener = self.news_listener
        if listener is not None:
            listener.notify_news()

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    def _check_online(self) -> None:
        if self.offline:
            raise LogOfflineError(
                f"The log for {self.topic}-{self.partition} is offline (log dir {self.dir.parent})"
            )

    def _fail(self, error: OSError) -> LogDirFailure:
        """Take the log offline after an I/O error and build the error to raise."""
        self.offline = True
        failure = LogDirFailure(str(self.dir.parent), error)
        if self.on_log_dir_failure is not None:
            self.on_log_dir_failure(str(self.dir.parent), error)
        return failure

    def _segment_index_for(self, offset: int) -> int:
        """Index of the segment holding ``offset`` (floor by base offset), -1 if before all."""
        return bisect.bisect_right(self._base_offsets, offset) - 1

    # ================================================================= aborted transactions

    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Index a transaction aborted by the marker at ``entry.last_offset`` (in the segment
        holding the marker, as Kafka's ``.txnindex``)."""
        self._check_online()
        i = self._segment_index_for(entry.last_offset)
        if i < 0:
            return
        try:
            self._segments[i].txn_index.append(entry)
        except OSError as e:
            raise self._fail(e) from e

    def has_aborted_txns_from(self, offset: int) -> bool:
        """Whether a transaction aborted by a marker at or after ``offset`` is indexed
        (newest segments first: the answer is usually found in the last one or two)."""
        first = max(self._segment_index_for(offset), 0)
        for segment in reversed(self._segments[first:]):
            entries = segment.txn_index.entries
            if entries and entries[-1].last_offset >= offset:
                return True
        return False

    def collect_aborted_txns(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start_offset, upper_bound_offset)`` (Kafka's
        ``collectAbortedTransactions``), oldest marker first."""
        found: list[AbortedTxn] = []
        i = max(self._segment_index_for(start_offset), 0)
        for segment in self._segments[i:]:
            entries, complete = segment.txn_index.collect(start_offset, upper_bound_offset)
            found.extend(entries)
            if complete:
                break
        return found

    # ================================================================= appends

    def append_as_leader(
        self,
        records: bytearray | memoryview,
        leader_epoch: int,
        *,
        origin_client: bool = True,
        validated: list[RecordBatchHeader] | None = None,
    ) -> LogAppendInfo:
        """Validate ``records``, number them from ``log_end_offset`` (patching the buffer in
        place), stamp ``leader_epoch`` (and LogAppendTime if configured), append.

        ``validated``: headers from an earlier ``validate_batches`` of this buffer (to skip a
        second CRC pass). Raises CorruptRecordError / InvalidRecordError / RecordTooLargeError /
        RecordBatchTooLargeError / InvalidTimestampError without appending anything.
        """
        if self.offline:
            self._check_online()
        view = memoryview(records)
        if view.readonly:
            view = memoryview(bytearray(view))
        config = self.config
        headers = (
            validated
            if validated is not None
            else validate_batches(
                view, origin_client=origin_client, max_batch_size=config.max_message_bytes
            )
        )
        if not headers:
            return _empty_append_info(self.log_start_offset)
        valid_bytes = view.nbytes
        if valid_bytes > config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {valid_bytes} bytes in append to partition "
                f"{self.topic}-{self.partition} which exceeds the maximum configured segment size of "
                f"{config.segment_bytes}."
            )
        now = self._time_ms()
        first_offset = self.log_end_offset
        log_append_time = now if config.message_timestamp_type == "LogAppendTime" else -1
        diff = config.message_timestamp_difference_max_ms
        # What LogSegment.append needs per batch, with the offsets about to be assigned.
        batches = []
        offset = first_offset
        max_timestamp = NO_TIMESTAMP
        offset_of_max_timestamp = first_offset
        record_count = 0
        for header in headers:
            if log_append_time < 0:
                batch_max_timestamp = header.max_timestamp
                if (
                    diff != LONG_MAX
                    and header.timestamp_type == TimestampType.CREATE_TIME
                    and abs(batch_max_timestamp - now) > diff
                ):
                    raise InvalidTimestampError(
                        f"Timestamp {batch_max_timestamp} of a batch in append to partition "
                        f"{self.topic}-{self.partition} is out of range [{now - diff}, {now + diff}]"
                    )
            else:
                batch_max_timestamp = now
            batch_last = offset + header.last_offset_delta
            if batch_max_timestamp > max_timestamp:
                max_timestamp = batch_max_timestamp
                offset_of_max_timestamp = batch_last
            batches.append((batch_last, header.batch_length + LOG_OVERHEAD, batch_max_timestamp))
            record_count += header.record_count
            offset = batch_last + 1
        # Number the batches and stamp the epoch in place (neither field is under the CRC).
        # Not records.assign_offsets: that re-reads each batch's lengths from the buffer, this
        # loop reuses the sizes and offsets just computed (about twice as fast per batch).
        pos = 0
        base_offset = first_offset
        for batch_last, size, _ in batches:
            set_base_offset(view, pos, base_offset)
            set_partition_leader_epoch(view, pos, leader_epoch)
            if log_append_time >= 0:
                set_max_timestamp_and_type(view, pos, TimestampType.LOG_APPEND_TIME, now)
            pos += size
            base_offset = batch_last + 1
        last_offset = offset - 1
        # _assign_epoch_if_newer inlined: this runs on every produce (two calls fewer).
        if leader_epoch >= 0:
            latest = self.leader_epoch_cache.latest_epoch
            if latest is None or leader_epoch > latest:
                self._io(self.leader_epoch_cache.assign, leader_epoch, first_offset)
        self._append(view, batches, first_offset, last_offset, max_timestamp, valid_bytes, now)
        # tuple.__new__ skips the NamedTuple's Python-level __new__ (about 1 us per append).
        return _new_tuple(
            LogAppendInfo,
            (
                first_offset,
                last_offset,
                max_timestamp,
                offset_of_max_timestamp,
                log_append_time,
                self.log_start_offset,
                record_count,
                len(headers),
                valid_bytes,
                headers,
            ),
        )

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs.

        A trailing partial batch (a fetch cut at its size limit) is ignored, as Kafka does.
        Raises UnexpectedAppendOffsetError if the first offset is below ``log_end_offset``,
        OffsetsOutOfOrderError if offsets do not increase, CorruptRecordError on damage.
        """
        self._check_online()
        view = memoryview(records)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        view = view[: complete_batches_length(view)]
        headers = validate_batches(view, origin_client=False)
        if not headers:
            return _empty_append_info(self.log_start_offset)
        first_offset = headers[0].base_offset
        last_offset = headers[-1].last_offset
        if first_offset < self.log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"Unexpected offset in append to {self.topic}-{self.partition}. First offset "
                f"{first_offset} is less than the next offset {self.log_end_offset}.",
                first_offset,
                last_offset,
            )
        expected = first_offset
        max_timestamp = NO_TIMESTAMP
        offset_of_max_timestamp = last_offset
        for header in headers:
            if header.base_offset < expected:
                raise OffsetsOutOfOrderError(
                    f"Out of order offsets found in append to {self.topic}-{self.partition}: "
                    f"{header.base_offset} after {expected - 1}"
                )
            expected = header.next_offset
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
                offset_of_max_timestamp = header.last_offset
        valid_bytes = view.nbytes
        if valid_bytes > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {valid_bytes} bytes in append to partition "
                f"{self.topic}-{self.partition} which exceeds the maximum configured segment size"
            )
        for header in headers:
            self._io(self._assign_epoch_if_newer, header.partition_leader_epoch, header.base_offset)
        self._append(
            view,
            batch_summaries(headers),
            first_offset,
            last_offset,
            max_timestamp,
            valid_bytes,
            self._time_ms(),
        )
        return LogAppendInfo(
            first_offset,
            last_offset,
            max_timestamp,
            offset_of_max_timestamp,
            -1,
            self.log_start_offset,
            sum(h.record_count for h in headers),
            len(headers),
            valid_bytes,
            headers,
        )

    def _append(
        self,
        view: memoryview,
        batches: list[tuple[int, int, int]],
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        valid_bytes: int,
        now: int,
    ) -> None:
        self.uses += 1
        try:
            segment = self._maybe_roll(valid_bytes, first_offset, last_offset, max_timestamp, now)
            segment.append(view, batches)
        except OSError as e:
            raise self._fail(e) from e
        self.log_end_offset = last_offset + 1
        listener = self.news_listener
        if listener is not None:
            listener.notify_news()
        if self.log_end_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()

    def _assign_epoch_if_newer(self, epoch: int, start_offset: int) -> None:
        """Record in the leader epoch cache that ``epoch`` starts at ``start_offset`` when it is
        newer than the latest epoch known (-1, "no epoch", is ignored)."""
        cache = self.leader_epoch_cache
        if epoch >= 0 and (cache.latest_epoch is None or epoch > cache.latest_epoch):
            cache.assign(epoch, start_offset)

    def _io(self, fn: Callable, *args):
        try:
            return fn(*args)
        except OSError as e:
            raise self._fail(e) from e

    # ================================================================= rolling

    def _maybe_roll(
        self, messages_size: int, first_offset: int, last_offset: int, max_timestamp: int, now: int
    ) -> LogSegment:
        segment = self._segments[-1]
        config = self.config
        if segment.should_roll(
            config.segment_bytes, config.segment_ms, messages_size, max_timestamp, last_offset, now
        ):
            return self._roll(first_offset)
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, log_end_offset)``."""
        self._check_online()
        try:
            return self._roll(expected_next_offset or 0)
        except OSError as e:
            raise self._fail(e) from e

    def _roll(self, expected_next_offset: int) -> LogSegment:
        new_offset = max(expected_next_offset, self.log_end_offset)
        active = self._segments[-1]
        if active.size == 0:
            if active.base_offset == new_offset:
                return active  # nothing to roll away from
            # An empty active segment at a lower offset (a follower skipping a gap): replace it.
            active.delete()
            self._segments.pop()
            self._base_offsets = self._base_offsets[:-1]
            self._closed_size = None  # the segment list changed
        else:
            active.on_become_inactive_segment()
        for path in (
            log_file(self.dir, new_offset),
            offset_index_file(self.dir, new_offset),
            time_index_file(self.dir, new_offset),
        ):
            if path.exists():  # a leftover from an earlier incarnation of this offset range
                path.unlink()
        segment = self._open_segment(new_offset)
        self._add_segment(segment)
        if len(self._segments) > 1:
            self._roll_flush_offset = max(self._roll_flush_offset, new_offset)
            if self.on_roll is not None:
                self.on_roll(self)
        return segment

    # ================================================================= reads

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Bytes from the batch holding ``start_offset``: at most ``max_bytes`` (but the whole
        first batch if ``min_one_message``), only batches starting below ``max_offset`` (e.g.
        the high watermark for consumers). Empty at ``log_end_offset``.

        Raises OffsetOutOfRangeError outside [log_start_offset, log_end_offset].
        """
        self._check_online()
        self.uses += 1
        end = self.log_end_offset
        if start_offset == end:
            return FetchDataInfo(
                LogOffsetMetadata(end, self._segments[-1].base_offset, self._segments[-1].size),
                EMPTY_RECORDS,
            )
        if start_offset > end or start_offset < self.log_start_offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition {self.topic}-{self.partition}, "
                f"but we only have log segments in the range {self.log_start_offset} to {end}."
            )
        if max_offset is not None and max_offset <= start_offset:
            return FetchDataInfo(LogOffsetMetadata(start_offset), EMPTY_RECORDS)
        try:
            i = self._segment_index_for(start_offset)
            segments = self._segments
            while 0 <= i < len(segments):
                segment = segments[i]
                if max_offset is not None and segment.base_offset >= max_offset:
                    break
                max_position = self._max_position(segment, i, max_offset)
                info = segment.read(start_offset, max_bytes, max_position, min_one_message)
                if info is not None:
                    return info
                i += 1
        except OSError as e:
            raise self._fail(e) from e
        return FetchDataInfo(LogOffsetMetadata(start_offset), EMPTY_RECORDS)

    def _max_position(self, segment: LogSegment, i: int, max_offset: int | None) -> int:
        """Byte position in ``segment`` of the first batch starting at or after ``max_offset``."""
        if max_offset is None or max_offset >= self.log_end_offset:
            return segment.size
        if i + 1 < len(self._segments) and self._base_offsets[i + 1] <= max_offset:
            return segment.size
        batch = segment.translate_offset(max_offset)
        if batch is None:
            return segment.size
        if batch.base_offset >= max_offset:
            return batch.position
        return batch.position + batch.size

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``; None if
        there is none. ``MAX_TIMESTAMP`` (-3) gives the record with the largest timestamp."""
        self._check_online()
        try:
            if timestamp == MAX_TIMESTAMP:
                return self._offset_of_max_timestamp()
            for segment in self._segments:
                if segment.max_timestamp_so_far < timestamp:
                    continue
                batch = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                while batch is not None:
                    # A batch's max timestamp may come from a record below the log start offset
                    # (or below the target): then the answer is in a later batch of the segment
                    # (Kafka's FileRecords.searchForTimestamp goes on the same way).
                    found = self._record_at_or_after(segment, batch.position, batch.size, timestamp)
                    if found is not None:
                        return found
                    batch = segment.log.search_for_timestamp(
                        timestamp, batch.position + batch.size, self.log_start_offset
                    )
        except OSError as e:
            raise self._fail(e) from e
        return None

    def _record_at_or_after(
        self, segment: LogSegment, position: int, size: int, timestamp: int
    ) -> tuple[int, int] | None:
        """First record of the batch with timestamp >= target and offset >= log start offset."""
        with segment.log.slice(position, size).view() as view:
            header, records = decode_batch(bytes(view))
        for record in records:
            ts = record_timestamp(header, record)
            offset = record_offset(header, record)
            if ts >= timestamp and offset >= self.log_start_offset:
                return offset, ts
        return None

    def _offset_of_max_timestamp(self) -> tuple[int, int] | None:
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.max_timestamp_so_far >= 0 and (
                best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far
            ):
                best = segment
        if best is None:
            return None
        batch = best.translate_offset(best.offset_of_max_timestamp_so_far)
        if batch is None:
            return None
        with best.log.slice(batch.position, batch.size).view() as view:
            header, records = decode_batch(bytes(view))
        winner = None
        for record in records:
            ts = record_timestamp(header, record)
            if winner is None or ts > winner[1]:
                winner = (record_offset(header, record), ts)
        return winner

    # ================================================================= truncation

    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything at or after ``target_offset`` (follower truncation). Returns True
        if anything was removed. A batch straddling ``target_offset`` is removed whole."""
        self._check_online()
        if target_offset < 0:
            raise ValueError(
                f"Cannot truncate partition {self.topic}-{self.partition} to a negative offset ({target_offset})."
            )
        if target_offset >= self.log_end_offset:
            # Nothing to remove, but the epoch cache may end with an entry at the log end that
            # this broker wrote on becoming leader before it appended anything; the new
            # leader's records will carry an older epoch there (Kafka's truncateTo does this).
            self._io(self.leader_epoch_cache.truncate_from_end, self.log_end_offset)
            return False
        try:
            self._truncation_count += 1
            if self._segments[0].base_offset > target_offset:
                self._truncate_fully_and_start_at(target_offset)
                return True
            i = self._segment_index_for(target_offset)
            for segment in self._segments[i + 1 :]:
                segment.delete()
            del self._segments[i + 1 :]
            self._base_offsets = self._base_offsets[: i + 1]
            self._closed_size = None  # the segment list changed
            active = self._segments[-1]
            active.truncate_to(target_offset)
            self.log_end_offset = active.read_next_offset()
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        except OSError as e:
            raise self._fail(e) from e
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._roll_flush_offset = min(self._roll_flush_offset, self.log_end_offset)
        self._high_watermark = min(self._high_watermark, self.log_end_offset)
        self._news()
        if self.on_truncation is not None:
            self.on_truncation(self, self.log_end_offset)
        return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and restart the log, empty, at ``new_offset``."""
        self._check_online()
        if new_offset < 0:
            raise ValueError(
                f"Cannot start partition {self.topic}-{self.partition} at a negative offset"
            )
        try:
            self._truncation_count += 1
            self._truncate_fully_and_start_at(new_offset)
        except OSError as e:
            raise self._fail(e) from e
        self._news()
        if self.on_truncation is not None:
            self.on_truncation(self, new_offset)

    def _truncate_fully_and_start_at(self, new_offset: int) -> None:
        for segment in self._segments:
            segment.delete()
        self._segments.clear()
        self._base_offsets = ()
        self._closed_size = None  # the segment list changed
        self.leader_epoch_cache.clear_and_flush()
        self._add_segment(self._open_segment(new_offset))
        self.log_end_offset = new_offset
        self.log_start_offset = new_offset
        self.recovery_point = new_offset
        self._roll_flush_offset = -1
        self._high_watermark = new_offset

    # ================================================================= log start offset, retention

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """Move the log start offset up (DeleteRecords); never past the high watermark."""
        self._check_online()
        if new_log_start_offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {new_log_start_offset} of partition "
                f"{self.topic}-{self.partition} since it is larger than the high watermark {self._high_watermark}"
            )
        if new_log_start_offset <= self.log_start_offset:
            return False
        self.log_start_offset = new_log_start_offset
        self._news()
        self._io(self.leader_epoch_cache.truncate_from_start, new_log_start_offset)
        return True

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: records below ``offset`` become unreadable, whole segments below it
        are deleted. Returns the new log start offset (the partition's low watermark)."""
        self.maybe_increment_log_start_offset(offset)
        self._delete_log_start_offset_breached_segments()
        return self.log_start_offset

    def delete_old_segments(self) -> int:
        """Apply retention (retention.ms, retention.bytes, log start offset): delete whole
        segments wholly below the high watermark, the active one included once everything is
        replicated (a new empty segment takes its place). Returns how many were deleted."""
        self._check_online()
        if not self.config.delete:
            return self._delete_log_start_offset_breached_segments()
        return (
            self._delete_retention_ms_breached_segments()
            + self._delete_retention_size_breached_segments()
            + self._delete_log_start_offset_breached_segments()
        )

    def _delete_retention_ms_breached_segments(self) -> int:
        retention_ms = self.config.retention_ms
        if retention_ms < 0:
            return 0
        now = self._time_ms()
        return self._delete_segments(
            self._deletable_segments(
                lambda segment, next_base: now - segment.largest_timestamp > retention_ms
            )
        )

    def _delete_retention_size_breached_segments(self) -> int:
        retention_bytes = self.config.retention_bytes
        if retention_bytes < 0:
            return 0
        diff = self.size_bytes - retention_bytes
        if diff <= 0:
            return 0

        def should_delete(segment: LogSegment, next_base: int) -> bool:
            nonlocal diff
            if diff - segment.size >= 0:
                diff -= segment.size
                return True
            return False

        return self._delete_segments(self._deletable_segments(should_delete))

    def _delete_log_start_offset_breached_segments(self) -> int:
        return self._delete_segments(
            self._deletable_segments(lambda segment, next_base: next_base <= self.log_start_offset)
        )

    def _deletable_segments(self, predicate: Callable[[LogSegment, int], bool]) -> list[LogSegment]:
        """Leading segments wholly below the high watermark for which ``predicate`` holds
        (Kafka's deletableSegments): the active one too, unless it is empty, so an idle
        partition's data does not outlive retention until the next roll."""
        result = []
        segments = self._segments
        for i, segment in enumerate(segments):
            last = i == len(segments) - 1
            if last and segment.size == 0:
                break
            upper = self.log_end_offset if last else segments[i + 1].base_offset
            if self._high_watermark >= upper and predicate(segment, upper):
                result.append(segment)
            else:
                break
        return result

    def _delete_segments(self, deletable: list[LogSegment]) -> int:
        if not deletable:
            return 0
        try:
            if len(deletable) == len(self._segments):
                # A log always has a segment: roll first, the new empty one stays.
                self._roll(0)
            for segment in deletable:
                segment.delete()
            count = len(deletable)
            del self._segments[:count]
            self._base_offsets = self._base_offsets[count:]
            self._closed_size = None  # the segment list changed
            if self._segments[0].base_offset > self.log_start_offset:
                self.log_start_offset = self._segments[0].base_offset
                self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        except OSError as e:
            raise self._fail(e) from e
        self._high_watermark = max(self._high_watermark, self.log_start_offset)
        self._news()
        return len(deletable)

    # ================================================================= compaction swap

    @property
    def truncation_count(self) -> int:
        """Bumped by every truncation: work prepared from the log's files before a truncation
        (a cleaned segment) no longer matches them."""
        return self._truncation_count

    def replace_segments(
        self, new_segment: LogSegment, old_segments: list[LogSegment], truncation_count: int
    ) -> bool:
        """Swap a cleaned segment in for ``old_segments`` (Kafka's replaceSegments).

        ``new_segment``'s files carry the ``.cleaned`` suffix and are fsynced; it starts at the
        first old segment's base offset. Steps, each a point a crash may stop at (``_load``
        finishes or undoes the swap): rename ``.cleaned`` -> ``.swap`` (committed), put the new
        segment in the old ones' place, rename the old files to ``.deleted`` and delete them
        (readers' slices keep their descriptors), rename ``.swap`` to the final names.

        Returns False and changes nothing when the log changed since the cleaning started
        (truncated, offline, deleted, or the old segments are no longer contiguous in it:
        Kafka aborts cleaning on truncation and deletion); the caller deletes the new files.
        """
        if self.offline or truncation_count != self._truncation_count or not old_segments:
            return False
        try:
            i = next(n for n, seg in enumerate(self._segments) if seg is old_segments[0])
        except StopIteration:
            return False
        count = len(old_segments)
        if i + count >= len(self._segments) or any(
            a is not b for a, b in zip(self._segments[i : i + count], old_segments, strict=True)
        ):
            return False  # never the active segment, and the group must be intact
        try:
            new_segment.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
            fsync_dir(self._dir_str)
            self._segments[i : i + count] = [new_segment]
            offsets = self._base_offsets
            self._base_offsets = (*offsets[:i], new_segment.base_offset, *offsets[i + count :])
            self._closed_size = None  # the segment list changed
            for old in old_segments:
                old.close_handlers()
                for path in (old.log.file, old.offset_index.file, old.time_index.file):
                    try:
                        os.replace(path, str(path) + DELETED_FILE_SUFFIX)
                    except FileNotFoundError:
                        pass
            new_segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")
            for old in old_segments:
                for path in (old.log.file, old.offset_index.file, old.time_index.file):
                    try:
                        os.unlink(str(path) + DELETED_FILE_SUFFIX)
                    except FileNotFoundError:
                        pass
            fsync_dir(self._dir_str)
        except OSError as e:
            raise self._fail(e) from e
        return True

    # ================================================================= flushing

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery_point, offset) (default: all) and
        move the recovery point to ``offset``."""
        self._check_online()
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        if target <= self.recovery_point:
            return
        try:
            start = max(0, self._segment_index_for(self.recovery_point))
            for i in range(start, len(self._segments)):
                if self._base_offsets[i] >= target:
                    break
                self._segments[i].flush()
            # The epochs below the new recovery point must be on disk before it moves
            # (recovery re-assigns only those of batches past it).
            self.leader_epoch_cache.flush()
            if self._dir_needs_flush:
                # New segment files must survive a power loss too: their directory entries.
                fsync_dir(self._dir_str)
                self._dir_needs_flush = False
        except OSError as e:
            raise self._fail(e) from e
        self.recovery_point = target
        self.last_flush_ms = self._time_ms()

    def pending_roll_flush(self) -> tuple[int, list[int], int] | None:
        """For the LogManager: (target offset, duplicated fds to fsync, truncation count) when
        rolled segments are waiting for their fsync; None otherwise. The caller fsyncs and closes
        the fds (off the event loop), then calls ``complete_roll_flush``."""
        if not self.roll_flush_pending():
            return None
        target = self._roll_flush_offset
        fds = []
        try:
            start = max(0, self._segment_index_for(self.recovery_point))
            for i in range(start, len(self._segments)):
                if self._base_offsets[i] >= target:
                    break
                segment = self._segments[i]
                # Opened for the fsync only: a rolled segment keeps no descriptor of its own.
                fds.append(os.open(segment.log.file, os.O_RDONLY))
                # The indexes too (Kafka's LogSegment.flush): recovery will not rebuild them
                # below the recovery point, and fsync of the file writes back mapped pages.
                for index in (segment.offset_index, segment.time_index):
                    fds.append(os.open(index.file, os.O_RDONLY))
            if self._dir_needs_flush:
                fds.append(os.open(self._dir_str, os.O_RDONLY))
                self._dir_needs_flush = False
        except OSError as e:
            for fd in fds:
                os.close(fd)
            raise self._fail(e) from e
        return target, fds, self._truncation_count

    def roll_flush_pending(self) -> bool:
        """Whether rolled segments wait for their fsync (``pending_roll_flush`` has work)."""
        return self._roll_flush_offset > self.recovery_point and not self.offline

    def complete_roll_flush(self, target: int, truncation_count: int) -> None:
        if truncation_count != self._truncation_count or self.offline:
            return
        if target > self.recovery_point and target <= self.log_end_offset:
            # As in flush: the epochs below the recovery point are written before it moves.
            try:
                self.leader_epoch_cache.flush()
            except OSError as e:
                self._fail(e)
                return
            self.recovery_point = target
        if self._roll_flush_offset <= target:
            self._roll_flush_offset = -1

    def mark_flushed(self) -> None:
        """Everything up to the log end is on disk (the caller synced the filesystem)."""
        self.recovery_point = self.log_end_offset
        self.last_flush_ms = self._time_ms()

    def time_since_last_flush_ms(self) -> int:
        return self._time_ms() - self.last_flush_ms

    # ================================================================= life cycle

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        if self.on_config is not None:
            self.on_config(self)

    def close(self, *, sync: bool = True) -> None:
        """Write the leader-epoch checkpoint if it changed, trim indexes and release files
        (LogManager flushes first). With ``sync`` False the checkpoint is not fsynced: the
        caller syncs the whole filesystem once for all the logs it closes."""
        if self.offline:
            self._close_quietly()
            return
        try:
            self.leader_epoch_cache.flush_on_close(self.log_end_offset, sync=sync)
            for segment in self._segments:
                segment.close()
        except OSError as e:
            raise self._fail(e) from e

    def release_resources(self) -> None:
        """Close every segment's descriptor and unmap its indexes; the next append or read
        opens what it needs again (an idle log holds nothing open)."""
        for segment in self._segments:
            segment.release_resources()

    @property
    def open_segment_count(self) -> int:
        """Segments holding a descriptor or a map now (tests, metrics)."""
        return sum(1 for segment in self._segments if segment.holds_resources)

    def _close_quietly(self) -> None:
        for segment in self._segments:
            try:
                segment.close_handlers()
            except OSError:
                pass

    def delete(self) -> None:
        """Close and remove the log directory and everything in it."""
        self._close_quietly()
        try:
            shutil.rmtree(self.dir)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise self._fail(e) from e
        self._segments.clear()
        self._base_offsets = ()
        self._closed_size = None  # the segment list changed

    def rename_dir(self, name: str) -> None:
        """Rename the partition directory (to ``<topic>-<partition>.<uuid>-delete`` before a
        delete); segment file paths follow."""
        try:
            self.rename_dir_quietly(name)
        except OSError as e:
            raise self._fail(e) from e

    def rename_dir_quietly(self, name: str) -> None:
        """``rename_dir`` that raises the OSError without telling anyone (for a worker thread:
        the caller reports the failure on the event loop)."""
        new_dir = self.dir.parent / name
        os.replace(self.dir, new_dir)
        self.dir = new_dir
        for segment in self._segments:
            segment.update_parent_dir(new_dir)
        self.leader_epoch_cache.checkpoint_path = os.path.join(
            new_dir, LEADER_EPOCH_CHECKPOINT_FILE
        )

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
            f"end={self.log_end_offset}, hw={self._high_watermark}, segments={len(self._segments)})"
        )


_new_tuple = tuple.__new__


def _next_offset_of_file(path: str, base_offset: int) -> int:
    """The offset after the last complete batch of a segment file (``base_offset`` if none)."""
    next_offset = base_offset
    with open(path, "rb") as f:
        position = 0
        while True:
            prefix = os.pread(f.fileno(), LOG_OVERHEAD, position)
            if len(prefix) < LOG_OVERHEAD:
                return next_offset
            length = int.from_bytes(prefix[LENGTH_OFFSET:], "big", signed=True)
            if length + LOG_OVERHEAD < BATCH_HEADER_SIZE:
                return next_offset
            header = os.pread(f.fileno(), BATCH_HEADER_SIZE, position)
            if len(header) < BATCH_HEADER_SIZE or (
                os.fstat(f.fileno()).st_size < position + length + LOG_OVERHEAD
            ):
                return next_offset
            next_offset = parse_batch_header(header).next_offset
            position += length + LOG_OVERHEAD


__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "FetchDataInfo",
    "FileRecordsSlice",
    "Log",
    "LogAppendInfo",
    "LogOffsetMetadata",
    "StorageError",
    "log_dir_name",
    "parse_topic_partition_name",
]
