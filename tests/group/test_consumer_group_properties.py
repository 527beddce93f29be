"""Hypothesis drives a consumer group (KIP-848) with a few clients through random joins,
heartbeats (answers lost or not, owned partitions reported or not), delayed revocations,
leaves, static leaves and returns, session expiries, subscription changes and new partitions,
and checks after every step:

- safety: no partition is owned by two clients that heard every answer; none by two clients
  at the same epoch (a client owns what the
  coordinator told it, at the epoch of that answer, once it has applied it), and at most one
  of its owners is at its member's current epoch (a client that applies a stale answer after
  a lost one may overlap with the next owner, but at an older epoch: its commits are refused
  and its next heartbeat is fenced, as in Kafka); the group's ``partition_owner`` is exactly
  the members' assigned plus pending-revocation partitions;
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
        self.owned_epoch = -1
        self.told: tuple[dict, int] | None = None  # the last assignment received, not applied
        self.lost = False  # an answer was lost since it (re)joined
        self.sent_owned: dict | None = None
        self.subscription = ["t"]
        self.static_left = False

    def reset(self) -> None:
        self.lost = False
        self.epoch = None
        self.owned = {}
        self.owned_epoch = -1
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
            c.lost = True
            return
        if result.member_epoch < 0:
            c.reset()
            return
        c.member_id = result.member_id
        c.epoch = result.member_epoch
        if result.assignment is not None:
            c.told = (dict(result.assignment), result.member_epoch)
        elif c.told is not None:  # no assignment: the last one received stands, at this epoch
            c.told = (c.told[0], result.member_epoch)
        else:
            c.owned_epoch = result.member_epoch

    @rule(i=st.integers(0, CLIENTS - 1), subscription=st.sampled_from([["t"], ["t", "u"], ["u"]]))
    def join(self, i, subscription):
        c = self.clients[i]
        if c.epoch is not None:
            return
        c.subscription = subscription
        if c.instance_id is not None and c.static_left:
            # a new process for the same instance id (after a static leave), with a new id; a
            # member that was fenced rejoins with its own id, as Kafka's clients do
            c.incarnation += 1
            c.member_id = f"m{i}-{c.incarnation}"
            c.static_left = False
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
            (c.owned, c.owned_epoch), c.told = c.told, None

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
        c.static_left = static
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
    def no_partition_owned_twice_by_clients_that_heard_every_answer(self):
        seen: dict = {}
        for c in self.clients:
            if c.lost:
                continue
            for t, parts in c.owned.items():
                for p in parts:
                    assert (t, p) not in seen, f"{(t, p)} owned by {seen[t, p]} and {c.member_id}"
                    seen[t, p] = c.member_id

    @invariant()
    def no_partition_owned_twice(self):
        seen: dict = {}
        current: dict = {}
        for c in self.clients:
            member = self.group.members.get(c.member_id)
            is_current = member is not None and member.member_epoch == c.owned_epoch
            for t, parts in c.owned.items():
                for p in parts:
                    key = (t, p, c.owned_epoch)
                    assert key not in seen, f"{key} owned by {seen[key]} and {c.member_id}"
                    seen[key] = c.member_id
                    if is_current:
                        assert (t, p) not in current, (
                            f"{(t, p)} owned at current epochs by {current[t, p]} and {c.member_id}"
                        )
                        current[t, p] = c.member_id

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
            for i, c in enumerate(self.clients):
                if c.epoch is None:  # fenced meanwhile: a real consumer rejoins
                    self.join(i, c.subscription)
                self.heartbeat(i, lose=False, full=True)
                self.apply_assignment(i)
                self.no_partition_owned_twice()
        assert self.group.state == "Stable", self.group.state
        owners = {}
        for c in self.clients:
            assert c.told is None and c.owned_epoch == self.group.members[c.member_id].member_epoch
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
