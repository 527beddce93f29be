"""ConsumerGroup (KIP-848's consumer group protocol, sans I/O): joining, epochs, incremental
reconciliation (revoke before assign), static members, regex subscriptions, fencing, the
offsets-topic records and the group rebuilt from them."""

from __future__ import annotations

import pytest

from kafkalite.group.consumer_group import (
    ConsumerGroup,
    ConsumerGroupError,
    ConsumerGroupLoader,
    MemberState,
)
from kafkalite.group.records import decode_record
from kafkalite.protocol.errors import ErrorCode

from .cg_support import Topics


def join(g, topics, member, names=("t",), **kw):
    return g.heartbeat(
        topics,
        member,
        0,
        subscribed_topic_names=list(names),
        rebalance_timeout_ms=30000,
        owned={},
        **kw,
    )


def hb(g, topics, member, epoch, owned=None, **kw):
    return g.heartbeat(topics, member, epoch, owned=owned, **kw)


def parts(result, topics, name="t"):
    assert result.assignment is not None, "no assignment in the answer"
    return set(result.assignment.get(topics.ids[name], frozenset()))


def test_first_member_gets_everything_at_epoch_two():
    topics = Topics(t=4)
    g = ConsumerGroup("g")
    result, records = join(g, topics, "a")
    # a new group starts at epoch 1 (an empty target); the first assignment is epoch 2
    assert (result.error, result.member_epoch) == (ErrorCode.NONE, 2)
    assert parts(result, topics) == {0, 1, 2, 3}
    assert g.state == "Stable" and g.group_epoch == g.assignment_epoch == 2
    types = [decode_record(k, v)[0].record_type for k, v in records]
    # member metadata, partition metadata, target epoch 1, epoch 2, target member,
    # target epoch 2, current
    assert types == [5, 4, 6, 3, 7, 6, 8]


def test_partitions_move_only_after_their_owner_revoked_them():
    topics = Topics(t=4)
    g = ConsumerGroup("g")
    ra, _ = join(g, topics, "a")
    owned_a = {topics.ids["t"]: frozenset(ra.assignment[topics.ids["t"]])}
    rb, _ = join(g, topics, "b")
    # b is in the group at epoch 3 but gets nothing a still owns
    assert rb.member_epoch == 3 and parts(rb, topics) == set()
    assert g.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    # a is told to give two partitions up; it keeps its epoch until it does
    ra2, _ = hb(g, topics, "a", 2, owned_a)
    assert ra2.member_epoch == 2 and len(parts(ra2, topics)) == 2
    assert g.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    kept = parts(ra2, topics)
    # a heartbeat still owning them changes nothing; b still waits
    assert hb(g, topics, "a", 2, owned_a)[0].member_epoch == 2
    rb1, _ = hb(g, topics, "b", 3, {})
    assert rb1.assignment is None and g.members["b"].assigned == {}
    # a acks: it moves to epoch 3; then b gets the released partitions
    ra3, _ = hb(g, topics, "a", 2, {topics.ids["t"]: frozenset(kept)})
    assert ra3.member_epoch == 3 and g.members["a"].state is MemberState.STABLE
    rb2, _ = hb(g, topics, "b", 3, {})
    assert parts(rb2, topics) == {0, 1, 2, 3} - kept
    assert g.state == "Stable"


def test_epoch_checks():
    topics = Topics(t=2)
    g = ConsumerGroup("g")
    join(g, topics, "a")
    with pytest.raises(ConsumerGroupError) as e:
        hb(g, topics, "a", 5)
    assert e.value.error is ErrorCode.FENCED_MEMBER_EPOCH
    with pytest.raises(ConsumerGroupError) as e:
        hb(g, topics, "nobody", 2)
    assert e.value.error is ErrorCode.UNKNOWN_MEMBER_ID
    join(g, topics, "b")
    # a's epoch-3 answer was lost: it may still heartbeat with its previous epoch
    ra, _ = hb(g, topics, "a", 2, {topics.ids["t"]: frozenset({0, 1})})
    assert ra.member_epoch in (2, 3)


def test_leaving_frees_partitions_and_bumps_the_epoch():
    topics = Topics(t=2)
    g = ConsumerGroup("g")
    ra, _ = join(g, topics, "a")
    join(g, topics, "b")
    ra, _ = hb(g, topics, "a", 2, ra.assignment)  # told to give one partition up
    hb(g, topics, "a", 2, ra.assignment)  # done
    rb, _ = hb(g, topics, "b", 3, {})
    assert len(parts(ra, topics)) == len(parts(rb, topics)) == 1
    epoch = g.group_epoch
    result, records = g.heartbeat(topics, "b", -1)
    assert result.member_epoch == -1 and "b" not in g.members
    assert g.group_epoch == epoch + 1
    assert [v for _k, v in records[:3]] == [None, None, None]  # tombstones
    ra, _ = hb(g, topics, "a", g.members["a"].member_epoch, dict(g.members["a"].assigned))
    assert parts(ra, topics) == {0, 1} and ra.member_epoch == g.group_epoch


def test_static_member_leaves_and_comes_back_with_its_assignment():
    topics = Topics(t=4)
    g = ConsumerGroup("g")
    join(g, topics, "a1", instance_id="i-a")
    join(g, topics, "b")
    for _ in range(3):  # settle
        for m in list(g.members):
            member = g.members[m]
            hb(g, topics, m, member.member_epoch, dict(member.assigned))
    before = dict(g.members["a1"].assigned)
    epoch = g.group_epoch
    result, _ = g.heartbeat(topics, "a1", -2, instance_id="i-a")
    assert result.member_epoch == -2
    back, _ = join(g, topics, "a2", instance_id="i-a")
    assert back.member_id == "a2" and "a1" not in g.members
    assert g.members["a2"].assigned == before
    assert g.group_epoch == epoch  # no rebalance for a returning static member


def test_an_instance_id_in_use_is_not_released():
    topics = Topics(t=1)
    g = ConsumerGroup("g")
    join(g, topics, "p", instance_id="i")
    with pytest.raises(ConsumerGroupError) as e:
        join(g, topics, "q", instance_id="i")
    assert e.value.error is ErrorCode.UNRELEASED_INSTANCE_ID
    with pytest.raises(ConsumerGroupError) as e:
        hb(g, topics, "p", 1, instance_id="other")
    assert e.value.error is ErrorCode.FENCED_INSTANCE_ID


def test_regex_subscription_follows_new_topics():
    topics = Topics(**{"orders-1": 2, "other": 3})
    g = ConsumerGroup("g")
    r, _ = g.heartbeat(
        topics, "a", 0, subscribed_topic_regex="orders-.*", rebalance_timeout_ms=1000, owned={}
    )
    assert r.assignment == {}  # the regex is not resolved yet
    g.refresh_regexes(topics, 1)
    r, _ = hb(g, topics, "a", r.member_epoch, r.assignment)
    assert set(r.assignment) == {topics.ids["orders-1"]}
    epoch = g.group_epoch
    topics.add("orders-2", 1)
    topics.add("__consumer_offsets", 1)
    r2, _ = hb(g, topics, "a", r.member_epoch, r.assignment)
    assert r2.assignment is None  # the new topic is not seen until the regex is refreshed
    assert g.refresh_regexes(topics, 2)
    assert g.group_epoch == epoch + 1
    r2, _ = hb(g, topics, "a", r.member_epoch, r.assignment)
    assert set(r2.assignment) == {topics.ids["orders-1"], topics.ids["orders-2"]}
    assert g.refresh_regexes(topics, 3) == []  # nothing changed: nothing written


def test_literal_topics_are_assigned_before_the_regex_is_resolved():
    """Kafka resolves a new regex asynchronously: the first answer carries the literal topics,
    the regex's topics come once it is resolved (librdkafka's 0045 resubscribe_with_regex)."""
    topics = Topics(**{"re-1": 4, "re-2": 4, "lit": 2})
    g = ConsumerGroup("g")
    r, _ = g.heartbeat(
        topics,
        "a",
        0,
        subscribed_topic_names=["lit"],
        subscribed_topic_regex="re-.*",
        rebalance_timeout_ms=1000,
        owned={},
    )
    assert r.assignment == {topics.ids["lit"]: frozenset({0, 1})}
    records = g.refresh_regexes(topics, 1000)
    regex_records = [
        (k, v) for k, v in map(lambda kv: decode_record(*kv), records) if k.record_type == 16
    ]
    assert [(k.member_id, v.topics) for k, v in regex_records] == [("re-.*", ("re-1", "re-2"))]
    r, _ = hb(g, topics, "a", r.member_epoch, r.assignment)
    assert {t: len(ps) for t, ps in r.assignment.items()} == {
        topics.ids["lit"]: 2,
        topics.ids["re-1"]: 4,
        topics.ids["re-2"]: 4,
    }
    # the member leaves: its regex's resolution goes (a new subscriber resolves it again)
    _, left = hb(g, topics, "a", -1)
    tombstones = [decode_record(k, v) for k, v in left if v is None]
    assert any(k.record_type == 16 and k.member_id == "re-.*" for k, _v in tombstones)
    assert g.resolved_regexes == {}
    r, _ = g.heartbeat(
        topics,
        "a",
        0,
        subscribed_topic_names=["lit"],
        subscribed_topic_regex="re-.*",
        rebalance_timeout_ms=1000,
        owned={},
    )
    assert set(r.assignment) == {topics.ids["lit"]}


def test_resolved_regexes_are_replayed():
    topics = Topics(**{"re-1": 2, "lit": 1})
    g = ConsumerGroup("g")
    log = []
    r, recs = g.heartbeat(
        topics, "a", 0, subscribed_topic_regex="re-.*", rebalance_timeout_ms=1000, owned={}
    )
    log += recs
    log += g.refresh_regexes(topics, 5)
    r, recs = hb(g, topics, "a", r.member_epoch, r.assignment)
    log += recs
    loader = ConsumerGroupLoader("g")
    for k, v in log:
        loader.apply(*decode_record(k, v))
    rebuilt = loader.build("uniform")
    assert rebuilt.resolved_regexes == g.resolved_regexes
    assert rebuilt.members["a"].assigned == g.members["a"].assigned
    assert rebuilt.refresh_regexes(topics, 6) == []  # the replayed resolution still holds
    # the whole group as records (a snapshot) rebuilds the same resolution
    loader = ConsumerGroupLoader("g")
    for k, v in g.snapshot_records():
        loader.apply(*decode_record(k, v))
    assert loader.build("uniform").resolved_regexes == g.resolved_regexes


@pytest.mark.parametrize("pattern", [r"(t)\1", "(?=t).*", "(?<!x)t", "t++"])
def test_a_pattern_re2j_refuses_is_an_invalid_regular_expression(pattern):
    """Backreferences, lookarounds and possessive quantifiers: Python's re accepts them, RE2J
    (and RE2) refuse them, so Kafka answers INVALID_REGULAR_EXPRESSION."""
    g = ConsumerGroup("g")
    with pytest.raises(ConsumerGroupError) as e:
        g.heartbeat(
            Topics(t=1), "a", 0, subscribed_topic_regex=pattern, rebalance_timeout_ms=1, owned={}
        )
    assert e.value.error is ErrorCode.INVALID_REGULAR_EXPRESSION
    assert pattern in e.value.message


def test_a_regex_matches_whole_topic_names_with_re2_syntax():
    from kafkalite.group.consumer_group import compile_regex

    pattern = compile_regex(r"orders-\pL+|\Qa.b\E")  # RE2's Unicode class and quoting
    assert pattern.fullmatch("orders-eu") and pattern.fullmatch("a.b")
    assert not pattern.fullmatch("orders-eu2") and not pattern.fullmatch("axb")
    assert not pattern.fullmatch("xorders-eu")  # matches(), not find()


def test_bad_regex_and_assignor():
    topics = Topics(t=1)
    g = ConsumerGroup("g")
    with pytest.raises(ConsumerGroupError) as e:
        g.heartbeat(topics, "a", 0, subscribed_topic_regex="(", rebalance_timeout_ms=1, owned={})
    assert e.value.error is ErrorCode.INVALID_REGULAR_EXPRESSION
    with pytest.raises(ConsumerGroupError) as e:
        join(g, topics, "a", server_assignor="sticky")
    assert e.value.error is ErrorCode.UNSUPPORTED_ASSIGNOR


def test_range_assignor_when_members_ask_for_it():
    topics = Topics(t=4)
    g = ConsumerGroup("g")
    join(g, topics, "b", server_assignor="range")
    join(g, topics, "a", server_assignor="range")
    assert g.preferred_assignor() == "range"
    assert g.target["a"][topics.ids["t"]] == frozenset({0, 1})
    assert g.target["b"][topics.ids["t"]] == frozenset({2, 3})


def test_offset_commit_and_fetch_validation():
    topics = Topics(t=1)
    g = ConsumerGroup("g")
    join(g, topics, "a")
    assert g.validate_offset_commit("a", 2, False, 9) is None
    assert g.validate_offset_commit("a", 1, False, 9) is ErrorCode.STALE_MEMBER_EPOCH
    assert g.validate_offset_commit("a", 2, False, 8) is ErrorCode.UNSUPPORTED_VERSION
    assert g.validate_offset_commit("zz", 2, False, 9) is ErrorCode.UNKNOWN_MEMBER_ID
    assert g.validate_offset_commit("", -1, False, 9) is ErrorCode.UNKNOWN_MEMBER_ID
    assert g.validate_offset_fetch(None, -1) is None
    assert g.validate_offset_fetch("a", 3) is ErrorCode.STALE_MEMBER_EPOCH
    g.heartbeat(topics, "a", -1)
    assert g.validate_offset_commit("", -1, False, 9) is None  # admin commit, empty group


def test_the_records_rebuild_the_group():
    topics = Topics(t=6, u=2)
    g = ConsumerGroup("g")
    written = []

    def run(result_records):
        written.extend(result_records[1])
        return result_records[0]

    ra = run(join(g, topics, "a", names=("t", "u"), instance_id="ia", rack_id="r1"))
    run(join(g, topics, "b"))
    run(hb(g, topics, "a", ra.member_epoch, ra.assignment))
    run(join(g, topics, "c"))
    written.extend(g.remove_member("c"))
    loader = ConsumerGroupLoader("g")
    for k, v in written:
        key, value = decode_record(k, v)
        loader.apply(key, value)
    rebuilt = loader.build("uniform")
    assert rebuilt is not None
    assert (rebuilt.group_epoch, rebuilt.assignment_epoch) == (g.group_epoch, g.assignment_epoch)
    assert rebuilt.target == g.target
    assert rebuilt.subscription_metadata == g.subscription_metadata
    assert rebuilt.partition_owner == g.partition_owner
    assert set(rebuilt.members) == set(g.members) == {"a", "b"}
    for m in g.members.values():
        assert rebuilt.members[m.member_id] == m
    assert rebuilt.static_members == {"ia": "a"}
    # deleting the group leaves nothing to rebuild
    for k, v in rebuilt.tombstones():
        key, value = decode_record(k, v)
        loader.apply(key, value)
    assert loader.build("uniform") is None
