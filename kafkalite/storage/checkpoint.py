"""Checkpoint files in Kafka's text format, written atomically.

Format (Kafka's ``CheckpointFile``)::

    <version>\\n          always 0
    <entry count>\\n
    <entry>\\n            one line per entry, fields separated by one space

Entries:

* ``OffsetCheckpointFile`` (``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint``,
  ``log-start-offset-checkpoint``, one per log directory): ``<topic> <partition> <offset>``.
* ``LeaderEpochCheckpointFile`` (``leader-epoch-checkpoint``, one per partition directory):
  ``<leader epoch> <start offset>``.

Writes are atomic: the content goes to ``<name>.tmp``, is fsynced, renamed over the file and the
directory is fsynced, so a crash leaves either the old or the new checkpoint, never a mix.
A file that does not parse raises ``StorageError`` naming it (Kafka: "Malformed line in
checkpoint file").
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar

from kafkalite.storage.errors import StorageError

CURRENT_VERSION = 0

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT_FILE = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"

T = TypeVar("T")


def fsync_dir(dir: str | os.PathLike[str]) -> None:
    fd = os.open(dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_filesystem(dir: str | os.PathLike[str]) -> None:
    """Write back everything of the filesystem holding ``dir`` (Linux ``syncfs``; ``sync``
    elsewhere): one call instead of one fsync per file when thousands of logs close."""
    fd = os.open(dir, os.O_RDONLY)
    try:
        syncfs = _libc_syncfs()
        if syncfs is None:
            os.sync()
        elif syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(dir))
    finally:
        os.close(fd)


_SYNCFS: list = []


def _libc_syncfs():
    if not _SYNCFS:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _SYNCFS.append(libc.syncfs)
        except (OSError, AttributeError):
            _SYNCFS.append(None)
    return _SYNCFS[0]


def atomic_write_text(path: Path, text: str, *, sync: bool = True) -> None:
    """Write ``text`` to ``path`` via temp file + fsync + rename + directory fsync (without
    the fsyncs when ``sync`` is False: the caller syncs the filesystem afterwards)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = text.encode()
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


class CheckpointFile(Generic[T]):
    """A versioned list of entries, one per line."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        format_entry: Callable[[T], str],
        parse_entry: Callable[[list[str]], T],
        fields: int,
        version: int = CURRENT_VERSION,
    ) -> None:
        # The Path is made when first used: a broker loading 10,000 logs makes a leader epoch
        # checkpoint each, most never read nor written at start-up (a Path's construction was
        # a visible part of the load).
        self._path: str | os.PathLike[str] = path
        self._format = format_entry
        self._parse = parse_entry
        self._fields = fields
        self.version = version

    @property
    def path(self) -> Path:
        path = self._path
        if not isinstance(path, Path):
            path = self._path = Path(path)
        return path

    @path.setter
    def path(self, path: str | os.PathLike[str]) -> None:
        self._path = path

    def write(self, entries: Iterable[T], *, sync: bool = True) -> None:
        lines = [self._format(entry) for entry in entries]
        atomic_write_text(
            self.path,
            f"{self.version}\n{len(lines)}\n" + "".join(f"{line}\n" for line in lines),
            sync=sync,
        )

    def read(self) -> list[T]:
        """The entries; [] if the file does not exist."""
        checked = self.entry_lines()
        if checked is None:
            return []
        lines, expected = checked
        entries = []
        for line in lines:
            parts = line.split(" ")
            if len(parts) != self._fields:
                raise StorageError(f"Malformed line in checkpoint file {self.path}: {line!r}")
            try:
                entries.append(self._parse(parts))
            except ValueError:
                raise StorageError(
                    f"Malformed line in checkpoint file {self.path}: {line!r}"
                ) from None
        if len(entries) != expected:
            raise StorageError(
                f"Expected {expected} entries in checkpoint file {self.path}, but found only {len(entries)}"
            )
        return entries

    def entry_lines(self) -> tuple[list[str], int] | None:
        """The entry lines and the count the file gives, its version and count lines checked;
        None if the file does not exist."""
        try:
            with open(self._path) as f:
                text = f.read()
        except FileNotFoundError:
            return None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        try:
            version = int(lines[0])
        except (IndexError, ValueError):
            raise StorageError(f"Malformed version line in checkpoint file {self.path}") from None
        if version != self.version:
            raise StorageError(f"Unrecognized version {version} of the checkpoint file {self.path}")
        try:
            expected = int(lines[1])
        except (IndexError, ValueError):
            raise StorageError(f"Malformed count line in checkpoint file {self.path}") from None
        return lines[2:], expected


class OffsetCheckpointFile:
    """``topic partition offset`` lines, read and written as ``{(topic, partition): offset}``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file: CheckpointFile[tuple[str, int, int]] = CheckpointFile(
            path,
            lambda e: f"{e[0]} {e[1]} {e[2]}",
            lambda parts: (parts[0], int(parts[1]), int(parts[2])),
            fields=3,
        )

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, offsets: dict[tuple[str, int], int]) -> None:
        self._file.write(
            (topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())
        )

    def read(self) -> dict[tuple[str, int], int]:
        """The offsets; {} if the file does not exist. A broker's start reads three of these
        with a line per partition (10,000 and more): the lines are parsed straight into the
        dict; a malformed line or count goes through ``CheckpointFile.read``, which says what is
        wrong (the same files are accepted and refused either way)."""
        checked = self._file.entry_lines()
        if checked is None:
            return {}
        lines, expected = checked
        offsets: dict[tuple[str, int], int] = {}
        try:
            for line in lines:
                topic, partition, offset = line.split(" ")
                offsets[(topic, int(partition))] = int(offset)
        except ValueError:
            pass  # a malformed line: the general reader names it
        else:
            if len(lines) == expected:
                return offsets
        return {(topic, partition): offset for topic, partition, offset in self._file.read()}


class EpochEntry(NamedTuple):
    """A leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


def _format_epoch_entry(e: EpochEntry) -> str:
    return f"{e.epoch} {e.start_offset}"


def _parse_epoch_entry(parts: list[str]) -> EpochEntry:
    return EpochEntry(int(parts[0]), int(parts[1]))


class LeaderEpochCheckpointFile:
    """``epoch start_offset`` lines."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file: CheckpointFile[EpochEntry] = CheckpointFile(
            path, _format_epoch_entry, _parse_epoch_entry, fields=2
        )

    @property
    def path(self) -> Path:
        return self._file.path

    @path.setter
    def path(self, path: str | os.PathLike[str]) -> None:
        """The partition directory was renamed: the file is now at ``path``."""
        self._file.path = Path(path)

    def write(self, entries: Iterable[EpochEntry], *, sync: bool = True) -> None:
        self._file.write(entries, sync=sync)

    def read(self) -> list[EpochEntry]:
        return self._file.read()
