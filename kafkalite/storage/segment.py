"""One segment of a partition's log: ``.log`` + ``.index`` + ``.timeindex`` (Kafka's LogSegment).

Files, all named by the segment's base offset in 20 digits (``00000000000000170410.log``):

* ``.log``: the record batches (``FileRecords``), base offset = offset of its first batch
  (or the offset the segment was rolled at, if empty).
* ``.index``: sparse ``OffsetIndex``; an entry ``(last offset of batch, position of batch)`` is
  added for the first batch after more than ``index.interval.bytes`` bytes since the previous
  entry. Every index entry's offset is <= every offset of the batches after its position, so
  ``lookup(offset)`` gives a position from which a forward scan finds the batch holding offset.
* ``.timeindex``: sparse ``TimeIndex``; added together with the offset index entries, holding the
  largest timestamp so far and the last offset of the batch holding it. On roll the final
  ``(max timestamp, offset)`` is added so lookups by time see the whole segment.

Invariants: batches are in offset order, all offsets within ``[base_offset, base_offset +
2^31 - 1]`` (relative offsets fit in int32), ``size`` == bytes of complete batches.

The index files are created lazily (see index.py): a new segment has only its ``.log``; a
segment holding data keeps an offset index on disk once closed, rolled or recovered
(``keep_index_files``), so that the loader's rule "a missing offset index of a segment holding
data is rebuilt" (Kafka's) never costs a scan after a clean shutdown.

``recover()`` rebuilds both indexes from the log, checking every batch (length, magic, CRC),
and truncates a torn or corrupt tail: it is how a crashed segment is brought back.

Reads never hand out a batch that fails its CRC: ``verified`` (``verifier.VerifiedRanges``)
holds the byte ranges already checked; a read reaching past them checks the new batches first,
once. A bad batch ends the read before it, or, first in the read, raises
``CorruptRecordError`` (CORRUPT_MESSAGE) and is logged.

What counts as verified depends on whether the segment is closed:

* the active segment: its appends (checked in memory before they were written) and its
  recovery. Its bytes are still being written; a check of the page cache just written would
  only cost time on the produce-then-fetch path.
* a closed (rolled, inactive) segment: only checks made after it was closed. On roll
  (``on_become_inactive_segment``) and for every closed segment a log loads, ``verified``
  starts empty, whoever wrote the bytes and whatever checked them before: damage done to the
  file after the write (a stray write, bit rot, a tool) is found by the first read of each
  byte after the close, and is never served by a running broker. Each byte is checked once
  per close (or per background ``SegmentVerifier`` rebuild, which re-checks it too);
  damage done after that first read is left to the background verifier and ``kafkalite
  storage verify``.

A read checks, on the event loop, at most ``VERIFY_SLICE_BYTES`` (1 MiB) of unverified bytes
and ``VERIFY_SLICE_BATCHES`` (1,000) batches beyond its first batch: a read reaching further is
cut at the last whole batch checked (a short read, as at a segment's end; the client fetches
the rest next). The check is crc32c in C over the bytes plus a Python step of about 1 us per
batch: roughly 0.1-0.4 ms per MiB of 16 KiB-1 MiB batches, and 1 ms for 1,000 small batches
(``bench/first_read_bench.py``; ``bench/fetch_bench.py --first-read`` for a broker), so one
read never holds the loop for long, and a segment of 1 GiB is verified a slice at a time, by
its readers.

Why CORRUPT_MESSAGE for the partition, not KAFKA_STORAGE_ERROR with the log dir offline:
Kafka does not check CRCs on its fetch path (it relies on recovery after a crash and on the
clients' ``check.crcs``); when a read does raise ``CorruptRecordException``, its
ReplicaManager.readFromLocalLog answers the partition with that error (CORRUPT_MESSAGE, from
its catch-all, logged as an error); an I/O error (``KafkaStorageException``) is what takes a
log dir offline. A bad batch is damage to one file, not a failing disk: the other partitions of
the directory, and the good batches of this one, stay readable, and the error names the
partition. A follower backs the partition off and fetches it again (``replica_fetcher.py``); a
consumer gets the batches before the bad one, then the error for the partition.

Not safe for concurrent use; the owning Log serialises access.
"""

from __future__ import annotations

import errno
import mmap
import os
import time
from collections.abc import Callable, Container, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from kafkalite.protocol.errors import CorruptRecordError
from kafkalite.protocol.records import RecordBatchHeader, scan_valid_prefix
from kafkalite.storage.errors import CorruptIndexError, IndexOffsetOverflowError
from kafkalite.storage.file_records import (
    EMPTY_RECORDS,
    BatchInfo,
    FileRecords,
    FileRecordsSlice,
)
from kafkalite.storage.index import (
    INT32_MAX,
    NO_TIMESTAMP,
    OffsetIndex,
    TimeIndex,
    TimestampOffset,
)
from kafkalite.storage.txn_index import TXN_INDEX_FILE_SUFFIX, TransactionIndex
from kafkalite.storage.verifier import VerifiedRanges, check_batches, report_corrupt_fetch

# What one read checks at most beyond its first batch, in unverified bytes and in batches
# (see the module docstring): about 1 ms of the loop.
VERIFY_SLICE_BYTES = 1 << 20
VERIFY_SLICE_BATCHES = 1000

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"


def batch_summaries(headers: Iterable[RecordBatchHeader | BatchInfo]) -> list[tuple[int, int, int]]:
    """``(last offset, size, max timestamp)`` per batch, what ``LogSegment.append`` takes."""
    return [(h.last_offset, h.size, h.max_timestamp) for h in headers]


def filename_prefix_from_offset(offset: int) -> str:
    """Kafka's segment file name: the offset zero-padded to 20 digits."""
    return f"{offset:020d}"


def offset_from_file_name(name: str) -> int:
    return int(name.split(".", 1)[0])


def log_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return dir / (filename_prefix_from_offset(offset) + LOG_FILE_SUFFIX + suffix)


def offset_index_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return dir / (filename_prefix_from_offset(offset) + INDEX_FILE_SUFFIX + suffix)


def time_index_file(dir: Path, offset: int, suffix: str = "") -> Path:
    return dir / (filename_prefix_from_offset(offset) + TIME_INDEX_FILE_SUFFIX + suffix)


def txn_index_file_for(log_path: Path) -> Path:
    """``<base>.txnindex[suffix]`` beside ``<base>.log[suffix]``."""
    name = log_path.name
    return log_path.with_name(name.replace(LOG_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX, 1))


class LogOffsetMetadata(NamedTuple):
    """An offset with where it sits on disk (Kafka's LogOffsetMetadata)."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1


class FetchDataInfo(NamedTuple):
    """What a read returns: where it started and the bytes (a zero-copy slice)."""

    fetch_offset_metadata: LogOffsetMetadata
    records: FileRecordsSlice
    first_entry_incomplete: bool = False


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogSegment:
    """A segment: its three files and the bookkeeping a roll decision needs."""

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        base_offset: int,
        index_interval_bytes: int,
        rolling_jitter_ms: int = 0,
        time_ms: Callable[[], int] = _wall_clock_ms,
        *,
        txn_index_exists: bool | None = None,
        trust_time_index: bool = False,
    ) -> None:
        self.log = log
        self.offset_index = offset_index
        self.time_index = time_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.rolling_jitter_ms = rolling_jitter_ms
        self._time_ms = time_ms
        self.created_ms = time_ms()
        self.bytes_since_last_index_entry = 0
        # Largest timestamp in the segment and the last offset of the batch holding it.
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = base_offset
        # Timestamp of the first batch: a segment.ms roll counts from it (Kafka's
        # rollingBasedTimestamp); None until known.
        self._rolling_based_timestamp: int | None = None
        # False while the indexes are kept at their valid entries and grown to their maximum
        # size only on the first append (defer_index_growth): an idle active segment then
        # costs no ftruncate to re-grow on load and to trim again on close.
        self._index_room = True
        self.verified = VerifiedRanges()
        # Aborted transactions whose marker is in this segment (file made on the first one).
        # Known to have no file: made when first asked for (``txn_index``), at the name the
        # ``.log`` has then; most segments never hold an aborted transaction, and a segment
        # is kept for the broker's life (two objects fewer for the garbage collector to walk).
        self._txn_index: TransactionIndex | None = (
            None if txn_index_exists is False else self._new_txn_index(txn_index_exists)
        )
        if trust_time_index and time_index.on_disk:
            # After a clean shutdown the time index ends with the segment's max timestamp (a
            # close or roll wrote it): nothing of the log is read (Kafka's LogSegment takes
            # its max timestamp from the time index's last entry too).
            last = time_index.last_entry
            if last.timestamp >= 0:
                self.max_timestamp_so_far = last.timestamp
                self.offset_of_max_timestamp_so_far = last.offset
        else:
            self._load_largest_timestamp()
            self.log.release_map()

    def _new_txn_index(self, exists: bool | None) -> TransactionIndex:
        head, sep, name = self.log.path.rpartition(os.sep)
        return TransactionIndex(
            head + sep + name.replace(LOG_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX, 1), exists=exists
        )

    @property
    def txn_index(self) -> TransactionIndex:
        """The segment's aborted-transaction index (``.txnindex``), made when first asked
        for if the segment was known to have none."""
        index = self._txn_index
        if index is None:
            index = self._txn_index = self._new_txn_index(False)
        return index

    # ---------------------------------------------------------------- construction

    @classmethod
    def open(
        cls,
        dir: str | os.PathLike[str],
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        rolling_jitter_ms: int = 0,
        time_ms: Callable[[], int] = _wall_clock_ms,
        file_suffix: str = "",
        preallocate: bool = True,
        new: bool = False,
        names: Container[str] | None = None,
        log_size: int | None = None,
        trust_time_index: bool = False,
    ) -> LogSegment:
        """Open (or create) the segment's files.

        ``new``: none of the files exists (the log's directory was just made): the ``.log``
        is created, the indexes are not (each is created by its first entry, or when the
        segment is closed or rolled holding data; see index.py). ``names``: the directory's
        listing, when the caller made one: an index not in it is opened the same way, not
        created. ``log_size``: the ``.log``'s length, if known. ``trust_time_index``: the
        log was shut down cleanly (see ``__init__``)."""
        prefix = os.path.join(os.fspath(dir), filename_prefix_from_offset(base_offset))
        if new:
            index_exists: bool | None = False
            time_index_exists: bool | None = False
            txn_index_exists: bool | None = False
        elif names is not None:
            name = prefix[len(prefix) - 20 :]
            index_exists = name + INDEX_FILE_SUFFIX + file_suffix in names
            time_index_exists = name + TIME_INDEX_FILE_SUFFIX + file_suffix in names
            txn_index_exists = name + TXN_INDEX_FILE_SUFFIX + file_suffix in names
        else:
            index_exists = time_index_exists = txn_index_exists = None
        return cls(
            FileRecords(
                prefix + LOG_FILE_SUFFIX + file_suffix,
                create=new or log_size is None,
                size=0 if new else log_size,
            ),
            OffsetIndex(
                prefix + INDEX_FILE_SUFFIX + file_suffix,
                base_offset,
                max_index_size,
                preallocate=preallocate,
                exists=index_exists,
            ),
            TimeIndex(
                prefix + TIME_INDEX_FILE_SUFFIX + file_suffix,
                base_offset,
                max_index_size,
                preallocate=preallocate,
                exists=time_index_exists,
            ),
            base_offset,
            index_interval_bytes,
            rolling_jitter_ms,
            time_ms,
            txn_index_exists=txn_index_exists,
            trust_time_index=trust_time_index,
        )

    def keep_index_files(self) -> None:
        """A segment holding data keeps its offset index on disk (created empty if its first
        entry never came): the load rebuilds a non-empty segment whose ``.index`` is missing,
        as Kafka's does. Called when the segment is closed, rolled or recovered."""
        if self.log.size and not self.offset_index.on_disk:
            self.offset_index.resize(self.offset_index.size_in_bytes)
            self.offset_index.create_file()

    def _load_largest_timestamp(self) -> None:
        """Max timestamp from the time index's last entry, then the batches after it."""
        last = self.time_index.last_entry
        if last.timestamp >= 0:
            self.max_timestamp_so_far = last.timestamp
            self.offset_of_max_timestamp_so_far = last.offset
        if self.log.size == 0:
            return
        start = self.offset_index.lookup(max(last.offset, self.base_offset)).position
        ts, offset = self.log.largest_timestamp_after(start)
        if ts > self.max_timestamp_so_far:
            self.max_timestamp_so_far = ts
            self.offset_of_max_timestamp_so_far = offset

    # ---------------------------------------------------------------- properties

    @property
    def size(self) -> int:
        return self.log.size

    @property
    def largest_timestamp(self) -> int:
        """Max timestamp of the segment (for retention.ms), or the file's mtime if none."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return os.stat(self.log.file).st_mtime_ns // 1_000_000

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if an index cannot belong to this log (checked on load)."""
        self.offset_index.sanity_check(self.log.size)
        self.time_index.sanity_check()

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return self.offset_index.can_append_offset(offset)

    def rolling_based_timestamp(self) -> int | None:
        if self._rolling_based_timestamp is None and self.log.size > 0:
            first = self.log.batch_at(0)
            if first is not None:
                self._rolling_based_timestamp = first.max_timestamp
        return self._rolling_based_timestamp

    def should_roll(
        self,
        segment_bytes: int,
        segment_ms: int,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> bool:
        """Kafka's LogSegment.shouldRoll: the append would overflow segment.bytes, the segment
        is older than segment.ms (by its first batch's timestamp), an index is full, or the
        last offset would not fit as a relative offset. Runs on every append: kept lean."""
        if not self._index_room:
            self.ensure_index_room()
        size = self.log.size
        if size > segment_bytes - messages_size:
            return True
        offset_index = self.offset_index
        if offset_index._entries >= offset_index._max_entries or self.time_index.is_full():
            return True
        if not 0 <= max_offset_in_messages - self.base_offset <= INT32_MAX:
            return True
        if size > 0:
            first = self._rolling_based_timestamp
            if first is None:
                first = self.rolling_based_timestamp()
            if first is not None and first >= 0:
                waited = max_timestamp_in_messages - first
            else:
                waited = now_ms - self.created_ms
            return waited > segment_ms - self.rolling_jitter_ms
        return False

    # ---------------------------------------------------------------- writing

    def append(
        self,
        records: bytes | bytearray | memoryview,
        batches: Sequence[tuple[int, int, int]],
    ) -> None:
        """Append ``records``, whose batches are summarised in order by ``batches`` as
        ``(last offset, size in bytes, max timestamp)`` tuples (plain tuples: this is the hot
        path, see ``batch_summaries``).

        Adds an index entry for each batch that starts more than ``index_interval_bytes`` after
        the previous entry, while the indexes have room.
        """
        if not batches:
            return
        if not self._index_room:
            self.ensure_index_room()
        log = self.log
        position = log.size
        if position == 0 and self._rolling_based_timestamp is None:
            self._rolling_based_timestamp = batches[0][2]
        # Check every offset fits as int32 relative offset before writing anything.
        last_offset = batches[-1][0]
        if not 0 <= last_offset - self.base_offset <= INT32_MAX:
            raise IndexOffsetOverflowError(
                f"Offset {last_offset} cannot be stored relative to base offset {self.base_offset}"
            )
        log.append(records)
        try:
            self._index_appended(position, batches)
        except OSError:
            raise
        except Exception as e:
            # The bytes are in the log: a failure now must not look like a refused append
            # (a producer would retry and write them twice). As an OSError the log takes its
            # directory offline (KAFKA_STORAGE_ERROR); the load rebuilds the index.
            raise OSError(
                errno.EIO, f"index update of {self.log.file} failed after the log write: {e!r}"
            ) from e

    def _index_appended(self, position: int, batches: Sequence[tuple[int, int, int]]) -> None:
        """The index entries (and timestamps) for batches just written from ``position``."""
        self.verified.mark(position, self.log.size)  # validated (CRC) before the append
        interval = self.index_interval_bytes
        since_last_entry = self.bytes_since_last_index_entry
        max_timestamp = self.max_timestamp_so_far
        for batch_last_offset, size, batch_max_timestamp in batches:
            if batch_max_timestamp > max_timestamp:
                max_timestamp = self.max_timestamp_so_far = batch_max_timestamp
                self.offset_of_max_timestamp_so_far = batch_last_offset
            if since_last_entry > interval and not (
                self.offset_index.is_full() or self.time_index.is_full()
            ):
                # A full index (several batches in one append, few slots left) just gets no
                # more entries: lookups scan a little further, and the next append rolls. An
                # error here, after the bytes were written, left the log end behind them.
                self.offset_index.append(batch_last_offset, position)
                self.time_index.maybe_append(max_timestamp, self.offset_of_max_timestamp_so_far)
                since_last_entry = 0
            position += size
            since_last_entry += size
        self.bytes_since_last_index_entry = since_last_entry

    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()

    def _append_final_time_index_entry(self) -> None:
        """The segment's max timestamp as the time index's last entry (lookups by time then
        cover the whole segment); grows a full (trimmed) index by one entry if needed."""
        index = self.time_index
        if self.max_timestamp_so_far <= index.last_entry.timestamp:
            return
        if index.entries >= index.max_entries:
            index.resize(index.length + index.entry_size)
        index.maybe_append(
            self.max_timestamp_so_far,
            self.offset_of_max_timestamp_so_far,
            skip_full_check=True,
            direct=True,
        )

    def time_index_is_complete(self) -> bool:
        """False if the time index misses the segment's max timestamp (a damaged index)."""
        return self.max_timestamp_so_far <= self.time_index.last_entry.timestamp

    def forget_verification(self) -> None:
        """Nothing of the segment counts as verified any more: each batch is checked again on
        its next read (see the module docstring)."""
        self.verified = VerifiedRanges()

    def on_become_inactive_segment(self) -> None:
        """On roll: final time index entry, indexes trimmed to their entries, nothing verified
        (every batch is checked again on its first read, see the module docstring)."""
        self.forget_verification()
        self._append_final_time_index_entry()
        self.keep_index_files()
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.release_resources()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)
        self._index_room = True

    def defer_index_growth(self, size: int) -> None:
        """The active segment's indexes may grow to ``size``, on the first append (until then
        they stay as they are on disk)."""
        self.offset_index.max_index_size = size
        self.time_index.max_index_size = size
        self._index_room = False

    def ensure_index_room(self) -> None:
        self.resize_indexes(self.offset_index.max_index_size)

    # ---------------------------------------------------------------- reading

    def translate_offset(self, offset: int, starting_file_position: int = 0) -> BatchInfo | None:
        """The batch holding ``offset`` (or the first after it); None if past the segment."""
        mapping = self.offset_index.lookup(offset)
        return self.log.search_for_offset_with_size(
            offset, max(mapping.position, starting_file_position)
        )

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """Up to ``max_size`` bytes from the batch holding ``start_offset``, not past
        ``max_position``; None if ``start_offset`` is beyond this segment.

        With ``min_one_message`` the first batch is returned whole even if larger than
        ``max_size`` (KIP-74).
        """
        if max_size < 0:
            raise ValueError(
                f"Invalid max size {max_size} for log read from segment {self.log.file}"
            )
        if max_position is None:
            max_position = self.log.size
        batch = self.translate_offset(start_offset)
        if batch is None:
            return None
        metadata = LogOffsetMetadata(start_offset, self.base_offset, batch.position)
        adjusted_max_size = max(max_size, batch.size) if min_one_message else max_size
        if adjusted_max_size == 0 or max_position <= batch.position:
            return FetchDataInfo(metadata, EMPTY_RECORDS)
        fetch_size = min(max_position - batch.position, adjusted_max_size)
        end = batch.position + fetch_size
        verified = self.verified
        if end > verified.prefix and not verified.covered(batch.position, end):
            fetch_size = self._checked_end(batch.position, end, batch.size) - batch.position
        return FetchDataInfo(
            metadata, self.log.slice(batch.position, fetch_size), adjusted_max_size < batch.size
        )

    def _checked_end(self, start: int, end: int, first_batch_size: int) -> int:
        """Check the batches of ``[start, end)`` not verified yet (the verified runs between
        them are skipped, never checked again), up to ``VERIFY_SLICE_BYTES`` beyond the first
        unverified byte (at least the first batch) and ``VERIFY_SLICE_BATCHES`` batches;
        returns where the read must end (before a bad batch, or after the last batch checked
        when the slice ran out), raises CorruptRecordError if the first batch is bad."""
        verified = self.verified
        size = self.log.size
        begin = verified.unverified_start(start)
        check_end = min(end, max(begin + VERIFY_SLICE_BYTES, start + first_batch_size))
        # A map of just these pages, unmapped at once: the segment's cached whole-file map
        # would keep every segment ever read mapped (RSS, vm.max_map_count).
        base = begin - begin % mmap.ALLOCATIONGRANULARITY
        mapped = mmap.mmap(self.log.fd, check_end - base, access=mmap.ACCESS_READ, offset=base)
        pos, problem = begin, None
        batches = VERIFY_SLICE_BATCHES
        try:
            while pos < check_end:  # one unverified gap at a time
                stop = min(check_end, verified.next_verified(pos))
                good_end, problem, checked = check_batches(
                    mapped, pos - base, check_end - base, size - base, batches, stop - base
                )
                good_end += base
                verified.mark(pos, good_end)
                if problem is not None:
                    pos = good_end
                    break
                batches -= checked
                if good_end < stop:
                    # Cut by the slice, or by the read's own size: then the read keeps its
                    # partial last batch, as Kafka's does.
                    return end if check_end == end and batches > 0 else good_end
                pos = verified.unverified_start(good_end)
        finally:
            mapped.close()
        if problem is None:
            return min(pos, end)
        report_corrupt_fetch(self.log.file, pos, problem)
        if pos <= start:
            raise CorruptRecordError(
                f"Record batch at position {pos} of {self.log.file} is corrupt: {problem}"
            )
        return pos

    def read_next_offset(self) -> int:
        """Offset after the last batch (base offset when empty)."""
        start = self.offset_index.last_entry.position
        last = None
        for last in self.log.batches_from(start):  # noqa: B007
            pass
        return last.next_offset if last is not None else self.base_offset

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> BatchInfo | None:
        """The first batch with max timestamp >= ``timestamp`` and last offset >= ``starting_offset``."""
        entry: TimestampOffset = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    # ---------------------------------------------------------------- recovery and truncation

    def recover(self, on_batch: Callable[[RecordBatchHeader], None] | None = None) -> int:
        """Rebuild the indexes from the log, checking each batch; truncate a bad tail.

        Stops at the first batch that is torn, fails its CRC or header checks, goes backwards in
        offsets, or does not fit the segment's relative-offset range. Returns the bytes truncated.
        ``on_batch`` sees every valid batch (the log reassigns leader epochs through it).
        """
        self.offset_index.reset()
        self.time_index.reset()
        size = self.log.size
        headers: list[RecordBatchHeader] = []
        if size:
            with memoryview(self.log.mapped(size)) as view:
                _, headers = scan_valid_prefix(view[:size])
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        position = 0
        last_index_entry = 0
        expected = self.base_offset
        for header in headers:
            if header.base_offset < expected or not self.can_convert_to_relative_offset(
                header.last_offset
            ):
                break
            if header.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = header.max_timestamp
                self.offset_of_max_timestamp_so_far = header.last_offset
            # A full index just stops getting entries (it is sparse; lookups scan forward from
            # the floor entry). The live appends may have added fewer entries than this scan
            # would (bytes_since_last_index_entry starts at 0 on load, as in Kafka), or
            # segment.index.bytes may have shrunk since the segment was written.
            if (
                position - last_index_entry > self.index_interval_bytes
                and not self.offset_index.is_full()
                and not self.time_index.is_full()
            ):
                self.offset_index.append(header.last_offset, position)
                self.time_index.maybe_append(
                    self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
                )
                last_index_entry = position
            if position == 0:
                self._rolling_based_timestamp = header.max_timestamp
            if on_batch is not None:
                on_batch(header)
            position += header.size
            expected = header.next_offset
        self.bytes_since_last_index_entry = position - last_index_entry
        del headers
        truncated = size - position
        if truncated:
            self.log.truncate_to(position)
        # entries for markers lost with a torn tail go too (the owner's producer-state replay
        # appends the surviving ones again; appending an entry already there is a no-op)
        if self._txn_index is not None:
            self._txn_index.truncate_to(expected)
        self.offset_index.trim_to_valid_size()
        self.keep_index_files()
        self._append_final_time_index_entry()
        self.time_index.trim_to_valid_size()
        self.log.release_map()
        self.verified = VerifiedRanges(position)  # every batch kept was just checked
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (the batch holding ``offset``
        goes too); returns the bytes removed."""
        batch = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        if self._txn_index is not None:
            self._txn_index.truncate_to(offset)
        # The active segment's indexes must be able to grow again after truncation.
        self.resize_indexes(self.offset_index.max_index_size)
        if batch is None:
            return 0
        removed = self.log.truncate_to(batch.position)
        self.verified.forget_from(batch.position)
        if self.log.size == 0:
            self.created_ms = self._time_ms()
            self._rolling_based_timestamp = None
        self.bytes_since_last_index_entry = self.log.size - self.offset_index.last_entry.position
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self._load_largest_timestamp()
        return removed

    # ---------------------------------------------------------------- life cycle

    def close(self) -> None:
        """Trim the indexes and release the files (slices handed out stay readable)."""
        try:
            time_index = self.time_index
            creates = (not time_index.on_disk and self.max_timestamp_so_far >= 0) or (
                self.log.size > 0 and not self.offset_index.on_disk
            )
            # An index file is made here only in the segment's directory as it is: never
            # in one deleted under the log (the files are gone, nothing is to be kept).
            if time_index.writable and (
                not creates or os.path.isdir(os.path.dirname(self.log.path))
            ):
                if not time_index.on_disk or os.path.exists(time_index._path):
                    self._append_final_time_index_entry()
                self.keep_index_files()
        finally:
            self.offset_index.close()
            self.time_index.close()
            self.log.close()

    def update_parent_dir(self, dir: Path) -> None:
        """The partition directory was renamed (the files moved with it): follow it."""
        for file in (self.log, self.offset_index, self.time_index, self._txn_index):
            if file is not None:  # an index not made yet takes its name from the .log's
                file.file = os.path.join(dir, os.path.basename(file._path))

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the three files from ``<name><old_suffix>`` to ``<name><new_suffix>`` (Kafka's
        changeFileSuffixes): the ``.log`` first, so during a cleaner swap the log file's name is
        the commit point; an index left behind under the old suffix is rebuilt on load."""
        for file in (self.log, self.offset_index, self.time_index):
            name = file.file.name
            if not name.endswith(old_suffix):
                raise ValueError(f"{file.file} does not end with {old_suffix!r}")
            file.rename_to(file.file.with_name(name[: len(name) - len(old_suffix)] + new_suffix))
        txn_index = self._txn_index
        if txn_index is None:
            return  # no file; made later, it takes its name from the .log's
        name = txn_index.file.name
        if name.endswith(old_suffix):
            txn_index.rename_to(
                txn_index.file.with_name(name[: len(name) - len(old_suffix)] + new_suffix)
            )

    def set_last_modified(self, ms: int) -> None:
        """Set the ``.log`` file's mtime (a cleaned segment keeps its source's: the delete
        horizon of tombstones is measured from it)."""
        ns = ms * 1_000_000
        os.utime(self.log.file, ns=(ns, ns))

    def release_resources(self) -> None:
        """Unmap the indexes and close the ``.log`` descriptor; all are opened again on the
        next use (an idle segment holds no descriptor, map or resident index page)."""
        self.log.release_handle()
        self.offset_index.release()
        self.time_index.release()

    @property
    def holds_resources(self) -> bool:
        return self.log.is_open or self.offset_index.is_mapped or self.time_index.is_mapped

    def close_handlers(self) -> None:
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.log.close()

    def delete(self) -> None:
        """Close and remove the three files."""
        self.close_handlers()
        for path in (self.log.file, self.offset_index.file, self.time_index.file):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        if self._txn_index is not None:
            self._txn_index.delete()

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, file={self.log.file})"


def check_index_files(segment: LogSegment) -> bool:
    """True if both indexes pass their sanity check."""
    try:
        segment.sanity_check()
    except CorruptIndexError:
        return False
    return True
