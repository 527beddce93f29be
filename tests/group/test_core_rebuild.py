"""Oracle test: whatever sequence of commits (some failing), offset deletions, group deletions,
membership changes and expirations happened, a coordinator that rebuilds from the
__consumer_offsets log knows exactly what the live one knows (committed offsets with their
metadata, groups with their generation, leader and assignments)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.group.config import GroupConfig, OffsetConfig
from kafkalite.group.core import MemberIdentity
from kafkalite.group.metadata import GroupState, OffsetAndMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

from .harness import NUM_PARTITIONS, Harness

GROUPS = ["a", "b", "c"]
TPS = [TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)]

op = st.one_of(
    st.tuples(
        st.just("commit"),
        st.sampled_from(GROUPS),
        st.lists(st.sampled_from(TPS), min_size=1, max_size=3, unique=True),
        st.integers(0, 1000),
        st.text(max_size=5),
        st.booleans(),
    ),
    st.tuples(
        st.just("delete_offsets"),
        st.sampled_from(GROUPS),
        st.lists(st.sampled_from(TPS), min_size=1, unique=True),
    ),
    st.tuples(st.just("delete_group"), st.sampled_from(GROUPS)),
    st.tuples(st.just("form"), st.integers(1, 3)),
    st.tuples(
        st.just("leave_all"),
    ),
    st.tuples(st.just("member_commit"), st.integers(0, 1000)),
    st.tuples(st.just("time"), st.sampled_from([1_000, 30_000, 61_000])),
)


def visible_state(h: Harness) -> dict:
    out = {}
    for gid, g in h.core.groups.items():
        if g.state is GroupState.DEAD:
            continue
        offsets = {
            tp: (
                e.offset_and_metadata.offset,
                e.offset_and_metadata.leader_epoch,
                e.offset_and_metadata.metadata,
            )
            for tp, e in g.offsets.items()
        }
        members = {m.member_id: m.assignment for m in g.members.values()}
        out[gid] = (
            g.generation_id if g.protocol_type else None,
            g.protocol_type,
            g.leader_id,
            members,
            offsets,
        )
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(op, max_size=25))
def test_rebuild_from_log_equals_live_state(ops):
    offset_config = OffsetConfig(
        offsets_topic_num_partitions=NUM_PARTITIONS,
        offsets_retention_minutes=1,
        offsets_retention_check_interval_ms=10_000,
    )
    group_config = GroupConfig(group_initial_rebalance_delay_ms=0)
    h = Harness(offset_config=offset_config, group_config=group_config)
    members: list[str] = []
    generation = -1
    for o in ops:
        kind = o[0]
        if kind == "commit":
            _, gid, tps, offset, metadata, fail = o
            h.hold_writes = True
            t = h.commit(gid, "", -1, {tp: OffsetAndMetadata(offset, 1, metadata) for tp in tps})
            h.hold_writes = False
            h.release_writes(ErrorCode.NOT_ENOUGH_REPLICAS if fail else None)
            assert h.response(t) is not None
        elif kind == "delete_offsets":
            t = h.token()
            h.apply(h.core.delete_offsets(t, o[1], o[2]))
        elif kind == "delete_group":
            t = h.token()
            h.apply(h.core.delete_groups(t, [o[1]]))
        elif kind == "form":
            if not members:
                members, generation, _ = h.form_group(
                    "m", o[1], session_ms=600_000, rebalance_ms=600_000
                )
        elif kind == "leave_all":
            if members:
                h.leave("m", [MemberIdentity(m) for m in members])
                members, generation = [], -1
        elif kind == "member_commit":
            if members:
                r = h.response(
                    h.commit("m", members[0], generation, {TPS[0]: OffsetAndMetadata(o[1])})
                )
                assert r == {TPS[0]: ErrorCode.NONE}
        elif kind == "time":
            h.advance(o[1])
    assert h.core.pending_appends == 0
    rebuilt = Harness(
        offset_config=offset_config, group_config=group_config, log=h.log, clock=h.clock
    )
    assert visible_state(rebuilt) == visible_state(h)
