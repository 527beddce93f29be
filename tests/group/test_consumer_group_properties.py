"""Hypothesis drives a consumer group (KIP-848) with a few clients through random joins,
heartbeats (answers lost or not, owned partitions reported or not), delayed revocations,
leaves, static leaves and returns, session expiries, subscription changes and new partitions,
and checks after every step:

- safety: no partition is owned by two live clients at the same time (a client owns what the
  coordinator last told it, once it has applied that), and the group's ``partition_owner`` is
  exactly the members' assigned plus pending-revocation partitions;
- liveness: once every client keeps heartbeating and applying what it is told, the group
  becomes Stable with every partition of every subscribed topic owned by exactly one client
  subscribed to it.

A client that is fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) or whose session expired
drops its partitions, as a real consumer does before rejoining.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkalite.group.consumer_group import ConsumerGroup, ConsumerGroupError
from kafkalite.protocol.errors import ErrorCode

from .cg_support import Topics

CLIENTS = 4


class Client:
    def __init__(self, index: int) -> None:
        self.member_id = f"m{index}"
        self.instance_id = f"i{index}" if index % 2 == 0 else None
        self.incarnation = 0
        self.epoch: int | None = None  # None: not in the group
        self.owned: dict = {}
        self.told: dict | None = None  # the last assignment received, not yet applied
        self.sent_owned: dict | None = None
        self.subscription = ["t"]
        self.static_left = False

    def reset(self) -> None:
        self.epoch = None
        self.owned = {}
        self.told = None
        self.sent_owned = None


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.topics = Topics(t=5, u=3)
        self.group = ConsumerGroup("g")
        self.clients = [Client(i) for i in range(CLIENTS)]

    # ------------------------------------------------------------------ client actions

    def _answer(self, c: Client, call, lose: bool = False) -> None:
        try:
            result, _records = call()
        except ConsumerGroupError as e:
            assert e.error in (
                ErrorCode.FENCED_MEMBER_EPOCH,
                ErrorCode.UNKNOWN_MEMBER_ID,
                ErrorCode.UNRELEASED_INSTANCE_ID,
            ), e.error
            if e.error is not ErrorCode.UNRELEASED_INSTANCE_ID:
                c.reset()
            return
        if lose:
            return
        if result.member_epoch < 0:
            c.reset()
            return
        c.member_id = result.member_id
        c.epoch = result.member_epoch
        if result.assignment is not None:
            c.told = dict(result.assignment)

    @rule(i=st.integers(0, CLIENTS - 1), subscription=st.sampled_from([["t"], ["t", "u"], ["u"]]))
    def join(self, i, subscription):
        c = self.clients[i]
        if c.epoch is not None:
            return
        c.subscription = subscription
        if c.instance_id is not None:
            c.incarnation += 1
            c.member_id = f"m{i}-{c.incarnation}"
        self._answer(
            c,
            lambda: self.group.heartbeat(
                self.topics,
                c.member_id,
                0,
                instance_id=c.instance_id,
                subscribed_topic_names=c.subscription,
                rebalance_timeout_ms=1000,
                owned={},
            ),
        )

    @rule(i=st.integers(0, CLIENTS - 1), lose=st.booleans(), full=st.booleans())
    def heartbeat(self, i, lose, full):
        c = self.clients[i]
        if c.epoch is None:
            return
        owned = dict(c.owned) if full or c.owned != c.sent_owned else None
        if owned is not None:
            c.sent_owned = dict(owned)
        self._answer(
            c, lambda: self.group.heartbeat(self.topics, c.member_id, c.epoch, owned=owned), lose
        )

    @rule(i=st.integers(0, CLIENTS - 1))
    def apply_assignment(self, i):
        """The client revokes what it lost and starts on what it gained."""
        c = self.clients[i]
        if c.told is not None:
            c.owned, c.told = c.told, None

    @rule(i=st.integers(0, CLIENTS - 1), subscription=st.sampled_from([["t"], ["t", "u"], ["u"]]))
    def change_subscription(self, i, subscription):
        c = self.clients[i]
        if c.epoch is None:
            return
        c.subscription = subscription
        self._answer(
            c,
            lambda: self.group.heartbeat(
                self.topics,
                c.member_id,
                c.epoch,
                subscribed_topic_names=subscription,
                owned=dict(c.owned),
            ),
        )

    @rule(i=st.integers(0, CLIENTS - 1))
    def leave(self, i):
        c = self.clients[i]
        if c.epoch is None:
            return
        static = c.instance_id is not None
        c.owned = {}  # a leaving consumer stops consuming first
        self._answer(
            c,
            lambda: self.group.heartbeat(
                self.topics, c.member_id, -2 if static else -1, instance_id=c.instance_id
            ),
        )
        c.reset()

    @rule(i=st.integers(0, CLIENTS - 1))
    def session_expires(self, i):
        c = self.clients[i]
        member = self.group.members.get(c.member_id)
        if member is None:
            return
        self.group.remove_member(c.member_id)
        c.reset()  # a real client learns it with its next heartbeat; it has stopped meanwhile

    @rule(topic=st.sampled_from(["t", "u"]))
    def add_partition(self, topic):
        if self.topics.partitions[topic] < 8:
            self.topics.add(topic, self.topics.partitions[topic] + 1)

    # ------------------------------------------------------------------ checks

    @invariant()
    def no_partition_owned_twice(self):
        seen = {}
        for c in self.clients:
            for t, parts in c.owned.items():
                for p in parts:
                    assert (t, p) not in seen, f"{(t, p)} owned by {seen[t, p]} and {c.member_id}"
                    seen[t, p] = c.member_id

    @invariant()
    def ownership_index_is_exact(self):
        expected = {}
        for m in self.group.members.values():
            for a in (m.assigned, m.pending_revocation):
                for t, parts in a.items():
                    for p in parts:
                        assert (t, p) not in expected, f"{(t, p)} held by two members"
                        expected[t, p] = m.member_id
        assert expected == self.group.partition_owner

    def teardown(self):
        # liveness: everyone (re)joins and keeps heartbeating and applying
        for c in self.clients:
            if c.epoch is None:
                self.join(self.clients.index(c), c.subscription)
        for _ in range(12):
            for i in range(len(self.clients)):
                self.heartbeat(i, lose=False, full=True)
                self.apply_assignment(i)
                self.no_partition_owned_twice()
        assert self.group.state == "Stable", self.group.state
        owners = {}
        for c in self.clients:
            for t, parts in c.owned.items():
                for p in parts:
                    owners[t, p] = c
        for name in ("t", "u"):
            tid = self.topics.ids[name]
            if not any(name in c.subscription for c in self.clients if c.epoch is not None):
                continue
            for p in range(self.topics.partitions[name]):
                assert (tid, p) in owners, f"{name}-{p} owned by nobody"
                assert name in owners[tid, p].subscription


ConsumerGroupMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
TestConsumerGroupStateMachine = ConsumerGroupMachine.TestCase
