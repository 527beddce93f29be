"""Online migration in GroupCoordinatorCore (``group.consumer.migration.policy``): a
consumer-protocol member converts a classic group with members (upgrade), classic members are
then served through JoinGroup/SyncGroup/Heartbeat/LeaveGroup inside the consumer group, and the
group becomes classic again when its last consumer-protocol member leaves (downgrade)."""

from __future__ import annotations

import struct

from kafkalite.group.config import GroupConfig, OffsetConfig
from kafkalite.group.consumer_group import HeartbeatResult
from kafkalite.group.core import JoinGroupResult, MemberIdentity, SyncGroupResult
from kafkalite.group.metadata import GroupState, OffsetAndMetadata
from kafkalite.group.migration import encode_assignment
from kafkalite.group.records import GroupMetadataKey, decode_record
from kafkalite.protocol.consumer_protocol import assigned_partitions
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

from .cg_support import Topics
from .harness import NUM_PARTITIONS, Harness, MemoryLog

PROTOCOL = "cooperative-sticky"


def harness(policy: str = "bidirectional", **kw) -> Harness:
    return Harness(
        group_config=GroupConfig(
            group_initial_rebalance_delay_ms=0,
            group_consumer_session_timeout_ms=45_000,
            group_consumer_heartbeat_interval_ms=500,
            # these tests are about other things: every change gets its target at once
            group_consumer_assignment_interval_ms=0,
            group_consumer_assignor_offload_enable=False,
            group_consumer_migration_policy=policy,
        ),
        offset_config=OffsetConfig(offsets_topic_num_partitions=NUM_PARTITIONS),
        **kw,
    )


def subscription(owned=()) -> bytes:
    """A ConsumerProtocolSubscription v1 of topic ``t`` owning ``owned``."""
    out = bytearray(struct.pack(">hih", 1, 1, 1) + b"t" + struct.pack(">i", -1))
    if owned:
        owned = sorted(owned)
        out += struct.pack(">ih", 1, 1) + b"t" + struct.pack(f">i{len(owned)}i", len(owned), *owned)
    else:
        out += struct.pack(">i", 0)
    return bytes(out)


def classic_join(h: Harness, topics, member_id: str, owned=(), group="g") -> JoinGroupResult:
    t = h.token()
    h.apply(
        h.core.join_group(
            t,
            group,
            member_id,
            None,
            True,
            "client",
            "/127.0.0.1",
            30_000,
            10_000,
            "consumer",
            [(PROTOCOL, subscription(sorted(owned)))],
            None,
            False,
            topics=topics,
        )
    )
    return h.response(t)


def consumer_heartbeat(h: Harness, topics, member_id, epoch, owned=None) -> HeartbeatResult:
    t = h.token()
    kw = {}
    if epoch == 0:
        kw = {"subscribed_topic_names": ["t"], "rebalance_timeout_ms": 30_000}
    h.apply(
        h.core.consumer_group_heartbeat(
            t, "g", member_id, epoch, topics=topics, owned=owned if owned is not None else {}, **kw
        )
    )
    return h.response(t)


def classic_group(h: Harness, topics, split: list[list[int]]) -> tuple[list[str], int]:
    """A classic group whose leader handed out ``split`` (one partition list per member)."""
    ids, tokens = [], []
    for _ in split:
        mid, t = h.join_new_member("g", protocols=[(PROTOCOL, subscription())])
        ids.append(mid)
        tokens.append(t)
    h.advance(1)
    results = [h.response(t) for t in tokens]
    assert all(r.error is ErrorCode.NONE for r in results), results
    generation, leader = results[0].generation_id, results[0].leader_id
    assignment = {m: encode_assignment([("t", ps)]) for m, ps in zip(ids, split, strict=True)}
    syncs = [h.sync("g", m, generation, assignment if m == leader else None) for m in ids]
    assert all(h.response(s).error is ErrorCode.NONE for s in syncs)
    return ids, generation


class Clients:
    """What each client owns, as real clients would: a classic one what its last SyncGroup
    gave it (a cooperative client drops the rest before rejoining), a consumer one what its
    last heartbeat gave it."""

    def __init__(self, h: Harness, topics: Topics) -> None:
        self.h, self.topics = h, topics
        self.owned: dict[str, set[int]] = {}
        self.epoch: dict[str, int] = {}
        self.kind: dict[str, str] = {}
        self.tid = topics.get_topic_id("t")

    def classic_round(self, mid: str) -> None:
        hb = self.h.heartbeat("g", mid, self.epoch[mid])
        if hb is ErrorCode.NONE:
            return
        assert hb is ErrorCode.REBALANCE_IN_PROGRESS, hb
        joined = classic_join(self.h, self.topics, mid, self.owned[mid])
        assert joined.error is ErrorCode.NONE and joined.leader_id == "", joined
        self.epoch[mid] = joined.generation_id
        synced = self.h.response(
            self.h.sync("g", mid, joined.generation_id, protocol_type="consumer")
        )
        assert isinstance(synced, SyncGroupResult)
        if synced.error is ErrorCode.REBALANCE_IN_PROGRESS:
            return
        assert synced.error is ErrorCode.NONE, synced
        got = assigned_partitions(synced.assignment) or []
        self.owned[mid] = {p for _, ps in got for p in ps}

    def consumer_round(self, mid: str) -> None:
        owned = {self.tid: frozenset(self.owned[mid])} if self.owned[mid] else {}
        r = consumer_heartbeat(self.h, self.topics, mid, self.epoch[mid], owned)
        assert r.error is ErrorCode.NONE, r
        self.epoch[mid] = r.member_epoch
        if r.assignment is not None:
            self.owned[mid] = set(r.assignment.get(self.tid, ()))

    def round(self) -> None:
        for mid in sorted(self.owned):
            if self.kind[mid] == "classic":
                self.classic_round(mid)
            else:
                self.consumer_round(mid)
            self.check()

    def check(self) -> None:
        seen: set[int] = set()
        for ps in self.owned.values():
            assert not (ps & seen), self.owned
            seen |= ps


def upgraded(h: Harness, topics: Topics) -> tuple[Clients, list[str]]:
    ids, generation = classic_group(h, topics, [[0, 1, 2], [3, 4, 5]])
    clients = Clients(h, topics)
    for mid, ps in zip(ids, [[0, 1, 2], [3, 4, 5]], strict=True):
        clients.owned[mid], clients.epoch[mid], clients.kind[mid] = set(ps), generation, "classic"
    r = consumer_heartbeat(h, topics, "modern", 0)
    assert r.error is ErrorCode.NONE, r
    clients.owned["modern"], clients.epoch["modern"], clients.kind["modern"] = (
        set(r.assignment.get(clients.tid, ())),
        r.member_epoch,
        "consumer",
    )
    return clients, ids


def test_a_consumer_member_upgrades_a_classic_group_with_members():
    h = harness()
    topics = Topics(t=6)
    clients, ids = upgraded(h, topics)
    group = h.core.groups["g"]
    assert group.consumer is not None and not group.members
    cg = group.consumer
    assert {m for m in cg.members} == {*ids, "modern"}
    assert all(cg.members[m].is_classic for m in ids)
    assert not cg.members["modern"].is_classic
    # the classic group's record is deleted before the consumer group's records
    written = [decode_record(k, v) for _, k, v in h.log.partitions[h.core.partition_for("g")]]
    tombstone = next(
        i for i, (k, v) in enumerate(written) if isinstance(k, GroupMetadataKey) and v is None
    )
    assert all(not isinstance(k, GroupMetadataKey) for k, _ in written[tombstone + 1 :])
    clients.check()
    for _ in range(6):
        clients.round()
    assert set().union(*clients.owned.values()) == set(range(6))
    assert all(clients.owned[m] for m in clients.owned)  # every member got a share
    assert cg.state == "Stable"


def test_the_upgrade_survives_a_coordinator_failover():
    log = MemoryLog()
    h = harness(log=log)
    topics = Topics(t=6)
    clients, ids = upgraded(h, topics)
    for _ in range(6):
        clients.round()
    h2 = harness(log=log)
    cg = h2.core.groups["g"].consumer
    assert cg is not None
    for mid in ids:
        member = cg.members[mid]
        assert member.is_classic and member.session_timeout_ms == 10_000
        assert member.classic_protocols[0][0] == PROTOCOL
    clients.h = h2
    for _ in range(2):
        clients.round()
    assert set().union(*clients.owned.values()) == set(range(6))
    # a classic member keeps its own session timeout (10 s) on the new coordinator, not the
    # consumer protocol's (45 s)
    for _ in range(3):
        h2.advance(4_000)
        consumer_heartbeat(h2, topics, "modern", clients.epoch["modern"], None)
        h2.heartbeat("g", ids[1], clients.epoch[ids[1]])
    assert ids[0] not in cg.members and ids[1] in cg.members


def test_the_policy_decides_whether_a_classic_group_with_members_converts():
    for policy in ("disabled", "downgrade"):
        h = harness(policy)
        topics = Topics(t=2)
        classic_group(h, topics, [[0, 1]])
        r = consumer_heartbeat(h, topics, "modern", 0)
        assert r.error is ErrorCode.GROUP_ID_NOT_FOUND
        assert h.core.groups["g"].consumer is None


def test_classic_requests_to_a_consumer_group_are_validated():
    h = harness()
    topics = Topics(t=6)
    clients, ids = upgraded(h, topics)
    assert h.heartbeat("g", "nobody", 1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("g", ids[0], 999) is ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("g", "modern", clients.epoch["modern"]) is ErrorCode.UNKNOWN_MEMBER_ID
    r = h.response(h.sync("g", ids[0], 999))
    assert r.error is ErrorCode.ILLEGAL_GENERATION
    # a new classic member gets its id first (KIP-394), then joins
    first = classic_join(h, topics, "")
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    joined = classic_join(h, topics, first.member_id)
    assert joined.error is ErrorCode.NONE and joined.protocol_name == PROTOCOL
    # a protocol no classic member supports is refused
    t = h.token()
    h.apply(
        h.core.join_group(
            t, "g", "", None, False, "c", "/h", 1000, 10_000, "consumer",
            [("range", subscription())], None, False, topics=topics,
        )
    )  # fmt: skip
    assert h.response(t).error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_the_last_consumer_member_leaving_downgrades_the_group():
    h = harness()
    topics = Topics(t=6)
    clients, ids = upgraded(h, topics)
    for _ in range(6):
        clients.round()
    left = consumer_heartbeat(h, topics, "modern", -1)
    assert left.error is ErrorCode.NONE and left.member_epoch == -1
    del clients.owned["modern"]
    group = h.core.groups["g"]
    assert group.consumer is None
    assert set(group.members) == set(ids)
    assert group.is_state(GroupState.PREPARING_REBALANCE)
    # the classic members rejoin through a classic rebalance
    tokens = {}
    for mid in ids:
        assert h.heartbeat("g", mid, clients.epoch[mid]) is ErrorCode.REBALANCE_IN_PROGRESS
        tokens[mid] = h.join("g", mid, protocols=[(PROTOCOL, subscription(clients.owned[mid]))])
    results = {m: h.response(t) for m, t in tokens.items()}
    assert all(r.error is ErrorCode.NONE for r in results.values()), results
    leader = next(iter(results.values())).leader_id
    assert leader in ids and len(results[leader].members) == 2
    # the classic group is written back
    written = [decode_record(k, v) for _, k, v in h.log.partitions[h.core.partition_for("g")]]
    assert any(isinstance(k, GroupMetadataKey) and v is not None for k, v in written[-3:])


def test_a_classic_member_leaving_a_consumer_group():
    h = harness()
    topics = Topics(t=6)
    clients, ids = upgraded(h, topics)
    r = h.leave(
        "g",
        [
            MemberIdentity(ids[0], None),
            MemberIdentity("ghost", None),
            MemberIdentity("modern", None),  # not a classic member: not through LeaveGroup
            MemberIdentity("", "no-such-instance"),
        ],
    )
    assert [m.error for m in r.members] == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.UNKNOWN_MEMBER_ID,
    ]
    cg = h.core.groups["g"].consumer
    assert ids[0] not in cg.members
    del clients.owned[ids[0]]
    for _ in range(6):
        clients.round()
    assert set().union(*clients.owned.values()) == set(range(6))


def test_a_silent_classic_member_is_fenced_after_its_session_timeout():
    h = harness()
    topics = Topics(t=6)
    clients, ids = upgraded(h, topics)
    h.advance(9_000)
    consumer_heartbeat(h, topics, "modern", clients.epoch["modern"])
    assert h.heartbeat("g", ids[1], clients.epoch[ids[1]]) is not ErrorCode.UNKNOWN_MEMBER_ID
    h.advance(2_000)  # ids[0] silent for 11 s > its 10 s session timeout
    cg = h.core.groups["g"].consumer
    assert ids[0] not in cg.members and ids[1] in cg.members


def test_a_classic_member_commits_with_its_generation():
    h = harness()
    topics = Topics(t=6)
    clients, ids = upgraded(h, topics)
    tp = TopicPartition("t", 0)
    for generation, expected in (
        (clients.epoch[ids[0]], ErrorCode.NONE),
        (99, ErrorCode.ILLEGAL_GENERATION),
    ):
        t = h.token()
        h.apply(
            h.core.commit_offsets(
                t, "g", ids[0], None, generation, {tp: OffsetAndMetadata(5)}, api_version=2
            )
        )
        assert h.response(t)[tp] is expected
    # a consumer-protocol member still needs v9 and a current epoch
    t = h.token()
    h.apply(
        h.core.commit_offsets(
            t, "g", "modern", None, clients.epoch["modern"], {tp: OffsetAndMetadata(6)}, 8
        )
    )
    assert h.response(t)[tp] is ErrorCode.UNSUPPORTED_VERSION


def test_a_classic_member_that_does_not_rejoin_or_sync_in_time_is_fenced():
    h = harness()
    topics = Topics(t=6)
    clients, ids = upgraded(h, topics)
    cg = h.core.groups["g"].consumer
    # told to rejoin, ids[0] keeps heartbeating but never rejoins: fenced after its rebalance
    # timeout (30 s) although its session (10 s) is kept alive
    for _ in range(8):
        assert h.heartbeat("g", ids[0], clients.epoch[ids[0]]) is ErrorCode.REBALANCE_IN_PROGRESS
        consumer_heartbeat(h, topics, "modern", clients.epoch["modern"])
        h.advance(4_000)
    assert ids[0] not in cg.members
    # ids[1] rejoins but never syncs: fenced after its rebalance timeout too
    joined = classic_join(h, topics, ids[1], clients.owned[ids[1]])
    assert joined.error is ErrorCode.NONE
    for _ in range(8):
        h.heartbeat("g", ids[1], joined.generation_id)
        consumer_heartbeat(h, topics, "modern", clients.epoch["modern"])
        h.advance(4_000)
    assert ids[1] not in cg.members


def test_a_static_classic_member_replacing_the_last_consumer_member_downgrades():
    h = harness()
    topics = Topics(t=6)
    clients, ids = upgraded(h, topics)
    # a second, static consumer-protocol member, which then restarts as a classic consumer
    t = h.token()
    h.apply(
        h.core.consumer_group_heartbeat(
            t, "g", "static-modern", 0, topics=topics, instance_id="i1",
            subscribed_topic_names=["t"], rebalance_timeout_ms=30_000, owned={},
        )
    )  # fmt: skip
    assert h.response(t).error is ErrorCode.NONE
    consumer_heartbeat(h, topics, "modern", -1)  # not the last: the group stays consumer
    assert h.core.groups["g"].consumer is not None
    t = h.token()
    h.apply(
        h.core.join_group(
            t, "g", "", "i1", True, "c", "/h", 30_000, 10_000, "consumer",
            [(PROTOCOL, subscription())], None, False, topics=topics,
        )
    )  # fmt: skip
    group = h.core.groups["g"]
    assert group.consumer is None
    assert group.static_members["i1"] in group.members
    assert set(ids) <= set(group.members)
    assert group.is_state(GroupState.PREPARING_REBALANCE)


def test_an_upgrade_whose_first_write_failed_keeps_the_offsets_on_a_new_coordinator():
    log = MemoryLog()
    h = harness(log=log)
    topics = Topics(t=6)
    ids, generation = classic_group(h, topics, [[0, 1, 2], [3, 4, 5]])
    tp = TopicPartition("t", 1)
    t = h.token()
    h.apply(h.core.commit_offsets(t, "g", ids[0], None, generation, {tp: OffsetAndMetadata(7)}))
    assert h.response(t)[tp] is ErrorCode.NONE
    h.fail_writes = ErrorCode.NOT_LEADER_OR_FOLLOWER
    r = consumer_heartbeat(h, topics, "modern", 0)
    assert r.error is ErrorCode.NOT_COORDINATOR
    h.fail_writes = None
    # the next change writes the whole consumer group, without the classic tombstone
    r = consumer_heartbeat(h, topics, "modern", 0)
    assert r.error is ErrorCode.NONE
    h2 = harness(log=log)
    group = h2.core.groups["g"]
    assert group.consumer is not None and not group.members
    assert h2.core.fetch_offsets("g")[1][tp].offset == 7
