"""The transaction state machine (TransactionMetadata) under hypothesis-generated operations.

Each step tries one operation (any, legal or not) and then either "writes" the prepared
transition (complete_transition_to) or "fails the write" (cancel_pending). Invariants: a move
the table forbids raises IllegalTransition and changes nothing; every applied move is in
Kafka's valid-previous-states table; the epoch of a producer id never goes down; completed
states hold no partitions; PrepareEpochFence is never a stored state.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.types import TopicPartition
from kafkalite.txn.metadata import (
    COMPLETED_STATES,
    VALID_PREVIOUS_STATES,
    IllegalTransition,
    TransactionMetadata,
    TransactionState,
    TxnError,
)

S = TransactionState
partitions = st.frozensets(st.builds(TopicPartition, st.sampled_from("ab"), st.integers(0, 2)))

operations = st.one_of(
    st.tuples(st.just("init"), st.one_of(st.none(), st.integers(-1, 6))),
    st.tuples(st.just("add"), partitions),
    st.tuples(st.just("end"), st.sampled_from([S.PREPARE_COMMIT, S.PREPARE_ABORT])),
    st.tuples(st.just("complete"), st.none()),
    st.tuples(st.just("fence"), st.none()),
    st.tuples(st.just("dead"), st.none()),
    st.tuples(st.just("rotate"), st.booleans()),
)


def snapshot(meta: TransactionMetadata) -> dict:
    return dataclasses.asdict(meta)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(operations, st.booleans()), max_size=40))
def test_random_operations_keep_the_invariants(steps):
    meta = TransactionMetadata("tx", 1)
    now = 0
    for (op, arg), write_succeeds in steps:
        now += 1
        before = snapshot(meta)
        try:
            if op == "init":
                transit = meta.prepare_increment_producer_epoch(1000, arg, now)
            elif op == "add":
                transit = meta.prepare_add_partitions(arg, now)
            elif op == "end":
                transit = meta.prepare_abort_or_commit(arg, now)
            elif op == "complete":
                if meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                    raise IllegalTransition("nothing to complete")
                transit = meta.prepare_complete(now)
            elif op == "fence":
                transit = meta.prepare_fence_producer_epoch(now)
            elif op == "dead":
                transit = meta.prepare_dead()
            else:
                transit = meta.prepare_producer_id_rotation(meta.producer_id + 1, 1000, now, arg)
        except (IllegalTransition, TxnError):
            assert snapshot(meta) == before
            continue
        assert meta.pending_state is transit.state
        if transit.state is S.PREPARE_EPOCH_FENCE:
            # never written: the abort that follows carries the bumped epoch (Kafka)
            meta.cancel_pending()
            assert transit.producer_epoch >= meta.producer_epoch
            continue
        if not write_succeeds:
            meta.cancel_pending()
            before["pending_state"] = None
            assert snapshot(meta) == before
            continue
        previous_state, previous_pid, previous_epoch = (
            meta.state,
            meta.producer_id,
            meta.producer_epoch,
        )
        meta.complete_transition_to(transit)
        assert previous_state in VALID_PREVIOUS_STATES[meta.state]
        assert meta.pending_state is None
        if meta.producer_id == previous_pid:
            assert meta.producer_epoch >= previous_epoch
        else:
            assert meta.producer_epoch == 0 and meta.last_producer_id == previous_pid
        if meta.state in COMPLETED_STATES or meta.state is S.DEAD:
            assert not meta.partitions
        if meta.state is S.DEAD:
            break
        assert meta.state is not S.PREPARE_EPOCH_FENCE


def test_a_second_prepare_while_one_is_pending_is_illegal():
    meta = TransactionMetadata("tx", 1)
    meta.prepare_increment_producer_epoch(1000, None, 1)
    try:
        meta.prepare_add_partitions({TopicPartition("a", 0)}, 2)
    except IllegalTransition:
        pass
    else:  # pragma: no cover
        raise AssertionError("allowed two pending transitions")


def test_names_are_kafkas():
    assert [s.state_name for s in S] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]
    assert S.from_name("Ongoing") is S.ONGOING and S.from_name("nope") is None
