"""The fetcher's side of KIP-227 (FetchSessionHandler) against the broker's FetchSessionCache:
what each request carries, how answers and failures move the session, and (property) that a
follower applying only what incremental answers carry always ends knowing every partition's
high watermark and log start, whatever is lost, evicted or dropped on the way."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.fetch_session import (
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchSessionCache,
    FetchSessionHandler,
)
from kafkalite.broker.types import FetchInfo, FetchPartitionData
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

from .conftest import MockTime

A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def info(offset, epoch=0, log_start=0):
    return FetchInfo(offset, 100, log_start, epoch)


class Leader:
    """The broker side, served as the Fetch handler serves a session."""

    def __init__(self):
        self.cache = FetchSessionCache(10, time=MockTime())
        self.hw: dict[TopicPartition, int] = {}
        self.log_start: dict[TopicPartition, int] = {}
        self.read: dict[TopicPartition, FetchInfo] | None = None

    def serve(self, request):
        context = self.cache.new_context(
            request.session_id, request.epoch, request.to_send, request.to_forget, is_follower=True
        )
        if context.error_code is not ErrorCode.NONE:
            self.read = None
            return context.error_code, INVALID_SESSION_ID, {}
        self.read = dict(context.fetch_infos)
        results = {
            tp: FetchPartitionData(
                ErrorCode.NONE, self.hw.get(tp, 0), self.hw.get(tp, 0), self.log_start.get(tp, 0)
            )
            for tp in context.fetch_infos
        }
        partitions, session_id = context.update_and_generate_response(results)
        return ErrorCode.NONE, session_id, dict(partitions)


def round_trip(handler, leader, wanted):
    request = handler.build(wanted)
    error, session_id, partitions = leader.serve(request)
    usable = handler.handle_response(request, error, session_id, partitions.keys())
    return request, usable, partitions


def test_first_request_is_full_then_only_changes_are_sent():
    handler, leader = FetchSessionHandler(), Leader()
    request, usable, partitions = round_trip(handler, leader, {A: info(0), B: info(0)})
    assert request.epoch == INITIAL_EPOCH and request.session_id == INVALID_SESSION_ID
    assert usable and set(partitions) == {A, B}
    assert handler.session_id != INVALID_SESSION_ID and handler.next_epoch == 1

    # Nothing changed: nothing sent, nothing answered.
    request, usable, partitions = round_trip(handler, leader, {A: info(0), B: info(0)})
    assert (request.to_send, request.to_forget, request.epoch) == ({}, [], 1)
    assert usable and partitions == {}
    # A moved on, B left, C joined; the leader reads exactly what the follower wants.
    leader.hw[A] = 5
    wanted = {A: info(5), C: info(0)}
    request, usable, partitions = round_trip(handler, leader, wanted)
    assert request.to_send == {A: info(5), C: info(0)} and request.to_forget == [B]
    assert usable and set(partitions) == {A, C}
    assert leader.read == wanted


def test_unknown_session_starts_a_new_one():
    handler, leader = FetchSessionHandler(), Leader()
    round_trip(handler, leader, {A: info(0)})
    old = handler.session_id
    leader.cache.remove(old)  # the leader restarted or evicted it
    request, usable, _ = round_trip(handler, leader, {A: info(0)})
    assert request.epoch == 1 and not usable
    assert (handler.session_id, handler.next_epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH)
    request, usable, partitions = round_trip(handler, leader, {A: info(0)})
    assert request.epoch == INITIAL_EPOCH and usable and set(partitions) == {A}


def test_wrong_epoch_and_lost_answers_close_the_session_with_a_full_request():
    handler, leader = FetchSessionHandler(), Leader()
    round_trip(handler, leader, {A: info(0)})
    session_id = handler.session_id
    # The answer to this one is lost: the leader moved its epoch on, the follower cannot know.
    leader.serve(handler.build({A: info(0)}))
    handler.handle_error()
    request, usable, partitions = round_trip(handler, leader, {A: info(0)})
    assert (request.session_id, request.epoch) == (session_id, INITIAL_EPOCH)
    assert usable and set(partitions) == {A}
    assert session_id not in leader.cache.sessions  # closed, a new one made

    handler.next_epoch += 5  # out of step with the leader
    request, usable, _ = round_trip(handler, leader, {A: info(0)})
    assert not usable and handler.next_epoch == INITIAL_EPOCH
    assert handler.session_id == request.session_id  # the next full request closes it


def test_reset_during_a_request_outlives_its_answer():
    handler, leader = FetchSessionHandler(), Leader()
    round_trip(handler, leader, {A: info(0)})
    request = handler.build({A: info(0)})
    handler.reset()  # e.g. a LeaderAndIsr re-added a partition while the fetch was out
    error, session_id, partitions = leader.serve(request)
    assert handler.handle_response(request, error, session_id, partitions.keys())
    assert handler.build({A: info(0)}).epoch == INITIAL_EPOCH


def test_an_emptied_session_is_closed_and_the_next_request_is_full():
    handler, leader = FetchSessionHandler(), Leader()
    round_trip(handler, leader, {A: info(0)})
    request, usable, partitions = round_trip(handler, leader, {})
    assert request.to_forget == [A] and usable and partitions == {}
    assert handler.next_epoch == INITIAL_EPOCH and not leader.cache.sessions


def test_a_full_answer_missing_partitions_is_used_but_the_session_restarts():
    handler = FetchSessionHandler()
    request = handler.build({A: info(0), B: info(0)})
    assert handler.handle_response(request, ErrorCode.NONE, 7, [A])
    assert (handler.session_id, handler.next_epoch) == (7, INITIAL_EPOCH)


TPS = [TopicPartition("t", i) for i in range(4)]
step = st.one_of(
    st.tuples(st.just("hw"), st.sampled_from(TPS), st.integers(0, 3)),
    st.tuples(st.just("log_start"), st.sampled_from(TPS), st.integers(0, 2)),
    st.tuples(st.just("offset"), st.sampled_from(TPS), st.integers(0, 3)),
    st.tuples(st.just("epoch"), st.sampled_from(TPS), st.just(0)),
    st.tuples(st.just("toggle"), st.sampled_from(TPS), st.just(0)),
    st.tuples(st.just("round"), st.sampled_from(TPS), st.sampled_from(["ok", "lost", "drop"])),
    st.tuples(st.just("evict"), st.sampled_from(TPS), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=60))
def test_the_follower_always_learns_every_change(steps):
    handler, leader = FetchSessionHandler(), Leader()
    wanted = {tp: info(0) for tp in TPS[:2]}
    known: dict[TopicPartition, tuple[int, int]] = {}  # (hw, log start) the follower was told
    for kind, tp, arg in steps:
        if kind == "hw":
            leader.hw[tp] = leader.hw.get(tp, 0) + arg
        elif kind == "log_start":
            leader.log_start[tp] = leader.log_start.get(tp, 0) + arg
        elif kind == "offset" and tp in wanted:
            old = wanted[tp]
            wanted[tp] = info(
                old.fetch_offset + arg, old.current_leader_epoch, old.log_start_offset
            )
        elif kind == "epoch" and tp in wanted:
            old = wanted[tp]
            wanted[tp] = info(old.fetch_offset, old.current_leader_epoch + 1)
            handler.reset()  # what the fetcher does when a partition is re-added
        elif kind == "toggle":
            if tp in wanted:
                del wanted[tp]
            else:
                wanted[tp] = info(0)
        elif kind == "evict":
            for session_id in list(leader.cache.sessions):
                leader.cache.remove(session_id)
        elif kind == "round":
            request = handler.build(wanted)
            error, session_id, partitions = leader.serve(request)
            if arg == "lost":
                handler.handle_error()
                continue
            usable = handler.handle_response(request, error, session_id, partitions.keys())
            if not usable:
                continue
            if leader.read is not None and request.session_partitions:
                assert leader.read == request.session_partitions
            dropped = None
            if arg == "drop" and partitions:
                dropped = sorted(partitions)[0]
                handler.reset()  # the fetcher drops an answer whose partition changed
            for returned, data in partitions.items():
                if returned != dropped:
                    known[returned] = (data.high_watermark, data.log_start_offset)
            if dropped is None:
                for t in wanted:
                    assert known.get(t) == (leader.hw.get(t, 0), leader.log_start.get(t, 0)), t


class _SessionEndpoint:
    supports_fetch_sessions = True


def test_a_re_added_partition_makes_the_fetchers_next_request_full():
    from kafkalite.broker.replica_fetcher import ReplicaFetcher

    fetcher = ReplicaFetcher(1, _SessionEndpoint(), replica_manager=None)  # type: ignore[arg-type]
    session = fetcher.session
    assert session is not None
    fetcher.add_partitions({A: (0, 0)})
    request = session.build({A: info(0)})
    assert session.handle_response(request, ErrorCode.NONE, 9, [A])
    fetcher.add_partitions({B: (0, 0)})  # new: joins the session incrementally
    assert session.build({A: info(0), B: info(0)}).epoch == 1
    session.next_epoch = 2
    fetcher.add_partitions({A: (0, 1)})  # re-added with a new leader epoch
    assert session.build({A: info(0, epoch=1), B: info(0)}).epoch == INITIAL_EPOCH
