"""``SharePartition``: the in-flight records of one share-partition (Kafka's SharePartition).

Pure state (no I/O, an injected clock in milliseconds): the share-partition start offset (SPSO),
the end offset (SPEO, one past the last record ever acquired) and, for every offset in
[SPSO, SPEO), its state and delivery count:

- AVAILABLE: may be acquired (again);
- ACQUIRED: handed to one member, locked until ``lock_duration_ms`` after the acquisition;
- ACKNOWLEDGED: accepted, never delivered again;
- ARCHIVED: rejected, beyond the delivery-count limit, a gap or a control record; never
  delivered again.

Invariants (tests/share/test_partition_properties.py checks them under random operations):

- an ACQUIRED record has exactly one owner; acquiring only takes AVAILABLE records or new ones,
  so a record is never held by two members at once;
- ACKNOWLEDGED and ARCHIVED are terminal: such a record is never acquired again;
- a record's delivery count is incremented on each acquisition and never exceeds
  ``delivery_count_limit``: a record released (RELEASE, lock timeout, member gone) whose count
  reached the limit is ARCHIVED instead of AVAILABLE;
- SPSO moves forward over every leading terminal record, so the window only holds the records
  still in play, and ``SPEO - SPSO`` never exceeds ``max_record_locks`` through new acquisitions
  (Kafka's ``group.share.partition.max.record.locks``).

Acknowledgements are all-or-nothing per batch: every offset of [first, last] must be ACQUIRED by
the acknowledging member, else INVALID_RECORD_STATE and nothing changes.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from kafkalite.protocol.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's RecordState; the persisted DeliveryState uses 0, 2 and 4 (ACQUIRED is
    persisted as AVAILABLE: a lock does not outlive its broker)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets with one persisted state and delivery count (Kafka's StateBatch)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class InFlightRun:
    """A run of in-flight offsets alike in state, delivery count, owner and lock deadline (the
    owner and deadline of an ACQUIRED run only)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    deadline_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Acquired:
    """An acquired range as ShareFetch returns it (AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


class SharePartition:
    def __init__(
        self,
        start_offset: int,
        *,
        delivery_count_limit: int = 5,
        lock_duration_ms: int = 30000,
        max_record_locks: int = 2000,
    ) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.lock_duration_ms = lock_duration_ms
        self.max_record_locks = max_record_locks
        self.records: dict[int, InFlight] = {}
        self.state_epoch = 0
        self.leader_epoch = -1
        """The partition's leader epoch when this state was loaded (set by the owner)."""
        self.topic_id: uuid.UUID | None = None
        """The topic id this state belongs to (set by the owner): a topic deleted and created
        again under the same name is another topic, with a state of its own."""

    # -- restoring and persisting -----------------------------------------------------------

    @classmethod
    def restore(
        cls, start_offset: int, batches: Iterable[StateBatch], **settings: int
    ) -> SharePartition:
        """The partition as persisted: ACQUIRED never is (it comes back AVAILABLE)."""
        sp = cls(start_offset, **settings)
        for batch in sorted(batches, key=lambda b: b.first_offset):
            state = RecordState(batch.delivery_state)
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
                sp.records[offset] = InFlight(state, batch.delivery_count)
            sp.end_offset = max(sp.end_offset, batch.last_offset + 1)
        # offsets inside the window the snapshot does not name were never delivered
        for offset in range(sp.start_offset, sp.end_offset):
            sp.records.setdefault(offset, InFlight(RecordState.AVAILABLE))
        sp._advance_start()
        return sp

    def state_batches(self) -> list[StateBatch]:
        """The window as runs of (persisted state, delivery count)."""
        out: list[StateBatch] = []
        run: list[int] | None = None  # [first, last, state, count]
        for offset in range(self.start_offset, self.end_offset):
            record = self.records[offset]
            state = record.state
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            if (
                run is not None
                and run[1] == offset - 1
                and run[2] == state
                and run[3] == (record.delivery_count)
            ):
                run[1] = offset
                continue
            if run is not None:
                out.append(StateBatch(*run))
            run = [offset, offset, int(state), record.delivery_count]
        if run is not None:
            out.append(StateBatch(*run))
        return out

    # -- reading the state ------------------------------------------------------------------

    def first_acquirable_offset(self) -> int:
        """The lowest offset a new acquisition could take: an AVAILABLE one in the window, or
        the end offset."""
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state is RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def can_acquire_new(self) -> bool:
        return self.end_offset - self.start_offset < self.max_record_locks

    def has_available(self) -> bool:
        return any(r.state is RecordState.AVAILABLE for r in self.records.values())

    def acquired_by(self, member_id: str) -> list[int]:
        return [
            o
            for o, r in self.records.items()
            if r.state is RecordState.ACQUIRED and r.member_id == member_id
        ]

    def next_deadline(self) -> int | None:
        deadlines = [
            r.deadline_ms for r in self.records.values() if r.state is RecordState.ACQUIRED
        ]
        return min(deadlines) if deadlines else None

    def in_flight_count(self) -> int:
        return len(self.records)

    def in_flight_runs(self) -> list[InFlightRun]:
        """The window [SPSO, SPEO) as runs of consecutive offsets alike in state, delivery
        count, owner and lock deadline (what an operator reads; changes nothing)."""
        out: list[InFlightRun] = []
        for offset in range(self.start_offset, self.end_offset):
            r = self.records[offset]
            owner = r.member_id if r.state is RecordState.ACQUIRED else None
            deadline = r.deadline_ms if r.state is RecordState.ACQUIRED else None
            last = out[-1] if out else None
            if (
                last is not None
                and last.last_offset == offset - 1
                and (last.state, last.delivery_count, last.member_id, last.deadline_ms)
                == (r.state, r.delivery_count, owner, deadline)
            ):
                out[-1] = InFlightRun(
                    last.first_offset, offset, r.state, r.delivery_count, owner, deadline
                )
            else:
                out.append(InFlightRun(offset, offset, r.state, r.delivery_count, owner, deadline))
        return out

    # -- transitions ------------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        batches: Iterable[tuple[int, int, bool]],
        max_records: int,
        now_ms: int,
    ) -> list[Acquired]:
        """Acquire up to ``max_records`` records for ``member_id`` from the log ``batches``
        read ((base offset, last offset, is control), in offset order): AVAILABLE records in
        the window first (redeliveries), then records past the end offset while the window has
        room. Offsets past the end offset that no batch holds (compacted away) and control
        records become ARCHIVED as the end offset passes them. Returns the acquired ranges."""
        taken: list[tuple[int, int]] = []  # (offset, delivery count)
        deadline = now_ms + self.lock_duration_ms
        limit = max(1, max_records)
        for base, last, control in batches:
            for offset in range(max(base, self.start_offset), last + 1):
                if len(taken) >= limit:
                    break
                if offset < self.end_offset:
                    record = self.records[offset]
                    if record.state is not RecordState.AVAILABLE:
                        continue
                else:
                    if not self.can_acquire_new():
                        break
                    # a gap before this batch: nothing to deliver there
                    for gap in range(self.end_offset, offset):
                        self.records[gap] = InFlight(RecordState.ARCHIVED)
                    record = InFlight(RecordState.ARCHIVED if control else RecordState.AVAILABLE)
                    self.records[offset] = record
                    self.end_offset = offset + 1
                    if control:
                        continue
                record.state = RecordState.ACQUIRED
                record.member_id = member_id
                record.delivery_count += 1
                record.deadline_ms = deadline
                taken.append((offset, record.delivery_count))
        self._advance_start()
        return _ranges(taken)

    def acknowledge(
        self, member_id: str, first_offset: int, last_offset: int, types: list[int]
    ) -> ErrorCode:
        """Apply one acknowledgement batch: one type for the whole range, or one per offset."""
        if last_offset < first_offset or not types:
            return ErrorCode.INVALID_REQUEST
        count = last_offset - first_offset + 1
        if len(types) not in (1, count):
            return ErrorCode.INVALID_REQUEST
        try:
            kinds = [AcknowledgeType(t) for t in types]
        except ValueError:
            return ErrorCode.INVALID_REQUEST
        for offset in range(first_offset, last_offset + 1):
            record = self.records.get(offset)
            if (
                record is None
                or record.state is not RecordState.ACQUIRED
                or record.member_id != member_id
            ):
                return ErrorCode.INVALID_RECORD_STATE
        for i, offset in enumerate(range(first_offset, last_offset + 1)):
            kind = kinds[0] if len(kinds) == 1 else kinds[i]
            record = self.records[offset]
            if kind is AcknowledgeType.ACCEPT:
                self._settle(record, RecordState.ACKNOWLEDGED)
            elif kind is AcknowledgeType.RELEASE:
                self._release(record)
            else:  # REJECT, GAP
                self._settle(record, RecordState.ARCHIVED)
        self._advance_start()
        return ErrorCode.NONE

    def release_member(self, member_id: str) -> int:
        """Everything ``member_id`` holds goes back (its session closed or it left the
        group); how many records were released."""
        released = 0
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                self._release(record)
                released += 1
        self._advance_start()
        return released

    def expire_locks(self, now_ms: int) -> int:
        """Acquisition locks past their deadline are released; how many."""
        expired = 0
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and record.deadline_ms <= now_ms:
                self._release(record)
                expired += 1
        self._advance_start()
        return expired

    def move_start(self, offset: int) -> None:
        """Records below ``offset`` are gone (the log start moved past them, or an operator
        reset the group's offsets): they leave the window."""
        if offset <= self.start_offset:
            return
        for o in range(self.start_offset, min(offset, self.end_offset)):
            self.records.pop(o, None)
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._advance_start()

    # -- internals --------------------------------------------------------------------------

    def _release(self, record: InFlight) -> None:
        if record.delivery_count >= self.delivery_count_limit:
            self._settle(record, RecordState.ARCHIVED)
        else:
            self._settle(record, RecordState.AVAILABLE)

    @staticmethod
    def _settle(record: InFlight, state: RecordState) -> None:
        record.state = state
        record.member_id = None
        record.deadline_ms = 0

    def _advance_start(self) -> None:
        start = self.start_offset
        records = self.records
        while start < self.end_offset and records[start].state in TERMINAL:
            del records[start]
            start += 1
        self.start_offset = start


def _ranges(taken: list[tuple[int, int]]) -> list[Acquired]:
    """Consecutive offsets with one delivery count as one range."""
    out: list[Acquired] = []
    for offset, count in taken:
        if out and out[-1].last_offset == offset - 1 and out[-1].delivery_count == count:
            last = out[-1]
            out[-1] = Acquired(last.first_offset, offset, count)
        else:
            out.append(Acquired(offset, offset, count))
    return out
