"""Leader epoch -> start offset cache (Kafka's LeaderEpochFileCache, KIP-101/KIP-279).

For each leader epoch the partition has seen, the first offset written in it, in increasing order
of both epoch and start offset (invariant kept by ``assign``, which drops entries that would
break it). Persisted to ``leader-epoch-checkpoint`` in the partition directory on every change
(see ``checkpoint.py`` for the format).

A follower becoming follower asks the leader ``end_offset_for(its latest epoch)`` (the
OffsetsForLeaderEpoch API) and truncates its log to the answer: this replaces truncation to the
high watermark, which could lose or diverge acknowledged data (the fix the seeds predate).

Not safe for concurrent use.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable

from kafkalite.storage.checkpoint import EpochEntry, LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    def __init__(
        self,
        checkpoint_path: str | os.PathLike[str],
        log_end_offset: Callable[[], int] | None = None,
        *,
        deferred: bool = False,
        read: bool = True,
    ) -> None:
        self.checkpoint = LeaderEpochCheckpointFile(checkpoint_path)
        self.deferred = deferred
        self.dirty = False  # changed since the checkpoint was last written
        self._log_end_offset = log_end_offset
        self._epochs: list[int] = []
        self._start_offsets: list[int] = []
        # What the file holds (None: unknown), so a close that would write the same skips it.
        self._persisted: list[EpochEntry] | None = None
        if read:  # False: a new partition directory, there is no file yet
            for entry in self.checkpoint.read():
                self._assign(entry)
            self._persisted = self.epoch_entries
        else:
            self._persisted = []

    # ---------------------------------------------------------------- queries

    @property
    def epoch_entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, o) for e, o in zip(self._epochs, self._start_offsets, strict=True)]

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._start_offsets[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._start_offsets[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch in which ``offset`` was written (None if before every known epoch)."""
        i = bisect.bisect_right(self._start_offsets, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def previous_epoch(self) -> int | None:
        return self._epochs[-2] if len(self._epochs) >= 2 else None

    def end_offset_for(
        self, requested_epoch: int, log_end_offset: int | None = None
    ) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch, with Kafka's semantics.

        * requested epoch undefined (-1): (-1, -1);
        * the latest epoch: (epoch, log end offset);
        * an older epoch: (largest known epoch <= requested, start offset of the first epoch
          after it) -- the offset where the requester's log may start to diverge;
        * older than every known epoch: (requested, start offset of the first known epoch);
        * newer than every known epoch: (-1, -1).
        """
        if log_end_offset is None:
            log_end_offset = (
                self._log_end_offset()
                if self._log_end_offset is not None
                else UNDEFINED_EPOCH_OFFSET
            )
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._start_offsets[0]
        return self._epochs[higher - 1], self._start_offsets[higher]

    # ---------------------------------------------------------------- updates

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True (and persisted) if changed.

        An entry with epoch >= ``epoch`` or start offset >= ``start_offset`` is removed first so
        both stay strictly increasing.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Invalid leader epoch entry ({epoch}, {start_offset})")
        if not self._assign(EpochEntry(epoch, start_offset)):
            return False
        self._changed()
        return True

    def _assign(self, entry: EpochEntry) -> bool:
        if self._epochs and not (
            entry.epoch != self._epochs[-1] or entry.start_offset < self._start_offsets[-1]
        ):
            return False
        while self._epochs and (
            self._epochs[-1] >= entry.epoch or self._start_offsets[-1] >= entry.start_offset
        ):
            self._epochs.pop()
            self._start_offsets.pop()
        self._epochs.append(entry.epoch)
        self._start_offsets.append(entry.start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after ``end_offset`` (the log was truncated there)."""
        if end_offset < 0 or not self._epochs or self._start_offsets[-1] < end_offset:
            return
        keep = bisect.bisect_left(self._start_offsets, end_offset)
        del self._epochs[keep:]
        del self._start_offsets[keep:]
        self._changed()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop epochs wholly before it and move the
        start of the epoch containing it up to ``start_offset``."""
        if start_offset < 0 or not self._epochs or self._start_offsets[0] >= start_offset:
            return
        i = bisect.bisect_right(self._start_offsets, start_offset) - 1
        epoch = self._epochs[i]
        del self._epochs[: i + 1]
        del self._start_offsets[: i + 1]
        self._epochs.insert(0, epoch)
        self._start_offsets.insert(0, start_offset)
        self._changed()

    def clear_and_flush(self) -> None:
        self._epochs.clear()
        self._start_offsets.clear()
        self.flush(force=True)

    def _changed(self) -> None:
        self.dirty = True
        if not self.deferred:
            self.flush()

    def flush(self, *, force: bool = False, sync: bool = True) -> None:
        """Write the checkpoint if anything changed since the last write (or ``force``);
        without fsync if not ``sync`` (the caller syncs the filesystem)."""
        if self.dirty or force:
            entries = self.epoch_entries
            self.checkpoint.write(entries, sync=sync)
            self._persisted = entries
            self.dirty = False

    def flush_on_close(self, log_end_offset: int, *, sync: bool = True) -> None:
        """The last write before the log closes: the entries that start below
        ``log_end_offset`` (loading drops the others: ``truncate_from_end`` at the log end),
        and nothing at all when the file already holds exactly those, which is the case of
        every idle empty partition whose epoch moved while the broker ran."""
        if not self.dirty:
            return
        entries = [e for e in self.epoch_entries if e.start_offset < log_end_offset]
        if entries != self._persisted:
            self.checkpoint.write(entries, sync=sync)
            self._persisted = entries
        self.dirty = False
