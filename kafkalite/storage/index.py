"""Sparse, memory-mapped segment indexes: ``.index`` (offsets) and ``.timeindex`` (timestamps).

On-disk formats (big-endian, fixed-size entries, no header -- byte-compatible with Kafka):

* ``OffsetIndex`` (``<base offset, 20 digits>.index``), 8-byte entries::

      relative_offset: int32   (offset - segment base offset)
      position:        int32   (byte position of the batch in the .log file)

* ``TimeIndex`` (``<base offset, 20 digits>.timeindex``), 12-byte entries::

      timestamp:       int64   (largest timestamp seen so far in the segment)
      relative_offset: int32   (offset of the batch holding that timestamp, minus base offset)

Invariants: entries are strictly increasing in offset (and, for the offset index, in position;
for the time index, in timestamp). The index is sparse: the segment adds an entry only after
``index.interval.bytes`` of log, so a lookup returns the *floor* entry and the caller scans the
log forward from its position.

Life cycle (Kafka's AbstractIndex): a new index file is preallocated to ``max_index_size``
(``segment.index.bytes``, rounded down to whole entries); ``entries`` counts the valid ones.
An index opened with ``exists=False`` (a new log's segment, or a segment loaded without this
file) is not created until its first entry is written or its owner asks (``create_file``):
until then ``resize`` only records the length the file will get, and a single entry written
directly (``pwrite``, on close or roll) creates the file holding just that entry. A new log
thus costs its directory and its ``.log``, where Kafka's also creates both indexes (its
loader resizes the active segment's at once); the loader's rules for a missing index are in
log.py. The
file is memory-mapped only when first used (Kafka's LazyIndex, KAFKA-7283): opening an index
reads its length and last entry with ``pread`` and maps nothing, so an idle partition's indexes
cost no mapping, no descriptor (CPython's mmap keeps a duplicate of the file's descriptor for
as long as the map lives) and no resident pages; ``release()`` unmaps an index again.

The preallocated file is sparse, as Kafka's ``setLength`` makes it, so an idle index costs no
disk; but a write to a mapped page of a hole must allocate a block, and on a full filesystem
that fault is a SIGBUS that kills the process (the JVM turns it into an exception, Python
cannot). So no entry is written through the map into space that is not reserved: before an
entry lands past ``_reserved`` the next chunk of the file is reserved with ``posix_fallocate``,
and a full filesystem answers that with ENOSPC, an ``OSError`` the log turns into a log-dir
failure. An index loaded with holes (any index left untrimmed by a crash) counts only the data
before its first hole as reserved, and as its entries (on tmpfs even reading a hole of a full
filesystem through a map faults; ``pread`` does not). When the segment rolls or the log closes,
the file is trimmed to
``entries * entry_size`` so an index reopened later is exactly its entries (and is full: the
active segment's index is re-grown with ``resize`` on load). An index left untrimmed by a crash
belongs to a segment past the recovery point, which recovery rebuilds.

An index file shortened under a running broker (by hand, by a tool: never by the broker while
the file is mapped) is an I/O error (``OSError`` EIO, which takes the log dir offline): mapping
checks the file is as long as the map will be, and every entry written through the map checks
the map's file is still that long first (one ``fstat``), since writing past the end of the file
would be a SIGBUS.

Lookup: binary search for the largest entry <= target. Like Kafka, the search first tries the
last ``WARM_SECTION_BYTES`` (8 KiB) of entries: almost every lookup (followers and consumers
reading near the head of the log) lands there, so the pages it touches are the ones already in
the page cache, and a cold lookup costs at most one extra comparison.

Not safe for concurrent use; the owning Log serialises access (one event loop).
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path
from typing import NamedTuple

from kafkalite.storage.errors import CorruptIndexError, IndexOffsetOverflowError, InvalidOffsetError
from kafkalite.storage.file_path import FilePath

WARM_SECTION_BYTES = 8192
_WARM_OFFSET_ENTRIES = WARM_SECTION_BYTES // 8
_OFFSET_ENTRY = struct.Struct(">ii")
INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1

# Bytes reserved at a time ahead of the entries written: one fallocate per 8,192 offset-index
# entries (32 MiB of log at the default index interval).
RESERVE_CHUNK_BYTES = 64 * 1024


def is_sparse(stat: os.stat_result) -> bool:
    """True if the file has fewer blocks than its length needs (holes)."""
    return stat.st_blocks * 512 < stat.st_size


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class AbstractIndex(FilePath):
    """Common machinery: preallocation, mmap, binary search with a warm section, trim, resize."""

    entry_size: int = 0
    _entry_struct: struct.Struct

    def __init__(
        self,
        file: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = -1,
        writable: bool = True,
        preallocate: bool = True,
        exists: bool | None = None,
    ) -> None:
        # The path as a str for the os calls (a Path's __fspath__ and construction are a
        # visible part of loading thousands of logs); ``file`` builds the Path on demand.
        self._path = os.fspath(file)
        self._file: Path | None = file if isinstance(file, Path) else None
        # False: a new file is created empty (the owner grows it with ``resize`` before the
        # first append), so an index that is never written costs no ftruncate to create,
        # trim or re-grow.
        self.preallocate = preallocate
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._mmap: mmap.mmap | None = None
        self._length = 0
        self._reserved = 0  # bytes from the start known to have blocks (see module docstring)
        self._entries = 0
        self._max_entries = 0
        self._reading_fd = -1  # while _open reads the last entry without a map
        self._ends: tuple[int, tuple[int, int], tuple[int, int]] | None = None
        # False while the file is not on disk: a writable index whose file did not exist when
        # it was opened with ``exists=False`` (a new segment, or one loaded without this
        # index) is created when its first entry is written or the owner asks for it
        # (``create_file``), as Kafka's LazyIndex; until then it has no entries and ``resize``
        # only records the length the file will be created with.
        self._on_disk = True
        if exists is False and writable:
            self._on_disk = False
            if max_index_size < self.entry_size:
                raise ValueError(f"Invalid max index size: {max_index_size}")
            self._length = self._round_down(max_index_size) if preallocate else 0
            self._max_entries = self._length // self.entry_size
            self._after_load()
        else:
            self._open()

    @property
    def on_disk(self) -> bool:
        """False while the index file has not been created (see ``__init__``)."""
        return self._on_disk

    def create_file(self) -> None:
        """Create the file now if it is not on disk: ``length`` bytes (sparse), no entries."""
        if self._on_disk:
            return
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if self._length:
                os.ftruncate(fd, self._length)
        finally:
            os.close(fd)
        self._reserved = 0
        self._on_disk = True

    # ------------------------------------------------------------------ file handling

    def _open(self) -> None:
        newly_created = False
        if self.writable:
            try:
                fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                newly_created = True
            except FileExistsError:
                fd = os.open(self._path, os.O_RDWR)
        else:
            fd = os.open(self._path, os.O_RDONLY)
        try:
            stat = os.fstat(fd)
            length = stat.st_size
            # Entries are written from the start, each reserved first: the data is the prefix
            # before the first hole (see module docstring).
            self._reserved = (
                self._round_down(os.lseek(fd, 0, os.SEEK_HOLE)) if is_sparse(stat) else length
            )
            if newly_created:
                if self.max_index_size < self.entry_size:
                    raise ValueError(f"Invalid max index size: {self.max_index_size}")
                if self.preallocate:
                    length = self._round_down(self.max_index_size)
                    os.ftruncate(fd, length)
            self._length = length
            self._max_entries = length // self.entry_size
            # A new index is empty; an existing one is whatever whole entries its data holds.
            self._entries = (
                0 if newly_created else self._round_down(self._reserved) // self.entry_size
            )
            self._reading_fd = fd
            self._after_load()
            # The ends, for the sanity check on load (no second open of the file).
            self._ends = (
                (self._entries, self._raw_entry(0), self._raw_entry(self._entries - 1))
                if self._entries
                else None
            )
        finally:
            self._reading_fd = -1
            os.close(fd)

    def _first_and_last_entries(self) -> tuple[tuple[int, int], tuple[int, int]]:
        ends = self._ends
        if ends is not None and ends[0] == self._entries and self._mmap is None:
            return ends[1], ends[2]
        return self._raw_entry(0), self._raw_entry(self._entries - 1)

    def _mapped(self) -> mmap.mmap:
        """The map of the file, made now if the index is not mapped (see module docstring)."""
        mapped = self._mmap
        if mapped is None:
            if not self._on_disk:
                self.create_file()
            fd = os.open(self._path, os.O_RDWR if self.writable else os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                if size < self._length:
                    raise self._shrunk(size)
                access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
                mapped = self._mmap = mmap.mmap(fd, self._length, access=access)
            finally:
                os.close(fd)
        return mapped

    def _writable_map(self) -> mmap.mmap:
        """The map, for writing an entry: the file must still be as long as the map (a write
        to a mapped page past the end of the file is a SIGBUS that kills the process). Only
        something outside the broker shortens the file; it is an I/O error of the log dir."""
        mapped = self._mmap
        if mapped is None:
            return self._mapped()
        size = mapped.size()  # fstat of the map's own descriptor (under a microsecond)
        if size < self._length:
            raise self._shrunk(size)
        return mapped

    def _shrunk(self, size: int) -> OSError:
        return OSError(
            errno.EIO,
            f"index file {self.file} is {size} bytes, {self._length} expected: it was "
            "truncated outside the broker",
        )

    @property
    def is_mapped(self) -> bool:
        return self._mmap is not None

    def release(self) -> None:
        """Unmap (the pages stay in the page cache; the next use maps again)."""
        self._close_mmap()

    def _after_load(self) -> None:
        """Hook for subclasses to cache the last entry after (re)mapping."""

    def _round_down(self, number: int) -> int:
        return number - number % self.entry_size

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def length(self) -> int:
        """Current file length in bytes (preallocated size while the index is active)."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes of valid entries."""
        return self._entries * self.entry_size

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    def resize(self, new_size: int) -> bool:
        """Set the file (and mapping) to ``new_size`` rounded down to whole entries, never below
        the valid entries. Returns True if the length changed."""
        rounded = max(self._round_down(new_size), self.size_in_bytes)
        if rounded == self._length:
            return False
        self._close_mmap()  # mapped again, at the new length, when next used
        if not self._on_disk:  # the file is created at this length when first written
            self._length = rounded
            self._max_entries = rounded // self.entry_size
            return True
        fd = os.open(self._path, os.O_RDWR)
        try:
            os.ftruncate(fd, rounded)
            self._length = rounded
            self._reserved = min(self._reserved, rounded)
        finally:
            os.close(fd)
        self._max_entries = rounded // self.entry_size
        return True

    def trim_to_valid_size(self) -> bool:
        """Shrink the file to exactly its valid entries (on roll and close)."""
        return self.resize(self.size_in_bytes)

    def flush(self) -> None:
        if self._mmap is not None and self.writable:
            self._mmap.flush()

    def _close_mmap(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def close(self) -> None:
        """Trim and unmap. The object must not be used afterwards (except ``delete_if_exists``)."""
        if self.writable and self._on_disk and os.path.exists(self._path):
            self.trim_to_valid_size()
        self.close_handler()

    def close_handler(self) -> None:
        """Unmap without trimming (for files about to be deleted or renamed)."""
        self._close_mmap()

    def delete_if_exists(self) -> bool:
        self.close_handler()
        try:
            os.unlink(self._path)
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        if self._on_disk:
            os.replace(self._path, path)
        self.file = path

    def reset(self) -> None:
        """Remove every entry and re-grow to the preallocated size (used before a rebuild)."""
        self.truncate_to_entries(0)
        self.resize(self.max_index_size)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        slot = self.largest_lower_bound_slot_for(offset, by_offset=True)
        if slot == -1:
            keep = 0
        elif self._key(slot, True) == offset:
            keep = slot
        else:
            keep = slot + 1
        self.truncate_to_entries(keep)

    def truncate_to_entries(self, entries: int) -> None:
        if not 0 <= entries <= self._entries:
            raise ValueError(f"cannot truncate {self.file} to {entries} of {self._entries} entries")
        self._entries = entries
        self._after_load()

    def _check_whole_entries(self, kind: str) -> None:
        """The start of every ``sanity_check``: the file holds whole entries."""
        if self._length % self.entry_size != 0:
            raise CorruptIndexError(
                f"{kind} file {self.file} is corrupt: length {self._length} is not a multiple of {self.entry_size}"
            )

    # ------------------------------------------------------------------ entries

    def relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise IndexOffsetOverflowError(
                f"Integer overflow for offset {offset} ({self.file}), base {self.base_offset}"
            )
        return relative

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def _raw_entry(self, n: int) -> tuple[int, int]:
        mapped = self._mmap
        if mapped is not None:
            return self._entry_struct.unpack_from(mapped, n * self.entry_size)
        # Not mapped: read the entry (the last one on open, the ends in a sanity check).
        fd = self._reading_fd
        if fd < 0:
            fd = os.open(self._path, os.O_RDONLY)
            try:
                data = os.pread(fd, self.entry_size, n * self.entry_size)
            finally:
                os.close(fd)
        else:
            data = os.pread(fd, self.entry_size, n * self.entry_size)
        return self._entry_struct.unpack(data)

    def _reserve(self, end: int) -> None:
        """Give ``[0, end)`` real blocks before an entry is written there through the map, a
        chunk ahead; ENOSPC (an OSError) on a full filesystem instead of a SIGBUS. Where the
        filesystem cannot reserve blocks at all, the map is written as it is."""
        if not self._on_disk:
            self.create_file()
        new_end = min(self._length, max(end, self._reserved + RESERVE_CHUNK_BYTES))
        fd = os.open(self._path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, self._reserved, new_end - self._reserved)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            new_end = self._length
        finally:
            os.close(fd)
        self._reserved = new_end

    def _write_entry(self, a: int, b: int, direct: bool = False) -> None:
        """Write the next entry: through the map, or with ``direct`` and no map made yet with
        one ``pwrite`` (a single entry written on close or roll: mapping the file and
        faulting a page of it in costs milliseconds on a busy filesystem, a ``pwrite`` tens of
        microseconds; it needs no reservation, since a full filesystem answers it with
        ENOSPC, not a SIGBUS)."""
        if self._entries >= self._max_entries:
            raise ValueError(
                f"Attempt to append to a full index (size = {self._entries}): {self.file}"
            )
        position = self._entries * self.entry_size
        if direct and self._mmap is None:
            if not self._on_disk:
                # The file is made holding just this entry (the length a trim would give it:
                # a direct write is the last one before the roll's or the close's trim).
                fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                self._on_disk = True
                self._length = position + self.entry_size
                self._max_entries = self._entries + 1
            else:
                fd = os.open(self._path, os.O_RDWR)
            try:
                os.pwrite(fd, self._entry_struct.pack(a, b), position)
            finally:
                os.close(fd)
            self._reserved = max(self._reserved, position + self.entry_size)
            self._entries += 1
            return
        if position + self.entry_size > self._reserved:
            self._reserve(position + self.entry_size)
        self._entry_struct.pack_into(self._writable_map(), position, a, b)
        self._entries += 1

    # Subclasses say which field of an entry is searched; key(slot) returns it.
    def _key(self, slot: int, by_offset: bool) -> int:
        raise NotImplementedError

    def largest_lower_bound_slot_for(self, target: int, by_offset: bool = True) -> int:
        """Slot of the largest entry whose key is <= ``target``, or -1 if there is none.

        ``by_offset`` selects the key: the absolute offset (both indexes) or the timestamp (time
        index). The warm tail is searched first (see module docstring).
        """
        entries = self._entries
        if entries == 0:
            return -1
        key = self._key
        if key(0, by_offset) > target:
            return -1
        last = entries - 1
        warm_entries = WARM_SECTION_BYTES // self.entry_size
        first_hot = max(0, last - warm_entries)
        if key(first_hot, by_offset) <= target:
            lo, hi = first_hot, last
        else:
            lo, hi = 0, first_hot
        # Invariant: key(lo) <= target; answer in [lo, hi].
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if key(mid, by_offset) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def smallest_upper_bound_slot_for(self, target: int, by_offset: bool = True) -> int:
        """Slot of the smallest entry whose key is >= ``target``, or -1 if there is none."""
        entries = self._entries
        if entries == 0:
            return -1
        key = self._key
        slot = self.largest_lower_bound_slot_for(target, by_offset)
        if slot >= 0 and key(slot, by_offset) == target:
            return slot
        slot += 1
        return slot if slot < entries else -1


class OffsetIndex(AbstractIndex):
    """``.index``: offset -> file position of the batch starting there (see module docstring).

    Lookups are on every fetch, so besides the mmap'd file the index keeps an in-memory copy of
    its relative offsets (``array('i')``, built on the first lookup, kept in step by append and
    truncate) and runs the binary search -- warm section first, as above -- with C ``bisect``
    over it. The file stays the only durable state; the copy is 4 bytes per entry.
    """

    entry_size = 8
    _entry_struct = _OFFSET_ENTRY
    _relative_offsets: array | None = None

    def _after_load(self) -> None:
        self._last_offset = self._compute_last_offset()
        mirror = self._relative_offsets
        if mirror is not None and len(mirror) > self._entries:
            del mirror[self._entries :]

    def _mirror(self) -> array:
        mirror = self._relative_offsets
        if mirror is None:
            mirror = array("i")
            if self._entries:
                mirror.frombytes(self._mapped()[: self._entries * 8])
                mirror = mirror[::2]  # relative offsets; positions dropped
                if sys.byteorder == "little":
                    mirror.byteswap()
            self._relative_offsets = mirror
        return mirror

    def largest_lower_bound_slot_for(self, target: int, by_offset: bool = True) -> int:
        """Slot of the largest entry with offset <= ``target`` (-1 if none); warm section first."""
        entries = self._entries
        if entries == 0:
            return -1
        keys = self._mirror()
        relative = target - self.base_offset
        if keys[0] > relative:
            return -1
        first_hot = max(0, entries - 1 - _WARM_OFFSET_ENTRIES)
        if keys[first_hot] <= relative:
            return bisect_right(keys, relative, first_hot, entries) - 1
        return bisect_right(keys, relative, 0, first_hot) - 1

    def _compute_last_offset(self) -> int:
        if self._entries == 0:
            return self.base_offset
        return self.base_offset + self._raw_entry(self._entries - 1)[0]

    @property
    def last_offset(self) -> int:
        """Offset of the last entry (base offset when empty)."""
        return self._last_offset

    def _key(self, slot: int, by_offset: bool) -> int:
        return self.base_offset + self._entry_struct.unpack_from(self._mapped(), slot * 8)[0]

    def entry(self, n: int) -> OffsetPosition:
        if not 0 <= n < self._entries:
            raise IndexError(f"Attempt to fetch entry {n} of {self._entries} from {self.file}")
        relative, position = self._raw_entry(n)
        return OffsetPosition(self.base_offset + relative, position)

    @property
    def last_entry(self) -> OffsetPosition:
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(self._entries - 1)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry with offset <= ``target_offset``; ``(base_offset, 0)`` if none.

        (``largest_lower_bound_slot_for`` inlined: this runs on every fetch.)
        """
        entries = self._entries
        base = self.base_offset
        relative = target_offset - base
        keys = self._relative_offsets
        if keys is None:
            keys = self._mirror()
        if entries == 0 or keys[0] > relative:
            return OffsetPosition(base, 0)
        first_hot = entries - 1 - _WARM_OFFSET_ENTRIES
        if first_hot < 0:
            first_hot = 0
        if keys[first_hot] <= relative:
            slot = bisect_right(keys, relative, first_hot, entries) - 1
        else:
            slot = bisect_right(keys, relative, 0, first_hot) - 1
        mapped = self._mmap
        if mapped is None:
            mapped = self._mapped()
        relative, position = _OFFSET_ENTRY.unpack_from(mapped, slot * 8)
        return OffsetPosition(base + relative, position)

    def fetch_upper_bound_offset(
        self, fetch_offset: OffsetPosition, fetch_size: int
    ) -> OffsetPosition | None:
        """The first entry whose position is past ``fetch_offset.position + fetch_size``."""
        target = fetch_offset.position + fetch_size
        lo, hi = 0, self._entries - 1
        result = None
        while lo <= hi:
            mid = (lo + hi) >> 1
            entry = self.entry(mid)
            if entry.position > target:
                result = entry
                hi = mid - 1
            else:
                lo = mid + 1
        return result

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ``offset`` must exceed the last entry's (InvalidOffsetError otherwise)."""
        n = self._entries
        if n != 0 and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to position {n} no larger "
                f"than the last offset appended ({self._last_offset}) to {self.file}"
            )
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            self.relative_offset(offset)  # raises IndexOffsetOverflowError
        if n >= self._max_entries:
            raise ValueError(f"Attempt to append to a full index (size = {n}): {self.file}")
        if n * 8 + 8 > self._reserved:
            self._reserve(n * 8 + 8)
        self._entry_struct.pack_into(self._writable_map(), n * 8, relative, position)
        self._entries = n + 1
        self._last_offset = offset
        if self._relative_offsets is not None:
            self._relative_offsets.append(relative)

    def sanity_check(self, log_size: int | None = None) -> None:
        """Raise CorruptIndexError if the file cannot be this segment's offset index."""
        self._check_whole_entries("Index")
        if self._entries == 0:
            return
        (first_relative, first_position), (last_relative, last_position) = (
            self._first_and_last_entries()
        )
        if first_relative < 0 or last_relative < first_relative:
            raise CorruptIndexError(f"Index file {self.file} is corrupt: offsets not increasing")
        if self._entries > 1 and (
            last_relative == first_relative or last_position <= first_position
        ):
            # A zero-filled file (or a crash-preallocated tail) looks like repeated (0, 0) entries.
            raise CorruptIndexError(f"Index file {self.file} is corrupt: repeated entries")
        if log_size is not None and last_position >= max(log_size, 1):
            raise CorruptIndexError(
                f"Index file {self.file} is corrupt: position {last_position} beyond log size {log_size}"
            )


class TimeIndex(AbstractIndex):
    """``.timeindex``: largest timestamp so far -> offset of the batch holding it.

    One slot is always kept free so the segment can add its final entry when it rolls
    (``maybe_append(..., skip_full_check=True)``), hence ``is_full`` at ``max_entries - 1``.
    """

    entry_size = 12
    _entry_struct = struct.Struct(">qi")

    # The last entry is kept as two ints, its TimestampOffset made when asked for: a named
    # tuple stays tracked by the garbage collector (a plain int never is), one object more per
    # segment for every full collection to walk.
    _last_timestamp: int
    _last_offset: int

    def _after_load(self) -> None:
        if self._entries == 0:
            self._last_timestamp, self._last_offset = NO_TIMESTAMP, self.base_offset
        else:
            timestamp, relative = self._raw_entry(self._entries - 1)
            self._last_timestamp, self._last_offset = timestamp, self.base_offset + relative

    @property
    def last_entry(self) -> TimestampOffset:
        return TimestampOffset(self._last_timestamp, self._last_offset)

    def is_full(self) -> bool:
        return self._entries >= self._max_entries - 1

    def _key(self, slot: int, by_offset: bool) -> int:
        timestamp, relative = self._entry_struct.unpack_from(self._mapped(), slot * 12)
        return self.base_offset + relative if by_offset else timestamp

    def entry(self, n: int) -> TimestampOffset:
        if not 0 <= n < self._entries:
            raise IndexError(f"Attempt to fetch entry {n} of {self._entries} from {self.file}")
        timestamp, relative = self._raw_entry(n)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target; ``(NO_TIMESTAMP, base_offset)`` if none."""
        slot = self.largest_lower_bound_slot_for(target_timestamp, by_offset=False)
        if slot == -1:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(slot)

    def maybe_append(
        self, timestamp: int, offset: int, skip_full_check: bool = False, direct: bool = False
    ) -> None:
        """Add ``(timestamp, offset)`` if ``timestamp`` is larger than the last entry's;
        ``direct``: written with ``pwrite`` when the index is not mapped (``_write_entry``)."""
        last_timestamp, last_offset = self._last_timestamp, self._last_offset
        if self._entries != 0:
            if offset < last_offset:
                raise InvalidOffsetError(
                    f"Attempt to append an offset ({offset}) smaller than the last offset "
                    f"({last_offset}) to the time index {self.file}"
                )
            if timestamp < last_timestamp:
                raise InvalidOffsetError(
                    f"Attempt to append a timestamp ({timestamp}) smaller than the last one "
                    f"({last_timestamp}) to the time index {self.file}"
                )
        if timestamp <= last_timestamp:
            return
        if not skip_full_check and self._entries >= self._max_entries - 1:
            raise ValueError(
                f"Attempt to append to a full time index (size = {self._entries}): {self.file}"
            )
        self._write_entry(timestamp, self.relative_offset(offset), direct)
        self._last_timestamp, self._last_offset = timestamp, offset

    def sanity_check(self, log_size: int | None = None) -> None:
        self._check_whole_entries("Time index")
        if self._entries == 0:
            return
        (first_ts, first_rel), (last_ts, last_rel) = self._first_and_last_entries()
        if first_rel < 0 or last_rel < first_rel or last_ts < first_ts:
            raise CorruptIndexError(
                f"Time index file {self.file} is corrupt: entries not increasing"
            )
        if self._entries > 1 and last_ts == first_ts:
            raise CorruptIndexError(f"Time index file {self.file} is corrupt: repeated entries")
