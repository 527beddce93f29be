"""KIP-227 fetch sessions: context selection, incremental responses, eviction."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkalite.broker.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchSessionCache,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    SessionlessFetchContext,
    next_epoch,
)
from kafkalite.broker.types import FetchInfo, FetchPartitionData
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

from .conftest import MockTime

A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def data(hw=10, records=b"", error=ErrorCode.NONE, log_start=0):
    return FetchPartitionData(error, hw, hw, log_start, records)


def open_session(cache, infos, results=None):
    context = cache.new_context(INVALID_SESSION_ID, INITIAL_EPOCH, infos)
    assert isinstance(context, FullFetchContext)
    results = results or {tp: data() for tp in infos}
    response, session_id = context.update_and_generate_response(results)
    return response, session_id


def test_next_epoch_wraps_to_one():
    assert next_epoch(0) == 1
    assert next_epoch(0x7FFFFFFF) == 1
    assert next_epoch(-1) == FINAL_EPOCH


def test_full_fetch_creates_session_and_returns_everything():
    cache = FetchSessionCache(10, time=MockTime())
    infos = {A: FetchInfo(0, 100), B: FetchInfo(5, 100)}
    response, session_id = open_session(cache, infos)
    assert session_id != INVALID_SESSION_ID
    assert [tp for tp, _ in response] == [A, B]
    session = cache.get(session_id)
    assert session.epoch == 1
    assert {tp: c.fetch_offset for tp, c in session.partitions.items()} == {A: 0, B: 5}
    assert cache.num_partitions == 2


def test_sessionless_full_fetch_creates_nothing():
    cache = FetchSessionCache(10, time=MockTime())
    context = cache.new_context(INVALID_SESSION_ID, FINAL_EPOCH, {A: FetchInfo(0, 100)})
    assert isinstance(context, SessionlessFetchContext)
    response, session_id = context.update_and_generate_response({A: data()})
    assert session_id == INVALID_SESSION_ID and [tp for tp, _ in response] == [A]
    assert len(cache) == 0


def test_incremental_fetch_sends_only_changes():
    cache = FetchSessionCache(10, time=MockTime())
    _, sid = open_session(cache, {A: FetchInfo(0, 100), B: FetchInfo(0, 100)})
    # Epoch 1, nothing changed in the request: the session supplies both partitions.
    context = cache.new_context(sid, 1, {})
    assert isinstance(context, IncrementalFetchContext)
    assert context.fetch_infos == {A: FetchInfo(0, 100), B: FetchInfo(0, 100)}
    # A's HW moved, B is unchanged: only A is sent.
    response, same = context.update_and_generate_response({A: data(hw=11), B: data(hw=10)})
    assert same == sid and [tp for tp, _ in response] == [A]
    # Epoch 2: A advances its fetch offset and gets records; B has nothing new.
    context = cache.new_context(sid, 2, {A: FetchInfo(11, 100)})
    assert context.fetch_infos[A].fetch_offset == 11
    response, _ = context.update_and_generate_response(
        {A: data(hw=11, records=b"xyz"), B: data(hw=10)}
    )
    assert [tp for tp, _ in response] == [A]
    # A returned data: it moves to the back of the session order (fairness).
    assert list(cache.get(sid).partitions) == [B, A]
    context = cache.new_context(sid, 3, {})
    response, _ = context.update_and_generate_response(
        {A: data(hw=11, error=ErrorCode.NOT_LEADER_OR_FOLLOWER), B: data(hw=10)}
    )
    assert [tp for tp, _ in response] == [A]
    # After an error the HW is forgotten, so A is sent again when healthy.
    context = cache.new_context(sid, 4, {})
    response, _ = context.update_and_generate_response({A: data(hw=11), B: data(hw=10)})
    assert [tp for tp, _ in response] == [A]


def test_session_errors():
    cache = FetchSessionCache(10, time=MockTime())
    _, sid = open_session(cache, {A: FetchInfo(0, 100)})
    wrong_epoch = cache.new_context(sid, 5, {})
    assert isinstance(wrong_epoch, SessionErrorContext)
    assert wrong_epoch.error_code is ErrorCode.INVALID_FETCH_SESSION_EPOCH
    unknown = cache.new_context(sid + 1, 1, {})
    assert unknown.error_code is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert unknown.update_and_generate_response({}) == ([], INVALID_SESSION_ID)
    # The session survived both errors; the right epoch still works.
    assert isinstance(cache.new_context(sid, 1, {}), IncrementalFetchContext)


def test_forget_and_close():
    cache = FetchSessionCache(10, time=MockTime())
    _, sid = open_session(cache, {A: FetchInfo(0, 100), B: FetchInfo(0, 100)})
    context = cache.new_context(sid, 1, {C: FetchInfo(3, 50)}, forgotten=[A])
    assert set(context.fetch_infos) == {B, C}
    context = cache.new_context(sid, 2, {}, forgotten=[B, C])
    assert isinstance(context, SessionlessFetchContext)
    assert cache.get(sid) is None and cache.num_partitions == 0
    _, sid = open_session(cache, {A: FetchInfo(0, 100)})
    context = cache.new_context(sid, FINAL_EPOCH, {A: FetchInfo(0, 100)})
    assert isinstance(context, SessionlessFetchContext) and cache.get(sid) is None
    _, sid = open_session(cache, {A: FetchInfo(0, 100)})
    _, sid2 = open_session(cache, {A: FetchInfo(0, 100)})
    context = cache.new_context(sid, INITIAL_EPOCH, {A: FetchInfo(0, 100)})
    assert isinstance(context, FullFetchContext) and cache.get(sid) is None
    assert cache.get(sid2) is not None


def test_eviction_order():
    time = MockTime()
    cache = FetchSessionCache(2, eviction_ms=1_000, time=time, rng=random.Random(1))
    _, small = open_session(cache, {A: FetchInfo(0, 1)})
    _, big = open_session(cache, {A: FetchInfo(0, 1), B: FetchInfo(0, 1)})
    # Full, both new (protected): a consumer session is not created.
    _, none = open_session(cache, {A: FetchInfo(0, 1), B: FetchInfo(0, 1), C: FetchInfo(0, 1)})
    assert none == INVALID_SESSION_ID
    # A follower (privileged) evicts the least valuable unprivileged session.
    context = cache.new_context(
        INVALID_SESSION_ID, INITIAL_EPOCH, {A: FetchInfo(0, 1)}, is_follower=True
    )
    _, follower = context.update_and_generate_response({A: data()})
    assert follower != INVALID_SESSION_ID
    assert cache.get(small) is None and cache.get(big) is not None
    # After eviction_ms without use, a stale session goes first.
    time.advance(1_001)
    cache.new_context(follower, 1, {})  # touch the follower's session
    _, newest = open_session(cache, {C: FetchInfo(0, 1)})
    assert newest != INVALID_SESSION_ID
    assert cache.get(big) is None and cache.get(follower) is not None
    assert cache.evictions == 2


class SessionEpochMachine(RuleBasedStateMachine):
    """Random request sequences against a model of one session's id and epoch."""

    def __init__(self):
        super().__init__()
        self.cache = FetchSessionCache(4, time=MockTime())
        self.session_id = INVALID_SESSION_ID
        self.epoch = 0

    @rule()
    def open(self):
        _, self.session_id = open_session(self.cache, {A: FetchInfo(0, 1)})
        self.epoch = 1

    @precondition(lambda self: self.session_id != INVALID_SESSION_ID)
    @rule()
    def incremental(self):
        context = self.cache.new_context(self.session_id, self.epoch, {})
        assert context.error_code is ErrorCode.NONE
        self.epoch = next_epoch(self.epoch)

    @precondition(lambda self: self.session_id != INVALID_SESSION_ID)
    @rule(delta=st.integers(min_value=1, max_value=3))
    def stale_or_future_epoch(self, delta):
        bad = self.epoch + delta if delta % 2 else max(1, self.epoch - delta)
        if bad == self.epoch:
            return
        context = self.cache.new_context(self.session_id, bad, {})
        assert context.error_code is ErrorCode.INVALID_FETCH_SESSION_EPOCH

    @precondition(lambda self: self.session_id != INVALID_SESSION_ID)
    @rule()
    def close(self):
        self.cache.new_context(self.session_id, FINAL_EPOCH, {})
        closed = self.session_id
        self.session_id = INVALID_SESSION_ID
        context = self.cache.new_context(closed, self.epoch, {})
        assert context.error_code is ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    @invariant()
    def at_most_one_session(self):
        expected = 0 if self.session_id == INVALID_SESSION_ID else 1
        assert len(self.cache) <= 4
        if self.session_id != INVALID_SESSION_ID:
            assert self.cache.get(self.session_id).epoch == self.epoch
        assert expected <= len(self.cache)


TestSessionEpochMachine = SessionEpochMachine.TestCase
TestSessionEpochMachine.settings = settings(max_examples=40, stateful_step_count=20, deadline=None)


def test_an_incremental_fetch_reuses_the_sessions_fetch_infos():
    """Nothing rebuilt per request: an incremental fetch that changes nothing hands out the
    session's own mapping with the same FetchInfo objects; a changed partition gets a new one
    in place, a new one goes last, a forgotten one leaves, one that returned data moves last."""
    cache = FetchSessionCache(10, time=MockTime())
    a0, b0 = FetchInfo(0, 100), FetchInfo(5, 100)
    _, sid = open_session(cache, {A: a0, B: b0})
    session = cache.get(sid)
    context = cache.new_context(sid, 1, {})
    # Without parking (a consumer's session) what is read is every partition, in order.
    assert context.fetch_infos is session.active and session.active == session.fetch_infos
    assert context.fetch_infos[A] is a0 and context.fetch_infos[B] is b0
    context.update_and_generate_response({A: data(), B: data()})
    a1 = FetchInfo(3, 100)
    context = cache.new_context(sid, 2, {A: a1, C: FetchInfo(0, 7)})
    assert list(context.fetch_infos) == [A, B, C]
    assert context.fetch_infos[A] is a1 and context.fetch_infos[B] is b0
    context.update_and_generate_response({A: data(records=b"x"), B: data(), C: data()})
    assert list(session.fetch_infos) == list(session.partitions) == [B, C, A]
    assert list(session.active) == [B, C, A]
    context = cache.new_context(sid, 3, {}, forgotten=[B])
    assert list(context.fetch_infos) == [C, A] and context.fetch_infos[A] is a1


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from([A, B, C]), st.integers(0, 50), max_size=3),
            st.lists(st.sampled_from([A, B, C]), max_size=2),
            st.sets(st.sampled_from([A, B, C])),
        ),
        max_size=8,
    )
)
def test_session_fetch_infos_mirror_its_partitions(steps):
    """Whatever the sequence of changes, forgets and data, the session's fetch_infos hold each
    partition's last request parameters, in the session's order."""
    cache = FetchSessionCache(10, time=MockTime())
    _, sid = open_session(cache, {A: FetchInfo(0, 100)})
    epoch = 1
    for changed, forgotten, with_data in steps:
        infos = {tp: FetchInfo(offset, 100) for tp, offset in changed.items()}
        context = cache.new_context(sid, epoch, infos, forgotten=forgotten)
        session = cache.get(sid)
        if session is None:  # every partition forgotten: the session closed
            assert isinstance(context, SessionlessFetchContext)
            return
        epoch = next_epoch(epoch)
        results = {tp: data(records=b"x" if tp in with_data else b"") for tp in context.fetch_infos}
        context.update_and_generate_response(results)
        assert list(session.fetch_infos) == list(session.partitions)
        for tp, cached in session.partitions.items():
            assert session.fetch_infos[tp] is cached.info
            assert cached.info.fetch_offset == cached.fetch_offset
