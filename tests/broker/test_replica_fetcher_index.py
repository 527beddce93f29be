"""A follower's replica fetcher builds each round from the partitions whose fetch state changed
(its ``_dirty`` index), not from every partition it follows. Property: whatever happens to the
partitions (added, re-added, removed, backed off, truncating, fetching, moved on, their local
log start or log replaced, gone offline), the fetcher's wanted set at every round is the one a
rebuild from every partition makes, and the requests its session sends (built from the
changes only) are the ones the full diff (``FetchSessionHandler.build``) sends, whatever
happens to the answers. And an idle round reads no partition at all."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.fetch_session import FetchSessionHandler
from kafkalite.broker.partition import Partition
from kafkalite.broker.replica_fetcher import FetchState, ReplicaFetcher
from kafkalite.broker.types import FetchInfo
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

from .conftest import MockTime

TPS = [TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)]


class _SessionEndpoint:
    supports_fetch_sessions = True


class FakeReplicaManager:
    """What the fetcher reads of its replica manager: the online partitions, with counts."""

    broker_id = 2

    def __init__(self, time: MockTime) -> None:
        self.time = time
        self.online: dict[TopicPartition, Partition] = {}
        self.lookups = 0

    def online_partition(self, tp: TopicPartition) -> Partition | None:
        self.lookups += 1
        return self.online.get(tp)

    def host(self, tp: TopicPartition, log_start: int) -> Partition:
        partition = Partition(tp, 2, self.time)
        partition.log = fake_log(log_start)
        self.online[tp] = partition
        return partition


def fake_log(log_start: int) -> SimpleNamespace:
    return SimpleNamespace(
        log_start_offset=log_start,
        news_listener=None,
        newly_created=True,
        log_end_offset=0,
        dir=None,
    )


def request_key(request) -> tuple:
    return (
        request.session_id,
        request.epoch,
        dict(request.to_send),
        sorted(request.to_forget),
        dict(request.session_partitions),
    )


# Weighted: partitions must reach the fetching state and stay there long enough for the
# rounds to matter.
KINDS = [
    *["add"] * 3,
    "remove",
    "delay",
    "advance",
    *["fetching"] * 4,
    "truncating",
    *["offset"] * 2,
    *["log_start"] * 2,
    *["new_log"] * 2,
    "offline",
    *["round"] * 5,
]
ANSWERS = ["answered", "answered", "answered", "lost", "not_found", "reset"]
operations = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.sampled_from(TPS),
        st.integers(0, 6),
        st.integers(0, 60),
    ),
    min_size=10,
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(operations)
def test_the_indexed_round_is_the_full_rebuild(ops):
    time = MockTime()
    rm = FakeReplicaManager(time)
    fetcher = ReplicaFetcher(1, _SessionEndpoint(), rm, time)  # type: ignore[arg-type]
    session = fetcher.session
    assert session is not None
    reference = FetchSessionHandler()
    for tp in TPS:
        rm.host(tp, 0)
    for kind, tp, value, extra in ops:
        if kind == "add":
            fetcher.add_partitions({tp: (value, extra % 4)})
        elif kind == "remove":
            fetcher.remove_partitions([tp])
        elif kind == "delay":
            fetcher._delay([tp], 1 + extra)
        elif kind == "advance":
            time.advance(1 + extra)
        elif kind == "fetching":
            state = fetcher.partitions.get(tp)
            if state is not None and state.state is FetchState.TRUNCATING:
                fetcher._start_fetching(tp, state, value)
        elif kind == "truncating":
            state = fetcher.partitions.get(tp)
            if state is not None and state.state is FetchState.FETCHING:
                fetcher._set_truncating(tp, state)
        elif kind == "offset":
            state = fetcher.partitions.get(tp)
            if state is not None:
                fetcher._set_fetch_offset(tp, state, value)
        elif kind == "log_start":
            partition = rm.online.get(tp)
            if partition is not None:
                # What the Log does on retention or DeleteRecords: move it, tell its partition.
                partition.log.log_start_offset = value
                partition.notify_news()
        elif kind == "new_log":
            partition = rm.online.get(tp)
            if partition is not None:
                partition.attach_log(fake_log(value))
        elif kind == "offline":
            # The replica manager's mark_log_dir_offline: fetchers first, then the partition.
            fetcher.remove_partitions([tp])
            partition = rm.online.pop(tp, None)
            if partition is not None:
                partition.make_offline()
                rm.host(tp, 0)  # hosted again later (a new Partition and log)
        else:
            # A round, as ``run`` starts one: back-offs due end, the index brings the
            # wanted set up to date, and the session's request is built from the changes.
            fetcher._ready_to_truncate(time.milliseconds())
            fetcher._update_wanted()
            assert fetcher._wanted == fetcher._full_wanted()
            if not fetcher._wanted:
                continue  # the fetcher sends nothing this round (the changes stay unsent)
            if session._reset:
                reference.reset()
            expected = reference.build(fetcher._full_wanted())
            request = fetcher._build_session_request(session)
            assert request_key(request) == request_key(expected)
            answer = ANSWERS[extra % len(ANSWERS)]
            for handler, sent in ((session, request), (reference, expected)):
                if answer == "lost":
                    handler.handle_error()
                    continue
                if answer == "not_found":
                    handler.handle_response(sent, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
                    continue
                returned = list(sent.session_partitions) if sent.is_full else []
                handler.handle_response(sent, ErrorCode.NONE, 77, returned)
                if answer == "reset":
                    handler.reset()  # an answer dropped: its partition changed meanwhile
            assert (session.session_id, session.next_epoch) == (
                reference.session_id,
                reference.next_epoch,
            )


def test_an_idle_round_reads_no_partition():
    time = MockTime()
    rm = FakeReplicaManager(time)
    fetcher = ReplicaFetcher(1, _SessionEndpoint(), rm, time)  # type: ignore[arg-type]
    session = fetcher.session
    assert session is not None
    for tp in TPS:
        rm.host(tp, 0)
        fetcher.add_partitions({tp: (3, 0)})
        fetcher._start_fetching(tp, fetcher.partitions[tp], 3)
    fetcher._update_wanted()
    request = fetcher._build_session_request(session)
    assert request.is_full and len(request.to_send) == len(TPS)
    session.handle_response(request, ErrorCode.NONE, 9, list(request.session_partitions))

    before = rm.lookups
    fetcher._ready_to_truncate(time.milliseconds())
    fetcher._update_wanted()
    request = fetcher._build_session_request(session)
    assert (request.epoch, request.to_send, request.to_forget) == (1, {}, [])
    assert rm.lookups == before

    # One partition's log start moves (retention): that one alone is read and sent.
    rm.online[TPS[2]].log.log_start_offset = 2
    rm.online[TPS[2]].notify_news()
    session.handle_response(request, ErrorCode.NONE, 9, [])
    fetcher._update_wanted()
    request = fetcher._build_session_request(session)
    assert request.to_send == {TPS[2]: FetchInfo(3, fetcher.config.replica_fetch_max_bytes, 2, 0)}
    assert rm.lookups == before + 1
