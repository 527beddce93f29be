"""Share-group membership (kafkalite/share/group.py) and share sessions (manager.py) without a
broker: epochs, the simple assignor, leaving, session timeouts, the share-session epoch rules."""

from __future__ import annotations

import uuid

from kafkalite.protocol.errors import ErrorCode
from kafkalite.share.group import ShareGroupManager
from kafkalite.share.manager import ShareGroupService

T1, T2 = uuid.uuid4(), uuid.uuid4()
TOPICS = {"t1": (T1, 3), "t2": (T2, 1)}


class Clock:
    def __init__(self) -> None:
        self.now = 1000

    def __call__(self) -> int:
        return self.now


def manager(clock=None) -> ShareGroupManager:
    return ShareGroupManager(session_timeout_ms=1000, time_ms=clock or Clock())


def test_a_member_joins_and_gets_every_partition_of_its_topics():
    groups = manager()
    r = groups.heartbeat("g", "m1", 0, None, ("t1",), TOPICS.get)
    assert r.error is ErrorCode.NONE and r.member_epoch == 1
    assert r.assignment == {T1: (0, 1, 2)}


def test_members_of_one_topic_share_its_partitions():
    groups = manager()
    groups.heartbeat("g", "m1", 0, None, ("t1",), TOPICS.get)
    r2 = groups.heartbeat("g", "m2", 0, None, ("t1", "t2"), TOPICS.get)
    assert r2.assignment == {T1: (0, 1, 2), T2: (0,)}
    r1 = groups.heartbeat("g", "m1", 1, None, None, TOPICS.get)
    assert r1.error is ErrorCode.NONE
    assert r1.assignment is None, "unchanged: not sent again"
    assert r1.member_epoch == groups.groups["g"].group_epoch


def test_an_empty_member_id_gets_one():
    r = manager().heartbeat("g", "", 0, None, ("t1",), TOPICS.get)
    assert r.member_id


def test_a_stale_epoch_is_fenced_and_an_unknown_member_refused():
    groups = manager()
    groups.heartbeat("g", "m1", 0, None, ("t1",), TOPICS.get)
    assert groups.heartbeat("g", "m1", 7, None, None, TOPICS.get).error is (
        ErrorCode.FENCED_MEMBER_EPOCH
    )
    assert groups.heartbeat("g", "zz", 1, None, None, TOPICS.get).error is (
        ErrorCode.UNKNOWN_MEMBER_ID
    )


def test_a_topic_created_later_reaches_the_member():
    topics: dict = {}
    groups = manager()
    r = groups.heartbeat("g", "m1", 0, None, ("t1",), topics.get)
    assert r.assignment is None or r.assignment == {}
    topics["t1"] = (T1, 2)
    r = groups.heartbeat("g", "m1", r.member_epoch, None, None, topics.get)
    assert r.assignment == {T1: (0, 1)}


def test_leaving_and_timing_out():
    clock = Clock()
    groups = manager(clock)
    groups.heartbeat("g", "m1", 0, None, ("t1",), TOPICS.get)
    groups.heartbeat("g", "m2", 0, None, ("t1",), TOPICS.get)
    r = groups.heartbeat("g", "m1", -1, None, None, TOPICS.get)
    assert r.removed == "m1" and r.member_epoch == -1
    clock.now += 999
    assert groups.expire() == []
    clock.now += 1
    assert groups.expire() == [("g", "m2")]
    assert groups.groups["g"].state == "Empty"


class Metadata:
    def get_topic_name(self, topic_id):
        return {T1: "t1", T2: "t2"}.get(topic_id)


def service() -> ShareGroupService:
    return ShareGroupService(0, None, Metadata(), persister=None, time_ms=Clock())


def test_share_session_epochs():
    s = service()
    p = [(T1, 0)]
    assert s.open_session("g", "m", 1, p, ())[0] is ErrorCode.SHARE_SESSION_NOT_FOUND
    error, session = s.open_session("g", "m", 0, p, ())
    assert error is ErrorCode.NONE and session.partitions == {(T1, 0)}
    assert s.open_session("g", "m", 2, (), ())[0] is ErrorCode.INVALID_SHARE_SESSION_EPOCH
    error, session = s.open_session("g", "m", 1, [(T1, 1)], [(T1, 0)])
    assert error is ErrorCode.NONE and session.partitions == {(T1, 1)}
    assert s.open_session("g", "m", 2, (), ())[0] is ErrorCode.NONE
    # epoch -1: the session is served, then closed by the caller
    assert s.open_session("g", "m", -1, (), ())[0] is ErrorCode.NONE
    s.close_session("g", "m")
    assert s.open_session("g", "m", 3, (), ())[0] is ErrorCode.SHARE_SESSION_NOT_FOUND
