"""Online migration between classic and consumer groups, sans I/O: a classic group's members
become classic members of a consumer group with their assignments, are served through
join/sync/heartbeat with the consumer group's incremental reconciliation, and no partition is
ever owned by two clients at once across the conversion (hypothesis)."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.group.consumer_group import (
    ClassicMemberView,
    ConsumerGroup,
    ConsumerGroupError,
    MemberState,
    from_classic_group,
)
from kafkalite.group.migration import encode_assignment, parse_subscription
from kafkalite.group.records import (
    ConsumerGroupMemberMetadataValue,
    decode_consumer_group_value,
    encode_consumer_group_value,
)
from kafkalite.protocol.consumer_protocol import assigned_partitions
from kafkalite.protocol.errors import ErrorCode

from .cg_support import Topics


def subscription(topics, owned=(), version=1) -> bytes:
    out = bytearray(struct.pack(">hi", version, len(topics)))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1)
    if version >= 1:
        out += struct.pack(">i", len(owned))
        for t, ps in owned:
            out += struct.pack(">h", len(t)) + t.encode()
            out += struct.pack(f">i{len(ps)}i", len(ps), *ps)
    return bytes(out)


def classic_view(member_id, topics, assigned, protocol="cooperative-sticky"):
    return ClassicMemberView(
        member_id=member_id,
        instance_id=None,
        client_id="c",
        client_host="h",
        rebalance_timeout_ms=30_000,
        session_timeout_ms=10_000,
        protocols=((protocol, subscription(topics)),),
        assignment=encode_assignment(assigned),
    )


def owned_names(group: ConsumerGroup, member_id: str) -> dict[str, set[int]]:
    names = group.topic_names_by_id()
    return {names[t]: set(ps) for t, ps in group.members[member_id].assigned.items()}


# --------------------------------------------------------------------------- codecs


def test_classic_member_metadata_is_kafkas_tagged_field():
    plain = ConsumerGroupMemberMetadataValue(None, None, "c", "h", ("t",), None, 1000, None)
    classic = ConsumerGroupMemberMetadataValue(
        None, None, "c", "h", ("t",), None, 1000, None, (("range", b"\x00\x01"), ("x", b"")), 9000
    )
    plain_bytes = encode_consumer_group_value(plain)
    assert plain_bytes.endswith(b"\x00")  # no tagged fields
    classic_bytes = encode_consumer_group_value(classic)
    assert classic_bytes[: len(plain_bytes) - 1] == plain_bytes[:-1]
    assert classic_bytes[len(plain_bytes) - 1 : len(plain_bytes) + 1] == b"\x01\x00"  # 1 tag: 0
    assert decode_consumer_group_value(5, classic_bytes) == classic
    assert decode_consumer_group_value(5, plain_bytes) == plain


def test_subscription_and_assignment_codecs():
    sub = parse_subscription(subscription(["a", "b"], [("a", [2, 0])]))
    assert sub is not None and sub.topics == ("a", "b") and sub.owned == (("a", (0, 2)),)
    v0 = parse_subscription(subscription(["a"], version=0))
    assert v0 is not None and v0.owned == ()
    assert parse_subscription(b"\x00\x01\x7f\xff\xff\xff") is None
    assert parse_subscription(b"") is None
    assert assigned_partitions(encode_assignment([("b", [1]), ("a", [3, 0])])) == [
        ("a", [0, 3]),
        ("b", [1]),
    ]


# --------------------------------------------------------------------------- upgrade


def upgraded(topics: Topics, split: dict[str, list[int]], generation=5):
    views = [classic_view(m, ["t"], [("t", ps)] if ps else []) for m, ps in split.items()]
    return from_classic_group("g", "uniform", generation, "cooperative-sticky", views, topics)


def test_upgrade_keeps_members_assignments_and_epochs():
    topics = Topics(t=4)
    group, records = upgraded(topics, {"a": [0, 1], "b": [2, 3]})
    assert group.group_epoch == group.assignment_epoch == 5
    assert owned_names(group, "a") == {"t": {0, 1}}
    assert owned_names(group, "b") == {"t": {2, 3}}
    assert all(m.is_classic and m.member_epoch == 5 for m in group.members.values())
    assert group.state == "Stable"
    # member metadata (with the classic protocols), partition metadata, epoch, targets, target
    # epoch, current assignments: the whole group, as Kafka writes a converted group
    types = [int.from_bytes(key[:2], "big") for key, _ in records]
    assert types.count(5) == 2 and types.count(8) == 2 and types.count(7) == 2
    assert {3, 4, 6} <= set(types)


def test_upgrade_refuses_a_member_whose_subscription_does_not_parse():
    topics = Topics(t=2)
    bad = ClassicMemberView("a", None, "c", "h", 1, 1, (("range", b"\xff"),), b"")
    try:
        from_classic_group("g", "uniform", 1, "range", [bad], topics)
    except ConsumerGroupError as e:
        assert e.error is ErrorCode.GROUP_ID_NOT_FOUND
    else:
        raise AssertionError("converted")


def test_a_partition_two_classic_members_claim_stays_with_one():
    topics = Topics(t=2)
    group, _ = upgraded(topics, {"a": [0, 1], "b": [1]})
    assert owned_names(group, "a") == {"t": {0, 1}}
    assert owned_names(group, "b") == {}


def test_consumer_member_joins_and_classic_members_rejoin_to_revoke():
    topics = Topics(t=4)
    group, _ = upgraded(topics, {"a": [0, 1], "b": [2, 3]})
    result, _ = group.heartbeat(
        topics, "new", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"], owned={}
    )
    # the new member waits for partitions the classic members still hold
    assert result.assignment == {}
    assert group.group_epoch == 6
    a = group.classic_member("a", None, 5)
    assert group.classic_must_rejoin(a)
    # a cooperative member rejoins still owning its partitions: it is told to give some up
    # (its assignment shrinks at the same generation) and rejoins once it has
    for mid, ps in (("a", [0, 1]), ("b", [2, 3])):
        member, _ = group.classic_join(
            topics,
            mid,
            instance_id=None,
            client_id="c",
            client_host="h",
            rebalance_timeout_ms=30_000,
            session_timeout_ms=10_000,
            protocols=[("cooperative-sticky", subscription(["t"], [("t", ps)]))],
        )
        kept = {p for (_, p), owner in group.partition_owner.items() if owner == mid}
        assert kept  # still held until revoked
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            assert member.member_epoch == 5
            names = group.topic_names_by_id()
            kept_now = {names[t]: sorted(p) for t, p in member.assigned.items()}
            member, _ = group.classic_join(
                topics,
                mid,
                instance_id=None,
                client_id="c",
                client_host="h",
                rebalance_timeout_ms=30_000,
                session_timeout_ms=10_000,
                protocols=[("cooperative-sticky", subscription(["t"], list(kept_now.items())))],
            )
        assert member.member_epoch == 6
        assert not group.classic_must_rejoin(member)
    result, _ = group.heartbeat(topics, "new", result.member_epoch, owned={})
    assert result.assignment is not None and sum(len(p) for p in result.assignment.values()) > 0
    held = [owner for owner in group.partition_owner.values()]
    assert len(held) == 4
    assert group.state == "Stable"


def test_classic_member_validation():
    topics = Topics(t=2)
    group, _ = upgraded(topics, {"a": [0, 1]})
    for args, error in (
        (("x", None, 5), ErrorCode.UNKNOWN_MEMBER_ID),
        (("a", "other", 5), ErrorCode.FENCED_INSTANCE_ID),
        (("a", None, 4), ErrorCode.ILLEGAL_GENERATION),
    ):
        try:
            group.classic_member(*args)
        except ConsumerGroupError as e:
            assert e.error is error
        else:
            raise AssertionError(args)
    try:
        group.classic_join(
            topics,
            "z",
            instance_id=None,
            client_id="c",
            client_host="h",
            rebalance_timeout_ms=1,
            session_timeout_ms=1,
            protocols=[("range", subscription(["t"]))],
        )
    except ConsumerGroupError as e:
        assert e.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    else:
        raise AssertionError("joined with a protocol no member supports")
    a = group.members["a"]
    assert assigned_partitions(group.classic_assignment(a)) == [("t", [0, 1])]
    assert group.only_classic_members()


# --------------------------------------------------------------------------- property


@settings(max_examples=60, deadline=None)
@given(
    n_partitions=st.integers(1, 8),
    n_classic=st.integers(1, 3),
    owners=st.data(),
    ops=st.lists(
        st.tuples(st.sampled_from(["classic", "consumer", "leave", "join"]), st.integers(0, 5)),
        max_size=40,
    ),
    eager=st.booleans(),
)
def test_no_partition_owned_twice_across_the_upgrade(n_partitions, n_classic, owners, ops, eager):
    """Clients (classic ones owning what their last SyncGroup gave them, consumer ones what
    their last heartbeat gave them) never own a partition together, and once everyone has
    caught up every partition is owned by exactly one of them."""
    topics = Topics(t=n_partitions)
    classic_ids = [f"c{i}" for i in range(n_classic)]
    split: dict[str, list[int]] = {m: [] for m in classic_ids}
    for p in range(n_partitions):
        split[owners.draw(st.sampled_from(classic_ids))].append(p)
    group, _ = upgraded(topics, split)
    tid = topics.get_topic_id("t")
    # what each client believes it owns
    clients: dict[str, set[int]] = {m: set(ps) for m, ps in split.items()}
    kinds = {m: "classic" for m in classic_ids}
    epochs = {m: 5 for m in classic_ids}
    next_id = [0]

    #: what a classic client's last SyncGroup gave it: a cooperative client drops the rest of
    #: what it owns only before its next JoinGroup (an eager one drops everything then)
    synced: dict[str, set[int]] = {m: set(ps) for m, ps in split.items()}

    def classic_step(mid: str) -> None:
        clients[mid] = set() if eager else set(synced[mid])
        owned = clients[mid]
        member, _ = group.classic_join(
            topics,
            mid,
            instance_id=None,
            client_id="c",
            client_host="h",
            rebalance_timeout_ms=1000,
            session_timeout_ms=1000,
            protocols=[("cooperative-sticky", subscription(["t"], [("t", sorted(owned))]))],
        )
        got = set(member.assigned.get(tid, ()))
        assert group.classic_member(mid, None, member.member_epoch) is member
        synced[mid] = got
        clients[mid] |= got  # until its next rejoin it still holds what it must give up

    def consumer_step(mid: str) -> None:
        result, _ = group.heartbeat(
            topics,
            mid,
            epochs[mid],
            owned={tid: frozenset(clients[mid])} if clients[mid] else {},
            **(
                {"rebalance_timeout_ms": 1000, "subscribed_topic_names": ["t"]}
                if epochs[mid] == 0
                else {}
            ),
        )
        epochs[mid] = result.member_epoch
        if result.assignment is not None:
            clients[mid] = set(result.assignment.get(tid, ()))

    def check() -> None:
        seen: set[int] = set()
        for ps in clients.values():
            assert not (ps & seen)
            seen |= ps

    for op, i in ops:
        live = sorted(clients)
        if op == "join":
            mid = f"k{next_id[0]}"
            next_id[0] += 1
            clients[mid], kinds[mid], epochs[mid] = set(), "consumer", 0
            consumer_step(mid)
        elif not live:
            continue
        else:
            mid = live[i % len(live)]
            if op == "leave":
                group.remove_member(mid)
                del clients[mid]
            elif kinds[mid] == "classic":
                classic_step(mid)
            else:
                consumer_step(mid)
        check()
    # everyone catches up
    for _ in range(4):
        for mid in sorted(clients):
            (classic_step if kinds[mid] == "classic" else consumer_step)(mid)
            check()
    if clients:
        assert set().union(*clients.values()) == set(range(n_partitions))
