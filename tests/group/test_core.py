"""GroupCoordinatorCore driven by a fake clock: membership, rebalances, offsets, ownership."""

import pytest

from kafkalite.group.config import GroupConfig, OffsetConfig
from kafkalite.group.core import (
    JoinGroupResult,
    LeaveGroupResult,
    MemberIdentity,
    OffsetDeleteResult,
    SyncGroupResult,
)
from kafkalite.group.metadata import GroupState, IllegalGroupStateTransition, OffsetAndMetadata
from kafkalite.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_record,
)
from kafkalite.protocol.consumer_protocol import encode_subscription
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

from .harness import NUM_PARTITIONS, FakeClock, Harness, MemoryLog

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def state(h: Harness, group: str) -> GroupState:
    return h.core.groups[group].state


# ------------------------------------------------------------------ JoinGroup basics


def test_member_id_required_round_trip_then_single_member_becomes_stable():
    h = Harness()
    mid, t = h.join_new_member("g")
    assert mid.startswith("client-")
    assert h.response(t) is None  # waits in the (zero) initial delay
    assert state(h, "g") is GroupState.PREPARING_REBALANCE
    h.advance(1)
    r = h.response(t)
    assert r.error is ErrorCode.NONE and r.member_id == mid and r.generation_id == 1
    assert r.leader_id == mid and r.protocol_name == "range" and r.protocol_type == "consumer"
    assert [m.member_id for m in r.members] == [mid]
    assert state(h, "g") is GroupState.COMPLETING_REBALANCE
    s = h.sync("g", mid, 1, {mid: b"A"})
    assert h.response(s) == SyncGroupResult(b"A", "consumer", "range", ErrorCode.NONE)
    assert state(h, "g") is GroupState.STABLE


def test_join_v3_without_member_id_requirement_enters_directly():
    h = Harness()
    t = h.join("g", require_known=False)
    h.advance(1)
    r = h.response(t)
    assert r.error is ErrorCode.NONE and r.generation_id == 1


@pytest.mark.parametrize("n", [1, 3, 50])
def test_rebalance_with_n_members(n):
    h = Harness(initial_delay_ms=3000)
    ids, generation, leader = h.form_group("g", n)
    g = h.core.groups["g"]
    assert generation == 1 and len(g) == n and leader in ids
    assert g.state is GroupState.STABLE
    assert all(g.get(m).assignment == f"{m}:1".encode() for m in ids)


def test_initial_delay_collects_members_and_is_extended_by_newcomers():
    h = Harness(initial_delay_ms=3000)
    _, t1 = h.join_new_member("g")
    h.advance(2000)
    _, t2 = h.join_new_member("g")  # joins during the delay: extends it by another 3000
    h.advance(1500)
    assert h.response(t1) is None and h.response(t2) is None
    h.advance(3000)
    r1, r2 = h.response(t1), h.response(t2)
    assert r1.error is ErrorCode.NONE and r2.error is ErrorCode.NONE
    assert r1.generation_id == r2.generation_id == 1
    assert len(r1.members) + len(r2.members) == 2  # only the leader gets the member list


def test_initial_delay_never_exceeds_rebalance_timeout():
    h = Harness(initial_delay_ms=3000)
    _, t = h.join_new_member("g", rebalance_ms=4000)
    for _ in range(5):
        h.advance(1000)
        h.join_new_member("g", rebalance_ms=4000)
    assert h.response(t).error is ErrorCode.NONE


def test_followers_wait_for_the_leaders_sync():
    h = Harness()
    (a, ta), (b, _tb) = h.join_new_member("g"), h.join_new_member("g")
    h.advance(1)
    leader = h.response(ta).leader_id
    follower = b if leader == a else a
    sf = h.sync("g", follower, 1)
    assert h.response(sf) is None
    sl = h.sync("g", leader, 1, {leader: b"L", follower: b"F"})
    assert h.response(sf).assignment == b"F" and h.response(sl).assignment == b"L"


def test_members_left_out_by_the_leader_get_an_empty_assignment():
    h = Harness()
    (a, ta), (b, _) = h.join_new_member("g"), h.join_new_member("g")
    h.advance(1)
    leader = h.response(ta).leader_id
    follower = b if leader == a else a
    sl = h.sync("g", leader, 1, {leader: b"L", "stranger": b"X"})
    sf = h.sync("g", follower, 1)
    assert h.response(sl).assignment == b"L" and h.response(sf).assignment == b""


def test_join_with_no_protocols_is_inconsistent_and_leaves_no_group():
    h = Harness()
    t = h.join("g", protocols=[])
    assert h.response(t).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert "g" not in h.core.groups
    t = h.join("g", protocol_type="")
    assert h.response(t).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_join_with_incompatible_protocols_is_refused():
    h = Harness()
    h.form_group("g", 1)
    t = h.join("g", protocols=[("roundrobin", b"")])
    assert h.response(t).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    t = h.join("g", protocol_type="connect")
    assert h.response(t).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_invalid_session_timeout_and_invalid_group_id():
    h = Harness()
    assert h.response(h.join("g", session_ms=10)).error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.response(h.join("g", session_ms=2_000_000)).error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.response(h.join("")).error is ErrorCode.INVALID_GROUP_ID


def test_join_with_unknown_member_id_into_missing_group():
    h = Harness()
    assert h.response(h.join("g", "ghost")).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_protocol_selected_by_vote_across_members():
    h = Harness()
    rr_first = [("roundrobin", b"r"), ("range", b"g")]
    range_first = [("range", b"g"), ("roundrobin", b"r")]
    _, t1 = h.join_new_member("g", protocols=range_first)
    _, t2 = h.join_new_member("g", protocols=rr_first)
    _, t3 = h.join_new_member("g", protocols=rr_first)
    h.advance(1)
    assert {h.response(t).protocol_name for t in (t1, t2, t3)} == {"roundrobin"}
    leader_result = next(h.response(t) for t in (t1, t2, t3) if h.response(t).members)
    assert {m.metadata for m in leader_result.members} == {b"r"}


def test_group_max_size():
    h = Harness(group_config=GroupConfig(group_initial_rebalance_delay_ms=0, group_max_size=2))
    h.form_group("g", 2)
    t = h.join("g")
    r = h.response(t)
    # the third member is refused once the group is full
    assert r.error in (ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.MEMBER_ID_REQUIRED)
    if r.error is ErrorCode.MEMBER_ID_REQUIRED:
        assert h.response(h.join("g", r.member_id)).error is ErrorCode.GROUP_MAX_SIZE_REACHED


# ------------------------------------------------------------------ rejoin, heartbeat, leave


def test_new_member_triggers_rebalance_seen_through_heartbeat():
    h = Harness()
    (a,), gen, _ = h.form_group("g", 1)
    assert h.heartbeat("g", a, gen) is ErrorCode.NONE
    _, tb = h.join_new_member("g")
    assert state(h, "g") is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("g", a, gen) is ErrorCode.REBALANCE_IN_PROGRESS
    ta = h.join("g", a)
    ra, rb = h.response(ta), h.response(tb)
    assert ra.generation_id == rb.generation_id == gen + 1
    assert h.heartbeat("g", a, gen) is ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("g", "nobody", gen + 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("missing-group", a, gen) is ErrorCode.UNKNOWN_MEMBER_ID


def test_follower_rejoin_without_changes_keeps_stable_but_leader_rejoin_rebalances():
    h = Harness()
    ids, gen, leader = h.form_group("g", 2)
    follower = next(m for m in ids if m != leader)
    r = h.response(h.join("g", follower))
    assert r.error is ErrorCode.NONE and r.generation_id == gen and r.members == ()
    assert state(h, "g") is GroupState.STABLE
    h.join("g", leader)
    assert state(h, "g") is GroupState.PREPARING_REBALANCE


def test_session_timeout_evicts_a_silent_member():
    h = Harness()
    (a, b), gen, _ = h.form_group("g", 2, session_ms=10_000)
    h.advance(6_000)
    assert h.heartbeat("g", a, gen) is ErrorCode.NONE
    g = h.core.groups["g"]
    assert g.has(b)
    h.advance(6_000)
    # b never heartbeats: gone after its 10 s session, the group rebalances without it
    assert not g.has(b)
    assert h.heartbeat("g", a, gen) is ErrorCode.REBALANCE_IN_PROGRESS
    r = h.response(h.join("g", a))
    assert r.error is ErrorCode.NONE and r.generation_id == gen + 1 and r.leader_id == a
    assert h.heartbeat("g", b, gen) is ErrorCode.UNKNOWN_MEMBER_ID


def test_members_that_do_not_rejoin_within_rebalance_timeout_are_dropped():
    h = Harness()
    (a, b), gen, _ = h.form_group("g", 2, rebalance_ms=20_000, session_ms=30_000)
    # a changes its subscription: rebalance; b never rejoins
    ta = h.join(
        "g",
        a,
        protocols=[("range", encode_subscription(["t", "u"]))],
        rebalance_ms=20_000,
        session_ms=30_000,
    )
    assert h.response(ta) is None
    h.advance(20_001)
    r = h.response(ta)
    assert r.error is ErrorCode.NONE and r.generation_id == gen + 1
    assert not h.core.groups["g"].has(b)


def test_last_member_leaving_empties_the_group():
    h = Harness()
    (a,), gen, _ = h.form_group("g", 1)
    r = h.leave("g", [MemberIdentity(a)])
    assert (
        r == LeaveGroupResult(ErrorCode.NONE, (r.members[0],))
        and r.members[0].error is ErrorCode.NONE
    )
    g = h.core.groups["g"]
    assert g.state is GroupState.EMPTY and g.generation_id == gen + 1
    assert g.leader_id is None and g.protocol_name is None


def test_batched_leave_with_unknown_members():
    h = Harness()
    (a, b, c), gen, _ = h.form_group("g", 3)
    r = h.leave("g", [MemberIdentity(a), MemberIdentity("ghost"), MemberIdentity(b)])
    assert [m.error for m in r.members] == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.NONE,
    ]
    r = h.response(h.join("g", c))
    assert r.error is ErrorCode.NONE and r.generation_id == gen + 1 and r.leader_id == c
    r = h.leave("nope", [MemberIdentity(a)])
    assert r.members[0].error is ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_during_rebalance_completes_the_join_for_the_others():
    h = Harness()
    (a, b), gen, _ = h.form_group("g", 2)
    ta = h.join("g", a, protocols=[("range", encode_subscription(["x"]))])
    assert h.response(ta) is None
    h.leave("g", [MemberIdentity(b)])
    assert h.response(ta).generation_id == gen + 1


def test_pending_member_that_never_comes_back_expires():
    h = Harness()
    r = h.response(h.join("g", session_ms=10_000))
    assert r.error is ErrorCode.MEMBER_ID_REQUIRED
    assert r.member_id in h.core.groups["g"].pending_members
    h.advance(10_001)
    # the group was only created for the pending member: it leaves no trace
    assert "g" not in h.core.groups


def test_pending_member_delays_completion_until_it_joins():
    h = Harness()
    (a,), gen, _ = h.form_group("g", 1)
    pending = h.response(h.join("g")).member_id
    ta = h.join("g", a, protocols=[("range", encode_subscription(["x"]))])
    assert h.response(ta) is None  # waits for the pending member
    tp = h.join("g", pending)
    assert h.response(ta).generation_id == h.response(tp).generation_id == gen + 1


def test_sync_errors():
    h = Harness()
    (a, b), gen, leader = h.form_group("g", 2)
    assert h.response(h.sync("g", "ghost", gen)).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.response(h.sync("g", a, gen + 5)).error is ErrorCode.ILLEGAL_GENERATION
    assert h.response(h.sync("g", a, gen, protocol_type="consumer", protocol_name="rr")).error is (
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    )
    assert h.response(h.sync("nope", a, gen)).error is ErrorCode.UNKNOWN_MEMBER_ID
    # Stable: a late SyncGroup just returns the assignment
    assert h.response(h.sync("g", a, gen)).assignment == f"{a}:{gen}".encode()
    h.join("g", leader)
    assert h.response(h.sync("g", a, gen)).error is ErrorCode.REBALANCE_IN_PROGRESS


def test_leader_that_never_syncs_is_removed_after_rebalance_timeout():
    h = Harness()
    kw = {"rebalance_ms": 20_000, "session_ms": 30_000}
    (a, ta), (b, _tb) = h.join_new_member("g", **kw), h.join_new_member("g", **kw)
    h.advance(1)
    leader = h.response(ta).leader_id
    follower = b if leader == a else a
    sf = h.sync("g", follower, 1)
    h.advance(20_001)
    # the follower's sync is answered with REBALANCE_IN_PROGRESS and the leader is gone
    assert h.response(sf).error is ErrorCode.REBALANCE_IN_PROGRESS
    assert not h.core.groups["g"].has(leader)
    r = h.response(h.join("g", follower, **kw))
    assert r.error is ErrorCode.NONE and r.leader_id == follower


def test_assignment_store_failure_makes_members_rejoin():
    h = Harness()
    (a, ta), (b, _tb) = h.join_new_member("g"), h.join_new_member("g")
    h.advance(1)
    leader = h.response(ta).leader_id
    follower = b if leader == a else a
    sf = h.sync("g", follower, 1)
    h.hold_writes = True
    sl = h.sync("g", leader, 1, {a: b"A", b: b"B"})
    assert h.response(sl) is None
    h.hold_writes = False
    h.release_writes(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert h.response(sl).error is ErrorCode.NOT_COORDINATOR
    assert h.response(sf).error is ErrorCode.NOT_COORDINATOR
    assert state(h, "g") is GroupState.PREPARING_REBALANCE


# ------------------------------------------------------------------ static membership


def test_static_member_rejoin_gets_new_id_without_rebalance_and_fences_old_id():
    h = Harness()
    ta = h.join("g", instance_id="i-a")  # static members skip MEMBER_ID_REQUIRED
    tb = h.join("g", instance_id="i-b")
    h.advance(1)
    ra, rb = h.response(ta), h.response(tb)
    assert ra.error is ErrorCode.NONE and ra.member_id.startswith("i-a-")
    leader = ra.leader_id
    follower = rb.member_id if leader == ra.member_id else ra.member_id
    h.sync("g", leader, 1, {ra.member_id: b"A", rb.member_id: b"B"}, instance_id=None)
    h.sync("g", follower, 1)
    assert state(h, "g") is GroupState.STABLE
    old_b = rb.member_id
    # instance i-b restarts and comes back without its member id
    r = h.response(h.join("g", instance_id="i-b"))
    assert r.error is ErrorCode.NONE and r.member_id != old_b and r.generation_id == 1
    assert state(h, "g") is GroupState.STABLE
    assert h.core.groups["g"].get(r.member_id).assignment == b"B"
    assert h.heartbeat("g", old_b, 1, instance_id="i-b") is ErrorCode.FENCED_INSTANCE_ID
    assert h.response(h.join("g", old_b, instance_id="i-b")).error is ErrorCode.FENCED_INSTANCE_ID
    assert h.response(h.commit("g", old_b, 1, {TP0: OffsetAndMetadata(1)}, instance_id="i-b"))[
        TP0
    ] is (ErrorCode.FENCED_INSTANCE_ID)
    assert h.heartbeat("g", r.member_id, 1, instance_id="i-b") is ErrorCode.NONE
    # the replacement was persisted
    last = h.log.partitions[h.core.partition_for("g")][-1]
    _, value = decode_record(last[1], last[2])
    assert r.member_id in {m.member_id for m in value.members}


def test_static_leader_rejoin_is_told_to_skip_assignment():
    h = Harness()
    ta = h.join("g", instance_id="i-a")
    h.advance(1)
    leader = h.response(ta).member_id
    h.sync("g", leader, 1, {leader: b"A"})
    r = h.response(h.join("g", instance_id="i-a", skip_assignment=True))
    assert r.error is ErrorCode.NONE and r.leader_id == r.member_id and r.skip_assignment
    assert [m.member_id for m in r.members] == [r.member_id]
    # before JoinGroup v9 the rejoining leader is given the old leader id: it does not assign
    previous = r.member_id
    r = h.response(h.join("g", instance_id="i-a"))
    assert r.error is ErrorCode.NONE and r.leader_id == previous != r.member_id
    assert r.members == () and not r.skip_assignment
    assert state(h, "g") is GroupState.STABLE and h.core.groups["g"].leader_id == r.member_id


def test_static_members_survive_a_rebalance_they_miss():
    h = Harness()
    ta = h.join("g", instance_id="i-a", rebalance_ms=10_000, session_ms=60_000)
    tb = h.join("g", instance_id="i-b", rebalance_ms=10_000, session_ms=60_000)
    h.advance(1)
    a, b = h.response(ta).member_id, h.response(tb).member_id
    leader = h.response(ta).leader_id
    h.sync("g", leader, 1, {a: b"A", b: b"B"})
    h.sync("g", b if leader == a else a, 1)
    ta2 = h.join(
        "g",
        a,
        instance_id="i-a",
        protocols=[("range", encode_subscription(["z"]))],
        rebalance_ms=10_000,
        session_ms=60_000,
    )
    h.advance(10_001)
    assert h.response(ta2).generation_id == 2
    assert h.core.groups["g"].has(b)  # static member kept until its session times out


def test_static_member_with_unknown_instance_and_known_id_is_unknown():
    h = Harness()
    (a,), gen, _ = h.form_group("g", 1)
    assert h.response(h.join("g", a, instance_id="never-seen")).error is ErrorCode.UNKNOWN_MEMBER_ID


def test_static_leave_by_instance_id():
    h = Harness()
    ta = h.join("g", instance_id="i-a")
    h.advance(1)
    r = h.leave("g", [MemberIdentity("", "i-a")])
    assert r.members[0].error is ErrorCode.NONE
    assert not h.core.groups["g"].members
    assert h.response(ta).error is ErrorCode.NONE


# ------------------------------------------------------------------ offsets


def test_commit_and_fetch_in_a_stable_group():
    h = Harness()
    (a,), gen, _ = h.form_group("g", 1)
    t = h.commit("g", a, gen, {TP0: OffsetAndMetadata(10, 3, "meta-ü"), TP1: OffsetAndMetadata(20)})
    assert h.response(t) == {TP0: ErrorCode.NONE, TP1: ErrorCode.NONE}
    err, offsets = h.core.fetch_offsets("g", [TP0, TP1, TopicPartition("t", 9)])
    assert err is ErrorCode.NONE
    assert (offsets[TP0].offset, offsets[TP0].leader_epoch, offsets[TP0].metadata) == (
        10,
        3,
        "meta-ü",
    )
    assert offsets[TP1].offset == 20 and offsets[TopicPartition("t", 9)].offset == -1
    assert set(h.core.fetch_offsets("g")[1]) == {TP0, TP1}
    # the records are in Kafka's format in the group's partition
    keys = [decode_record(k, v)[0] for _, k, v in h.log.partitions[h.core.partition_for("g")]]
    assert OffsetCommitKey("g", "t", 0) in keys and GroupMetadataKey("g") in keys


def test_commit_rejections_change_nothing():
    h = Harness()
    (a, b), gen, leader = h.form_group("g", 2)
    om = {TP0: OffsetAndMetadata(5)}
    assert h.response(h.commit("g", "ghost", gen, om)) == {TP0: ErrorCode.UNKNOWN_MEMBER_ID}
    assert h.response(h.commit("g", a, gen - 1, om)) == {TP0: ErrorCode.ILLEGAL_GENERATION}
    assert h.response(h.commit("g", "", -1, om)) == {TP0: ErrorCode.UNKNOWN_MEMBER_ID}
    assert h.response(h.commit("other", "m", 3, om)) == {TP0: ErrorCode.ILLEGAL_GENERATION}
    assert "other" not in h.core.groups
    # CompletingRebalance: member has the new generation but no assignment yet
    h.join("g", leader)
    h.join("g", b if leader == a else a)
    assert state(h, "g") is GroupState.COMPLETING_REBALANCE
    assert h.response(h.commit("g", a, gen + 1, om)) == {TP0: ErrorCode.REBALANCE_IN_PROGRESS}
    assert h.core.fetch_offsets("g", [TP0])[1][TP0].offset == -1


def test_commit_during_preparing_rebalance_is_allowed():
    h = Harness()
    (a, b), gen, leader = h.form_group("g", 2)
    h.join("g", leader)
    assert state(h, "g") is GroupState.PREPARING_REBALANCE
    assert h.response(h.commit("g", a, gen, {TP0: OffsetAndMetadata(7)})) == {TP0: ErrorCode.NONE}


def test_simple_commit_from_a_groupless_consumer():
    h = Harness()
    assert h.response(
        h.commit("standalone", "", -1, {TP0: OffsetAndMetadata(3, metadata="x")})
    ) == {TP0: ErrorCode.NONE}
    g = h.core.groups["standalone"]
    assert g.state is GroupState.EMPTY and g.protocol_type is None
    assert h.core.fetch_offsets("standalone", [TP0])[1][TP0].metadata == "x"
    err, groups = h.core.list_groups()
    assert ("standalone", "", "Empty") in {(o.group_id, o.protocol_type, o.state) for o in groups}


def test_oversized_metadata_is_refused_per_partition():
    h = Harness()
    ok = "m" * 4096
    too_big = "m" * 4097
    r = h.response(
        h.commit(
            "g",
            "",
            -1,
            {TP0: OffsetAndMetadata(1, metadata=too_big), TP1: OffsetAndMetadata(2, metadata=ok)},
        )
    )
    assert r == {TP0: ErrorCode.OFFSET_METADATA_TOO_LARGE, TP1: ErrorCode.NONE}
    offsets = h.core.fetch_offsets("g", [TP0, TP1])[1]
    assert offsets[TP0].offset == -1 and offsets[TP1].metadata == ok
    # Java counts UTF-16 units: 2049 astral characters are 4098 units
    r = h.response(h.commit("g", "", -1, {TP0: OffsetAndMetadata(1, metadata="\U0001f600" * 2049)}))
    assert r == {TP0: ErrorCode.OFFSET_METADATA_TOO_LARGE}


def test_commit_not_visible_until_written_and_write_errors_are_mapped():
    h = Harness()
    h.hold_writes = True
    t = h.commit("g", "", -1, {TP0: OffsetAndMetadata(1)})
    assert h.response(t) is None
    assert h.core.fetch_offsets("g", [TP0])[1][TP0].offset == -1
    assert (
        h.core.fetch_offsets("g", [TP0], require_stable=True)[1][TP0].error
        is ErrorCode.UNSTABLE_OFFSET_COMMIT
    )
    h.release_writes(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert h.core.fetch_offsets("g", [TP0], require_stable=True)[1][TP0].error is ErrorCode.NONE
    assert h.response(t) == {TP0: ErrorCode.NOT_COORDINATOR}
    assert h.core.fetch_offsets("g", [TP0])[1][TP0].offset == -1
    t = h.commit("g", "", -1, {TP0: OffsetAndMetadata(1)})
    h.release_writes(ErrorCode.NOT_ENOUGH_REPLICAS)
    assert h.response(t) == {TP0: ErrorCode.COORDINATOR_NOT_AVAILABLE}
    t = h.commit("g", "", -1, {TP0: OffsetAndMetadata(1)})
    h.release_writes(ErrorCode.MESSAGE_TOO_LARGE)
    assert h.response(t) == {TP0: ErrorCode.INVALID_COMMIT_OFFSET_SIZE}
    t = h.commit("g", "", -1, {TP0: OffsetAndMetadata(9)})
    h.release_writes()
    assert h.response(t) == {TP0: ErrorCode.NONE}
    assert h.core.fetch_offsets("g", [TP0])[1][TP0].offset == 9


def test_offset_delete():
    h = Harness()
    (a,), gen, _ = h.form_group("g", 1)  # subscribed to topic "t"
    other = TopicPartition("u", 0)
    h.commit("g", a, gen, {TP0: OffsetAndMetadata(1), other: OffsetAndMetadata(2)})
    t = h.token()
    h.apply(h.core.delete_offsets(t, "g", [TP0, other]))
    r = h.response(t)
    assert r == OffsetDeleteResult(
        ErrorCode.NONE, {TP0: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, other: ErrorCode.NONE}
    )
    offsets = h.core.fetch_offsets("g", [TP0, other])[1]
    assert offsets[TP0].offset == 1 and offsets[other].offset == -1
    h.leave("g", [MemberIdentity(a)])
    t = h.token()
    h.apply(h.core.delete_offsets(t, "g", [TP0]))
    assert h.response(t).partitions == {TP0: ErrorCode.NONE}
    t = h.token()
    h.apply(h.core.delete_offsets(t, "missing", [TP0]))
    assert h.response(t).error is ErrorCode.GROUP_ID_NOT_FOUND


def test_offset_delete_of_a_non_consumer_group_with_members():
    h = Harness()
    t = h.join("g", protocol_type="connect", require_known=False)
    h.advance(1)
    assert h.response(t).error is ErrorCode.NONE
    t = h.token()
    h.apply(h.core.delete_offsets(t, "g", [TP0]))
    assert h.response(t).error is ErrorCode.NON_EMPTY_GROUP


def test_offsets_of_an_empty_group_expire_after_retention():
    h = Harness(
        offset_config=OffsetConfig(
            offsets_topic_num_partitions=NUM_PARTITIONS,
            offsets_retention_minutes=10,
            offsets_retention_check_interval_ms=60_000,
        )
    )
    (a,), gen, _ = h.form_group("g", 1, session_ms=300_000)
    h.commit("g", a, gen, {TP0: OffsetAndMetadata(1)})
    # still active: a stable group subscribed to "t" keeps its offsets forever
    for _ in range(15):
        h.advance(60_000)
        h.heartbeat("g", a, gen)
    assert h.core.fetch_offsets("g", [TP0])[1][TP0].offset == 1
    h.leave("g", [MemberIdentity(a)])
    h.advance(9 * 60_000)
    assert h.core.fetch_offsets("g", [TP0])[1][TP0].offset == 1
    h.advance(2 * 60_000)
    assert h.core.fetch_offsets("g", [TP0])[1][TP0].offset == -1
    assert "g" not in h.core.groups  # empty, no offsets: the group is gone
    last = [decode_record(k, v) for _, k, v in h.log.partitions[h.core.partition_for("g")]][-2:]
    assert last == [(OffsetCommitKey("g", "t", 0), None), (GroupMetadataKey("g"), None)]


def test_simple_group_offsets_expire_from_their_commit_time():
    h = Harness(
        offset_config=OffsetConfig(
            offsets_topic_num_partitions=NUM_PARTITIONS,
            offsets_retention_minutes=1,
            offsets_retention_check_interval_ms=10_000,
        )
    )
    h.commit("s", "", -1, {TP0: OffsetAndMetadata(1)})
    h.advance(30_000)
    h.commit("s", "", -1, {TP1: OffsetAndMetadata(2)})
    h.advance(40_000)
    offsets = h.core.fetch_offsets("s", [TP0, TP1])[1]
    assert offsets[TP0].offset == -1 and offsets[TP1].offset == 2


# ------------------------------------------------------------------ groups admin


def test_list_describe_delete_groups():
    h = Harness()
    ids, gen, leader = h.form_group("live", 2)
    h.commit("dormant", "", -1, {TP0: OffsetAndMetadata(1)})
    err, groups = h.core.list_groups()
    assert err is ErrorCode.NONE
    assert {(o.group_id, o.state) for o in groups} == {("live", "Stable"), ("dormant", "Empty")}
    assert [o.group_id for o in h.core.list_groups(states_filter=["stable"])[1]] == ["live"]
    assert {o.group_id for o in h.core.list_groups(types_filter=["Classic"])[1]} == {
        "live",
        "dormant",
    }
    assert h.core.list_groups(types_filter=["consumer"])[1] == []
    err, summary = h.core.describe_group("live")
    assert err is ErrorCode.NONE and summary.state == "Stable" and summary.protocol == "range"
    assert {m.member_id for m in summary.members} == set(ids)
    assert all(m.assignment == f"{m.member_id}:{gen}".encode() for m in summary.members)
    assert h.core.describe_group("nope") == (ErrorCode.NONE, h.core.describe_group("nope")[1])
    assert h.core.describe_group("nope")[1].state == "Dead"
    assert h.core.describe_group("nope", api_version=6)[0] is ErrorCode.GROUP_ID_NOT_FOUND
    t = h.token()
    h.apply(h.core.delete_groups(t, ["live", "dormant", "nope"]))
    assert h.response(t) == {
        "live": ErrorCode.NON_EMPTY_GROUP,
        "dormant": ErrorCode.NONE,
        "nope": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    assert "dormant" not in h.core.groups
    assert h.core.fetch_offsets("dormant", [TP0])[1][TP0].offset == -1
    tail = [decode_record(k, v) for _, k, v in h.log.partitions[h.core.partition_for("dormant")]][
        -2:
    ]
    assert tail == [(OffsetCommitKey("dormant", "t", 0), None), (GroupMetadataKey("dormant"), None)]


# ------------------------------------------------------------------ ownership and loading


def test_requests_for_groups_of_other_partitions_get_not_coordinator():
    h = Harness(load=False)
    assert h.response(h.join("g")).error is ErrorCode.NOT_COORDINATOR
    assert h.core.fetch_offsets("g")[0] is ErrorCode.NOT_COORDINATOR
    assert h.core.describe_group("g")[0] is ErrorCode.NOT_COORDINATOR
    p = h.core.partition_for("g")
    h.apply(h.core.begin_loading(p, 1))
    assert h.response(h.join("g")).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat("g", "m", 1) is ErrorCode.NONE
    assert h.response(h.sync("g", "m", 1)).error is ErrorCode.REBALANCE_IN_PROGRESS
    assert h.core.list_groups()[0] is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    h.apply(h.core.complete_loading(p, 1))
    assert h.response(h.join("g")).error is ErrorCode.MEMBER_ID_REQUIRED


def test_inactive_coordinator():
    h = Harness()
    h.apply(h.core.shutdown())
    assert h.response(h.join("g")).error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.core.list_groups()[0] is ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_groups_and_offsets_are_rebuilt_from_the_log():
    log = MemoryLog()
    clock = FakeClock()
    h = Harness(log=log, clock=clock)
    ids, gen, leader = h.form_group("g", 2)
    h.commit("g", ids[0], gen, {TP0: OffsetAndMetadata(11, 2, "keep me")})
    h.commit("g", ids[0], gen, {TP0: OffsetAndMetadata(12, 2, "newer")})
    h.commit("simple", "", -1, {TP1: OffsetAndMetadata(5)})
    h.commit("gone", "", -1, {TP1: OffsetAndMetadata(5)})
    t = h.token()
    h.apply(h.core.delete_groups(t, ["gone"]))

    h2 = Harness(log=log, clock=clock)  # a new coordinator that becomes leader of everything
    g = h2.core.groups["g"]
    assert g.state is GroupState.STABLE and g.generation_id == gen and g.leader_id == leader
    assert set(g.members) == set(ids)
    assert all(g.get(m).assignment == f"{m}:{gen}".encode() for m in ids)
    om = h2.core.fetch_offsets("g", [TP0])[1][TP0]
    assert (om.offset, om.leader_epoch, om.metadata) == (12, 2, "newer")
    assert h2.core.fetch_offsets("simple", [TP1])[1][TP1].offset == 5
    assert "gone" not in h2.core.groups
    # loaded members carry on heartbeating; a silent one is evicted after its session timeout
    assert h2.heartbeat("g", ids[0], gen) is ErrorCode.NONE
    h2.advance(10_001)
    assert not g.has(ids[1]) or g.state is not GroupState.STABLE


def test_unload_answers_waiting_members_with_not_coordinator():
    h = Harness()
    (a, b), gen, leader = h.form_group("g", 2)
    ta = h.join("g", leader)
    p = h.core.partition_for("g")
    h.apply(h.core.unload_partition(p))
    assert h.response(ta).error is ErrorCode.NOT_COORDINATOR
    assert "g" not in h.core.groups
    assert h.heartbeat("g", a, gen) is ErrorCode.NOT_COORDINATOR


def test_stale_load_is_ignored():
    h = Harness(load=False)
    h.apply(h.core.begin_loading(0, 1))
    h.apply(h.core.begin_loading(0, 2))
    h.apply(h.core.complete_loading(0, 1))
    assert h.core.partitions[0].value == "loading"
    h.apply(h.core.complete_loading(0, 2))
    assert h.core.partitions[0].value == "loaded"


def test_transitions_are_enforced_inside_the_core():
    h = Harness()
    h.form_group("g", 1)
    with pytest.raises(IllegalGroupStateTransition):
        h.core.groups["g"].transition_to(GroupState.EMPTY, 0)
    assert isinstance(h.response(h.join("g", "x")), JoinGroupResult)


def test_instance_id_must_map_to_the_member_id():
    h = Harness()
    (a,), gen, _ = h.form_group("g", 1)
    # a dynamic member naming an instance id the group does not know
    assert h.heartbeat("g", a, gen, instance_id="ghost") is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.response(h.sync("g", a, gen, instance_id="ghost")).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.response(h.commit("g", a, gen, {TP0: OffsetAndMetadata(1)}, instance_id="ghost")) == {
        TP0: ErrorCode.UNKNOWN_MEMBER_ID
    }
    r = h.leave("g", [MemberIdentity(a, "ghost"), MemberIdentity("", "ghost")])
    assert [m.error for m in r.members] == [
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
    ]
    assert h.core.groups["g"].has(a)


def test_static_replacement_is_reverted_when_it_cannot_be_persisted():
    h = Harness()
    ta = h.join("g", instance_id="i-a")
    h.advance(1)
    old = h.response(ta).member_id
    h.sync("g", old, 1, {old: b"A"})
    h.hold_writes = True
    t = h.join("g", instance_id="i-a")
    assert h.response(t) is None  # waits for the write
    h.hold_writes = False
    h.release_writes(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    r = h.response(t)
    assert r.error is ErrorCode.NOT_COORDINATOR and r.member_id == ""
    g = h.core.groups["g"]
    assert g.static_members == {"i-a": old} and g.get(old).assignment == b"A"
    assert h.heartbeat("g", old, 1, instance_id="i-a") is ErrorCode.NONE


def test_a_commit_still_being_written_is_cancelled_by_offset_delete():
    """Its record precedes the tombstone in the log: installing it on completion left an
    offset in memory that a reload from the log does not have."""
    h = Harness()
    tp = TopicPartition("t", 0)
    assert h.response(h.commit("g", "", -1, {tp: OffsetAndMetadata(1)})) == {tp: ErrorCode.NONE}
    h.hold_writes = True
    pending = h.commit("g", "", -1, {tp: OffsetAndMetadata(2)})
    deleted = h.token()
    h.apply(h.core.delete_offsets(deleted, "g", [tp]))
    h.hold_writes = False
    h.release_writes()
    assert h.response(pending) == {tp: ErrorCode.NONE}
    assert h.response(deleted).partitions == {tp: ErrorCode.NONE}
    assert h.core.fetch_offsets("g", [tp])[1][tp].offset == -1
    h.load(h.core.partition_for("g"), epoch=1)
    assert h.core.fetch_offsets("g", [tp])[1][tp].offset == -1


def test_delete_groups_of_an_empty_group_with_a_commit_in_flight():
    """Kafka's handleDeleteGroups: an Empty group goes Dead whatever is still being written."""
    h = Harness()
    tp = TopicPartition("t", 0)
    h.commit("g", "", -1, {tp: OffsetAndMetadata(1)})
    h.hold_writes = True
    h.commit("g", "", -1, {tp: OffsetAndMetadata(2)})
    deleted = h.token()
    h.apply(h.core.delete_groups(deleted, ["g"]))
    h.hold_writes = False
    h.release_writes()
    assert h.response(deleted) == {"g": ErrorCode.NONE}
    assert [g.group_id for g in h.core.list_groups()[1]] == []
    assert h.core.fetch_offsets("g", [tp])[1][tp].offset == -1
    h.load(h.core.partition_for("g"), epoch=1)
    assert h.core.fetch_offsets("g", [tp])[1][tp].offset == -1


def test_commits_completing_out_of_order_keep_the_one_written_last():
    h = Harness()
    tp = TopicPartition("t", 0)
    h.hold_writes = True
    h.commit("g", "", -1, {tp: OffsetAndMetadata(1)})
    h.commit("g", "", -1, {tp: OffsetAndMetadata(2)})
    first, second = h.held
    h.held = []
    first_base = h.log.append(first.partition, first.records)
    second_base = h.log.append(second.partition, second.records)
    h.apply(h.core.on_append_complete(second.append_id, ErrorCode.NONE, second_base))
    h.apply(h.core.on_append_complete(first.append_id, ErrorCode.NONE, first_base))
    assert h.core.fetch_offsets("g", [tp])[1][tp].offset == 2


def test_a_cancelled_commit_completing_late_does_not_take_a_newer_ones_place():
    """A in flight, OffsetDelete cancels it, B is committed, then A completes: A must install
    nothing and B must (a pending count let A take B's place: memory said A, the log B)."""
    h = Harness()
    tp, other = TopicPartition("t", 0), TopicPartition("t", 1)
    h.commit("g", "", -1, {other: OffsetAndMetadata(7)})  # keeps the group alive
    h.hold_writes = True
    h.commit("g", "", -1, {tp: OffsetAndMetadata(2)})  # A
    [a] = h.held
    h.held = []
    h.hold_writes = False
    h.apply(h.core.delete_offsets(h.token(), "g", [tp]))
    h.hold_writes = True
    h.commit("g", "", -1, {tp: OffsetAndMetadata(3)})  # B
    [b] = h.held
    h.held = []
    a_base = h.log.append(a.partition, a.records)
    b_base = h.log.append(b.partition, b.records)
    h.apply(h.core.on_append_complete(a.append_id, ErrorCode.NONE, a_base))
    h.apply(h.core.on_append_complete(b.append_id, ErrorCode.NONE, b_base))
    assert h.core.fetch_offsets("g", [tp])[1][tp].offset == 3
    h.load(h.core.partition_for("g"), epoch=1)
    assert h.core.fetch_offsets("g", [tp])[1][tp].offset == 3
