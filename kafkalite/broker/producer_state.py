"""Idempotent-producer state of one partition (Kafka's ProducerStateManager).

For every producer id that wrote to the partition the leader keeps a ``ProducerStateEntry``: the
producer epoch and the metadata of the last ``NUM_BATCHES_TO_RETAIN`` (5, the producer's
``max.in.flight.requests.per.connection`` limit for idempotence) batches it appended: last
sequence, last offset, offset delta, max timestamp. With it the leader

- acknowledges a retried batch (same producer id, epoch, first and last sequence as one of the
  retained batches) with the offsets it was first written at, without appending it again;
- rejects an older epoch with INVALID_PRODUCER_EPOCH (Kafka 2.7+ answers produce requests with it
  instead of PRODUCER_FENCED so the client can abort and retry);
- rejects a gap in the sequence with OUT_OF_ORDER_SEQUENCE_NUMBER. As in Kafka 3.x
  (KIP-360), a producer the partition does not know is accepted at any sequence (its state may
  have been removed by retention or DeleteRecords); UNKNOWN_PRODUCER_ID is never returned by
  produce. A new epoch of a known producer must start at sequence 0.

Sequence arithmetic wraps at 2**31 - 1 like Kafka's (after Integer.MAX_VALUE comes 0).

Validation is two-phase so a failed append leaves the state untouched: ``prepare`` returns
``ProducerAppendInfo`` objects (validated, not applied) and ``update`` applies them after the
records are in the log. Only batch headers are read, never records.

Persistence: the state is rebuilt on load from the newest snapshot at or below the log end
offset, then by scanning the batch headers of the log from the snapshot's offset (or the log
start offset) to the log end. Snapshots are Kafka's format, ``<offset, 20 digits>.snapshot`` in
the partition directory, offset = the map end offset they cover::

    version int16 (1) | crc int32 (CRC32C of everything after it) | count int32 |
    count x (producer_id int64, producer_epoch int16, last_sequence int32, last_offset int64,
             offset_delta int32, timestamp int64, coordinator_epoch int32,
             current_txn_first_offset int64)

Not safe to use from several threads; the broker uses it from one event loop.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from crc32c import crc32c

from kafkalite.protocol.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from kafkalite.protocol.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, RecordBatchHeader

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
SNAPSHOTS_TO_KEEP = 2
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms

_SNAPSHOT_HEAD = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


class AppendOrigin(Enum):
    """Who appends: clients are fully validated, the coordinator (offset commits, no sequences)
    has its epoch checked, replication and log recovery are trusted."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping after 2**31 - 1 to 0 (DefaultRecordBatch.incrementSequence)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is kept of one appended batch."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """One producer's state: epoch and its last (at most 5) batches, oldest first."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=deque)
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batches[0].first_offset if self.batches else -1

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches),
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        """A new epoch starts a new sequence space: the retained batches no longer apply."""
        if self.producer_epoch != epoch:
            self.batches.clear()
            self.producer_epoch = epoch
            return True
        return False

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        while len(self.batches) > NUM_BATCHES_TO_RETAIN:
            self.batches.popleft()
        self.last_timestamp = timestamp

    def find_duplicate_batch(self, header: RecordBatchHeader) -> BatchMetadata | None:
        """The retained batch with the same epoch and sequence range as ``header``, if any."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first_seq, last_seq = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker: its first offset and the marker's offset (Kafka's
    CompletedTxn; whether it was aborted is read from the marker by the partition)."""

    producer_id: int
    first_offset: int
    last_offset: int


class ProducerAppendInfo:
    """Validates the batches one producer appends in one request against its current entry and
    accumulates the updated entry; nothing is applied until ``ProducerStateManager.update``."""

    def __init__(
        self,
        partition_name: str,
        producer_id: int,
        current_entry: ProducerStateEntry,
        origin: AppendOrigin,
    ) -> None:
        self.partition_name = partition_name
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = origin
        self.updated_entry = ProducerStateEntry(
            producer_id,
            current_entry.producer_epoch,
            deque(),
            current_entry.coordinator_epoch,
            current_entry.last_timestamp,
            current_entry.current_txn_first_offset,
        )
        self.completed_txns: list[CompletedTxn] = []

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        if producer_epoch < self.updated_entry.producer_epoch:
            if self.origin is AppendOrigin.REPLICATION:
                return  # the leader validated it; a follower copies what the leader has
            raise InvalidProducerEpochError(
                f"Epoch of producer {self.producer_id} at offset {offset} in "
                f"{self.partition_name} is {producer_epoch}, which is smaller than the last "
                f"seen epoch {self.updated_entry.producer_epoch}"
            )

    def _check_sequence(self, producer_epoch: int, append_first_seq: int, offset: int) -> None:
        if producer_epoch != self.updated_entry.producer_epoch:
            if append_first_seq != 0 and self.updated_entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceNumberError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset} in {self.partition_name}: {producer_epoch} (request "
                    f"epoch), {append_first_seq} (seq. number), "
                    f"{self.updated_entry.producer_epoch} (current producer epoch)"
                )
            return
        if not self.updated_entry.is_empty:
            current_last_seq = self.updated_entry.last_seq
        elif producer_epoch == self.current_entry.producer_epoch:
            current_last_seq = self.current_entry.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        # With no known epoch (state removed by retention or DeleteRecords) any sequence goes.
        if not (
            self.current_entry.producer_epoch == NO_PRODUCER_EPOCH
            or in_sequence(current_last_seq, append_first_seq)
        ):
            raise OutOfOrderSequenceNumberError(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset} in {self.partition_name}: {append_first_seq} (incoming seq. "
                f"number), {current_last_seq} (current end sequence number)"
            )

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self.updated_entry.add_batch(
            epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp
        )
        txn_first = self.updated_entry.current_txn_first_offset
        if txn_first is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset} in {self.partition_name}"
            )
        if txn_first is None and is_transactional:
            self.updated_entry.current_txn_first_offset = first_offset

    def append_control_batch(
        self,
        header: RecordBatchHeader,
        offset: int | None = None,
        coordinator_epoch: int | None = None,
    ) -> None:
        # A control batch (transaction marker) ends the producer's transaction. Its record
        # is not decoded here: the partition reads the marker back from the log for the
        # transactions it completes (``completed_txns``), and, as leader, passes the marker's
        # coordinator epoch, which must not be older than the last one seen (a coordinator
        # that lost its partition is fenced: TRANSACTION_COORDINATOR_FENCED).
        marker_offset = header.base_offset if offset is None else offset
        if coordinator_epoch is not None:
            if coordinator_epoch < self.updated_entry.coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"Invalid coordinator epoch for producer {self.producer_id} at offset "
                    f"{marker_offset} in {self.partition_name}: {coordinator_epoch} (zombie), "
                    f"{self.updated_entry.coordinator_epoch} (current)"
                )
            self.updated_entry.coordinator_epoch = coordinator_epoch
        self._check_producer_epoch(header.producer_epoch, marker_offset)
        self.updated_entry.maybe_update_producer_epoch(header.producer_epoch)
        first = self.updated_entry.current_txn_first_offset
        self.completed_txns.append(
            CompletedTxn(self.producer_id, marker_offset if first is None else first, marker_offset)
        )
        self.updated_entry.current_txn_first_offset = None
        self.updated_entry.last_timestamp = header.max_timestamp

    def append(
        self,
        header: RecordBatchHeader,
        first_offset: int | None = None,
        coordinator_epoch: int | None = None,
    ) -> None:
        """Validate and accumulate one batch; ``first_offset`` overrides the header's base offset
        (the offset the leader is about to assign); ``coordinator_epoch`` is a marker's."""
        base = header.base_offset if first_offset is None else first_offset
        if header.is_control:
            self.append_control_batch(header, base, coordinator_epoch)
            return
        self.append_data_batch(
            header.producer_epoch,
            header.base_sequence,
            header.last_sequence,
            header.max_timestamp,
            base,
            base + header.last_offset_delta,
            header.is_transactional,
        )


class ProducerStateManager:
    """Producer entries of one partition, the offset they are valid up to (``map_end_offset``)
    and their snapshots. ``update`` must be called in offset order."""

    def __init__(
        self,
        partition_name: str,
        log_dir: str | None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.partition_name = partition_name
        self.log_dir = log_dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self.last_snapshot_offset: int | None = None
        # producer id -> first offset of its open transaction (Kafka's ongoingTxns)
        self.ongoing_txns: dict[int, int] = {}
        # transactions ended by markers since the owner last took them (take_completed_txns);
        # a tuple, () while there is none: no list per partition for the collector to walk
        self.completed_txns: tuple[CompletedTxn, ...] = ()

    # -- queries ------------------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    @property
    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return self.producers

    def find_duplicate_batch(self, header: RecordBatchHeader) -> BatchMetadata | None:
        entry = self.producers.get(header.producer_id)
        return None if entry is None else entry.find_duplicate_batch(header)

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction (the LSO is min(this, HW))."""
        return min(self.ongoing_txns.values()) if self.ongoing_txns else None

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO recorded with an aborted transaction: the oldest other open transaction's
        first offset, else the offset after the marker (Kafka's lastStableOffset(completedTxn))."""
        others = [o for pid, o in self.ongoing_txns.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def take_completed_txns(self) -> list[CompletedTxn]:
        done, self.completed_txns = list(self.completed_txns), ()
        return done

    # -- two-phase update ---------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(self.partition_name, producer_id, current, origin)

    def prepare(
        self,
        headers: Iterable[RecordBatchHeader],
        first_offset: int,
        origin: AppendOrigin,
        coordinator_epochs: dict[int, int] | None = None,
    ) -> tuple[dict[int, ProducerAppendInfo], BatchMetadata | None]:
        """Validate the batches of one append that will start at ``first_offset``.

        Returns the append infos to apply after the append, or a duplicate: the metadata of an
        already appended batch that a client retried (then nothing must be appended). Raises
        ``OutOfOrderSequenceNumberError``, ``InvalidProducerEpochError``,
        ``InvalidTxnStateError``.
        """
        infos: dict[int, ProducerAppendInfo] = {}
        offset = first_offset
        for i, header in enumerate(headers):
            if header.has_producer_id:
                if origin is AppendOrigin.CLIENT:
                    duplicate = self.find_duplicate_batch(header)
                    if duplicate is not None:
                        return {}, duplicate
                info = infos.get(header.producer_id)
                if info is None:
                    info = infos[header.producer_id] = self.prepare_update(
                        header.producer_id, origin
                    )
                info.append(
                    header,
                    offset,
                    None if coordinator_epochs is None else coordinator_epochs.get(i),
                )
            offset += header.last_offset_delta + 1
        return infos, None

    def update(self, info: ProducerAppendInfo) -> None:
        entry = info.updated_entry
        if entry.current_txn_first_offset is None:
            self.ongoing_txns.pop(info.producer_id, None)
        else:
            self.ongoing_txns[info.producer_id] = entry.current_txn_first_offset
        if info.completed_txns:
            self.completed_txns += tuple(info.completed_txns)
        current = self.producers.get(info.producer_id)
        if current is None:
            self.producers[info.producer_id] = entry.copy()
            return
        if current.producer_epoch != entry.producer_epoch:
            current.batches.clear()
        current.producer_epoch = entry.producer_epoch
        for batch in entry.batches:
            current.batches.append(batch)
            while len(current.batches) > NUM_BATCHES_TO_RETAIN:
                current.batches.popleft()
        current.coordinator_epoch = entry.coordinator_epoch
        current.last_timestamp = entry.last_timestamp
        current.current_txn_first_offset = entry.current_txn_first_offset

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def apply(self, infos: Iterable[ProducerAppendInfo], map_end_offset: int) -> None:
        for info in infos:
            self.update(info)
        self.update_map_end_offset(map_end_offset)

    def load_batches(self, headers: Iterable[RecordBatchHeader]) -> None:
        """Replay appended batches (offsets from their headers), trusting them."""
        for header in headers:
            if header.last_offset < self.map_end_offset:
                continue
            if header.has_producer_id:
                info = self.prepare_update(header.producer_id, AppendOrigin.REPLICATION)
                info.append(header)
                self.update(info)
            self.map_end_offset = header.next_offset

    # -- maintenance --------------------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms`` with no open transaction."""
        expired = [
            pid
            for pid, entry in self.producers.items()
            if entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return expired

    def truncate_head(self, log_start_offset: int) -> None:
        """The log start advanced: drop snapshots below it. Entries stay (KIP-360)."""
        for offset in self.list_snapshot_offsets():
            if offset < log_start_offset:
                self._delete_snapshot(offset)

    def reset(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.completed_txns = ()
        self.map_end_offset = 0

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> str:
        assert self.log_dir is not None
        return os.path.join(self.log_dir, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def list_snapshot_offsets(self) -> list[int]:
        if self.log_dir is None:
            return []
        try:
            names = os.listdir(self.log_dir)
        except (FileNotFoundError, NotADirectoryError):
            return []
        offsets = []
        for name in names:
            stem, ext = os.path.splitext(name)
            if ext == SNAPSHOT_SUFFIX and stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def _delete_snapshot(self, offset: int) -> None:
        try:
            os.unlink(self.snapshot_path(offset))
        except FileNotFoundError:
            pass

    def take_snapshot(self) -> int | None:
        """Write the state at ``map_end_offset`` (once per offset); returns the offset written."""
        snapshot = self.prepare_snapshot()
        if snapshot is None:
            return None
        offset, path, payload = snapshot
        self.write_snapshot(path, payload)
        self.complete_snapshot(offset)
        return offset

    def prepare_snapshot(self) -> tuple[int, str, bytes] | None:
        """``(offset, path, bytes)`` of the snapshot to write now, or None when there is
        nothing new to save. Reads the state (on its owner's loop); the bytes may then be
        written anywhere (``write_snapshot``, e.g. in a worker thread), and
        ``complete_snapshot`` records it."""
        if self.log_dir is None:
            return None
        if self.map_end_offset == 0 and self.last_snapshot_offset is None:
            # Nothing appended since offset 0 (Kafka's lastSnapOffset starts at 0): a reload
            # replays nothing, so there is nothing to save (an idle partition costs no file
            # and no fsync at every shutdown).
            return None
        if self.last_snapshot_offset == self.map_end_offset and os.path.exists(
            self.snapshot_path(self.map_end_offset)
        ):
            return None
        payload = bytearray(_SNAPSHOT_HEAD.size)
        struct.pack_into(">i", payload, 6, len(self.producers))
        for entry in self.producers.values():
            last = entry.batches[-1] if entry.batches else None
            payload += _SNAPSHOT_ENTRY.pack(
                entry.producer_id,
                entry.producer_epoch,
                last.last_seq if last else NO_SEQUENCE,
                last.last_offset if last else -1,
                last.offset_delta if last else 0,
                entry.last_timestamp,
                entry.coordinator_epoch,
                -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
            )
        struct.pack_into(">h", payload, 0, SNAPSHOT_VERSION)
        struct.pack_into(">I", payload, 2, crc32c(memoryview(payload)[6:]))
        return self.map_end_offset, self.snapshot_path(self.map_end_offset), bytes(payload)

    @staticmethod
    def write_snapshot(path: str, payload: bytes) -> None:
        """Write a snapshot file atomically (temp + fsync + rename) and delete the older ones
        beyond SNAPSHOTS_TO_KEEP in its directory. File work only: safe in a worker thread."""
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dir = os.path.dirname(path)
        offsets = sorted(
            int(stem)
            for stem, ext in (os.path.splitext(name) for name in os.listdir(dir))
            if ext == SNAPSHOT_SUFFIX and stem.isdigit()
        )
        for offset in offsets[:-SNAPSHOTS_TO_KEEP]:
            try:
                os.unlink(os.path.join(dir, f"{offset:020d}{SNAPSHOT_SUFFIX}"))
            except FileNotFoundError:
                pass

    def complete_snapshot(self, offset: int) -> None:
        self.last_snapshot_offset = offset

    @staticmethod
    def read_snapshot(path: str) -> list[ProducerStateEntry]:
        """Entries of a snapshot file; raises ValueError when it is corrupt."""
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < _SNAPSHOT_HEAD.size:
            raise ValueError(f"snapshot {path} is truncated")
        version, crc, count = _SNAPSHOT_HEAD.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"snapshot {path} has unknown version {version}")
        if crc32c(memoryview(data)[6:]) != crc:
            raise ValueError(f"snapshot {path} fails its CRC")
        if len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
            raise ValueError(f"snapshot {path} has a bad length")
        entries = []
        for i in range(count):
            pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first = (
                _SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEAD.size + i * _SNAPSHOT_ENTRY.size)
            )
            entry = ProducerStateEntry(pid, epoch, deque(), coord_epoch, ts, None)
            if last_offset >= 0:
                entry.batches.append(BatchMetadata(last_seq, last_offset, delta, ts))
            entry.current_txn_first_offset = None if txn_first < 0 else txn_first
            entries.append(entry)
        return entries

    def truncate_and_reload(
        self,
        log_start_offset: int,
        log_end_offset: int,
        read_headers: Callable[[int], Iterator[RecordBatchHeader]],
    ) -> None:
        """Rebuild the state for a log spanning [log_start_offset, log_end_offset).

        Snapshots above the log end (a truncated tail) or below the log start are deleted; the
        newest remaining one that reads cleanly is loaded; then ``read_headers(offset)`` (the
        batch headers of the log from ``offset`` to its end) is replayed. Without a snapshot the
        whole log is scanned.
        """
        kept = []
        for offset in self.list_snapshot_offsets():  # one listing of the directory
            if offset > log_end_offset or offset < log_start_offset:
                self._delete_snapshot(offset)
            else:
                kept.append(offset)
        self.reset()
        self.last_snapshot_offset = None
        for offset in reversed(kept):
            try:
                entries = self.read_snapshot(self.snapshot_path(offset))
            except (OSError, ValueError):
                self._delete_snapshot(offset)
                continue
            self.producers = {entry.producer_id: entry for entry in entries}
            self.ongoing_txns = {
                e.producer_id: e.current_txn_first_offset
                for e in entries
                if e.current_txn_first_offset is not None
            }
            self.map_end_offset = offset
            self.last_snapshot_offset = offset
            break
        if self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset
        if self.map_end_offset < log_end_offset:
            self.load_batches(read_headers(self.map_end_offset))
        self.map_end_offset = log_end_offset
