"""Leader epoch -> start offset cache (Kafka's LeaderEpochFileCache, KIP-101/KIP-279).

For each leader epoch the partition has seen, the first offset written in it, in increasing order
of both epoch and start offset (invariant kept by ``assign``, which drops entries that would
break it). Persisted to ``leader-epoch-checkpoint`` in the partition directory on every change
(see ``checkpoint.py`` for the format).

A follower becoming follower asks the leader ``end_offset_for(its latest epoch)`` (the
OffsetsForLeaderEpoch API) and truncates its log to the answer: this replaces truncation to the
high watermark, which could lose or diverge acknowledged data (the fix the seeds predate).

Not safe for concurrent use.

What it holds is atomic data, for the collector's sake: a broker hosts thousands of these,
each walked by every full garbage collection until frozen. The epochs, their start offsets and
what the file holds are tuples of ints (rebuilt on a change, which comes with a leader change,
not per record), which CPython stops tracking once a collection has seen them; the checkpoint
is kept as its path (a str) and its file object made when it is read or written; the log end
offset is passed in by the caller (no reference back to the log).
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
        self.checkpoint_path = os.fspath(checkpoint_path)
        self.deferred = deferred
        self.dirty = False  # changed since the checkpoint was last written
        self._log_end_offset = log_end_offset
        self._epochs: tuple[int, ...] = ()
        self._start_offsets: tuple[int, ...] = ()
        # What the file holds, so a close that would write the same skips it: plain
        # (epoch, start offset) pairs (a named tuple stays tracked by the collector).
        self._persisted: tuple[tuple[int, int], ...] = ()
        if read:  # False: a new partition directory, there is no file yet
            for entry in self.checkpoint.read():
                self._assign(entry)
            self._persisted = tuple(zip(self._epochs, self._start_offsets, strict=True))

    @property
    def checkpoint(self) -> LeaderEpochCheckpointFile:
        """The checkpoint file (an object made per use: the cache keeps only its path)."""
        return LeaderEpochCheckpointFile(self.checkpoint_path)

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
        epochs, starts = self._epochs, self._start_offsets
        keep = len(epochs)
        while keep and (epochs[keep - 1] >= entry.epoch or starts[keep - 1] >= entry.start_offset):
            keep -= 1
        self._epochs = (*epochs[:keep], entry.epoch)
        self._start_offsets = (*starts[:keep], entry.start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after ``end_offset`` (the log was truncated there)."""
        if end_offset < 0 or not self._epochs or self._start_offsets[-1] < end_offset:
            return
        keep = bisect.bisect_left(self._start_offsets, end_offset)
        self._epochs = self._epochs[:keep]
        self._start_offsets = self._start_offsets[:keep]
        self._changed()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop epochs wholly before it and move the
        start of the epoch containing it up to ``start_offset``."""
        if start_offset < 0 or not self._epochs or self._start_offsets[0] >= start_offset:
            return
        i = bisect.bisect_right(self._start_offsets, start_offset) - 1
        self._epochs = self._epochs[i:]
        self._start_offsets = (start_offset, *self._start_offsets[i + 1 :])
        self._changed()

    def clear_and_flush(self) -> None:
        self._epochs = self._start_offsets = ()
        self.flush(force=True)

    def _changed(self) -> None:
        self.dirty = True
        if not self.deferred:
            self.flush()

    def flush(self, *, force: bool = False, sync: bool = True) -> None:
        """Write the checkpoint if anything changed since the last write (or ``force``);
        without fsync if not ``sync`` (the caller syncs the filesystem)."""
        if self.dirty or force:
            self.checkpoint.write(self.epoch_entries, sync=sync)
            self._persisted = tuple(zip(self._epochs, self._start_offsets, strict=True))
            self.dirty = False

    def flush_on_close(self, log_end_offset: int, *, sync: bool = True) -> None:
        """The last write before the log closes: the entries that start below
        ``log_end_offset`` (loading drops the others: ``truncate_from_end`` at the log end),
        and nothing at all when the file already holds exactly those, which is the case of
        every idle empty partition whose epoch moved while the broker ran."""
        if not self.dirty:
            return
        entries = tuple(
            (epoch, start)
            for epoch, start in zip(self._epochs, self._start_offsets, strict=True)
            if start < log_end_offset
        )
        if entries != self._persisted:
            self.checkpoint.write([EpochEntry(*entry) for entry in entries], sync=sync)
            self._persisted = entries
        self.dirty = False
