"""Errors raised by the storage engine.

Foreign exceptions (``OSError`` from the file system) are converted here, at the storage boundary,
into the project's own: a failing log directory becomes :class:`LogDirFailure` naming the
directory, which the broker maps to Kafka's KAFKA_STORAGE_ERROR for the partitions stored there
(the partition goes offline; the process keeps running).

Index and segment corruption found while loading is not an error for callers: the log rebuilds
the damaged files (``CorruptIndexError`` is internal to recovery).
"""

from __future__ import annotations

from kafkalite.protocol.errors import KafkaStorageError


class StorageError(KafkaStorageError):
    """Base of every storage failure; maps to KAFKA_STORAGE_ERROR on the wire."""


class LogDirFailure(StorageError):
    """An I/O error (full disk, permission denied, ...) in log directory ``dir``.

    Every partition stored in ``dir`` goes offline; ``LogManager.offline_dirs`` lists it.
    """

    def __init__(self, dir: str, cause: BaseException | None = None) -> None:
        self.dir = str(dir)
        self.cause = cause
        detail = f": {cause}" if cause is not None else ""
        super().__init__(f"Error in log directory {self.dir}{detail}")


class LogOfflineError(StorageError):
    """An operation on a log whose directory has failed (Kafka: KafkaStorageException)."""


class CorruptIndexError(StorageError):
    """An index file fails its sanity check (Kafka: CorruptIndexException); rebuilt on load."""


class InvalidOffsetError(StorageError):
    """An index append that does not keep offsets increasing (Kafka: InvalidOffsetException)."""


class IndexOffsetOverflowError(StorageError):
    """An offset too far from the segment's base offset to be stored as int32 relative offset."""


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose first offset is below the log end offset (Kafka's
    UnexpectedAppendOffsetException): the fetcher truncates and retries."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        super().__init__(message)


class OffsetsOutOfOrderError(StorageError):
    """Batches in one append whose offsets do not increase (Kafka's OffsetsOutOfOrderException)."""
