"""Hypothesis drives a group with a handful of clients (dynamic and static) through random
join/sync/heartbeat/leave/commit/time sequences and checks the coordinator's invariants after
every step, plus liveness at the end: every request gets exactly one answer."""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkalite.group.core import JoinGroupResult, MemberIdentity, SyncGroupResult
from kafkalite.group.metadata import GroupState, OffsetAndMetadata
from kafkalite.protocol.consumer_protocol import encode_subscription
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

from .harness import Harness

GROUP = "g"
PROTOCOLS = [
    [("range", encode_subscription(["t"])), ("roundrobin", encode_subscription(["t"]))],
    [("roundrobin", encode_subscription(["t", "u"])), ("range", encode_subscription(["t", "u"]))],
]


class Client:
    def __init__(self, index: int) -> None:
        self.instance_id = f"static-{index}" if index % 3 == 0 else None
        self.member_id = ""
        self.generation = -1
        self.join_result: JoinGroupResult | None = None
        self.join_token = None
        self.sync_token = None

    def label(self) -> str:
        return self.instance_id or self.member_id


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(initial_delay_ms=300)
        self.clients = [Client(i) for i in range(5)]
        self.tokens: list = []
        self.last_generation = 0

    # -------------------------------------------------------------- plumbing

    def _absorb(self) -> None:
        for c in self.clients:
            if c.join_token is not None:
                r = self.h.response(c.join_token)
                if r is not None:
                    c.join_token = None
                    if r.error is ErrorCode.NONE:
                        c.member_id, c.generation, c.join_result = r.member_id, r.generation_id, r
                    elif r.error is ErrorCode.MEMBER_ID_REQUIRED:
                        c.member_id = r.member_id
                    elif r.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                        c.member_id, c.generation, c.join_result = "", -1, None
            if c.sync_token is not None and self.h.response(c.sync_token) is not None:
                r = self.h.response(c.sync_token)
                c.sync_token = None
                if r.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                    c.member_id, c.generation, c.join_result = "", -1, None

    def _track(self, token):
        self.tokens.append(token)
        self._absorb()
        return token

    # -------------------------------------------------------------- rules

    @rule(i=st.integers(0, 4), variant=st.integers(0, 1))
    def join(self, i, variant):
        c = self.clients[i]
        if c.join_token is not None:
            return
        c.join_token = self.h.join(
            GROUP,
            c.member_id,
            instance_id=c.instance_id,
            protocols=PROTOCOLS[variant],
            session_ms=6_000,
            rebalance_ms=8_000,
        )
        self._track(c.join_token)

    @rule(i=st.integers(0, 4))
    def sync(self, i):
        c = self.clients[i]
        if c.join_result is None or c.sync_token is not None:
            return
        r = c.join_result
        assignments = {}
        if r.leader_id == c.member_id and r.members:
            assignments = {
                m.member_id: f"{m.group_instance_id or m.member_id}:{r.generation_id}".encode()
                for m in r.members
            }
        c.sync_token = self.h.sync(
            GROUP, c.member_id, r.generation_id, assignments, instance_id=c.instance_id
        )
        self._track(c.sync_token)

    @rule(i=st.integers(0, 4))
    def heartbeat(self, i):
        c = self.clients[i]
        if not c.member_id:
            return
        err = self.h.heartbeat(GROUP, c.member_id, c.generation, instance_id=c.instance_id)
        if err in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            c.member_id, c.generation, c.join_result = "", -1, None

    @rule(i=st.integers(0, 4))
    def leave(self, i):
        c = self.clients[i]
        if not c.member_id:
            return
        self.h.leave(GROUP, [MemberIdentity(c.member_id, c.instance_id)])
        c.member_id, c.generation, c.join_result = "", -1, None
        self._absorb()

    @rule(i=st.integers(0, 4), offset=st.integers(0, 100))
    def commit(self, i, offset):
        c = self.clients[i]
        t = self.h.commit(
            GROUP,
            c.member_id,
            c.generation,
            {TopicPartition("t", 0): OffsetAndMetadata(offset)},
            instance_id=c.instance_id,
        )
        r = self.h.response(t)
        assert r is not None
        if r[TopicPartition("t", 0)] is ErrorCode.NONE:
            assert (
                self.h.core.fetch_offsets(GROUP, [TopicPartition("t", 0)])[1][
                    TopicPartition("t", 0)
                ].offset
                == offset
            )

    @rule(variant=st.integers(0, 1), rounds=st.integers(1, 3))
    def everyone_cooperates(self, variant, rounds):
        """Well-behaved clients: all (re)join, time passes, all sync; drives multi-member
        groups to Stable so the Stable invariants get exercised."""
        for _ in range(rounds):
            for i in range(len(self.clients)):
                self.join(i, variant)
            self.tick(301)
            self.tick(301)
            for i in range(len(self.clients)):
                if self.clients[i].join_result is not None:
                    self.sync(i)
            for i in range(len(self.clients)):
                self.heartbeat(i)

    @rule(ms=st.sampled_from([1, 100, 301, 2_000, 6_001, 8_001]))
    def tick(self, ms):
        self.h.advance(ms)
        self._absorb()

    # -------------------------------------------------------------- invariants

    @invariant()
    def group_invariants(self):
        g = self.h.core.groups.get(GROUP)
        if g is None:
            return
        assert g.generation_id >= self.last_generation, "generation went backwards"
        self.last_generation = g.generation_id
        if g.leader_id is not None:
            assert g.leader_id in g.members, "leader is not a member"
        assert g.pending_sync_members <= set(g.members)
        for instance, mid in g.static_members.items():
            assert mid in g.members and g.members[mid].group_instance_id == instance
        if g.state is GroupState.EMPTY:
            assert not g.members and g.leader_id is None
        if g.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert g.members and g.leader_id is not None and g.protocol_name is not None
            assert g.protocol_name in g.candidate_protocols()
        if g.state is GroupState.STABLE:
            for m in g.members.values():
                assert not m.is_awaiting_join and not m.is_awaiting_sync
                assert (
                    m.assignment
                    == f"{m.group_instance_id or m.member_id}:{g.generation_id}".encode()
                ), "a stable member holds an assignment of another generation"

    def teardown(self):
        # liveness: once every timeout has passed, every request has been answered exactly once
        # (Harness.apply refuses a second answer)
        for _ in range(4):
            self.h.advance(100_000)
        missing = [t for t in self.tokens if self.h.response(t) is None]
        assert not missing, f"unanswered requests: {missing}"
        for t in self.tokens:
            assert isinstance(self.h.response(t), JoinGroupResult | SyncGroupResult)


GroupMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestGroupStateMachine = GroupMachine.TestCase
