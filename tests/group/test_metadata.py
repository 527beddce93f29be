"""GroupMetadata: the legal-transition table, protocol selection, static member bookkeeping."""

import pytest

from kafkalite.group.metadata import (
    VALID_PREVIOUS_STATES,
    CommitRecordMetadataAndOffset,
    GroupMetadata,
    GroupState,
    IllegalGroupStateTransition,
    MemberMetadata,
    OffsetAndMetadata,
)
from kafkalite.protocol.types import TopicPartition

S = GroupState
LEGAL = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
} | {(s, S.DEAD) for s in S}


def member(mid: str, protocols, instance=None) -> MemberMetadata:
    return MemberMetadata(mid, "g", instance, "c", "h", 30000, 10000, "consumer", list(protocols))


@pytest.mark.parametrize("src", list(S))
@pytest.mark.parametrize("dst", list(S))
def test_transition_table(src, dst):
    group = GroupMetadata("g", state=src)
    if (src, dst) in LEGAL:
        group.transition_to(dst, 5)
        assert group.state is dst and group.current_state_timestamp == 5
    else:
        with pytest.raises(IllegalGroupStateTransition):
            group.transition_to(dst, 5)
        assert group.state is src


def test_table_matches_kafka():
    assert {(p, s) for s, prev in VALID_PREVIOUS_STATES.items() for p in prev} == LEGAL


def test_can_rebalance_only_from_empty_stable_completing():
    for s in S:
        assert GroupMetadata("g", state=s).can_rebalance == (
            s in (S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE)
        )


def test_protocol_vote_picks_the_majority_among_common_protocols():
    g = GroupMetadata("g")
    g.add(member("a", [("range", b""), ("roundrobin", b"")]))
    g.add(member("b", [("roundrobin", b""), ("range", b""), ("sticky", b"")]))
    g.add(member("c", [("roundrobin", b""), ("range", b"")]))
    assert g.candidate_protocols() == {"range", "roundrobin"}
    assert g.select_protocol() == "roundrobin"


def test_supports_protocols():
    g = GroupMetadata("g")
    assert not g.supports_protocols("consumer", set())
    assert not g.supports_protocols("", {"range"})
    assert g.supports_protocols("consumer", {"range"})
    g.add(member("a", [("range", b"")]))
    g.transition_to(S.PREPARING_REBALANCE, 0)
    assert g.supports_protocols("consumer", {"range", "x"})
    assert not g.supports_protocols("consumer", {"roundrobin"})
    assert not g.supports_protocols("connect", {"range"})


def test_leader_moves_when_leader_is_removed_and_static_mapping_is_dropped():
    g = GroupMetadata("g")
    g.add(member("a", [("range", b"")], instance="ia"))
    g.static_members["ia"] = "a"
    g.add(member("b", [("range", b"")]))
    assert g.leader_id == "a"
    g.remove("a")
    assert g.leader_id == "b"
    assert "ia" not in g.static_members
    assert g.supported_protocols["range"] == 1
    g.remove("b")
    assert g.leader_id is None and not g.supported_protocols


def test_replace_static_member_keeps_assignment_and_leadership():
    g = GroupMetadata("g")
    m = member("old", [("range", b"")], instance="i1")
    m.assignment = b"A"
    g.add(m)
    g.static_members["i1"] = "old"
    assert g.is_static_member_fenced("x", "i1")
    assert not g.is_static_member_fenced("old", "i1")
    g.replace_static_member("i1", "old", "new")
    assert g.has("new") and not g.has("old")
    assert g.get("new").assignment == b"A"
    assert g.leader_id == "new"
    assert g.is_static_member_fenced("old", "i1")


def test_expired_offsets_of_an_empty_group_count_from_when_it_became_empty():
    g = GroupMetadata("g", protocol_type="consumer", current_state_timestamp=1000)
    tp = TopicPartition("t", 0)
    g.offsets[tp] = CommitRecordMetadataAndOffset(0, OffsetAndMetadata(5, commit_timestamp=0))
    assert g.expired_offsets(now_ms=1000 + 99, retention_ms=100) == []
    assert g.expired_offsets(now_ms=1000 + 100, retention_ms=100) == [tp]
    g.pending_offset_commits[tp] = {1}
    assert g.expired_offsets(now_ms=10**9, retention_ms=100) == []


def test_offset_and_metadata_from_request():
    assert OffsetAndMetadata.from_request(5, None, None, now_ms=100) == OffsetAndMetadata(
        5, -1, "", 100, -1
    )
    assert OffsetAndMetadata.from_request(
        5, 3, "m", 100, commit_timestamp=50, retention_time_ms=10
    ) == (OffsetAndMetadata(5, 3, "m", 50, 110))
