"""Consumer groups (KIP-848) in GroupCoordinatorCore: answers after the records are written,
session and rebalance timeouts fence members, a new coordinator rebuilds the group from
``__consumer_offsets``, classic and consumer groups do not mix with migration disabled (an
empty one changes kind), ListGroups/DescribeGroups/OffsetCommit/DeleteGroups for consumer
groups."""

from __future__ import annotations

from kafkalite.group.config import GroupConfig, OffsetConfig
from kafkalite.group.consumer_group import HeartbeatResult
from kafkalite.group.metadata import OffsetAndMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

from .cg_support import Topics
from .harness import NUM_PARTITIONS, Harness, MemoryLog

SESSION_MS = 3000


def harness(**kw) -> Harness:
    return Harness(
        group_config=GroupConfig(
            group_initial_rebalance_delay_ms=0,
            group_consumer_session_timeout_ms=SESSION_MS,
            group_consumer_heartbeat_interval_ms=500,
            # these tests are about other things: every change gets its target at once
            group_consumer_assignment_interval_ms=0,
            group_consumer_assignor_offload_enable=False,
        ),
        offset_config=OffsetConfig(offsets_topic_num_partitions=NUM_PARTITIONS),
        **kw,
    )


def heartbeat(h: Harness, topics, group, member, epoch, **kw) -> HeartbeatResult:
    t = h.token()
    if epoch == 0:
        kw.setdefault("subscribed_topic_names", ["t"])
        kw.setdefault("rebalance_timeout_ms", 30000)
        kw.setdefault("owned", {})
    h.apply(h.core.consumer_group_heartbeat(t, group, member, epoch, topics=topics, **kw))
    return h.response(t)


def test_the_answer_waits_for_the_records():
    h = harness()
    topics = Topics(t=2)
    h.hold_writes = True
    t = h.token()
    h.apply(
        h.core.consumer_group_heartbeat(
            t,
            "g",
            "a",
            0,
            topics=topics,
            subscribed_topic_names=["t"],
            rebalance_timeout_ms=1,
            owned={},
        )
    )
    assert h.response(t) is None
    h.release_writes()
    assert h.response(t).member_epoch == 2
    # a failed write is answered with the coordinator error
    h.hold_writes = True
    t = h.token()
    h.apply(
        h.core.consumer_group_heartbeat(
            t,
            "g",
            "b",
            0,
            topics=topics,
            subscribed_topic_names=["t"],
            rebalance_timeout_ms=1,
            owned={},
        )
    )
    h.release_writes(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert h.response(t).error is ErrorCode.NOT_COORDINATOR


def test_request_validation():
    h = harness()
    topics = Topics(t=1)
    assert heartbeat(h, topics, "g", "", 0).error is ErrorCode.INVALID_REQUEST
    assert (
        heartbeat(h, topics, "g", "a", 0, rebalance_timeout_ms=-1).error
        is ErrorCode.INVALID_REQUEST
    )
    assert heartbeat(h, topics, "g", "a", 0, owned=None).error is ErrorCode.INVALID_REQUEST
    assert (
        heartbeat(h, topics, "g", "a", 0, subscribed_topic_names=None).error
        is ErrorCode.INVALID_REQUEST
    )
    assert heartbeat(h, topics, "g", "a", -2).error is ErrorCode.INVALID_REQUEST
    assert heartbeat(h, topics, "g", "a", 3).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(h, topics, "", "a", 0).error is ErrorCode.INVALID_GROUP_ID


def test_a_silent_member_is_fenced_after_the_session_timeout():
    h = harness()
    topics = Topics(t=4)
    a = heartbeat(h, topics, "g", "a", 0)
    b = heartbeat(h, topics, "g", "b", 0)
    for _ in range(4):
        h.advance(SESSION_MS // 3)
        a = heartbeat(
            h,
            topics,
            "g",
            "a",
            a.member_epoch,
            owned=dict(h.core.groups["g"].consumer.members["a"].assigned),
        )
    cg = h.core.groups["g"].consumer
    assert "b" not in cg.members  # b never heartbeat again
    assert heartbeat(h, topics, "g", "b", b.member_epoch).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert set(cg.members["a"].assigned[topics.ids["t"]]) == {0, 1, 2, 3}


def test_a_member_that_does_not_revoke_in_time_is_fenced():
    h = harness()
    topics = Topics(t=4)
    a = heartbeat(h, topics, "g", "a", 0, rebalance_timeout_ms=1000)
    owned = {topics.ids["t"]: frozenset(range(4))}
    heartbeat(h, topics, "g", "b", 0)
    heartbeat(h, topics, "g", "a", a.member_epoch, owned=owned)  # told to revoke two
    cg = h.core.groups["g"].consumer
    assert cg.members["a"].pending_revocation
    for _ in range(3):  # keeps heartbeating, never revokes
        h.advance(400)
        heartbeat(h, topics, "g", "a", a.member_epoch, owned=owned)
        heartbeat(h, topics, "g", "b", cg.members["b"].member_epoch)
    assert "a" not in cg.members


def test_a_new_coordinator_rebuilds_the_group_and_its_offsets():
    log = MemoryLog()
    h = harness(log=log)
    topics = Topics(t=4)
    a = heartbeat(h, topics, "g", "a", 0, instance_id="ia")
    heartbeat(h, topics, "g", "b", 0)
    a = heartbeat(h, topics, "g", "a", a.member_epoch, owned=dict(a.assignment))
    t = h.token()
    h.apply(
        h.core.commit_offsets(
            t, "g", "a", None, a.member_epoch, {TopicPartition("t", 0): OffsetAndMetadata(42)}, 9
        )
    )
    assert h.response(t) == {TopicPartition("t", 0): ErrorCode.NONE}
    old = h.core.groups["g"].consumer
    h2 = harness(log=log)
    new = h2.core.groups["g"].consumer
    assert (new.group_epoch, new.assignment_epoch) == (old.group_epoch, old.assignment_epoch)
    assert new.members == old.members and new.target == old.target
    assert new.partition_owner == old.partition_owner
    assert h2.core.fetch_offsets("g")[1][TopicPartition("t", 0)].offset == 42
    # members carry on with their epochs, and are fenced if they stay silent
    assert heartbeat(h2, topics, "g", "a", a.member_epoch).error is ErrorCode.NONE
    h2.advance(SESSION_MS + 1)
    assert not new.members


def test_classic_and_consumer_groups_never_mix_with_migration_disabled():
    h = Harness(
        group_config=GroupConfig(
            group_initial_rebalance_delay_ms=0,
            group_consumer_session_timeout_ms=SESSION_MS,
            group_consumer_heartbeat_interval_ms=500,
            # these tests are about other things: every change gets its target at once
            group_consumer_assignment_interval_ms=0,
            group_consumer_assignor_offload_enable=False,
            group_consumer_migration_policy="disabled",
        ),
        offset_config=OffsetConfig(offsets_topic_num_partitions=NUM_PARTITIONS),
    )
    topics = Topics(t=1)
    h.join_new_member("classic")
    assert h.core.groups["classic"].members  # a classic member, rebalancing
    assert heartbeat(h, topics, "classic", "x", 0).error is ErrorCode.GROUP_ID_NOT_FOUND
    heartbeat(h, topics, "modern", "a", 0)
    t = h.join("modern")  # a caller with no topics view cannot reconcile a classic member
    assert h.response(t).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # an empty group changes kind, keeping its offsets
    t = h.token()
    h.apply(
        h.core.commit_offsets(
            t, "offsets-only", "", None, -1, {TopicPartition("t", 0): OffsetAndMetadata(7)}
        )
    )
    assert heartbeat(h, topics, "offsets-only", "a", 0).member_epoch == 2
    assert h.core.fetch_offsets("offsets-only")[1][TopicPartition("t", 0)].offset == 7
    assert heartbeat(h, topics, "offsets-only", "a", 2, owned={}).error is ErrorCode.NONE
    heartbeat(h, topics, "offsets-only", "a", -1)
    h.join_new_member("offsets-only")
    assert h.core.groups["offsets-only"].consumer is None
    assert h.core.groups["offsets-only"].members


def test_listing_describing_committing_and_deleting():
    h = harness()
    topics = Topics(t=2)
    a = heartbeat(h, topics, "g", "a", 0)
    h.join_new_member("c")
    _, listed = h.core.list_groups(None, ["consumer"])
    assert [(o.group_id, o.group_type, o.protocol_type, o.state) for o in listed] == [
        ("g", "consumer", "consumer", "Stable")
    ]
    _, listed = h.core.list_groups(None, ["CLASSIC"])
    assert [o.group_id for o in listed] == ["c"]
    _, listed = h.core.list_groups(["stable"], None)
    assert {o.group_id for o in listed} == {"g"}
    assert h.core.describe_group("g", 5)[1].state == "Dead"
    assert h.core.describe_group("g", 6)[0] is ErrorCode.GROUP_ID_NOT_FOUND
    assert h.core.consumer_group_describe("c")[0] is ErrorCode.GROUP_ID_NOT_FOUND
    tp = TopicPartition("t", 0)
    t = h.token()
    h.apply(
        h.core.commit_offsets(t, "g", "a", None, a.member_epoch + 1, {tp: OffsetAndMetadata(1)}, 9)
    )
    assert h.response(t) == {tp: ErrorCode.STALE_MEMBER_EPOCH}
    assert h.core.fetch_offsets("g", [tp], member_id="a", member_epoch=9)[0] is (
        ErrorCode.STALE_MEMBER_EPOCH
    )
    t = h.token()
    h.apply(h.core.delete_groups(t, ["g"]))
    assert h.response(t) == {"g": ErrorCode.NON_EMPTY_GROUP}
    heartbeat(h, topics, "g", "a", -1)
    assert h.core.list_groups(None, ["consumer"])[1][0].state == "Empty"
    t = h.token()
    h.apply(h.core.delete_groups(t, ["g"]))
    assert h.response(t) == {"g": ErrorCode.NONE}
    assert "g" not in h.core.groups
    # nothing of it comes back from the log
    assert "g" not in harness(log=h.log).core.groups


def test_after_a_failed_write_the_next_change_rewrites_the_group():
    log = MemoryLog()
    h = harness(log=log)
    topics = Topics(t=4)
    a = heartbeat(h, topics, "g", "a", 0)
    h.fail_writes = ErrorCode.NOT_ENOUGH_REPLICAS
    assert heartbeat(h, topics, "g", "b", 0).error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    h.fail_writes = None
    # b's join stands in memory; a's next heartbeat writes the whole group again
    owned = dict(h.core.groups["g"].consumer.members["a"].assigned)
    assert heartbeat(h, topics, "g", "a", a.member_epoch, owned=owned).error is ErrorCode.NONE
    old = h.core.groups["g"].consumer
    new = harness(log=log).core.groups["g"].consumer
    assert new.members == old.members and new.target == old.target
    assert (new.group_epoch, new.assignment_epoch) == (old.group_epoch, old.assignment_epoch)


def test_transactional_commits_check_the_member_epoch():
    h = harness()
    topics = Topics(t=1)
    a = heartbeat(h, topics, "g", "a", 0)
    tp = TopicPartition("t", 0)

    def txn_commit(member_id, epoch):
        t = h.token()
        h.apply(
            h.core.commit_transactional_offsets(
                t, "g", 7, 0, member_id, None, epoch, {tp: OffsetAndMetadata(3)}
            )
        )
        return h.response(t)[tp]

    assert txn_commit("a", a.member_epoch) is ErrorCode.NONE
    assert txn_commit("a", a.member_epoch + 1) is ErrorCode.ILLEGAL_GENERATION
    assert txn_commit("b", a.member_epoch) is ErrorCode.UNKNOWN_MEMBER_ID
    assert txn_commit("", -1) is ErrorCode.NONE  # a producer naming only the group


def test_a_refused_first_heartbeat_leaves_no_group():
    h = harness()
    topics = Topics(t=1)
    assert heartbeat(
        h, topics, "g", "a", 0, subscribed_topic_regex="(", subscribed_topic_names=None
    ).error is (ErrorCode.INVALID_REGULAR_EXPRESSION)
    assert "g" not in h.core.groups
    assert h.core.list_groups()[1] == []
    # nor does it turn an empty classic group into a consumer group
    t = h.token()
    h.apply(
        h.core.commit_offsets(t, "c", "", None, -1, {TopicPartition("t", 0): OffsetAndMetadata(1)})
    )
    assert heartbeat(h, topics, "c", "a", 0, server_assignor="sticky").error is (
        ErrorCode.UNSUPPORTED_ASSIGNOR
    )
    assert h.core.groups["c"].consumer is None
    assert h.core.list_groups()[1][0].group_type == "classic"
