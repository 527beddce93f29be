"""Log compaction for ``cleanup.policy=compact`` (Kafka's LogCleaner, LogCleanerManager and
SkimpyOffsetMap).

A compacted log is split at the *first dirty offset* (the cleaner's checkpoint, else the log
start offset): below it the log has been cleaned, from it on records are as appended. One
cleaning of a log:

1. ``LogToClean``: the cleanable range is ``[first dirty, first uncleanable)`` with the first
   uncleanable offset ``min(active segment base, high watermark)``, lowered to the base of the
   first segment younger than ``min.compaction.lag.ms``. The active segment is never cleaned,
   nothing at or past the high watermark is ever removed. The log qualifies when its dirty ratio
   (cleanable bytes / (clean + cleanable bytes)) exceeds ``min.cleanable.dirty.ratio``, or a
   dirty segment's first batch is older than ``max.compaction.lag.ms``; of those the one with
   the highest dirty ratio is cleaned first.
2. ``OffsetMap``: the dirty range is scanned and every keyed record's offset recorded under the
   MD5 digest of its key (latest offset wins). The map holds at most
   ``log.cleaner.dedupe.buffer.size * io.buffer.load.factor / 24`` keys (Kafka's 16-byte digest
   plus 8-byte offset per slot, so a pass covers as many keys as Kafka's would; the Python dict
   costs several times that in memory). When it fills, the pass ends after the last batch that
   fit and cleaning covers only up to there; the rest stays dirty for the next pass.
3. Segments from the log's start up to the map's end are grouped (``group_segments_by_size``:
   at most ``segment.bytes`` of log and ``segment.index.bytes`` of each index per group) and each
   group recopied into one ``<base>.log.cleaned`` (+ indexes) keeping a record when it is past
   the map's last offset, or its offset is >= the map's offset for its key; keyless records are
   dropped (a compacted topic refuses them at produce). Tombstones (null values) follow
   KIP-534 (Kafka 3.1+, v2 batches): the first cleaning that keeps a tombstone stamps its
   batch with a delete horizon (now + ``delete.retention.ms``, written as the batch's base
   timestamp with attribute bit 6, record timestamp deltas rebased so every record keeps its
   timestamp); a later cleaning drops the tombstone once the horizon has passed. So a
   tombstone stays readable for at least ``delete.retention.ms`` after it was first cleaned,
   whatever the segments' modification times. Offsets never
   change: a batch losing records is rebuilt with its base offset, offset deltas,
   lastOffsetDelta (so the producer's last sequence survives), codec, timestamp type,
   timestamps, leader epoch and producer id/epoch/sequence; an untouched batch is copied byte
   for byte; a batch losing every record is dropped unless it is the last batch of its producer
   id in the log, which is kept empty (header only) so producer state survives. Control batches
   are kept.
4. The cleaned segment is fsynced, gets the last source segment's mtime and is swapped in by
   ``Log.replace_segments`` (``.cleaned`` -> ``.swap`` -> old files ``.deleted`` and removed ->
   final names); ``Log._load`` completes or discards a swap a crash interrupted.
5. The first dirty offset becomes the map's end offset and is written to
   ``cleaner-offset-checkpoint`` in the log's directory (``checkpoint.py`` format).

Concurrency: the scans and recopies run in a worker thread (``asyncio.to_thread``) over
``FileRecordsSlice`` descriptors taken on the event loop, read with ``pread`` (never mapped, so a
concurrent truncation cannot SIGBUS it); the Log itself is only touched on the event loop. If the
log is truncated, deleted or loses the group's segments to retention while a group is being
recopied, the swap is skipped (Kafka's abortAndPauseCleaning) and the cleaned files deleted.
Appends only go to the active segment, which is never part of a group. Cancelling the cleaner
(shutdown) or deleting the log sets the cleaning's stop event: the worker thread gives up at its
next batch instead of finishing a long recopy nobody will swap in. A log whose records cannot be
decoded is marked uncleanable and skipped from then on (Kafka's uncleanable partitions). Every
byte read or written by a worker thread is counted by one ``Throttler`` shared by the cleaner
threads (``log.cleaner.io.max.bytes.per.second``); its delays are waited out on the stop event.

Transactions (Kafka's CleanedTransactionMetadata): a first scan collects the transaction
markers below the first uncleanable offset; a transactional batch's fate is its producer's
next marker after it: ABORT (the batch is removed and its keys never mapped), COMMIT (mapped
and filtered like any batch) or none yet (an open transaction: copied as is, never mapped).
A marker is kept while the pass saw records of its transaction (a kept ABORT marker's entry
is written to the cleaned segment's ``.txnindex``); once none are left it gets a delete horizon
(now + ``delete.retention.ms``, KIP-534) and a later cleaning past the horizon removes it
(an empty header is kept if it is its producer's last batch, so producer state survives).

Not done (Kafka does more): producers' last batches are kept whether or not the producer
expired.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import structlog

from kafkalite.protocol.errors import CorruptRecordError
from kafkalite.protocol.records import (
    BATCH_HEADER_SIZE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    ControlRecordType,
    RecordBatchHeader,
    build_batch,
    decode_batch,
    parse_batch_header,
    parse_control_record_type,
)
from kafkalite.storage.checkpoint import OffsetCheckpointFile
from kafkalite.storage.config import LONG_MAX
from kafkalite.storage.errors import StorageError
from kafkalite.storage.file_records import FileRecordsSlice
from kafkalite.storage.log import Log
from kafkalite.storage.segment import (
    CLEANED_FILE_SUFFIX,
    LogSegment,
    log_file,
    offset_index_file,
    time_index_file,
    txn_index_file_for,
)
from kafkalite.storage.throttler import Throttler
from kafkalite.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from kafkalite.config import BrokerConfig

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"

logger = structlog.get_logger("kafkalite.storage.cleaner")

# Kafka's SkimpyOffsetMap slot: a 16-byte MD5 digest and an 8-byte offset.
BYTES_PER_ENTRY = 16 + 8
INT32_MAX = 2**31 - 1
_READ_CHUNK = 1 << 20

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Broker-level cleaner settings (Kafka's ``log.cleaner.*``, Kafka's defaults)."""

    enable: bool = True
    num_threads: int = 1
    backoff_ms: int = 15_000
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024  # accepted; reads are chunked by _READ_CHUNK
    io_max_bytes_per_second: float = float("inf")  # reads and writes of all cleaner threads

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> CleanerConfig:
        """From the broker's typed settings (``log.cleaner.enable``, ``log.cleaner.threads``,
        ``log.cleaner.backoff.ms``, ``log.cleaner.dedupe.buffer.size``,
        ``log.cleaner.io.buffer.load.factor``, ``log.cleaner.io.buffer.size``,
        ``log.cleaner.io.max.bytes.per.second``), validated there: a load factor or an I/O
        rate of 0 is refused at start-up (Kafka accepts a rate of 0 and its cleaner then
        sleeps for ever)."""
        return cls(
            enable=config.log_cleaner_enable,
            num_threads=config.log_cleaner_threads,
            backoff_ms=config.log_cleaner_backoff_ms,
            dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
            io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
            io_buffer_size=config.log_cleaner_io_buffer_size,
            io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
        )

    def max_map_entries(self) -> int:
        """Keys one cleaning pass may map (the buffer is shared by the cleaner threads)."""
        slots = self.dedupe_buffer_size // max(1, self.num_threads) // BYTES_PER_ENTRY
        return max(1, int(slots * self.io_buffer_load_factor))


# ===================================================================== offset map


class OffsetMap:
    """key digest -> latest offset seen (Kafka's SkimpyOffsetMap, on a dict)."""

    __slots__ = ("_map", "capacity", "latest_offset")

    def __init__(self, capacity: int) -> None:
        self._map: dict[bytes, int] = {}
        self.capacity = capacity
        self.latest_offset = -1

    @staticmethod
    def digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> None:
        self._map[hashlib.md5(key, usedforsecurity=False).digest()] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset recorded for ``key``, -1 if none."""
        return self._map.get(hashlib.md5(key, usedforsecurity=False).digest(), -1)

    def __len__(self) -> int:
        return len(self._map)

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1


# ===================================================================== choosing a log


class LogToClean(NamedTuple):
    """A compacted log and its cleanable range (Kafka's LogToClean)."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else 0.0


def cleanable_offsets(log: Log, checkpoint: int | None, now_ms: int) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset) of ``log`` (Kafka's
    LogCleanerManager.cleanableOffsets)."""
    log_start = log.log_start_offset
    if checkpoint is None or checkpoint < log_start or checkpoint > log.log_end_offset:
        first_dirty = log_start  # no checkpoint, or one the log moved away from
    else:
        first_dirty = checkpoint
    segments = log.segments
    active_base = segments[-1].base_offset
    first_uncleanable = min(log.high_watermark, active_base)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for i, segment in enumerate(segments[:-1]):
            if segments[i + 1].base_offset <= first_dirty:
                continue
            if segment.base_offset >= first_uncleanable:
                break
            if segment.largest_timestamp > now_ms - lag:
                first_uncleanable = min(first_uncleanable, segment.base_offset)
                break
    return first_dirty, max(first_dirty, first_uncleanable)


def _segments_overlapping(segments: list[LogSegment], start: int, end: int) -> list[LogSegment]:
    """Segments holding offsets in [start, end) (Kafka's logSegments(from, to))."""
    if end <= start:
        return []
    result = []
    for i, segment in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else LONG_MAX
        if next_base > start and segment.base_offset < end:
            result.append(segment)
    return result


def log_to_clean(log: Log, checkpoint: int | None, now_ms: int) -> LogToClean:
    first_dirty, first_uncleanable = cleanable_offsets(log, checkpoint, now_ms)
    segments = log.segments
    clean_bytes = sum(s.size for s in segments if s.base_offset < first_dirty)
    dirty = _segments_overlapping(segments, first_dirty, first_uncleanable)
    cleanable_bytes = sum(s.size for s in dirty)
    delay = 0
    max_lag = log.config.max_compaction_lag_ms
    if max_lag < LONG_MAX and first_uncleanable > first_dirty:
        firsts = [
            ts
            for s in _segments_overlapping(segments[:-1], first_dirty, LONG_MAX)
            if (ts := s.rolling_based_timestamp()) is not None and ts > 0
        ]
        if firsts:
            clean_until = now_ms - max_lag
            if min(firsts) < clean_until:
                delay = clean_until - min(firsts)
    return LogToClean(log, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, delay)


def filthiest_log(candidates: list[LogToClean]) -> LogToClean | None:
    """The log to clean next (Kafka's grabFilthiestCompactedLog): among those whose dirty ratio
    exceeds their ``min.cleanable.dirty.ratio`` (strictly, as in Kafka) or that have cleanable
    bytes past ``max.compaction.lag.ms``, the one with the highest dirty ratio."""
    cleanable = [
        c
        for c in candidates
        if c.first_uncleanable_offset > c.first_dirty_offset
        and c.cleanable_bytes > 0
        and (
            c.max_compaction_delay_ms > 0
            or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
        )
    ]
    if not cleanable:
        return None
    return max(cleanable, key=lambda c: c.cleanable_ratio)


def group_segments_by_size(
    segments: list[LogSegment], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[LogSegment]]:
    """Consecutive segments grouped so that each group's log, offset index and time index fit
    one segment (Kafka's groupSegmentsBySize) and its offsets fit int32 relative offsets."""
    groups: list[list[LogSegment]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        log_size = group[0].size
        index_size = group[0].offset_index.size_in_bytes
        time_index_size = group[0].time_index.size_in_bytes
        while rest:
            nxt = rest[0]
            last_offset = (rest[1].base_offset - 1) if len(rest) > 1 else first_uncleanable - 1
            if (
                log_size + nxt.size <= max_size
                and index_size + nxt.offset_index.size_in_bytes <= max_index_size
                and time_index_size + nxt.time_index.size_in_bytes <= max_index_size
                # An empty segment needs no offset range check (Kafka: no empty segment is
                # left behind every 2^31 offsets).
                and (nxt.size == 0 or last_offset - group[0].base_offset <= INT32_MAX)
            ):
                group.append(rest.pop(0))
                log_size += nxt.size
                index_size += nxt.offset_index.size_in_bytes
                time_index_size += nxt.time_index.size_in_bytes
            else:
                break
        groups.append(group)
    return groups


# ===================================================================== reading and recopying


class CleaningStopped(Exception):
    """The cleaner is shutting down: work in a worker thread stops at the next batch."""


class CleanerIo:
    """What a worker thread checks as it reads and writes: the cleaning's stop event and the
    throttler shared by the cleaner threads (``log.cleaner.io.max.bytes.per.second``)."""

    __slots__ = ("stop", "throttler")

    def __init__(self, stop: threading.Event, throttler: Throttler | None = None) -> None:
        self.stop = stop
        self.throttler = throttler

    def check_stopped(self) -> None:
        if self.stop.is_set():
            raise CleaningStopped

    def throttle(self, nbytes: int) -> None:
        """Count ``nbytes`` of I/O; wait as long as the throttler says (a stop ends the wait
        and raises CleaningStopped)."""
        if self.throttler is None:
            return
        delay = self.throttler.maybe_throttle(nbytes)
        if delay > 0 and self.stop.wait(delay):
            raise CleaningStopped


class SegmentSnapshot(NamedTuple):
    """A segment's bytes as they were when taken on the event loop (a slice holds the file
    descriptor), its last-modified time, and the stop event and throttle its reads obey."""

    base_offset: int
    records: FileRecordsSlice
    last_modified_ms: int
    io: CleanerIo | None = None


def snapshot(segment: LogSegment, io: CleanerIo | None = None) -> SegmentSnapshot:
    return SegmentSnapshot(
        segment.base_offset, segment.log.slice(0, segment.size), segment.last_modified_ms, io
    )


def _raw_batches(segment: SegmentSnapshot) -> Iterator[tuple[RecordBatchHeader, bytes]]:
    """(header, bytes) of each complete batch of the segment, read with ``pread``; stops at a
    short read (the file was truncated meanwhile: the caller's swap will be refused). Raises
    CleaningStopped once the snapshot's stop event is set; each read is counted by its throttle."""
    records, io = segment.records, segment.io
    fd, position, end = records.fd, records.position, records.position + records.size
    if fd < 0:
        return
    buffer = b""
    buffer_start = position
    while position < end:
        if io is not None:
            io.check_stopped()
        offset = position - buffer_start
        if len(buffer) - offset < BATCH_HEADER_SIZE:
            buffer = os.pread(fd, min(_READ_CHUNK, end - position), position)
            buffer_start, offset = position, 0
            if io is not None:
                io.throttle(len(buffer))
            if len(buffer) < BATCH_HEADER_SIZE:
                return
        header = parse_batch_header(buffer, offset)
        size = header.size
        if offset + size > len(buffer):
            buffer = os.pread(fd, min(max(_READ_CHUNK, size), end - position), position)
            buffer_start, offset = position, 0
            if io is not None:
                io.throttle(len(buffer))
            if len(buffer) < size:
                return
        yield header, buffer[offset : offset + size]
        position += size


class TxnFates:
    """Where each transactional batch ends: its producer's next marker below the first
    uncleanable offset (``collect_txn_markers``). Also what one cleaning pass saw of each
    transaction (``observed``: (producer id, marker offset)) and the ABORT markers it kept."""

    def __init__(self, markers: dict[int, list[tuple[int, bool]]]) -> None:
        self.markers = markers  # producer id -> [(marker offset, commit)] in offset order
        self.observed: set[tuple[int, int]] = set()

    def fate(self, producer_id: int, offset: int) -> tuple[int, bool] | None:
        """(marker offset, commit) of the transaction holding ``offset``; None while open."""
        marks = self.markers.get(producer_id)
        if not marks:
            return None
        i = bisect.bisect_right(marks, (offset, True))
        return marks[i] if i < len(marks) else None


def add_txn_marker(
    markers: dict[int, list[tuple[int, bool]]], header: RecordBatchHeader, raw: bytes
) -> None:
    """Record a COMMIT/ABORT marker batch: producer id -> [(offset, commit)]."""
    if header.record_count == 0:
        return
    _, records = decode_batch(raw)
    try:
        kind = parse_control_record_type(records[0])
    except CorruptRecordError:
        return
    if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        markers.setdefault(header.producer_id, []).append(
            (header.base_offset, kind is ControlRecordType.COMMIT)
        )


def producer_scan(
    segments: list[SegmentSnapshot], upper: int
) -> tuple[dict[int, int], dict[int, list[tuple[int, bool]]]]:
    """One header scan of the whole log: each producer's last offset
    (``producer_last_offsets``) and the transaction markers below ``upper``."""
    last: dict[int, int] = {}
    markers: dict[int, list[tuple[int, bool]]] = {}
    for segment in segments:
        for header, raw in _raw_batches(segment):
            if header.producer_id >= 0:
                last[header.producer_id] = header.last_offset
            if header.is_control and header.base_offset < upper:
                add_txn_marker(markers, header, raw)
    return last, markers


def build_offset_map(
    dirty: list[SegmentSnapshot],
    start: int,
    end: int,
    offset_map: OffsetMap,
    fates: TxnFates | None = None,
) -> int:
    """Map every keyed record in [start, end) of ``dirty`` (Kafka's buildOffsetMap). Returns
    the offset the map covers up to (exclusive): ``end``, or less when the map filled."""
    covered = start
    full = False
    for segment in dirty:
        for header, raw in _raw_batches(segment):
            if header.last_offset < start:
                continue
            if header.base_offset >= end:
                break
            # Only committed transactional batches are mapped: an aborted or still open
            # transaction's value must never supersede a committed one.
            mapped = not header.is_control and (
                not header.is_transactional
                or (
                    fates is not None
                    and (fate := fates.fate(header.producer_id, header.last_offset)) is not None
                    and fate[1]
                )
            )
            if mapped:
                if len(offset_map) + header.record_count > offset_map.capacity and len(offset_map):
                    full = True  # clean up to the batches mapped so far
                    break
                _, records = decode_batch(raw)
                base = header.base_offset
                for record in records:
                    offset = base + record.offset_delta
                    if record.key is not None and start <= offset < end:
                        offset_map.put(record.key, offset)
            covered = min(header.next_offset, end)
        if full:
            break
    if not full:
        covered = end
    # Kafka's updateLatestOffset: records past it are kept as they are.
    offset_map.latest_offset = covered - 1
    return covered


def producer_last_offsets(segments: list[SegmentSnapshot]) -> dict[int, int]:
    """producer id -> last offset of its last batch in the log (header scan)."""
    last: dict[int, int] = {}
    for segment in segments:
        for header, _ in _raw_batches(segment):
            if header.producer_id >= 0:
                last[header.producer_id] = header.last_offset
    return last


def filter_control_batch(
    header: RecordBatchHeader,
    raw: bytes,
    now_ms: int,
    delete_retention_ms: int,
    producer_last: dict[int, int],
    fates: TxnFates,
) -> bytes | None:
    """A transaction marker: kept while this pass saw records of its transaction; then
    stamped with a delete horizon; removed by a cleaning past the horizon."""
    key = (header.producer_id, header.base_offset)
    if key in fates.observed or header.record_count == 0:
        return raw
    horizon = header.delete_horizon_ms
    if horizon != NO_TIMESTAMP:
        if now_ms < horizon:
            return raw
        if producer_last.get(header.producer_id) == header.last_offset:
            return build_batch(
                [],
                base_offset=header.base_offset,
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence,
                is_transactional=True,
                is_control=True,
                partition_leader_epoch=header.partition_leader_epoch,
                last_offset_delta=header.last_offset_delta,
                base_timestamp=header.max_timestamp,
                max_timestamp=header.max_timestamp,
            )
        return None
    _, records = decode_batch(raw)
    horizon = now_ms + delete_retention_ms
    shift = header.base_timestamp - horizon
    return build_batch(
        [r._replace(timestamp_delta=r.timestamp_delta + shift) for r in records],
        base_offset=header.base_offset,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=header.partition_leader_epoch,
        timestamp_type=header.timestamp_type,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp,
        delete_horizon_ms=horizon,
        keep_offset_deltas=True,
    )


def filter_batch(
    header: RecordBatchHeader,
    raw: bytes,
    offset_map: OffsetMap,
    now_ms: int,
    delete_retention_ms: int,
    producer_last: dict[int, int],
    fates: TxnFates | None = None,
) -> bytes | None:
    """The batch as it stays in the cleaned log: ``raw`` itself when nothing changes, a
    rebuilt batch when some records go or its retained tombstones get their delete horizon, an
    empty batch when all go but it is its producer's last, None when it goes whole (Kafka's
    cleanInto / MemoryRecords.filterTo and Cleaner.shouldRetainRecord for v2 batches).
    Transactional batches and markers follow ``fates`` (see the module docstring); without it
    they are kept as they are."""
    if header.is_control:
        if fates is None:
            return raw
        return filter_control_batch(header, raw, now_ms, delete_retention_ms, producer_last, fates)
    if header.is_transactional:
        fate = None if fates is None else fates.fate(header.producer_id, header.last_offset)
        if fate is None:
            return raw  # an open transaction (or no marker information): as it is
        fates.observed.add((header.producer_id, fate[0]))  # type: ignore[union-attr]
        if not fate[1]:
            return None  # aborted: its records go
    _, records = decode_batch(raw)
    latest = offset_map.latest_offset
    base = header.base_offset
    horizon = header.delete_horizon_ms
    retain_deletes = horizon == NO_TIMESTAMP or now_ms < horizon
    retained = []
    for record in records:
        offset = base + record.offset_delta
        if offset > latest:
            retained.append(record)
        elif record.key is None:
            continue
        elif offset >= offset_map.get(record.key) and (record.value is not None or retain_deletes):
            retained.append(record)
    stamp_horizon = horizon == NO_TIMESTAMP and any(r.value is None for r in retained)
    if len(retained) == len(records) and not stamp_horizon:
        return raw
    if stamp_horizon:
        # KIP-534: the horizon takes the base timestamp's place; deltas are rebased onto it.
        horizon = now_ms + delete_retention_ms
        shift = header.base_timestamp - horizon
        retained = [r._replace(timestamp_delta=r.timestamp_delta + shift) for r in retained]
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    common: dict[str, Any] = dict(
        base_offset=base,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        partition_leader_epoch=header.partition_leader_epoch,
        timestamp_type=header.timestamp_type,
        last_offset_delta=header.last_offset_delta,
    )
    if retained:
        return build_batch(
            retained,
            compression=header.compression,
            base_timestamp=header.base_timestamp,
            delete_horizon_ms=None if horizon == NO_TIMESTAMP else horizon,
            keep_offset_deltas=True,
            max_timestamp=header.max_timestamp if log_append_time else None,
            **common,
        )
    if header.producer_id >= 0 and producer_last.get(header.producer_id) == header.last_offset:
        # Kafka's writeEmptyHeader: no records, no codec, both timestamps the batch's max.
        return build_batch(
            [], base_timestamp=header.max_timestamp, max_timestamp=header.max_timestamp, **common
        )
    return None


def clean_into_segment(
    dir: Path,
    group: list[SegmentSnapshot],
    offset_map: OffsetMap,
    now_ms: int,
    delete_retention_ms: int,
    producer_last: dict[int, int],
    index_interval_bytes: int,
    max_index_size: int,
    io: CleanerIo | None = None,
    fates: TxnFates | None = None,
    aborted: dict[tuple[int, int], AbortedTxn] | None = None,
) -> LogSegment:
    """Recopy ``group`` into a new fsynced ``<base>.log.cleaned`` segment (Kafka's
    cleanSegments without the swap); it keeps the last source segment's mtime. Writes are
    counted by ``io``'s throttle, as Kafka's cleaner counts its read and written bytes."""
    base = group[0].base_offset
    for path in (
        log_file(dir, base, CLEANED_FILE_SUFFIX),
        offset_index_file(dir, base, CLEANED_FILE_SUFFIX),
        time_index_file(dir, base, CLEANED_FILE_SUFFIX),
        txn_index_file_for(log_file(dir, base, CLEANED_FILE_SUFFIX)),
    ):
        path.unlink(missing_ok=True)
    cleaned = LogSegment.open(
        dir,
        base,
        index_interval_bytes=index_interval_bytes,
        max_index_size=max_index_size,
        file_suffix=CLEANED_FILE_SUFFIX,
    )
    try:
        for source in group:
            out = bytearray()
            summaries: list[tuple[int, int, int]] = []
            for header, raw in _raw_batches(source):
                kept = filter_batch(
                    header, raw, offset_map, now_ms, delete_retention_ms, producer_last, fates
                )
                if kept is None:
                    continue
                if header.is_control and aborted:
                    entry = aborted.get((header.producer_id, header.base_offset))
                    if entry is not None and kept is raw:
                        # a kept ABORT marker whose records this pass removed: still indexed
                        cleaned.txn_index.append(entry)
                kept_header = header if kept is raw else parse_batch_header(kept)
                summaries.append((kept_header.last_offset, len(kept), kept_header.max_timestamp))
                out += kept
                if len(out) >= _READ_CHUNK:
                    cleaned.append(out, summaries)
                    if io is not None:
                        io.throttle(len(out))
                    out, summaries = bytearray(), []
            cleaned.append(out, summaries)
            if io is not None:
                io.throttle(len(out))
        cleaned.on_become_inactive_segment()
        cleaned.flush()
        cleaned.set_last_modified(group[-1].last_modified_ms)
    except BaseException:
        cleaned.delete()
        raise
    return cleaned


# ===================================================================== one cleaning


class CleanResult(NamedTuple):
    end_offset: int  # the new first dirty offset
    groups_swapped: int
    aborted: bool
    bytes_before: int
    bytes_after: int


Offload = Callable[..., Awaitable[Any]]


async def _inline(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


class Cleaner:
    """Cleans one log at a time (Kafka's Cleaner). ``offload`` runs the CPU and file work:
    ``asyncio.to_thread`` in the broker; ``clean_now`` runs everything inline (tests)."""

    def __init__(
        self,
        max_map_entries: int,
        time_ms: Callable[[], int],
        throttler: Throttler | None = None,
    ) -> None:
        self.offset_map = OffsetMap(max_map_entries)
        # Set to make a worker thread give up (shutdown must not wait for a whole cleaning).
        self.stop = threading.Event()
        self.io = CleanerIo(self.stop, throttler)
        self._time_ms = time_ms

    def clean_now(self, to_clean: LogToClean) -> CleanResult:
        coro = self.clean(to_clean, _inline)
        try:
            coro.send(None)
        except StopIteration as done:
            return done.value
        coro.close()
        raise RuntimeError("inline cleaning suspended")

    async def clean(
        self, to_clean: LogToClean, offload: Offload = asyncio.to_thread
    ) -> CleanResult:
        log = to_clean.log
        start, upper = to_clean.first_dirty_offset, to_clean.first_uncleanable_offset
        truncations = log.truncation_count
        segments = log.segments
        bytes_before = sum(s.size for s in segments[:-1])
        io = self.io
        dirty = [snapshot(s, io) for s in _segments_overlapping(segments, start, upper)]
        whole_log = [snapshot(s, io) for s in segments]
        offset_map = self.offset_map
        offset_map.clear()
        # No clearing of the map on the way out: after a cancellation the worker thread may
        # still read it until it sees the stop event (its result is thrown away).
        producer_last, markers = await offload(producer_scan, whole_log, upper)
        fates = TxnFates(markers)
        aborted = {
            (t.producer_id, t.last_offset): t
            for t in log.collect_aborted_txns(log.log_start_offset, upper)
        }
        end = await offload(build_offset_map, dirty, start, upper, offset_map, fates)
        del dirty, whole_log
        if log.truncation_count != truncations or log.offline:
            return CleanResult(start, 0, True, bytes_before, bytes_before)
        now_ms = self._time_ms()
        config = log.config
        groups = group_segments_by_size(
            [s for s in log.segments[:-1] if s.base_offset < end],
            config.segment_bytes,
            config.segment_index_bytes,
            upper,
        )
        swapped = 0
        for group in groups:
            if log.truncation_count != truncations or log.offline:
                return CleanResult(start, swapped, True, bytes_before, log.size_bytes)
            cleaned = await offload(
                clean_into_segment,
                log.dir,
                [snapshot(s, io) for s in group],
                offset_map,
                now_ms,
                config.delete_retention_ms,
                producer_last,
                config.index_interval_bytes,
                config.segment_index_bytes,
                io,
                fates,
                aborted,
            )
            if not log.replace_segments(cleaned, group, truncations):
                cleaned.delete()
                return CleanResult(start, swapped, True, bytes_before, log.size_bytes)
            swapped += 1
        bytes_after = sum(s.size for s in log.segments[:-1])
        return CleanResult(end, swapped, False, bytes_before, bytes_after)


# ===================================================================== scheduling


class LogCleaner:
    """Chooses logs to compact, cleans them, keeps ``cleaner-offset-checkpoint`` per log
    directory (Kafka's LogCleaner + LogCleanerManager).

    ``logs`` returns the online logs; ``run()`` is the background loop (one coroutine per
    ``log.cleaner.threads``, each offloading its work to a worker thread), backing off
    ``log.cleaner.backoff.ms`` when nothing needed cleaning. A log is cleaned by one worker at
    a time; ``remove_log`` (deletion) stops a running cleaning and forgets the log's
    checkpoint.
    """

    def __init__(
        self,
        config: CleanerConfig,
        logs: Callable[[], list[Log]],
        time_ms: Callable[[], int],
        on_log_dir_failure: Callable[[str, OSError], None] | None = None,
    ) -> None:
        self.config = config
        self._logs = logs
        self._time_ms = time_ms
        self._on_log_dir_failure = on_log_dir_failure
        self.checkpoints: dict[str, dict[TopicPartitionKey, int]] = {}
        self.in_progress: dict[TopicPartitionKey, Cleaner] = {}
        self.uncleanable: set[TopicPartitionKey] = set()
        self.cleanings = 0  # completed cleanings (tests, metrics)
        # One budget for every cleaner thread, as in Kafka (checked every 300 ms of work).
        self.throttler = Throttler(config.io_max_bytes_per_second, check_interval_ms=300)

    # ---------------------------------------------------------------- checkpoints

    def load_checkpoints(self, dirs: list[str]) -> None:
        for dir in dirs:
            try:
                self.checkpoints[dir] = OffsetCheckpointFile(
                    Path(dir) / CLEANER_CHECKPOINT_FILE
                ).read()
            except StorageError:
                self.checkpoints[dir] = {}  # damaged: everything is dirty again
            except OSError:
                self.checkpoints[dir] = {}

    def checkpoint_for(self, log: Log) -> int | None:
        return self.checkpoints.get(str(log.dir.parent), {}).get(log.topic_partition)

    def _write_checkpoint(self, dir: str) -> None:
        live = {log.topic_partition for log in self._logs() if str(log.dir.parent) == dir}
        entries = {tp: o for tp, o in self.checkpoints.get(dir, {}).items() if tp in live}
        self.checkpoints[dir] = entries
        try:
            OffsetCheckpointFile(Path(dir) / CLEANER_CHECKPOINT_FILE).write(entries)
        except OSError as e:
            if self._on_log_dir_failure is not None:
                self._on_log_dir_failure(dir, e)

    def update_checkpoint(self, log: Log, offset: int) -> None:
        dir = str(log.dir.parent)
        self.checkpoints.setdefault(dir, {})[log.topic_partition] = offset
        self._write_checkpoint(dir)

    def maybe_truncate_checkpoint(self, log: Log, offset: int) -> None:
        """The log was truncated to ``offset``: nothing past it is clean any more."""
        dir = str(log.dir.parent)
        current = self.checkpoints.get(dir, {}).get(log.topic_partition)
        if current is not None and current > offset:
            self.checkpoints[dir][log.topic_partition] = offset
            self._write_checkpoint(dir)

    def remove_log(self, dir: str, tp: TopicPartitionKey) -> None:
        """The log was deleted: forget its checkpoint; a running cleaning stops (its swap
        would fail anyway)."""
        running = self.in_progress.get(tp)
        if running is not None:
            running.stop.set()
        self.uncleanable.discard(tp)
        if self.checkpoints.get(dir, {}).pop(tp, None) is not None:
            self._write_checkpoint(dir)

    # ---------------------------------------------------------------- choosing and cleaning

    def grab_filthiest_compacted_log(self) -> LogToClean | None:
        now = self._time_ms()
        candidates = []
        for log in self._logs():
            tp = log.topic_partition
            if (
                not log.config.compact
                or log.offline
                or tp in self.in_progress
                or tp in self.uncleanable
            ):
                continue
            try:
                candidates.append(log_to_clean(log, self.checkpoint_for(log), now))
            except (OSError, StorageError):
                continue
        return filthiest_log(candidates)

    async def clean_filthiest_log(self, offload: Offload = asyncio.to_thread) -> bool:
        """Clean the dirtiest log if one qualifies; True if one was cleaned."""
        to_clean = self.grab_filthiest_compacted_log()
        if to_clean is None:
            return False
        log = to_clean.log
        tp = log.topic_partition
        cleaner = Cleaner(self.config.max_map_entries(), self._time_ms, self.throttler)
        self.in_progress[tp] = cleaner
        truncations = log.truncation_count
        try:
            result = await cleaner.clean(to_clean, offload)
        except asyncio.CancelledError:
            cleaner.stop.set()  # the worker thread gives up at its next batch
            raise
        except StorageError:
            return False
        except OSError as e:
            # A log deleted (its directory renamed away) while being cleaned is no disk failure.
            deleted = cleaner.stop.is_set() or log not in self._logs()
            if not deleted and self._on_log_dir_failure is not None:
                self._on_log_dir_failure(str(log.dir.parent), e)
            return False
        except CleaningStopped:
            return False  # the log was deleted meanwhile
        except CorruptRecordError:
            if log.truncation_count == truncations:  # not damage a truncation caused mid-read
                # Kafka marks such a partition uncleanable and goes on with the others.
                self.uncleanable.add(tp)
            return False
        except Exception as e:
            # Kafka's cleaner thread: any other failure makes this partition uncleanable (and
            # is logged); the cleaner goes on with the others instead of ending.
            self.uncleanable.add(tp)
            logger.error(
                "log cleaning failed; partition marked uncleanable",
                partition=f"{tp[0]}-{tp[1]}",
                error=repr(e),
            )
            return False
        finally:
            del self.in_progress[tp]
        if result.aborted:
            return False
        self.cleanings += 1
        if log in self._logs():
            self.update_checkpoint(log, result.end_offset)
        return True

    async def run(self) -> None:
        """The cleaner threads (run until cancelled)."""
        workers = [
            asyncio.create_task(self._work(), name=f"log-cleaner-{i}")
            for i in range(self.config.num_threads)
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()

    async def _work(self) -> None:
        while True:
            if not await self.clean_filthiest_log():
                await asyncio.sleep(self.config.backoff_ms / 1000)
