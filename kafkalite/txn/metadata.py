"""A transactional id's state and its legal transitions (Kafka's TransactionMetadata), sans I/O.

States (the byte is what ``__transaction_state`` stores)::

    Empty(0)  Ongoing(1)  PrepareCommit(2)  PrepareAbort(3)  CompleteCommit(4)  CompleteAbort(5)
    Dead(6)   PrepareEpochFence(7)

A change is made in two steps, as Kafka does, because each must be written to the log before it
counts: a ``prepare_*`` method checks the request against the current state and returns the
target (``TxnTransitMetadata``) while marking it pending (``pending_state``: other requests get
CONCURRENT_TRANSACTIONS meanwhile); after the write succeeds ``complete_transition_to`` applies
it, after it fails ``cancel_pending`` drops it. Only transitions in ``VALID_PREVIOUS_STATES`` are
legal; anything else raises ``IllegalTransition`` (a bug, never an answer to a client).

PrepareEpochFence is never written: it is the in-memory step of InitProducerId (or the timeout
abort) fencing an open transaction, which then goes to PrepareAbort with the bumped epoch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 2**15 - 1  # Short.MaxValue


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """Kafka's name (DescribeTransactions, ListTransactions filters)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        for state, n in _NAMES.items():
            if n == name:
                return state
        return None


_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
#: states in which a transactional id has no open transaction (may expire, may start one)
COMPLETED_STATES = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


class IllegalTransition(RuntimeError):
    """A transition the state table forbids: a coordinator bug."""


class TxnError(Exception):
    """A request refused with a Kafka error code (returned to the client, not a bug)."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of a pending transition (what is written to the log)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60_000
    state: TransactionState = S.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    pending_state: TransactionState | None = None

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    # -- preparing ----------------------------------------------------------------------------

    def _prepare(
        self,
        state: TransactionState,
        producer_id: int,
        epoch: int,
        last_epoch: int,
        timeout_ms: int,
        partitions: frozenset[TopicPartition],
        start: int,
        now: int,
        last_producer_id: int | None = None,
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: preparing {state.state_name} while "
                f"{self.pending_state.state_name} is pending"
            )
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.state_name} -> {state.state_name} "
                "is not a valid transition"
            )
        if not 0 <= epoch <= MAX_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: producer epoch {epoch} out of range")
        self.pending_state = state
        return TxnTransitMetadata(
            producer_id,
            self.last_producer_id if last_producer_id is None else last_producer_id,
            epoch,
            last_epoch,
            timeout_ms,
            state,
            partitions,
            start,
            now,
        )

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state again (a write of the same record, e.g. a timeout change)."""
        return TxnTransitMetadata(
            self.producer_id,
            self.last_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TxnTransitMetadata:
        """InitProducerId on a completed transactional id: bump the epoch (KIP-360: a retry
        with the previous epoch gets the same bumped epoch again). Raises TxnError
        PRODUCER_FENCED when the expected epoch is neither current nor the previous one."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransition("cannot bump an exhausted epoch: rotate the producer id")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch  # a retried bump
        else:
            raise TxnError(ErrorCode.PRODUCER_FENCED)
        return self._prepare(
            S.EMPTY, self.producer_id, epoch, last_epoch, timeout_ms, frozenset(), -1, now
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransition("rotation while a transition is pending")
        return self._prepare(
            S.EMPTY,
            new_producer_id,
            0,
            self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms,
            frozenset(),
            -1,
            now,
            last_producer_id=self.producer_id,
        )

    def prepare_fence_producer_epoch(self, now: int) -> TxnTransitMetadata:
        """Fence the open transaction's producer (InitProducerId of a new instance, or the
        timeout abort): the epoch is bumped, unless exhausted (then the abort uses it as is)."""
        epoch = self.producer_epoch if self.is_producer_epoch_exhausted else self.producer_epoch + 1
        return self._prepare(
            S.PREPARE_EPOCH_FENCE,
            self.producer_id,
            epoch,
            NO_PRODUCER_EPOCH,
            self.txn_timeout_ms,
            frozenset(self.partitions),
            self.txn_start_timestamp,
            now,
        )

    def prepare_add_partitions(
        self, partitions: set[TopicPartition] | frozenset[TopicPartition], now: int
    ) -> TxnTransitMetadata:
        start = now if self.state in COMPLETED_STATES else self.txn_start_timestamp
        return self._prepare(
            S.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.partitions | set(partitions)),
            start,
            now,
        )

    def prepare_abort_or_commit(self, state: TransactionState, now: int) -> TxnTransitMetadata:
        if state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransition(f"{state.state_name} is not a prepare state")
        return self._prepare(
            state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.partitions),
            self.txn_start_timestamp,
            now,
        )

    def prepare_complete(self, now: int) -> TxnTransitMetadata:
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        return self._prepare(
            state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp,
            now,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(
            S.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp,
            self.txn_last_update_timestamp,
        )

    # -- completing ---------------------------------------------------------------------------

    def cancel_pending(self) -> None:
        self.pending_state = None

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply ``transit`` once written. Raises IllegalTransition when it is not the pending
        one or does not follow from the current state."""
        if self.pending_state is not transit.state:
            raise IllegalTransition(
                f"{self.transactional_id}: completing {transit.state.state_name} but "
                f"{self.pending_state.state_name if self.pending_state else 'nothing'} is pending"
            )
        if self.state not in VALID_PREVIOUS_STATES[transit.state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.state_name} -> "
                f"{transit.state.state_name} is not a valid transition"
            )
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka bumps at most to Short.MaxValue - 1 so that a fence can still bump once more."""
    return epoch >= MAX_EPOCH - 1
