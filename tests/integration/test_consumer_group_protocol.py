"""KIP-848's consumer group protocol with a real client: confluent-kafka (librdkafka 2.16)
``Consumer({'group.protocol': 'consumer'})`` against one broker.

- three members share a 12-partition topic disjointly and consume every record exactly once;
- a fourth joins: only the partitions that move to it are revoked (on_revoke), from their
  owners, and they reach it (on_assign) with nothing else touched;
- a member in another process is killed (SIGKILL, no leave): after the session timeout
  (``group.consumer.session.timeout.ms`` made small here) its partitions move to the others;
- the coordinator restarts (broker stopped and started on the same data): the group comes back
  from ``__consumer_offsets`` with its epochs, assignment and committed offsets, and its members
  carry on without being fenced;
- a regex subscription picks up a matching topic created later;
- a static member (``group.instance.id``) that closes and comes back gets its partitions
  again with no rebalance (the group epoch unchanged, nothing revoked from the others);
- ConsumerGroupDescribe, ListGroups (types filter) and OffsetCommit with a stale epoch answer
  as Kafka does; a classic JoinGroup on the consumer group is first given a member id.

Run as a script (``worker`` mode) this file is the consumer process the kill test uses: it
reports its assignment as JSON lines on stdout.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kafkalite.testing import Broker, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 12
DEADLINE_S = 60.0
SESSION_TIMEOUT_MS = 4000
HEARTBEAT_MS = 300

BROKER_CONFIG = {
    "group.consumer.session.timeout.ms": SESSION_TIMEOUT_MS,
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
}


def consumer_config(bootstrap: str, group: str, **extra) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000,
        **extra,
    }


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        producer.produce(topic, v.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


class Member:
    """An in-process consumer whose callbacks record every assignment change."""

    def __init__(self, bootstrap: str, group: str, topic: str, **extra) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer(consumer_config(bootstrap, group, **extra))
        self.assigned_events: list[set[int]] = []
        self.revoked_events: list[set[int]] = []
        self.owned: set[int] = set()
        self.values: list[str] = []
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer, partitions) -> None:
        got = {tp.partition for tp in partitions}
        if got:
            self.assigned_events.append(got)
        self.owned |= got

    def _on_revoke(self, consumer, partitions) -> None:
        gone = {tp.partition for tp in partitions}
        if gone:
            self.revoked_events.append(gone)
        self.owned -= gone

    def poll(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            self.values.append(msg.value().decode())

    def close(self) -> None:
        self.consumer.close()


def poll_until(members: list[Member], condition, what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while True:
        for m in members:
            m.poll()
        if condition():
            return
        if time.monotonic() > deadline:
            owned = [sorted(m.owned) for m in members]
            raise AssertionError(f"timed out waiting for {what}; owned: {owned}")


def disjoint_cover(members: list[Member]) -> bool:
    owned = [m.owned for m in members]
    return (
        all(owned)
        and sum(map(len, owned)) == PARTITIONS
        and set().union(*owned) == set(range(PARTITIONS))
    )


async def _send(bootstrap: str, api_key, **fields):
    from kafkalite.client.client import KafkaClient
    from kafkalite.client.connection import request_builder

    client = KafkaClient(bootstrap, client_id="kip848-test")
    try:
        await client.start()
        return await client.send(api_key, request_builder(api_key, **fields))
    finally:
        await client.close()


def send(bootstrap: str, api_key, **fields):
    return asyncio.run(_send(bootstrap, api_key, **fields))


def describe(bootstrap: str, group: str):
    from kafkalite.protocol.api import ApiKey

    response = send(
        bootstrap,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        group_ids=[group],
        include_authorized_operations=False,
    )
    return response.groups[0]


@pytest.fixture(scope="module")
def broker():
    with Broker(config=BROKER_CONFIG) as b:
        yield b


def test_three_members_share_twelve_partitions_and_consume_every_record_once(broker):
    bootstrap = broker.bootstrap_servers
    topic, group = "kip848-share", "kip848-share-group"
    create_topic(bootstrap, topic)
    members = [Member(bootstrap, group, topic) for _ in range(3)]
    try:
        poll_until(
            members,
            lambda: disjoint_cover(members) and all(len(m.owned) == 4 for m in members),
            "a disjoint assignment, four partitions each",
        )
        # produced once the assignment is settled: a partition that moved while being read
        # from the start (no commits here) would be read twice, by the client's choice
        values = [f"v{i}" for i in range(600)]
        produce(bootstrap, topic, values)
        poll_until(
            members,
            lambda: sum(len(m.values) for m in members) >= len(values),
            "every record",
        )
        consumed = [v for m in members for v in m.values]
        assert sorted(consumed) == sorted(values)  # each once: no duplicates, none missing
        described = describe(bootstrap, group)
        assert described.error_code == 0
        assert described.group_state == "Stable"
        assert described.assignor_name == "uniform"
        assert len(described.members) == 3
        by_member = {
            m.member_id: {p for tp in m.assignment.topic_partitions for p in tp.partitions}
            for m in described.members
        }
        assert sorted(len(ps) for ps in by_member.values()) == [4, 4, 4]
        assert {
            tp.topic_name for m in described.members for tp in m.assignment.topic_partitions
        } == {topic}
    finally:
        for m in members:
            m.close()


def test_a_fourth_member_only_takes_the_partitions_that_move(broker):
    bootstrap = broker.bootstrap_servers
    topic, group = "kip848-join", "kip848-join-group"
    create_topic(bootstrap, topic)
    members = [Member(bootstrap, group, topic) for _ in range(3)]
    try:
        poll_until(members, lambda: disjoint_cover(members), "a disjoint assignment of three")
        before = [set(m.owned) for m in members]
        for m in members:
            m.revoked_events.clear()
        fourth = Member(bootstrap, group, topic)
        everyone = [*members, fourth]
        poll_until(
            everyone,
            lambda: disjoint_cover(everyone) and all(len(m.owned) == 3 for m in everyone),
            "a balanced assignment of four",
        )
        revoked = [set().union(*m.revoked_events) if m.revoked_events else set() for m in members]
        # only what moved was revoked: exactly the fourth member's partitions, each from its
        # previous owner, and every other partition stayed put
        assert set().union(*revoked) == fourth.owned
        assert sum(map(len, revoked)) == len(fourth.owned) == 3
        for m, had, gone in zip(members, before, revoked, strict=True):
            assert gone <= had
            assert m.owned == had - gone
        # the fourth got them incrementally, never something still owned elsewhere
        assert set().union(*fourth.assigned_events) == fourth.owned
        fourth.close()
        poll_until(members, lambda: disjoint_cover(members), "three members again")
    finally:
        for m in members:
            m.close()


# ---------------------------------------------------------------------- a member in a process


def worker_main(bootstrap: str, topic: str, group: str) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(consumer_config(bootstrap, group))
    owned: set[int] = set()

    def report() -> None:
        sys.stdout.write(json.dumps({"owned": sorted(owned)}) + "\n")
        sys.stdout.flush()

    def on_assign(c, partitions) -> None:
        owned.update(tp.partition for tp in partitions)
        report()

    def on_revoke(c, partitions) -> None:
        owned.difference_update(tp.partition for tp in partitions)
        report()

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while True:  # until killed
        consumer.poll(0.1)


class Worker:
    def __init__(self, bootstrap: str, topic: str, group: str, log: Path) -> None:
        self.stderr = open(log, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "worker", bootstrap, topic, group],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            cwd=REPO_ROOT,
        )
        self.owned: list[int] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.owned = json.loads(line)["owned"]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.stderr.close()


def test_a_killed_member_loses_its_partitions_after_the_session_timeout(broker, tmp_path):
    bootstrap = broker.bootstrap_servers
    topic, group = "kip848-kill", "kip848-kill-group"
    create_topic(bootstrap, topic)
    members = [Member(bootstrap, group, topic) for _ in range(2)]
    worker = Worker(bootstrap, topic, group, tmp_path / "worker.log")
    try:
        poll_until(
            members,
            lambda: len(worker.owned) == 4 and all(len(m.owned) == 4 for m in members),
            "three members with four partitions each",
        )
        theirs = set(worker.owned)
        worker.kill()
        poll_until(members, lambda: disjoint_cover(members), "the survivors taking over")
        assert theirs <= members[0].owned | members[1].owned
        described = describe(bootstrap, group)
        assert len(described.members) == 2
    finally:
        if worker.proc.poll() is None:
            worker.kill()
        for m in members:
            m.close()


def test_consumer_group_apis_answer_as_kafka(broker):
    from kafkalite.protocol.api import ApiKey

    bootstrap = broker.bootstrap_servers
    topic, group = "kip848-apis", "kip848-apis-group"
    create_topic(bootstrap, topic)
    member = Member(bootstrap, group, topic)
    try:
        poll_until([member], lambda: len(member.owned) == PARTITIONS, "the assignment")
        listed = send(bootstrap, ApiKey.LIST_GROUPS, states_filter=[], types_filter=["consumer"])
        entry = {g.group_id: g for g in listed.groups}[group]
        assert (entry.group_type, entry.protocol_type, entry.group_state) == (
            "consumer",
            "consumer",
            "Stable",
        )
        classic_only = send(
            bootstrap, ApiKey.LIST_GROUPS, states_filter=[], types_filter=["classic"]
        )
        assert group not in {g.group_id for g in classic_only.groups}
        # a classic member may join a consumer group that has members (Kafka 4.x): a dynamic
        # one is first given its member id (KIP-394)
        joined = send(
            bootstrap,
            ApiKey.JOIN_GROUP,
            group_id=group,
            session_timeout=datetime.timedelta(seconds=10),
            rebalance_timeout=datetime.timedelta(seconds=10),
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": b""}],
            reason=None,
        )
        assert joined.error_code == 79  # MEMBER_ID_REQUIRED
        described = describe(bootstrap, group)
        member_id = described.members[0].member_id
        stale = send(
            bootstrap,
            ApiKey.OFFSET_COMMIT,
            group_id=group,
            generation_id_or_member_epoch=described.members[0].member_epoch - 1,
            member_id=member_id,
            group_instance_id=None,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 0,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        )
        assert stale.topics[0].partitions[0].error_code == 113  # STALE_MEMBER_EPOCH
        unknown = describe(bootstrap, "no-such-group")
        assert unknown.error_code == 69  # GROUP_ID_NOT_FOUND
    finally:
        member.close()


INTERVAL = datetime.timedelta(milliseconds=HEARTBEAT_MS)
NO_INTERVAL = datetime.timedelta(0)


def heartbeat(bootstrap: str, group: str, member_id: str, epoch: int, **fields):
    from kafkalite.protocol.api import ApiKey

    values = dict(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(milliseconds=-1),
        subscribed_topic_names=None,
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=None,
    )
    values.update(fields)
    return send(bootstrap, ApiKey.CONSUMER_GROUP_HEARTBEAT, **values)


def test_a_leave_is_answered_as_kafka_and_the_member_may_rejoin_at_once(broker):
    """Kafka answers a leave (epoch -1, or -2 for a static member) with the member id and
    epoch only: heartbeat interval 0, no assignment. The same member id may join again with
    epoch 0 right after (librdkafka does, after an unsubscribe and a new subscribe)."""
    from kafkalite.protocol.api import ApiKey

    bootstrap = broker.bootstrap_servers
    topic, group = "kip848-leave", "kip848-leave-group"
    create_topic(bootstrap, topic, partitions=2)
    join = dict(
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=[topic],
        subscribed_topic_regex="",
        server_assignor="uniform",
        topic_partitions=[],
    )
    # as a client does, FindCoordinator first (it creates the offsets topic); a join with the
    # same member id and epoch 0 is idempotent, so it is sent again until the coordinator is up
    send(bootstrap, ApiKey.FIND_COORDINATOR, key=group, key_type=0, coordinator_keys=[group])
    joined = wait_for(
        lambda: (r := heartbeat(bootstrap, group, "leaver", 0, **join)).error_code == 0 and r,
        "the coordinator to answer",
    )
    assert joined.member_id == "leaver"
    assert joined.member_epoch > 0 and joined.heartbeat_interval == INTERVAL
    left = heartbeat(bootstrap, group, "leaver", -1)
    assert (left.error_code, left.member_id, left.member_epoch) == (0, "leaver", -1)
    assert left.heartbeat_interval == NO_INTERVAL
    assert left.assignment is None
    again = heartbeat(bootstrap, group, "leaver", 0, **join)
    assert (again.error_code, again.member_id) == (0, "leaver")
    assert again.member_epoch > joined.member_epoch
    assert again.heartbeat_interval == INTERVAL
    assert again.assignment is not None
    static = heartbeat(bootstrap, group, "still", 0, instance_id="i-1", **join)
    assert static.error_code == 0
    paused = heartbeat(bootstrap, group, "still", -2, instance_id="i-1")
    assert (paused.error_code, paused.member_id, paused.member_epoch) == (0, "still", -2)
    assert paused.heartbeat_interval == NO_INTERVAL
    assert paused.assignment is None
    gone = heartbeat(bootstrap, group, "leaver", -1)
    assert (gone.member_epoch, gone.heartbeat_interval, gone.assignment) == (-1, NO_INTERVAL, None)


def test_a_regex_subscription_takes_new_topics(broker):
    bootstrap = broker.bootstrap_servers
    group = "kip848-regex-group"
    create_topic(bootstrap, "kip848re-a", 2)
    create_topic(bootstrap, "kip848-other", 2)
    member = Member(bootstrap, group, "^kip848re-.*")
    try:

        def assigned():
            return {(tp.topic, tp.partition) for tp in member.consumer.assignment()}

        poll_until([member], lambda: len(assigned()) == 2, "the matching topic")
        create_topic(bootstrap, "kip848re-b", 3)
        poll_until([member], lambda: len(assigned()) == 5, "the new matching topic")
        assert {t for t, _p in assigned()} == {"kip848re-a", "kip848re-b"}
        described = describe(bootstrap, group)
        # librdkafka sends its patterns joined as "(p1)|(p2)..."
        assert described.members[0].subscribed_topic_regex == "(^kip848re-.*)"
        names = {tp.topic_name for tp in described.members[0].assignment.topic_partitions}
        assert names == {"kip848re-a", "kip848re-b"}
    finally:
        member.close()


def test_literal_topics_are_assigned_before_the_regex_resolves(broker):
    """As librdkafka's 0045 resubscribe_with_regex expects of Kafka: subscribing to a regex and
    a literal topic, the first assignment holds the literal topic's partitions only; the
    regex's topics follow once the coordinator has resolved it."""
    from confluent_kafka import Consumer

    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "kip848lit-re-1", 4)
    create_topic(bootstrap, "kip848lit-re-2", 4)
    create_topic(bootstrap, "kip848lit-a", 2)
    events: list[set[tuple[str, int]]] = []
    consumer = Consumer(consumer_config(bootstrap, "kip848-lit-group"))

    def on_assign(_consumer, partitions):
        events.append({(tp.topic, tp.partition) for tp in partitions})

    consumer.subscribe(["^kip848lit-re-.*", "kip848lit-a"], on_assign=on_assign)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while sum(len(e) for e in events) < 10:
            consumer.poll(0.05)
            assert time.monotonic() < deadline, f"timed out; assignments so far: {events}"
        assert events[0] == {("kip848lit-a", 0), ("kip848lit-a", 1)}
        assert set().union(*events) == {
            *(("kip848lit-a", p) for p in range(2)),
            *((f"kip848lit-re-{i}", p) for i in (1, 2) for p in range(4)),
        }
    finally:
        consumer.close()


def test_a_static_member_comes_back_to_its_partitions(broker):
    bootstrap = broker.bootstrap_servers
    topic, group = "kip848-static", "kip848-static-group"
    create_topic(bootstrap, topic)
    members = [
        Member(bootstrap, group, topic, **{"group.instance.id": f"static-{i}"}) for i in range(2)
    ]
    try:
        poll_until(
            members,
            lambda: disjoint_cover(members) and all(len(m.owned) == 6 for m in members),
            "both static members with six partitions",
        )
        before = describe(bootstrap, group)
        theirs = set(members[1].owned)
        members[0].revoked_events.clear()  # what it gave up while the group formed
        members[1].close()  # a static member leaves with epoch -2: its partitions wait for it
        back = Member(bootstrap, group, topic, **{"group.instance.id": "static-1"})
        members[1] = back
        poll_until(members, lambda: back.owned == theirs, "the same partitions back")
        after = describe(bootstrap, group)
        assert after.group_epoch == before.group_epoch  # no rebalance
        assert {m.instance_id for m in after.members} == {"static-0", "static-1"}
        assert members[0].revoked_events == []
    finally:
        for m in members:
            m.close()


def test_a_coordinator_restart_keeps_the_group(tmp_path):
    from confluent_kafka import TopicPartition

    topic, group = "kip848-restart", "kip848-restart-group"
    broker = Broker(config=BROKER_CONFIG, data_dir=tmp_path / "data")
    broker.start()
    members: list[Member] = []
    try:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, topic)
        members = [Member(bootstrap, group, topic) for _ in range(2)]
        poll_until(
            members,
            lambda: disjoint_cover(members) and all(len(m.owned) == 6 for m in members),
            "both members with six partitions",
        )
        produce(bootstrap, topic, [f"a{i}" for i in range(120)])
        poll_until(
            members,
            lambda: disjoint_cover(members) and sum(len(m.values) for m in members) >= 120,
            "both members consuming everything",
        )
        for m in members:
            m.consumer.commit(asynchronous=False)
        before = describe(bootstrap, group)
        owned_before = [set(m.owned) for m in members]
        wanted = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed_before = {
            tp.partition: tp.offset for tp in members[0].consumer.committed(wanted, timeout=30)
        }
        assert sum(committed_before.values()) == 120
        broker.stop()
        broker.start()
        # the group was rebuilt from __consumer_offsets: same epochs, same assignment
        after = wait_for(
            lambda: (d := describe(bootstrap, group)).error_code == 0 and d,
            timeout=DEADLINE_S,
            what="the group after the restart",
        )
        assert after.group_epoch == before.group_epoch
        assert after.assignment_epoch == before.assignment_epoch
        assert sorted((m.member_id, m.member_epoch) for m in after.members) == sorted(
            (m.member_id, m.member_epoch) for m in before.members
        )
        produce(bootstrap, topic, [f"b{i}" for i in range(120)])
        poll_until(
            members,
            lambda: sum(len(m.values) for m in members) >= 240,
            "the records produced after the restart",
        )
        consumed = sorted(v for m in members for v in m.values)
        assert consumed == sorted([f"a{i}" for i in range(120)] + [f"b{i}" for i in range(120)])
        assert [set(m.owned) for m in members] == owned_before  # nobody was fenced
        committed_after = {
            tp.partition: tp.offset for tp in members[0].consumer.committed(wanted, timeout=30)
        }
        assert committed_after == committed_before
        final = describe(bootstrap, group)
        assert final.group_epoch == before.group_epoch  # no member rejoined
    finally:
        for m in members:
            m.close()
        broker.close()


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "worker":
    worker_main(*sys.argv[2:5])


def _set_group_configs(bootstrap: str, group: str, **values: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in values.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def test_the_assignment_interval_and_offload_with_their_group_level_settings(broker):
    """Kafka 4.3's defaults (interval 1 s, assignor offloaded): a member joining a new group is
    answered at epoch 1 with nothing and gets its partitions at a later heartbeat. A group that
    sets consumer.assignment.interval.ms=0 and consumer.assignor.offload.enable=false (GROUP
    config resources) gets them in the answer to the join, as before Kafka 4.3."""
    from kafkalite.protocol.api import ApiKey

    bootstrap = broker.bootstrap_servers
    topic = "kip848-interval"
    create_topic(bootstrap, topic, partitions=2)
    join = dict(
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=[topic],
        subscribed_topic_regex="",
        server_assignor="uniform",
        topic_partitions=[],
    )
    for group in ("kip848-deferred", "kip848-at-once"):
        send(bootstrap, ApiKey.FIND_COORDINATOR, key=group, key_type=0, coordinator_keys=[group])
    _set_group_configs(
        bootstrap,
        "kip848-at-once",
        consumer_assignment_interval_ms="0",
        consumer_assignor_offload_enable="false",
    )

    def first_answer(group: str):
        return wait_for(
            lambda: (r := heartbeat(bootstrap, group, "m", 0, **join)).error_code == 0 and r,
            "the coordinator to answer",
        )

    deferred = first_answer("kip848-deferred")
    assert deferred.member_epoch == 1
    assert [tp.partitions for tp in deferred.assignment.topic_partitions] == []
    later = wait_for(
        lambda: (
            (r := heartbeat(bootstrap, "kip848-deferred", "m", 1, topic_partitions=[])).assignment
            and r
        ),
        "the partitions at a later heartbeat",
    )
    assert later.member_epoch == 2
    assert [sorted(tp.partitions) for tp in later.assignment.topic_partitions] == [[0, 1]]
    at_once = first_answer("kip848-at-once")
    assert at_once.member_epoch == 2
    assert [sorted(tp.partitions) for tp in at_once.assignment.topic_partitions] == [[0, 1]]
    assert deferred.heartbeat_interval == datetime.timedelta(milliseconds=HEARTBEAT_MS)


def test_a_groups_own_heartbeat_interval_is_what_its_members_are_told(broker):
    """consumer.heartbeat.interval.ms of a group (a GROUP config resource, within the broker's
    group.consumer.min/max.heartbeat.interval.ms) is the interval its members are answered."""
    from kafkalite.protocol.api import ApiKey

    bootstrap = broker.bootstrap_servers
    topic, group = "kip848-own-interval", "kip848-own-interval"
    create_topic(bootstrap, topic, partitions=1)
    send(bootstrap, ApiKey.FIND_COORDINATOR, key=group, key_type=0, coordinator_keys=[group])
    _set_group_configs(
        bootstrap, group, consumer_heartbeat_interval_ms="6000", consumer_session_timeout_ms="50000"
    )
    answer = wait_for(
        lambda: (
            (
                r := heartbeat(
                    bootstrap,
                    group,
                    "m",
                    0,
                    rebalance_timeout=datetime.timedelta(seconds=30),
                    subscribed_topic_names=[topic],
                    topic_partitions=[],
                )
            ).error_code
            == 0
            and r
        ),
        "the coordinator to answer",
    )
    assert answer.heartbeat_interval == datetime.timedelta(milliseconds=6000)
    assert HEARTBEAT_MS != 6000
