"""Checks of stored segments against corruption (bit rot, a stray write, a damaged index).

What is checked, for a segment ``<base>.log`` with its ``.index`` and ``.timeindex``:

* every batch of the ``.log``: a sane length that stays inside the file, magic 2, and the
  CRC32C of everything from the attributes to the end of the batch (the batch's own checksum);
  offsets increasing from batch to batch;
* every ``.index`` entry ``(relative offset, position)``: the position is the start of a batch
  and the offset is that batch's last offset (what ``LogSegment.append`` writes), entries
  increasing; the file a whole number of 8-byte entries (one cut mid-entry is a finding);
* every ``.timeindex`` entry ``(timestamp, relative offset)``: the offset is the last offset of a
  batch whose max timestamp is that timestamp, entries increasing; the file a whole number of
  12-byte entries.

Three users:

* ``check_batches`` for the fetch path (``LogSegment.read``): a fetch never returns a batch
  that fails its CRC. The segment remembers what is verified (see ``VerifiedRanges``), so each
  batch is checked the first time it is read, not on every fetch. Bytes appended by this
  process were checked in memory before they were written and count as verified while their
  segment is active; once it is closed only checks made after the close count (see
  ``segment.py``).
* ``SegmentVerifier``, a throttled background pass over the closed segments of every online
  log (reading in a worker thread with ``pread``, never through a map). Findings are logged,
  counted (``VerifierStats``, exported in /metrics) and a wrong index is rebuilt from its log.
  The batches it found good count as verified for the fetch path (checked after the close, off
  the event loop), so a segment it reached first costs its readers no check.
* ``verify_path`` for ``kafkalite storage verify <dir>`` (Kafka's ``kafka-dump-log
  --deep-iteration``): one line per finding, an exit status that says whether any was found.

Findings of the fetch path are counted in ``FETCH_STATS`` (one per process: the fetch path has
no handle on its broker; several brokers in one process, as in tests, share it).
"""

from __future__ import annotations

import asyncio
import os
import struct
import sys
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, cast

import structlog
from crc32c import crc32c

from kafkalite.protocol.records import (
    ATTRIBUTES_OFFSET,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
)
from kafkalite.storage.throttler import Throttler

if TYPE_CHECKING:
    from kafkalite.storage.log import Log
    from kafkalite.storage.segment import LogSegment

logger = structlog.get_logger("kafkalite.storage.verifier")

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta
_PREFIX = struct.Struct(">qiibIhi")
_LENGTH = struct.Struct(">i")
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_AT = 35
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")

READ_CHUNK = 4 << 20
DEFAULT_BYTES_PER_SECOND = 8 << 20
DEFAULT_PASS_INTERVAL_S = 300.0

BATCH_KINDS = ("corrupt-batch", "torn-batch", "offsets-out-of-order")
INDEX_KINDS = ("bad-index-entry", "bad-time-index-entry")


class Finding(NamedTuple):
    """One problem: ``kind`` (one of BATCH_KINDS or INDEX_KINDS), the file, the byte position
    in that file, the offset concerned (-1 if unknown) and what is wrong."""

    kind: str
    file: str
    position: int
    offset: int
    detail: str

    @property
    def is_index(self) -> bool:
        return self.kind in INDEX_KINDS

    def line(self) -> str:
        at = f" offset {self.offset}" if self.offset >= 0 else ""
        return f"{self.file}: {self.kind} at position {self.position}{at}: {self.detail}"


# ---------------------------------------------------------------------------------- batches


def batch_problem(buf, pos: int, end: int, limit: int) -> tuple[int, str | None]:
    """Check the batch at ``pos`` of ``buf`` (a map or buffer addressed like the file).

    ``end``: the bytes available to check; ``limit``: the file's size. Returns
    ``(batch end, None)`` for a good batch, ``(pos, None)`` when the batch is whole in the file
    but not within ``end`` (nothing to say yet), ``(pos, problem)`` for a bad one.
    """
    if pos + LOG_OVERHEAD > limit:
        return pos, f"torn batch: {limit - pos} bytes left, less than a batch's length field"
    if pos + LOG_OVERHEAD > end:
        return pos, None
    length = _LENGTH.unpack_from(buf, pos + 8)[0]
    if length < MIN_BATCH_LENGTH:
        return pos, f"batch length {length} is below the minimum {MIN_BATCH_LENGTH}"
    batch_end = pos + LOG_OVERHEAD + length
    if batch_end > limit:
        return pos, f"batch of {length + LOG_OVERHEAD} bytes runs past the end of the file"
    if batch_end > end:
        return pos, None
    _, _, _, magic, stored, _, _ = _PREFIX.unpack_from(buf, pos)
    if magic != CURRENT_MAGIC:
        return pos, f"magic {magic}, expected {CURRENT_MAGIC}"
    with memoryview(buf) as view:
        computed = crc32c(view[pos + ATTRIBUTES_OFFSET : batch_end])
    if computed != stored:
        return pos, f"crc mismatch: stored {stored}, computed {computed}"
    return batch_end, None


def check_batches(
    buf, start: int, end: int, limit: int, max_batches: int = -1, stop: int | None = None
) -> tuple[int, str | None, int]:
    """Check the complete batches of ``buf[start:end]`` that begin before ``stop`` (``end`` if
    None), at most ``max_batches`` of them (all if negative); returns ``(position after the
    last good batch, problem of the batch there or None, good batches checked)``.

    A batch that begins before ``stop`` is checked whole (up to ``end``), even if it runs past
    ``stop``: a length field damaged to reach into bytes verified before is checked, not
    skipped."""
    if stop is None:
        stop = end
    pos = start
    checked = 0
    while pos < stop and checked != max_batches:
        next_pos, problem = batch_problem(buf, pos, end, limit)
        if problem is not None or next_pos == pos:
            return pos, problem, checked
        pos = next_pos
        checked += 1
    return pos, None, checked


class VerifiedRanges:
    """Byte ranges of a segment's ``.log`` whose batches passed their CRC.

    ``prefix``: everything below it is verified (appends by this process, recovery, the reads
    from the segment's start). Beyond it, the verified runs (a consumer that started reading
    mid-segment): sorted, disjoint and merged (a run reaching the prefix or another run joins
    it), so no byte is checked twice however the reads start and end. At most ``MAX_RUNS``
    runs are kept (the shortest goes: its bytes are checked again on their next read). Lookups
    are a bisection; not safe for concurrent use (the segment's owner serialises reads).
    Without runs (most segments: every byte below the prefix) both run lists are the shared
    empty tuple, made lists by the first run: a broker holds one of these per segment, and an
    empty list each was two objects more per partition for the garbage collector to walk.
    """

    MAX_RUNS = 64
    NONE_AFTER = sys.maxsize  # ``next_verified`` when no run follows

    __slots__ = ("_ends", "_starts", "prefix")

    def __init__(self, prefix: int = 0) -> None:
        self.prefix = prefix
        # The runs [_starts[i], _ends[i]), all beyond the prefix.
        self._starts: list[int] | tuple[()] = ()
        self._ends: list[int] | tuple[()] = ()

    def unverified_start(self, start: int) -> int:
        """The first unverified byte at or after ``start``: where checking must begin."""
        if start <= self.prefix:
            return self.prefix
        i = bisect_right(self._starts, start) - 1
        if i >= 0 and start < self._ends[i]:
            return self._ends[i]
        return start

    def next_verified(self, position: int) -> int:
        """Where the first verified run after an unverified ``position`` begins."""
        i = bisect_right(self._starts, position)
        return self._starts[i] if i < len(self._starts) else self.NONE_AFTER

    def covered(self, start: int, end: int) -> bool:
        if end <= self.prefix:
            return True
        if start <= self.prefix:
            return False  # the byte at the prefix is unverified (a run there would have joined)
        i = bisect_right(self._starts, start) - 1
        return i >= 0 and end <= self._ends[i]

    def mark(self, start: int, end: int) -> None:
        """``[start, end)`` verified."""
        if end <= start:
            return
        starts, ends = self._starts, self._ends
        if start <= self.prefix:
            if end > self.prefix:
                self.prefix = end
                if starts:
                    joined = bisect_right(starts, end)  # the runs it reaches join the prefix
                    if joined:
                        ends = cast(list[int], ends)  # a list whenever the starts are one
                        self.prefix = max(end, ends[joined - 1])
                        del starts[:joined], ends[:joined]
                        if not starts:
                            self._starts = self._ends = ()
            return
        if not starts:  # the first run: lists from here on
            self._starts, self._ends = [start], [end]
            return
        ends = cast(list[int], ends)  # a list whenever the starts are one
        first = bisect_left(ends, start)  # the runs touching [start, end) merge with it
        last = bisect_right(starts, end)
        if first < last:
            start, end = min(start, starts[first]), max(end, ends[last - 1])
        starts[first:last] = [start]
        ends[first:last] = [end]
        if len(starts) > self.MAX_RUNS:
            shortest = min(range(len(starts)), key=lambda i: ends[i] - starts[i])
            del starts[shortest], ends[shortest]

    def forget_from(self, position: int) -> None:
        """Bytes from ``position`` on changed (truncation) or are suspect: verify again."""
        self.prefix = min(self.prefix, position)
        starts, ends = self._starts, self._ends
        if not starts:
            return
        kept = bisect_left(starts, position)
        if not kept:
            self._starts = self._ends = ()
            return
        ends = cast(list[int], ends)  # a list whenever the starts are one
        del starts[kept:], ends[kept:]
        if ends[-1] > position:
            ends[-1] = position


@dataclass
class FetchStats:
    corrupt_batches_refused: int = 0
    reported: set[tuple[str, int]] = field(default_factory=set)


FETCH_STATS = FetchStats()


def report_corrupt_fetch(file: Path, position: int, problem: str) -> None:
    """Log (once per batch) and count a batch a fetch refused."""
    FETCH_STATS.corrupt_batches_refused += 1
    key = (str(file), position)
    if key in FETCH_STATS.reported:
        return
    if len(FETCH_STATS.reported) > 10_000:
        FETCH_STATS.reported.clear()
    FETCH_STATS.reported.add(key)
    logger.error(
        "corrupt batch refused to a fetch", file=str(file), position=position, problem=problem
    )


# ---------------------------------------------------------------------------------- files


class _BatchInfo(NamedTuple):
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int


def _iter_file_batches(
    fd: int, size: int, file: str, throttle: Callable[[int], None] | None
) -> Iterator[_BatchInfo | Finding]:
    """The batches of a ``.log`` read with ``pread`` in chunks (no map: a file shrinking under
    the reader gives short reads, never a SIGBUS); stops after the first bad batch."""
    pos = 0
    while pos < size:
        chunk = os.pread(fd, min(READ_CHUNK, size - pos), pos)
        if not chunk:
            return
        if throttle is not None:
            throttle(len(chunk))
        off = 0
        limit = size - pos  # the file's end, relative to the chunk
        while off < len(chunk):
            next_off, problem = batch_problem(chunk, off, len(chunk), limit)
            if problem is not None:
                kind = "torn-batch" if "past the end" in problem or "torn" in problem else None
                yield Finding(kind or "corrupt-batch", file, pos + off, -1, problem)
                return
            if next_off == off:  # the batch continues past this chunk
                if off == 0:  # larger than a chunk: read it whole
                    length = _LENGTH.unpack_from(chunk, 8)[0] + LOG_OVERHEAD
                    chunk = os.pread(fd, length, pos)
                    if throttle is not None:
                        throttle(len(chunk))
                    if len(chunk) < length:
                        return  # the file shrank under the reader: nothing to say
                    continue
                break
            base, _, _, _, _, _, delta = _PREFIX.unpack_from(chunk, off)
            max_ts = _MAX_TIMESTAMP.unpack_from(chunk, off + _MAX_TIMESTAMP_AT)[0]
            yield _BatchInfo(pos + off, base, base + delta, max_ts)
            off = next_off
        pos += off


def _read_entries(path: Path, entry: struct.Struct) -> tuple[list[tuple[int, int]], int]:
    """The entries of an index file and its length (0 if there is no file)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], 0
    # The zero tail of a preallocated index (the active segment of a running or crashed
    # broker) holds no entries: a real entry is never all zeros (no entry at position 0).
    used = len(data.rstrip(b"\0"))
    used += -used % entry.size
    whole = min(used, len(data) - len(data) % entry.size)
    return [entry.unpack_from(data, i) for i in range(0, whole, entry.size)], len(data)


def _cut_entry(path: Path, length: int, entry: struct.Struct, kind: str) -> Finding | None:
    """A finding if the file ends inside an entry. Every index is a whole number of entries:
    preallocated to a multiple of the entry size, trimmed to its entries on roll and close
    (a load rebuilds one that is not, ``AbstractIndex.sanity_check``)."""
    cut = length % entry.size
    if not cut:
        return None
    whole = length - cut
    return Finding(
        kind,
        str(path),
        whole,
        -1,
        f"file is {length} bytes, not a whole number of {entry.size}-byte entries: entry "
        f"{whole // entry.size} is cut after {cut} bytes",
    )


def verify_segment_files(
    log_file: str | os.PathLike[str],
    base_offset: int,
    throttle: Callable[[int], None] | None = None,
    size: int | None = None,
) -> list[Finding]:
    """Every finding for one segment (see the module docstring); ``size``: the bytes of the
    ``.log`` to check (default: the file's size). Raises OSError if the files cannot be read."""
    log_path = Path(log_file)
    stem = log_path.name[: -len(".log")] if log_path.name.endswith(".log") else log_path.stem
    index_path = log_path.with_name(stem + ".index")
    time_index_path = log_path.with_name(stem + ".timeindex")
    findings: list[Finding] = []
    index_entries, index_length = _read_entries(index_path, _OFFSET_ENTRY)
    time_entries, time_length = _read_entries(time_index_path, _TIME_ENTRY)
    for cut in (
        _cut_entry(index_path, index_length, _OFFSET_ENTRY, "bad-index-entry"),
        _cut_entry(time_index_path, time_length, _TIME_ENTRY, "bad-time-index-entry"),
    ):
        if cut is not None:
            findings.append(cut)
    # The last batch of a closed segment's time index may be the roll's final entry only.
    by_position = {position: base_offset + rel for rel, position in index_entries}
    wanted_offsets = {base_offset + rel: ts for ts, rel in time_entries}
    batch_positions: set[int] = set()
    fd = os.open(log_path, os.O_RDONLY)
    try:
        if size is None:
            size = os.fstat(fd).st_size
        expected = -1
        for item in _iter_file_batches(fd, size, str(log_path), throttle):
            if isinstance(item, Finding):
                findings.append(item)
                break
            if item.base_offset <= expected:
                findings.append(
                    Finding(
                        "offsets-out-of-order",
                        str(log_path),
                        item.position,
                        item.base_offset,
                        f"batch starts at offset {item.base_offset}, after offset {expected}",
                    )
                )
                break
            expected = item.last_offset
            batch_positions.add(item.position)
            indexed = by_position.get(item.position)
            if indexed is not None and indexed != item.last_offset:
                findings.append(
                    Finding(
                        "bad-index-entry",
                        str(index_path),
                        item.position,
                        indexed,
                        f"entry says offset {indexed} at position {item.position}, the batch "
                        f"there ends at offset {item.last_offset}",
                    )
                )
            timestamp = wanted_offsets.pop(item.last_offset, None)
            if timestamp is not None and timestamp != item.max_timestamp:
                findings.append(
                    Finding(
                        "bad-time-index-entry",
                        str(time_index_path),
                        item.position,
                        item.last_offset,
                        f"entry says timestamp {timestamp}, the batch's max timestamp is "
                        f"{item.max_timestamp}",
                    )
                )
    finally:
        os.close(fd)
    log_is_whole = not any(not f.is_index for f in findings)
    previous = (-1, -1)
    for i, (rel, position) in enumerate(index_entries):
        offset = base_offset + rel
        problem = None
        if (rel, position) <= previous or position < previous[1]:
            problem = f"entry {i} ({offset}, {position}) does not increase"
        elif log_is_whole and position not in batch_positions:
            problem = f"entry {i} points at position {position}, which is not a batch start"
        if problem is not None:
            findings.append(Finding("bad-index-entry", str(index_path), i * 8, offset, problem))
        previous = (rel, position)
    if log_is_whole:
        for offset, timestamp in sorted(wanted_offsets.items()):
            findings.append(
                Finding(
                    "bad-time-index-entry",
                    str(time_index_path),
                    -1,
                    offset,
                    f"entry ({timestamp}, {offset}) names no batch's last offset",
                )
            )
    last = (-1, -1)
    for i, (ts, rel) in enumerate(time_entries):
        if ts < last[0] or rel < last[1]:
            findings.append(
                Finding(
                    "bad-time-index-entry",
                    str(time_index_path),
                    i * 12,
                    base_offset + rel,
                    f"entry {i} ({ts}, {base_offset + rel}) goes backwards",
                )
            )
        last = (ts, rel)
    return findings


def verify_path(path: str | os.PathLike[str]) -> Iterator[Finding]:
    """Findings for a segment file, a partition directory or a log directory (every
    ``<topic>-<partition>`` in it), segment by segment in offset order."""
    path = Path(path)
    if path.is_file():
        if not path.name.endswith(".log"):
            raise ValueError(f"{path} is not a segment (.log) file")
        yield from verify_segment_files(path, int(path.name.split(".", 1)[0]))
        return
    if not path.is_dir():
        raise FileNotFoundError(f"{path} does not exist")
    if _segment_files(path):
        partition_dirs = [path]
    else:  # a log directory (its own files, such as the embedded store's, are not segments)
        partition_dirs = sorted(p for p in path.iterdir() if p.is_dir() and _segment_files(p))
    for partition_dir in partition_dirs:
        for log_file in _segment_files(partition_dir):
            yield from verify_segment_files(log_file, int(log_file.name.split(".", 1)[0]))


def _segment_files(dir: Path) -> list[Path]:
    """``<20 digits>.log`` files of a directory, in offset order."""
    return sorted(p for p in dir.glob("*.log") if p.name.split(".", 1)[0].isdigit())


# ---------------------------------------------------------------------------------- background


class VerifierStopped(Exception):
    """The verifier was stopped while a segment was being read."""


@dataclass
class VerifierStats:
    segments_verified: int = 0
    bytes_verified: int = 0
    corrupt_batches: int = 0
    index_findings: int = 0
    indexes_rebuilt: int = 0


class SegmentVerifier:
    """Verifies each closed segment of every online log once, throttled to
    ``bytes_per_second``, then waits ``pass_interval_s`` and looks for new closed segments.

    Segments are identified by (file, size): a segment rewritten by the cleaner or truncated is
    verified again. ``stop()`` (called by the LogManager on shutdown) ends a verification in
    progress at its next chunk, so a throttled read never holds up the process's exit. Work is read in a worker thread; findings are acted on back on the event
    loop, and dropped if the log was truncated or the segment replaced meanwhile (a short read
    of a file being truncated is not corruption).
    """

    def __init__(
        self,
        logs: Callable[[], list[Log]],
        bytes_per_second: float = DEFAULT_BYTES_PER_SECOND,
        pass_interval_s: float = DEFAULT_PASS_INTERVAL_S,
    ) -> None:
        self._logs = logs
        self.throttler = Throttler(bytes_per_second, check_interval_ms=100)
        self.pass_interval_s = pass_interval_s
        self.stats = VerifierStats()
        self.findings: list[Finding] = []  # the latest ones (bounded), for tests and tools
        self._verified: set[tuple[str, int]] = set()
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def _throttle(self, observed: int) -> None:
        """In the worker thread, after each chunk read: wait out the rate, or give up."""
        delay = self.throttler.maybe_throttle(observed)
        if self._stop.is_set() or (delay > 0 and self._stop.wait(delay)):
            raise VerifierStopped

    async def run(self) -> None:
        self._stop.clear()
        try:
            while True:
                await self.verify_once()
                await asyncio.sleep(self.pass_interval_s)
        finally:
            self._stop.set()

    async def verify_once(self) -> int:
        """One pass; returns the segments verified."""
        done = 0
        for log in self._logs():
            if log.offline:
                continue
            for segment in log.segments[:-1]:  # closed segments only
                key = (str(segment.log.file), segment.size)
                if key in self._verified:
                    continue
                truncations = log.truncation_count
                try:
                    findings = await asyncio.to_thread(
                        verify_segment_files,
                        segment.log.file,
                        segment.base_offset,
                        self._throttle,
                        segment.size,
                    )
                except OSError:
                    continue  # deleted or replaced meanwhile; an I/O error shows on use
                except VerifierStopped:
                    return done
                if (
                    log.offline
                    or log.truncation_count != truncations
                    or segment not in log.segments
                    or segment.size != key[1]
                ):
                    continue
                self._verified.add(key)
                self.stats.segments_verified += 1
                self.stats.bytes_verified += key[1]
                done += 1
                # Checked after the close, off the loop: the fetch path need not check these
                # batches again (up to the first bad one, if any).
                bad = [f.position for f in findings if not f.is_index]
                segment.verified.mark(0, bad[0] if bad else key[1])
                if findings:
                    self._act_on(log, segment, findings)
        return done

    def _act_on(self, log: Log, segment: LogSegment, findings: list[Finding]) -> None:
        partition = f"{log.topic}-{log.partition}"
        for finding in findings:
            logger.error(
                "segment verification found corruption",
                partition=partition,
                kind=finding.kind,
                file=finding.file,
                position=finding.position,
                offset=finding.offset,
                detail=finding.detail,
            )
        self.findings = (self.findings + findings)[-1000:]
        batch_findings = [f for f in findings if not f.is_index]
        self.stats.corrupt_batches += len(batch_findings)
        self.stats.index_findings += len(findings) - len(batch_findings)
        if batch_findings:
            # Fetches check those bytes again, so they refuse the bad batch.
            segment.verified.forget_from(batch_findings[0].position)
            return
        # The log is whole and an index is wrong: rebuild both indexes from the log (which
        # checks every batch again on the way).
        segment.recover()
        log.segment_size_changed()
        self.stats.indexes_rebuilt += 1
        logger.warning(
            "index rebuilt from its segment", partition=partition, segment=segment.base_offset
        )
