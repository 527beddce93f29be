"""Property-based tests of the share-partition state machine (kafkalite/share/partition.py):
random acquisitions by several members, acknowledgements of every type (valid or not), members
leaving, the clock passing lock deadlines, and a restore from the persisted state.

Invariants checked after every step:
- an accepted (or rejected) record is never acquired again;
- a record's delivery count never exceeds the limit;
- a record is never held by two members at once;
- the window [start, end) never grows past ``max_record_locks`` through acquisitions.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkalite.protocol.errors import ErrorCode
from kafkalite.share.partition import AcknowledgeType, RecordState, SharePartition

MEMBERS = ("m1", "m2", "m3")
LIMIT = 3
LOCK_MS = 100
MAX_LOCKS = 100


def log_batches(end: int) -> list[tuple[int, int, bool]]:
    """A log of batches of 1 to 4 records, every seventh batch a control batch."""
    out, offset, i = [], 0, 0
    while offset < end:
        size = 1 + (i * 3) % 4
        out.append((offset, min(end, offset + size) - 1, i % 7 == 6))
        offset += size
        i += 1
    return out


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sp = SharePartition(
            0, delivery_count_limit=LIMIT, lock_duration_ms=LOCK_MS, max_record_locks=MAX_LOCKS
        )
        self.now = 0
        self.log_end = 0
        self.held: dict[int, tuple[str, int]] = {}  # offset -> (member, deadline)
        self.done: set[int] = set()  # accepted or rejected
        self.deliveries: dict[int, int] = {}

    @rule(n=st.integers(1, 40))
    def produce(self, n: int) -> None:
        self.log_end += n

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 30))
    def acquire(self, member: str, max_records: int) -> None:
        start = self.sp.first_acquirable_offset()
        batches = [b for b in log_batches(self.log_end) if b[1] >= start]
        got = self.sp.acquire(member, batches, max_records, self.now)
        for a in got:
            for offset in range(a.first_offset, a.last_offset + 1):
                assert offset not in self.held, f"{offset} handed to two members"
                assert offset not in self.done, f"{offset} delivered after it was settled"
                self.deliveries[offset] = self.deliveries.get(offset, 0) + 1
                assert a.delivery_count == self.deliveries[offset]
                self.held[offset] = (member, self.now + LOCK_MS)

    @rule(
        member=st.sampled_from(MEMBERS),
        kind=st.sampled_from(list(AcknowledgeType)),
        data=st.data(),
    )
    def acknowledge(self, member: str, kind: AcknowledgeType, data) -> None:
        if self.log_end == 0:
            return
        first = data.draw(st.integers(0, self.log_end - 1))
        last = data.draw(st.integers(first, min(self.log_end - 1, first + 5)))
        error = self.sp.acknowledge(member, first, last, [int(kind)])
        owned = all(self.held.get(o, ("", 0))[0] == member for o in range(first, last + 1))
        assert (error is ErrorCode.NONE) == owned
        if error is ErrorCode.NONE:
            for offset in range(first, last + 1):
                del self.held[offset]
                if kind in (AcknowledgeType.ACCEPT, AcknowledgeType.REJECT, AcknowledgeType.GAP):
                    self.done.add(offset)
                elif self.deliveries[offset] >= LIMIT:
                    self.done.add(offset)

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        self.sp.release_member(member)
        for offset in [o for o, (m, _) in self.held.items() if m == member]:
            del self.held[offset]
            if self.deliveries[offset] >= LIMIT:
                self.done.add(offset)

    @rule(ms=st.integers(1, 150))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self.sp.expire_locks(self.now)
        for offset in [o for o, (_, d) in self.held.items() if d <= self.now]:
            del self.held[offset]
            if self.deliveries[offset] >= LIMIT:
                self.done.add(offset)

    @precondition(lambda self: not self.held)
    @rule()
    def restart(self) -> None:
        """Persist and restore (a broker restart with nothing acquired)."""
        self.sp = SharePartition.restore(
            self.sp.start_offset,
            self.sp.state_batches(),
            delivery_count_limit=LIMIT,
            lock_duration_ms=LOCK_MS,
            max_record_locks=MAX_LOCKS,
        )

    @invariant()
    def delivery_counts_within_limit(self) -> None:
        assert all(r.delivery_count <= LIMIT for r in self.sp.records.values())

    @invariant()
    def state_matches_the_model(self) -> None:
        for offset, record in self.sp.records.items():
            if record.state is RecordState.ACQUIRED:
                assert self.held[offset][0] == record.member_id
            if offset in self.done:
                assert record.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        assert all(o < self.sp.start_offset or o in self.sp.records for o in self.held)

    @invariant()
    def window_bounded(self) -> None:
        assert self.sp.end_offset - self.sp.start_offset <= MAX_LOCKS
        assert self.sp.start_offset <= self.sp.end_offset

    @invariant()
    def in_flight_runs_describe_the_window(self) -> None:
        """What the admin API shows: runs that cover [SPSO, SPEO) once, in order, each offset
        with its record's state and count, an owner and deadline for ACQUIRED only, and no two
        neighbouring runs alike."""
        runs = self.sp.in_flight_runs()
        offsets = [o for r in runs for o in range(r.first_offset, r.last_offset + 1)]
        assert offsets == list(range(self.sp.start_offset, self.sp.end_offset))
        for run in runs:
            for offset in range(run.first_offset, run.last_offset + 1):
                record = self.sp.records[offset]
                assert (run.state, run.delivery_count) == (record.state, record.delivery_count)
                if record.state is RecordState.ACQUIRED:
                    assert (run.member_id, run.deadline_ms) == (
                        record.member_id,
                        record.deadline_ms,
                    )
                else:
                    assert (run.member_id, run.deadline_ms) == (None, None)
        for a, b in zip(runs, runs[1:], strict=False):
            assert (a.state, a.delivery_count, a.member_id, a.deadline_ms) != (
                b.state,
                b.delivery_count,
                b.member_id,
                b.deadline_ms,
            )


TestSharePartition = SharePartitionMachine.TestCase
TestSharePartition.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
