"""The transaction coordinator (Kafka's TransactionCoordinator + TransactionStateManager).

Which broker coordinates a transactional id: the leader of
``__transaction_state-<partition_for(id)>``. Ownership follows that leadership, as the group
coordinator's does: ``on_election(partition, epoch)`` replays the partition (the last record of
each id wins, a tombstone removes it) and completes the transactions found in PrepareCommit or
PrepareAbort (their markers are sent again); ``on_resignation`` forgets them. The partition's
leader epoch is the *coordinator epoch* written into every marker, so a broker that lost the
partition cannot complete a transaction a newer coordinator owns.

Rules kept here (persist before you announce):

- every state change is written to ``__transaction_state`` (acks=all) before it is applied and
  before the client hears of it; while it is written the id has a pending state and other
  requests for it get CONCURRENT_TRANSACTIONS (or wait, below);
- EndTxn is answered once PrepareCommit/PrepareAbort is written (not before: markers written
  while it could still be lost could commit a transaction a new coordinator then aborts); the
  markers are then written to every partition of the transaction (``MarkerSender``, retried
  until each is written or its topic is gone), and only then is the transaction completed
  (CompleteCommit/CompleteAbort, or the next transaction's record, below), which frees the id
  for the next transaction;
- a request (InitProducerId, AddPartitionsToTxn, EndTxn) that finds its id completing
  (PrepareCommit/PrepareAbort, markers in flight) waits for the completion, at most
  ``COMPLETION_WAIT_S``, and is then decided on the state it finds (Kafka answers
  CONCURRENT_TRANSACTIONS at once and the client retries after 20 ms or more; the wait gives
  the same answers without the retry's delay);
- pipelining, the next transaction's first AddPartitionsToTxn with the end of the previous one:
  once every marker is written, a waiting AddPartitionsToTxn of the same producer and epoch
  writes its Ongoing record directly after PrepareCommit/PrepareAbort, and the completion writes
  no Complete record of its own. This holds because a PrepareX record is only ever followed,
  for its id, by records written after all its markers (the last record wins on a load, so
  the Ongoing one carries the completion); in memory the Complete state is applied just before
  the Ongoing one is prepared, and put back to PrepareX if the Ongoing write fails, so the
  completion then writes it as usual;
- a second InitProducerId for an id with an open transaction fences it (PrepareEpochFence: the
  epoch is bumped, the transaction aborted with the bumped epoch) and answers
  CONCURRENT_TRANSACTIONS; the retry gets the next epoch. The old producer then gets
  PRODUCER_FENCED from the coordinator and INVALID_PRODUCER_EPOCH from the partitions;
- transactions open for longer than their timeout are fenced and aborted the same way, every
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms``; ids completed and unused for
  ``transactional.id.expiration.ms`` are removed (a tombstone), every
  ``transaction.remove.expired.transaction.cleanup.interval.ms``.

Decisions live in ``TransactionMetadata`` (metadata.py, sans I/O); this module does the I/O
around them. Everything runs on one event loop.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import structlog

from kafkalite.broker.clock import SYSTEM_TIME, Time
from kafkalite.broker.internal_log import apply_leadership_change, current_load, start_load
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.types import TopicPartition
from kafkalite.txn.config import TransactionConfig
from kafkalite.txn.metadata import (
    COMPLETED_STATES,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
    TxnError,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kafkalite.txn.records import (
    TransactionLogValue,
    TxnRecordFormatError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)

log = structlog.get_logger(__name__)

S = TransactionState
LOAD_YIELD_EVERY = 1000
COMPLETION_WAIT_S = 1.0  # how long a request waits for its id's transaction to complete
PREPARED_STATES = (S.PREPARE_COMMIT, S.PREPARE_ABORT)


@dataclass(eq=False, slots=True)
class _Completion:
    """The markers and Complete state of one prepared transaction being written."""

    meta: TransactionMetadata
    coordinator_epoch: int
    done: asyncio.Future  # the completion ended (either way)
    # the next transaction's first AddPartitionsToTxn, waiting for the markers: its partitions
    # and the future its answer goes to (None: not taken, decide again)
    next_begin: tuple[set[TopicPartition], asyncio.Future] | None = None


class TxnLogWriter(Protocol):
    async def append(self, partition: int, key: bytes, value: bytes | None) -> ErrorCode:
        """Write one record to ``__transaction_state-<partition>`` with acks=all."""
        ...

    def read(self, partition: int) -> AsyncIterator[tuple[int, bytes, bytes | None]]: ...


class MarkerSender(Protocol):
    async def write_markers(
        self,
        coordinator_epoch: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        partitions: Iterable[TopicPartition],
        still_coordinator: Callable[[], bool],
    ) -> bool:
        """Write the marker to every partition; returns False when it gave up because
        ``still_coordinator()`` turned False."""
        ...


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 0
    start_time_ms: int = -1
    last_update_time_ms: int = -1
    partitions: tuple[TopicPartition, ...] = ()


_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def value_of(meta: TransactionMetadata | TxnTransitMetadata) -> TransactionLogValue:
    state = meta.state
    return TransactionLogValue(
        meta.producer_id,
        meta.producer_epoch,
        meta.txn_timeout_ms,
        int(state),
        tuple(sorted(meta.partitions)),
        meta.txn_last_update_timestamp,
        meta.txn_start_timestamp,
    )


class TransactionCoordinator:
    def __init__(
        self,
        broker_id: int,
        writer: TxnLogWriter,
        markers: MarkerSender,
        generate_producer_id: Callable[[], Awaitable[int]],
        config: TransactionConfig | None = None,
        time: Time = SYSTEM_TIME,
    ) -> None:
        self.broker_id = broker_id
        self.writer = writer
        self.markers = markers
        self.generate_producer_id = generate_producer_id
        self.config = config or TransactionConfig()
        self.time = time
        self.owned: dict[int, int] = {}  # partition -> coordinator epoch (loaded)
        self.loading: dict[int, int] = {}  # partition -> epoch being loaded
        self.txns: dict[int, dict[str, TransactionMetadata]] = {}
        self._loads: dict[int, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()
        # transactional id -> done when its running _complete_transaction ends (either way)
        self._completing: dict[str, _Completion] = {}
        self._periodic: list[asyncio.Task] = []
        self.is_active = False

    # ------------------------------------------------------------------ lifecycle

    def startup(self) -> None:
        self.is_active = True
        self._periodic = [
            self._spawn(
                self._every(
                    self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                    self.abort_timed_out_transactions,
                )
            ),
            self._spawn(
                self._every(
                    self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
                    self.remove_expired_transactional_ids,
                )
            ),
        ]

    async def shutdown(self) -> None:
        self.is_active = False
        tasks = list(self._tasks) + list(self._loads.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self.owned.clear()
        self.txns.clear()

    async def _every(self, interval_ms: int, action: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction coordinator housekeeping failed")

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def is_local(self, transactional_id: str) -> bool:
        return self.partition_for(transactional_id) in self.owned

    # ------------------------------------------------------------------ ownership

    def on_election(self, partition: int, epoch: int) -> asyncio.Future:
        """This broker leads ``__transaction_state-<partition>`` at ``epoch``: load it."""
        if self.owned.get(partition) == epoch or self.loading.get(partition) == epoch:
            return current_load(self._loads, partition)
        self.owned.pop(partition, None)
        self.txns.pop(partition, None)
        self.loading[partition] = epoch
        return start_load(self._loads, partition, self._load(partition, epoch))

    async def _load(self, partition: int, epoch: int) -> None:
        latest: dict[str, TransactionLogValue | None] = {}
        count = 0
        try:
            async for _offset, key, value in self.writer.read(partition):
                try:
                    latest[decode_key(key)] = decode_value(value)
                except TxnRecordFormatError as e:
                    log.warning("skipping unreadable transaction log record", error=str(e))
                count += 1
                if count % LOAD_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading transaction state partition failed", partition=partition)
            if self.loading.get(partition) == epoch:
                del self.loading[partition]
            return
        if self.loading.get(partition) != epoch:
            return
        txns: dict[str, TransactionMetadata] = {}
        for txn_id, v in latest.items():
            if v is None:
                continue
            try:
                state = TransactionState(v.state)
            except ValueError:
                log.warning("unknown transaction state", transactional_id=txn_id, state=v.state)
                continue
            if state is S.DEAD:
                continue
            txns[txn_id] = TransactionMetadata(
                txn_id,
                v.producer_id,
                v.previous_producer_id,
                v.producer_epoch,
                NO_PRODUCER_EPOCH,
                v.transaction_timeout_ms,
                state,
                set(v.partitions),
                v.start_timestamp_ms,
                v.last_update_timestamp_ms,
            )
        del self.loading[partition]
        self.owned[partition] = epoch
        self.txns[partition] = txns
        log.info(
            "loaded transaction state partition", partition=partition, epoch=epoch, ids=len(txns)
        )
        for meta in txns.values():
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                log.info(
                    "completing a prepared transaction",
                    transactional_id=meta.transactional_id,
                    state=meta.state.state_name,
                    partition=partition,
                    epoch=epoch,
                )
                self._spawn(self._complete_transaction(meta.transactional_id, epoch, meta))

    def on_resignation(self, partition: int, epoch: int | None = None) -> None:
        current = self.owned.get(partition, self.loading.get(partition))
        if epoch is not None and current is not None and epoch < current:
            return
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        self.owned.pop(partition, None)
        self.loading.pop(partition, None)
        self.txns.pop(partition, None)

    def on_leadership_change(
        self, broker_id: int, states: Iterable, errors: dict | None = None, topic: str = ""
    ) -> list[asyncio.Future]:
        return apply_leadership_change(
            topic, broker_id, states, errors, self.on_election, self.on_resignation
        )

    # ------------------------------------------------------------------ state access

    def _lookup(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """(coordinator epoch, metadata or None); raises TxnError when not the coordinator."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            raise TxnError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        epoch = self.owned.get(partition)
        if epoch is None:
            raise TxnError(ErrorCode.NOT_COORDINATOR)
        return epoch, self.txns[partition].get(transactional_id)

    def _still_coordinator(self, transactional_id: str, coordinator_epoch: int) -> bool:
        return self.owned.get(self.partition_for(transactional_id)) == coordinator_epoch

    async def _wait_for_completion(self, transactional_id: str, deadline: float) -> bool:
        """Wait until the id's running completion is done, at most until ``deadline`` (loop
        time); False when there is none or the deadline passed."""
        completion = self._completing.get(transactional_id)
        if completion is None or completion.done.done():
            return False
        timeout = deadline - asyncio.get_running_loop().time()
        if timeout <= 0:
            return False
        await asyncio.wait({completion.done}, timeout=timeout)
        return True

    async def _begin_after_completion(
        self, completion: _Completion, partitions: set[TopicPartition], deadline: float
    ) -> ErrorCode | None:
        """Hand the next transaction's first partitions to the completion, which writes them
        (``_begin_after_markers``) once its markers are written; the answer, or None when it
        was not taken (decide again on the state then)."""
        answer: asyncio.Future = asyncio.get_running_loop().create_future()
        completion.next_begin = (partitions, answer)
        timeout = max(0.0, deadline - asyncio.get_running_loop().time())
        await asyncio.wait({answer}, timeout=timeout)
        if answer.done():
            return answer.result()
        if completion.next_begin is not None and completion.next_begin[1] is answer:
            completion.next_begin = None  # not taken in time
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return await answer  # taken: its write is under way

    async def _begin_after_markers(
        self, completion: _Completion, partitions: set[TopicPartition]
    ) -> ErrorCode:
        """Start the next transaction on top of a prepared one whose markers are written: its
        Ongoing record, written next, also completes the previous one (see the module doc)."""
        meta = completion.meta
        before = copy.copy(meta)
        ok = False
        try:
            now = self.time.milliseconds()
            meta.complete_transition_to(meta.prepare_complete(now))
            transit = meta.prepare_add_partitions(partitions, now)
            error = await self._append(meta, completion.coordinator_epoch, transit)
            ok = error is ErrorCode.NONE
            return error
        finally:
            if (
                not ok
                and meta.state in COMPLETED_STATES
                and not meta.pending_transition_in_progress
            ):
                for name in meta.__slots__:  # the Complete state was never written: PrepareX
                    setattr(meta, name, getattr(before, name))

    async def _append(
        self, meta: TransactionMetadata, coordinator_epoch: int, transit: TxnTransitMetadata
    ) -> ErrorCode:
        """Write ``transit`` and apply it (or cancel it); returns the error for the client."""
        txn_id = meta.transactional_id
        value = None if transit.state is S.DEAD else encode_value(value_of(transit))
        try:
            error = await self.writer.append(self.partition_for(txn_id), encode_key(txn_id), value)
        except KafkaError as e:
            error = e.error_code
        except asyncio.CancelledError:
            meta.cancel_pending()
            raise
        error = _APPEND_ERRORS.get(error, error)
        if error is ErrorCode.NONE and not self._still_coordinator(txn_id, coordinator_epoch):
            error = ErrorCode.NOT_COORDINATOR
        if error is not ErrorCode.NONE:
            meta.cancel_pending()
            return error
        meta.complete_transition_to(transit)
        return ErrorCode.NONE

    # ------------------------------------------------------------------ requests

    async def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> InitProducerIdResult:
        if not transactional_id:
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST)
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        expected = (
            (expected_producer_id, expected_producer_epoch)
            if expected_producer_id != NO_PRODUCER_ID
            else None
        )
        deadline = asyncio.get_running_loop().time() + COMPLETION_WAIT_S
        while True:
            try:
                coordinator_epoch, meta = self._lookup(transactional_id)
                if meta is None:
                    producer_id = await self.generate_producer_id()
                    coordinator_epoch, meta = self._lookup(transactional_id)
                    if meta is None:
                        meta = TransactionMetadata(
                            transactional_id,
                            producer_id,
                            txn_timeout_ms=transaction_timeout_ms,
                            txn_last_update_timestamp=self.time.milliseconds(),
                        )
                        self.txns[self.partition_for(transactional_id)][transactional_id] = meta
                transit = await self._prepare_init(meta, transaction_timeout_ms, expected)
                break
            except TxnError as e:
                if e.error is ErrorCode.CONCURRENT_TRANSACTIONS and await self._wait_for_completion(
                    transactional_id, deadline
                ):
                    continue
                return InitProducerIdResult(e.error)
            except KafkaError as e:
                return InitProducerIdResult(e.error_code)
        if transit.state is S.PREPARE_EPOCH_FENCE:
            error = await self.end_transaction(
                transactional_id,
                transit.producer_id,
                transit.producer_epoch,
                commit=False,
                from_client=False,
            )
            return InitProducerIdResult(
                ErrorCode.CONCURRENT_TRANSACTIONS if error is ErrorCode.NONE else error
            )
        error = await self._append(meta, coordinator_epoch, transit)
        if error is not ErrorCode.NONE:
            return InitProducerIdResult(error)
        log.info(
            "initialized transactional id",
            transactional_id=transactional_id,
            producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
        )
        return InitProducerIdResult(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)

    async def _prepare_init(
        self,
        meta: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
    ) -> TxnTransitMetadata:
        if meta.pending_transition_in_progress:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None:
            pid, epoch = expected
            valid = (
                meta.producer_epoch == NO_PRODUCER_EPOCH
                or pid == meta.producer_id
                or (pid == meta.last_producer_id and is_epoch_exhausted(epoch))
            )
            if not valid:
                raise TxnError(ErrorCode.PRODUCER_FENCED)
        state = meta.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state in COMPLETED_STATES:
            now = self.time.milliseconds()
            if meta.is_producer_epoch_exhausted and (
                expected is None or expected[1] == meta.producer_epoch
            ):
                new_id = await self.generate_producer_id()
                if meta.pending_transition_in_progress:
                    raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
                return meta.prepare_producer_id_rotation(
                    new_id, timeout_ms, now, expected is not None
                )
            return meta.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], now
            )
        if state is S.ONGOING:
            return meta.prepare_fence_producer_epoch(self.time.milliseconds())
        raise IllegalTransition(f"{meta.transactional_id} found in state {state.state_name}")

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> ErrorCode:
        """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's offsets partition)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        partitions = set(partitions)
        deadline = asyncio.get_running_loop().time() + COMPLETION_WAIT_S
        while True:
            try:
                coordinator_epoch, meta = self._lookup(transactional_id)
            except TxnError as e:
                return e.error
            if meta is None or meta.producer_id != producer_id:
                return ErrorCode.INVALID_PRODUCER_ID_MAPPING
            if meta.producer_epoch != producer_epoch:
                return ErrorCode.PRODUCER_FENCED
            completion = self._completing.get(transactional_id)
            if (
                completion is not None
                and completion.meta is meta
                and completion.coordinator_epoch == coordinator_epoch
                and completion.next_begin is None
                and not completion.done.done()
                and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
            ):
                answer = await self._begin_after_completion(completion, partitions, deadline)
                if answer is not None:
                    return answer
                continue
            if meta.pending_transition_in_progress or meta.state in (
                S.PREPARE_COMMIT,
                S.PREPARE_ABORT,
            ):
                if await self._wait_for_completion(transactional_id, deadline):
                    continue
                return ErrorCode.CONCURRENT_TRANSACTIONS
            break
        if meta.state is S.ONGOING and partitions <= meta.partitions:
            return ErrorCode.NONE
        transit = meta.prepare_add_partitions(partitions, self.time.milliseconds())
        return await self._append(meta, coordinator_epoch, transit)

    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        from_client: bool = True,
    ) -> ErrorCode:
        """EndTxn: answered once PrepareCommit/PrepareAbort is written; the markers and the
        Complete state follow in the background."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        deadline = asyncio.get_running_loop().time() + COMPLETION_WAIT_S
        while True:
            try:
                coordinator_epoch, meta = self._lookup(transactional_id)
            except TxnError as e:
                return e.error
            if meta is None or meta.producer_id != producer_id:
                return ErrorCode.INVALID_PRODUCER_ID_MAPPING
            if (from_client and producer_epoch != meta.producer_epoch) or (
                producer_epoch < meta.producer_epoch
            ):
                return ErrorCode.PRODUCER_FENCED
            # the previous transaction still completing (with, maybe, this one's first
            # AddPartitionsToTxn handed to it): decide on the state it leaves
            if (
                from_client
                and (meta.pending_transition_in_progress or meta.state in PREPARED_STATES)
                and await self._wait_for_completion(transactional_id, deadline)
            ):
                continue
            break
        fencing = meta.pending_state is S.PREPARE_EPOCH_FENCE
        if meta.pending_transition_in_progress and not fencing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = meta.state
        if state is S.ONGOING:
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            if fencing:
                if target is S.PREPARE_COMMIT:
                    meta.cancel_pending()
                    return ErrorCode.CONCURRENT_TRANSACTIONS
                # the fence's bumped epoch goes into the abort that follows it (Kafka)
                meta.cancel_pending()
                meta.producer_epoch = producer_epoch
                meta.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = meta.prepare_abort_or_commit(target, self.time.milliseconds())
        else:
            if fencing:
                meta.cancel_pending()
            if state is S.COMPLETE_COMMIT:
                return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE
            if state is S.COMPLETE_ABORT:
                return ErrorCode.NONE if not commit else ErrorCode.INVALID_TXN_STATE
            if state is S.PREPARE_COMMIT:
                return ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
            if state is S.PREPARE_ABORT:
                return (
                    ErrorCode.CONCURRENT_TRANSACTIONS if not commit else ErrorCode.INVALID_TXN_STATE
                )
            return ErrorCode.INVALID_TXN_STATE  # Empty: no transaction to end
        error = await self._append(meta, coordinator_epoch, transit)
        if error is not ErrorCode.NONE:
            return error
        self._spawn(self._complete_transaction(transactional_id, coordinator_epoch, meta))
        return ErrorCode.NONE

    async def _complete_transaction(
        self, transactional_id: str, coordinator_epoch: int, meta: TransactionMetadata
    ) -> None:
        """Send the markers of a prepared transaction, then write its Complete state."""
        loop = asyncio.get_running_loop()
        completion = _Completion(meta, coordinator_epoch, loop.create_future())
        self._completing[transactional_id] = completion
        try:
            await self._write_markers_and_complete(transactional_id, completion)
        finally:
            if self._completing.get(transactional_id) is completion:
                del self._completing[transactional_id]
            if completion.next_begin is not None:  # never taken: it decides again
                _partitions, answer = completion.next_begin
                completion.next_begin = None
                if not answer.done():
                    answer.set_result(None)
            completion.done.set_result(None)

    async def _write_markers_and_complete(
        self, transactional_id: str, completion: _Completion
    ) -> None:
        meta, coordinator_epoch = completion.meta, completion.coordinator_epoch
        commit = meta.state is S.PREPARE_COMMIT

        def still() -> bool:
            return self._still_coordinator(transactional_id, coordinator_epoch) and (
                self.txns.get(self.partition_for(transactional_id), {}).get(transactional_id)
                is meta
            )

        if meta.partitions:
            done = await self.markers.write_markers(
                coordinator_epoch,
                meta.producer_id,
                meta.producer_epoch,
                commit,
                sorted(meta.partitions),
                still,
            )
            if not done:
                return
        if (
            completion.next_begin is not None
            and still()
            and not meta.pending_transition_in_progress
            and meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
        ):
            partitions, answer = completion.next_begin
            completion.next_begin = None
            error = ErrorCode.NOT_COORDINATOR  # if cancelled: the coordinator is going away
            try:
                error = await self._begin_after_markers(completion, partitions)
            finally:
                if not answer.done():
                    answer.set_result(error)
            if error is ErrorCode.NONE:
                return  # the next transaction's Ongoing record completed this one
        while still():
            if meta.pending_transition_in_progress:
                await asyncio.sleep(0.05)
                continue
            if meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return
            transit = meta.prepare_complete(self.time.milliseconds())
            error = await self._append(meta, coordinator_epoch, transit)
            if error is ErrorCode.NONE:
                log.debug(
                    "completed transaction",
                    transactional_id=transactional_id,
                    state=meta.state.state_name,
                )
                return
            if error is ErrorCode.NOT_COORDINATOR:
                return
            await asyncio.sleep(0.1)

    # ------------------------------------------------------------------ housekeeping

    async def abort_timed_out_transactions(self) -> None:
        now = self.time.milliseconds()
        for txns in list(self.txns.values()):
            for meta in list(txns.values()):
                if (
                    meta.state is S.ONGOING
                    and not meta.pending_transition_in_progress
                    and meta.txn_start_timestamp + meta.txn_timeout_ms < now
                ):
                    await self.abort_transaction(meta.transactional_id, reason="timed out")

    async def abort_transaction(self, transactional_id: str, reason: str = "") -> ErrorCode:
        """Fence the producer of an open transaction and abort it (the timeout abort, and
        ``kafkalite transactions abort``)."""
        try:
            _, meta = self._lookup(transactional_id)
        except TxnError as e:
            return e.error
        if meta is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        if meta.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state is not S.ONGOING:
            return ErrorCode.INVALID_TXN_STATE
        transit = meta.prepare_fence_producer_epoch(self.time.milliseconds())
        log.info(
            "aborting transaction",
            transactional_id=transactional_id,
            producer_id=meta.producer_id,
            reason=reason,
        )
        return await self.end_transaction(
            transactional_id,
            transit.producer_id,
            transit.producer_epoch,
            commit=False,
            from_client=False,
        )

    async def remove_expired_transactional_ids(self) -> None:
        now = self.time.milliseconds()
        expiration = self.config.transactional_id_expiration_ms
        for partition, txns in list(self.txns.items()):
            epoch = self.owned.get(partition)
            if epoch is None:
                continue
            for txn_id, meta in list(txns.items()):
                if (
                    meta.state in COMPLETED_STATES
                    and not meta.pending_transition_in_progress
                    and meta.txn_last_update_timestamp + expiration <= now
                ):
                    transit = meta.prepare_dead()
                    error = await self._append(meta, epoch, transit)
                    if error is ErrorCode.NONE and txns.get(txn_id) is meta:
                        del txns[txn_id]
                        log.info("expired transactional id", transactional_id=txn_id)

    # ------------------------------------------------------------------ describe / list

    def describe(self, transactional_id: str) -> TransactionDescription:
        if not self.is_active:
            return TransactionDescription(transactional_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not transactional_id:
            return TransactionDescription(transactional_id, ErrorCode.INVALID_REQUEST)
        try:
            _, meta = self._lookup(transactional_id)
        except TxnError as e:
            return TransactionDescription(transactional_id, e.error)
        if meta is None or meta.state is S.DEAD:
            return TransactionDescription(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return TransactionDescription(
            transactional_id,
            ErrorCode.NONE,
            meta.state.state_name,
            meta.producer_id,
            meta.producer_epoch,
            meta.txn_timeout_ms,
            meta.txn_start_timestamp,
            meta.txn_last_update_timestamp,
            tuple(sorted(meta.partitions)),
        )

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_filter_ms: int = -1,
    ) -> tuple[ErrorCode, list[str], list[TransactionListing]]:
        """(error, unknown state filters, listings) of the ids owned here (KIP-664)."""
        if not self.is_active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        wanted_states = set(states)
        unknown = [s for s in wanted_states if TransactionState.from_name(s) is None]
        wanted_pids = set(producer_ids)
        now = self.time.milliseconds()
        out = []
        for txns in self.txns.values():
            for meta in txns.values():
                if meta.state is S.DEAD:
                    continue
                if wanted_states and meta.state.state_name not in wanted_states:
                    continue
                if wanted_pids and meta.producer_id not in wanted_pids:
                    continue
                if duration_filter_ms >= 0 and (
                    meta.txn_start_timestamp < 0
                    or now - meta.txn_start_timestamp < duration_filter_ms
                ):
                    continue
                out.append(
                    TransactionListing(
                        meta.transactional_id, meta.producer_id, meta.state.state_name
                    )
                )
        return ErrorCode.NONE, unknown, sorted(out, key=lambda t: t.transactional_id)
