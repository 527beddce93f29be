"""The aborted-transaction index of a segment: ``<base offset>.txnindex`` (Kafka's TransactionIndex).

One fixed-size entry per transaction aborted by a marker in this segment, in marker order::

    version int16 (0) | producer_id int64 | first_offset int64 | last_offset int64 |
    last_stable_offset int64                                          (34 bytes, big-endian)

``first_offset`` is the transaction's first offset in the partition, ``last_offset`` the offset
of its ABORT marker, ``last_stable_offset`` the partition's LSO once it was aborted (the first
offset of the oldest transaction still open then, or ``last_offset + 1``). A read_committed
fetch of ``[start, upper)`` is answered with every entry with ``last_offset >= start`` and
``first_offset < upper``, scanning segments from the one holding ``start`` and stopping at the
first entry whose ``last_stable_offset >= upper`` (every transaction that could overlap the
range ended before it: Kafka's ``TxnIndexSearchResult.isComplete``).

The file exists only once a transaction was aborted in the segment; entries are read from it
on first use and kept in memory (a few per segment). Appends write through at once (no fsync:
recovery rebuilds entries past the recovery point from the markers, as Kafka does).
Not safe for concurrent use; the owning Log serialises access.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from kafkalite.storage.file_path import FilePath

TXN_INDEX_FILE_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            CURRENT_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


class CorruptTxnIndexError(ValueError):
    pass


def decode_entries(data: bytes) -> list[AbortedTxn]:
    if len(data) % ENTRY_SIZE:
        raise CorruptTxnIndexError(f"transaction index length {len(data)} is not a multiple of 34")
    out = []
    for pos in range(0, len(data), ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != CURRENT_VERSION:
            raise CorruptTxnIndexError(f"unknown transaction index entry version {version}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex(FilePath):
    def __init__(self, file: str | os.PathLike[str], *, exists: bool | None = None) -> None:
        """``exists=False``: the caller knows there is no file (a new segment, or a listing
        without it): no entries, nothing to read."""
        self._path = os.fspath(file)
        self._file: Path | None = file if isinstance(file, Path) else None
        self._entries: list[AbortedTxn] | None = [] if exists is False else None

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                with open(self._path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            try:
                self._entries = decode_entries(data)
            except CorruptTxnIndexError:
                # a torn tail: keep the whole entries (Kafka rebuilds from the log on recovery)
                self._entries = decode_entries(data[: len(data) - len(data) % ENTRY_SIZE])
        return self._entries

    def append(self, entry: AbortedTxn) -> None:
        entries = self.entries
        if entries and entry.last_offset <= entries[-1].last_offset:
            return  # already indexed: replayed by recovery or a producer-state reload
        with open(self._path, "ab") as f:
            f.write(entry.encode())
        entries.append(entry)

    def collect(self, start: int, upper: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping ``[start, upper)`` and whether the search is complete."""
        found = []
        for entry in self.entries:
            if entry.last_offset >= start and entry.first_offset < upper:
                found.append(entry)
            if entry.last_stable_offset >= upper:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above ``offset``."""
        if self._entries is None and not os.path.exists(self._path):
            self._entries = []
            return
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) == len(self.entries):
            return
        self._entries = kept
        if kept:
            with open(self._path, "wb") as f:
                f.write(b"".join(e.encode() for e in kept))
        else:
            self.delete()
            self._entries = []

    def reset(self) -> None:
        self.delete()
        self._entries = []

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        try:
            os.replace(self._path, path)
        except FileNotFoundError:
            pass
        self.file = path

    def delete(self) -> None:
        try:
            os.unlink(self._path)
        except FileNotFoundError:
            pass
        self._entries = None
