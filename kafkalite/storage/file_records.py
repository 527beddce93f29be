"""The ``.log`` file of a segment and zero-copy slices of it (Kafka's ``FileRecords``).

A segment's ``.log`` file is the concatenation of v2 record batches exactly as they travel on the
wire (see ``kafkalite/protocol/records.py``); the leader patched baseOffset and
partitionLeaderEpoch before they got here. Appends go through one file descriptor opened with
``O_APPEND``; ``size`` is the logical end of the file (bytes of complete appends).

Reads never copy record bytes into Python objects. ``slice(position, size)`` returns a
:class:`FileRecordsSlice` that can be

* sent with ``os.sendfile`` / ``loop.sendfile`` through ``(fd, position, size)``, or
* viewed as a ``memoryview`` over a read-only ``mmap`` of the file (``view()``).

Lifetime rules (why the file descriptor is reference-counted):

* A slice holds the :class:`FileHandle`, so the descriptor stays open until the last slice is
  gone even if the segment is closed or deleted meanwhile (an unlinked file stays readable).
* ``view()`` maps only the slice's pages; the map lives as long as views into it (a Fetch
  response until it is written), then the pages leave the process again. Scans of batch headers
  use one cached map of the whole file, dropped on roll and after recovery (``release_map``).
* Truncation (a follower truncating to its leader's epoch end) must never shrink a file under a
  live view: touching mapped pages past the new end of file raises SIGBUS, and a Fetch response
  may still sit in a transport's buffer as a view. So ``truncate_to`` shrinks the file in place
  only when no map of it (``mapped()``, ``view()``) is still exported; otherwise it copies the kept
  prefix to a new file that replaces the old name (the old inode, with its maps and slices,
  stays intact until they are gone). Kafka truncates in place because it reads through
  ``FileChannel.transferTo``, never through a map.

Not safe for concurrent use.
"""

from __future__ import annotations

import mmap
import os
import struct
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from kafkalite.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    complete_batches_length,
)
from kafkalite.storage.file_path import FilePath

# baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32,
# attributes int16, lastOffsetDelta int32: the first 27 bytes of a v2 batch.
BATCH_PREFIX = struct.Struct(">qiibIhi")
# ... and maxTimestamp at MAX_TIMESTAMP_OFFSET.
MAX_TIMESTAMP = struct.Struct(">q")


class BatchInfo(NamedTuple):
    """Where a batch sits in a file, and the header fields the storage engine needs."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    max_timestamp: int

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


class FileHandle:
    """An OS file descriptor closed when the last reference to it goes away."""

    __slots__ = ("fd", "__weakref__")

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass


class FileRecordsSlice:
    """``size`` bytes of ``file`` from ``position``: what a fetch returns.

    Supports ``len()``, ``view()`` (memoryview), ``bytes()`` (one copy, for tests and tools) and
    ``(fd, position, size)`` for ``sendfile``. The slice may end inside a batch when the fetch
    size cut it (Kafka does the same; clients drop the partial batch).
    """

    __slots__ = ("_records", "_handle", "position", "size")

    def __init__(self, records: FileRecords | None, position: int, size: int) -> None:
        self._records = records
        self._handle = records.handle if records is not None else None
        self.position = position
        self.size = size

    @property
    def fd(self) -> int:
        return self._handle.fd if self._handle is not None else -1

    @property
    def file(self) -> Path | None:
        return self._records.file if self._records is not None else None

    def __len__(self) -> int:
        return self.size

    def whole_batches_size(self) -> int:
        """Bytes from the start of the slice covered by complete batches (a read cut at its
        byte limit ends inside one), read from the length fields through the file's cached
        map of batch headers: no map of the slice's own. -1 when the slice no longer belongs
        to its file's current descriptor (closed, replaced): the caller views it instead."""
        records = self._records
        if self.size == 0:
            return 0
        if records is None or records._handle is not self._handle:
            return -1
        end = self.position + self.size
        if end > records.size:
            return -1
        return complete_batches_length(records.mapped(end), self.position, end)

    def view(self) -> memoryview:
        """A memoryview over a map of just this slice's pages (from the allocation boundary
        at or below ``position``): when the response that carries it has been sent and the view
        dropped, the pages are unmapped again, so a consumer reading a whole segment does not
        leave the segment mapped into the broker (its RSS)."""
        if self.size == 0 or self._handle is None:
            return memoryview(b"")
        records = self._records
        if (
            records is not None
            and records._handle is self._handle
            and self.position + self.size > records.size
        ):
            # Truncated in place since the read: touching the map past the end of the file
            # would raise SIGBUS.
            raise ValueError(f"{self!r}: the file was truncated to {records.size} bytes")
        start = self.position - self.position % mmap.ALLOCATIONGRANULARITY
        skip = self.position - start
        mapped = mmap.mmap(self._handle.fd, skip + self.size, access=mmap.ACCESS_READ, offset=start)
        if records is not None and records._handle is self._handle:
            records.track_map(mapped)
        # else the segment was closed, replaced or deleted since the read: nothing truncates
        # that inode any more.
        return memoryview(mapped)[skip : skip + self.size]

    def __bytes__(self) -> bytes:
        if self.size == 0 or self._handle is None:
            return b""
        return os.pread(self._handle.fd, self.size, self.position)

    def __repr__(self) -> str:
        return f"FileRecordsSlice({self.file}, position={self.position}, size={self.size})"


EMPTY_RECORDS = FileRecordsSlice(None, 0, 0)
_CLOSED_HANDLE = FileHandle(-1)


class FileRecords(FilePath):
    """An append-only file of record batches with a logical ``size``."""

    def __init__(
        self, file: str | os.PathLike[str], *, create: bool = True, size: int | None = None
    ) -> None:
        """``size``: the file's length, when the caller knows it: with ``create`` it must be
        0 and the file must not exist yet (a new segment: one system call instead of an
        open, an ``fstat`` and a close); without, the file is not touched (a segment being
        loaded, its length from the directory's listing)."""
        # The path as a str for the os calls; ``file`` builds the Path on demand.
        self._path = os.fspath(file)
        self._file: Path | None = file if isinstance(file, Path) else None
        if size is None:
            flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0)
            fd = os.open(self._path, flags, 0o644)
            try:
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
        elif create:
            os.close(os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644))
        self.size = size
        # Opened on first use and dropped again by release_handle (an idle segment holds no
        # descriptor: a broker with thousands of idle partitions would otherwise hold one
        # each); a slice keeps the handle it was cut from.
        self._handle: FileHandle | None = None
        self._closed = False
        self._mmap: mmap.mmap | None = None
        # Every map of the file that may still be alive (views keep them): see truncate_to.
        # An empty tuple until a first map (no list per idle segment for the collector).
        self._maps: list[weakref.ref[mmap.mmap]] | tuple[()] = ()

    @property
    def handle(self) -> FileHandle:
        """The open descriptor (opened now if released); FileHandle(-1) once closed."""
        handle = self._handle
        if handle is None:
            if self._closed:
                return _CLOSED_HANDLE
            handle = self._handle = FileHandle(os.open(self._path, os.O_RDWR | os.O_APPEND))
        return handle

    @property
    def is_open(self) -> bool:
        """True while this object holds a descriptor (or a cached map, which holds one)."""
        return self._handle is not None or self._mmap is not None

    def release_handle(self) -> None:
        """Drop the descriptor and the cached map; the next access opens the file again.
        Slices cut earlier keep theirs."""
        self._drop_cached_map()
        self._handle = None

    @property
    def fd(self) -> int:
        return self.handle.fd

    # ---------------------------------------------------------------- writing

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Append all of ``data``; returns the bytes written."""
        fd = self.handle.fd
        written = os.write(fd, data)
        total = data.nbytes if type(data) is memoryview else len(data)
        if written < total:  # rare: a regular-file write is normally complete
            view = memoryview(data).cast("B")
            while written < total:
                written += os.write(fd, view[written:])
        self.size += total
        return total

    def flush(self) -> None:
        os.fsync(self.handle.fd)

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to ``target_size`` bytes; returns the bytes removed."""
        if not 0 <= target_size <= self.size:
            raise ValueError(
                f"Attempt to truncate {self.file} to {target_size} bytes, size is {self.size}"
            )
        removed = self.size - target_size
        if removed:
            self._mmap = None  # never extend a stale map past the new end (see module docstring)
            if self._release_maps():
                os.ftruncate(self.handle.fd, target_size)
            else:
                self._replace_with_prefix(target_size)
            self.size = target_size
        return removed

    def _release_maps(self) -> bool:
        """Close every map nobody views any more; True when none is left."""
        in_use = []
        for ref in self._maps:
            mapped = ref()
            if mapped is None:
                continue
            try:
                mapped.close()
            except BufferError:  # a view (a queued Fetch response) still points into it
                in_use.append(ref)
        self._maps = in_use or ()
        return not in_use

    def _replace_with_prefix(self, size: int) -> None:
        """Copy ``[0, size)`` to a new file that takes this file's name; the old inode lives on
        for the views and slices of it. A crash before the rename leaves a ``.tmp`` file that
        loading deletes, and the untruncated log, which the follower truncates again."""
        tmp = self.file.with_name(self.file.name + ".tmp")
        source = self.handle.fd
        target = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            copied = 0
            while copied < size:
                n = os.copy_file_range(source, target, size - copied, copied, copied)
                if n <= 0:
                    raise OSError(f"short copy of {self.file} at {copied} of {size} bytes")
                copied += n
            os.replace(tmp, self.file)
        except BaseException:
            os.close(target)
            tmp.unlink(missing_ok=True)
            raise
        os.close(target)
        self._handle = FileHandle(os.open(self.file, os.O_RDWR | os.O_APPEND))
        self._maps = ()

    def close(self) -> None:
        """Release this object's hold on the file; live slices keep the descriptor open."""
        self._mmap = None
        self._handle = None
        self._closed = True

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        os.replace(self._path, path)
        self.file = path

    # ---------------------------------------------------------------- reading

    def mapped(self, end: int) -> mmap.mmap:
        """A read-only map of the file covering at least ``[0, end)``."""
        current = self._mmap
        if current is None or len(current) < end:
            if end > self.size:
                raise ValueError(f"Cannot map {end} bytes of {self.file}: size is {self.size}")
            current = mmap.mmap(self.handle.fd, self.size, access=mmap.ACCESS_READ)
            self._mmap = current
            self.track_map(current)
        return current

    def track_map(self, mapped: mmap.mmap) -> None:
        """Remember a live map of this file, so that truncate_to never shrinks the file under
        it (the list holds weak references: dead maps are pruned here)."""
        maps = [ref for ref in self._maps if ref() is not None]
        maps.append(weakref.ref(mapped))
        self._maps = maps

    def release_map(self) -> None:
        """Drop the cached map (slices' views keep theirs); the next read maps again. Keeps
        the number of live mappings (vm.max_map_count) down to the segments being read."""
        self._drop_cached_map()

    def _drop_cached_map(self) -> None:
        """Forget the cached map, and the references to maps now gone: an idle segment keeps
        no list (nor dead weak references) for the garbage collector to walk."""
        self._mmap = None
        if self._maps:
            self._maps = [ref for ref in self._maps if ref() is not None] or ()

    def slice(self, position: int, size: int) -> FileRecordsSlice:
        if position < 0 or size < 0:
            raise ValueError(f"Invalid slice position {position} or size {size}")
        end = min(self.size, position + size)
        if end <= position:
            return EMPTY_RECORDS
        return FileRecordsSlice(self, position, end - position)

    def batch_at(self, position: int) -> BatchInfo | None:
        """The batch starting at ``position`` (trusted data), or None at/after the end."""
        if position + BATCH_HEADER_SIZE > self.size:
            return None
        mm = self.mapped(self.size)
        base_offset, batch_length, epoch, _magic, _crc, _attrs, last_delta = (
            BATCH_PREFIX.unpack_from(mm, position)
        )
        size = batch_length + LOG_OVERHEAD
        if position + size > self.size:
            return None
        max_ts = MAX_TIMESTAMP.unpack_from(mm, position + MAX_TIMESTAMP_OFFSET)[0]
        return BatchInfo(position, size, base_offset, base_offset + last_delta, epoch, max_ts)

    def batches_from(self, position: int = 0) -> Iterator[BatchInfo]:
        """Batches from ``position`` to the end of the file (trusted data: no CRC check)."""
        size = self.size
        if position >= size:
            return
        mm = self.mapped(size)
        unpack = BATCH_PREFIX.unpack_from
        ts_unpack = MAX_TIMESTAMP.unpack_from
        while position + BATCH_HEADER_SIZE <= size:
            base_offset, batch_length, epoch, _magic, _crc, _attrs, last_delta = unpack(
                mm, position
            )
            batch_size = batch_length + LOG_OVERHEAD
            if batch_length <= 0 or position + batch_size > size:
                return
            yield BatchInfo(
                position,
                batch_size,
                base_offset,
                base_offset + last_delta,
                epoch,
                ts_unpack(mm, position + MAX_TIMESTAMP_OFFSET)[0],
            )
            position += batch_size

    def search_for_offset_with_size(
        self, target_offset: int, starting_position: int
    ) -> BatchInfo | None:
        """The first batch from ``starting_position`` whose last offset is >= ``target_offset``."""
        for batch in self.batches_from(starting_position):
            if batch.last_offset >= target_offset:
                return batch
        return None

    def search_for_timestamp(
        self, target_timestamp: int, starting_position: int, starting_offset: int
    ) -> BatchInfo | None:
        """The first batch from ``starting_position`` with max timestamp >= target and an offset
        >= ``starting_offset``."""
        for batch in self.batches_from(starting_position):
            if batch.max_timestamp >= target_timestamp and batch.last_offset >= starting_offset:
                return batch
        return None

    def largest_timestamp_after(self, starting_position: int) -> tuple[int, int]:
        """(max timestamp, last offset of the batch holding it) over batches from the position."""
        best = (-1, -1)
        for batch in self.batches_from(starting_position):
            if batch.max_timestamp > best[0]:
                best = (batch.max_timestamp, batch.last_offset)
        return best
