"""Consumer groups with real clients: confluent-kafka (librdkafka), kafka-python and aiokafka.

Every consumer runs in its own process (this file run as a script: ``worker`` mode), so one can
be killed with SIGKILL (no LeaveGroup). A worker subscribes, reports its assignment and every
message it consumes as JSON lines on stdout, commits synchronously after each batch (then
reports how many of its messages are committed), and closes (LeaveGroup) when "close" arrives
on stdin.

Per client, on one broker (session.timeout.ms 6000, group.initial.rebalance.delay.ms 0):
three consumers on a 6-partition topic get disjoint assignments covering it and consume every
message exactly once; one leaves and the other two take its partitions; one is killed and is
evicted after its session timeout, the last consumer then owns every partition and resumes from
the committed offsets. A second group on the same topic sees every message too.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kafkalite.testing import Broker
from tests.integration.common import wait_for
from tests.integration.support import (
    CLIENTS,
    PARTITIONS,
    create_topic,
    describe,
    describe_group,
    kafka_python_metadata_before_poll,
    produce,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

SESSION_TIMEOUT_MS = 6000
DEADLINE_S = 60.0
ASSIGNOR_ENV = "KAFKALITE_TEST_ASSIGNOR"  # librdkafka's partition.assignment.strategy


# ---------------------------------------------------------------------- the worker process


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _watch_stdin(stop: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "close":
            break
    stop.set()


def _worker_confluent(
    bootstrap: str, topic: str, group: str, stop: threading.Event, instance_id: str | None = None
) -> None:
    from confluent_kafka import Consumer

    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if instance_id:
        config["group.instance.id"] = instance_id  # KIP-345 static membership
    if os.environ.get(ASSIGNOR_ENV):
        config["partition.assignment.strategy"] = os.environ[ASSIGNOR_ENV]
    consumer = Consumer(config)
    consumer.subscribe([topic])
    last = None
    consumed = 0
    while not stop.is_set():
        batch = consumer.consume(500, 0.1)
        assigned = sorted(tp.partition for tp in consumer.assignment())
        if assigned != last:
            last = assigned
            _emit({"assigned": assigned})
        got = [m for m in batch if m.error() is None]
        for m in got:
            _emit({"msg": [m.partition(), m.offset(), m.value().decode()]})
        if got:
            consumer.commit(asynchronous=False)
            consumed += len(got)
            _emit({"committed": consumed})
    consumer.close()


def _worker_kafka_python(bootstrap: str, topic: str, group: str, stop: threading.Event) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=500,
    )
    # kafka-python 3.0.12 needs its topic metadata before its first poll; see
    # kafka_python_metadata_before_poll
    kafka_python_metadata_before_poll(consumer, topic)
    last = None
    consumed = 0
    while not stop.is_set():
        batch = consumer.poll(timeout_ms=100)
        assigned = sorted(tp.partition for tp in consumer.assignment())
        if assigned != last:
            last = assigned
            _emit({"assigned": assigned})
        for records in batch.values():
            for m in records:
                _emit({"msg": [m.partition, m.offset, m.value.decode()]})
        if batch:
            consumer.commit()
            consumed += sum(len(records) for records in batch.values())
            _emit({"committed": consumed})
    consumer.close()


async def _worker_aiokafka(bootstrap: str, topic: str, group: str, stop: threading.Event) -> None:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=500,
        metadata_max_age_ms=1000,
    )
    await consumer.start()
    last = None
    consumed = 0
    while not stop.is_set():
        batch = await consumer.getmany(timeout_ms=100)
        assigned = sorted(tp.partition for tp in consumer.assignment())
        if assigned != last:
            last = assigned
            _emit({"assigned": assigned})
        for records in batch.values():
            for m in records:
                _emit({"msg": [m.partition, m.offset, m.value.decode()]})
        if batch:
            await consumer.commit()
            consumed += sum(len(records) for records in batch.values())
            _emit({"committed": consumed})
    await consumer.stop()


def worker_main(
    client: str, bootstrap: str, topic: str, group: str, instance_id: str | None = None
) -> None:
    import logging

    # the client's own log goes to the worker's stderr file (kept with the test's tmp dir)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(threadName)s %(name)s %(message)s"
    )
    stop = threading.Event()
    threading.Thread(target=_watch_stdin, args=(stop,), daemon=True).start()
    if client == "confluent-kafka":
        _worker_confluent(bootstrap, topic, group, stop, instance_id)
    elif client == "kafka-python":
        _worker_kafka_python(bootstrap, topic, group, stop)
    else:
        asyncio.run(_worker_aiokafka(bootstrap, topic, group, stop))
    _emit({"closed": True})


# ---------------------------------------------------------------------- the test side


class Worker:
    """A consumer process; `assigned` is its latest reported assignment, `messages` every
    (partition, offset, value) it consumed."""

    def __init__(
        self,
        client: str,
        bootstrap: str,
        topic: str,
        group: str,
        log_dir: Path,
        instance_id: str | None = None,
        assignor: str | None = None,
    ) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        if assignor:
            env[ASSIGNOR_ENV] = assignor
        self.stderr = open(log_dir / f"worker-{client}-{group}-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "worker", client, bootstrap, topic, group]
            + ([instance_id] if instance_id else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            cwd=str(REPO_ROOT),
        )
        self.assigned: list[int] | None = None
        self.history: list[list[int]] = []  # every assignment reported, in order
        self.messages: list[tuple[int, int, str]] = []
        self.committed = 0  # how many of `messages` the worker's commits have covered
        self.closed = False
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            with self._lock:
                if "assigned" in event:
                    self.assigned = event["assigned"]
                    self.history.append(event["assigned"])
                elif "msg" in event:
                    self.messages.append(tuple(event["msg"]))
                elif "committed" in event:
                    self.committed = event["committed"]
                elif "closed" in event:
                    self.closed = True

    def values(self) -> list[str]:
        with self._lock:
            return [v for _, _, v in self.messages]

    def all_committed(self) -> bool:
        """Every message it reported is covered by a commit it saw succeed."""
        with self._lock:
            return self.committed == len(self.messages)

    def close(self) -> None:
        """Close the consumer (LeaveGroup) and wait for the process to end."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"close\n")
        self.proc.stdin.flush()
        self.proc.wait(30)
        self._reader.join(5)
        assert self.closed, "the worker did not close its consumer"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.stderr.close()


def stable_cover(broker: Broker, group: str, workers: list[Worker]) -> bool:
    """The group is Stable with exactly these members, each with a non-empty assignment, and
    the assignments are disjoint and cover every partition."""
    assignments = [w.assigned for w in workers]
    if any(not a for a in assignments):
        return False
    flat = sorted(p for a in assignments for p in a)
    if flat != list(range(PARTITIONS)):
        return False
    return describe(broker.bootstrap_servers, group) == ("Stable", len(workers))


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("groups-broker")
    config = {"offsets.topic.num.partitions": "10"}
    with Broker(config, subprocess=True, data_dir=data_dir) as broker:
        yield broker


@pytest.mark.timeout(150)
@pytest.mark.parametrize("client", CLIENTS)
def test_group_membership_lifecycle(group_broker, tmp_path, client):
    bootstrap = group_broker.bootstrap_servers
    topic, group = f"orders-{client}", f"billing-{client}"
    create_topic(bootstrap, topic)
    workers: list[Worker] = []
    try:
        workers = [Worker(client, bootstrap, topic, group, tmp_path) for _ in range(3)]
        wait_for(
            lambda: stable_cover(group_broker, group, workers), "3 disjoint covering assignments"
        )
        assert all(len(w.assigned) == 2 for w in workers), [w.assigned for w in workers]

        first = [f"a-{i}" for i in range(300)]
        produce(bootstrap, topic, first)
        consumed = lambda: sorted(v for w in workers for v in w.values())  # noqa: E731
        wait_for(lambda: len(consumed()) >= len(first), "every message consumed")
        assert consumed() == sorted(first), "each message exactly once across the group"

        # a consumer leaves: the other two take its partitions
        leaver, *rest = workers
        leaver.close()
        wait_for(lambda: stable_cover(group_broker, group, rest), "rebalance after LeaveGroup")
        second = [f"b-{i}" for i in range(120)]
        produce(bootstrap, topic, second)
        consumed = lambda: sorted(v for w in workers for v in w.values())  # noqa: E731
        wait_for(lambda: len(consumed()) >= len(first) + len(second), "messages after the leave")
        assert consumed() == sorted(first + second)

        # a consumer dies without LeaveGroup: evicted after its session timeout. Killed once
        # its commits are acknowledged: one killed between reporting a message and committing
        # it would have it consumed again by the survivor, as Kafka's at-least-once allows.
        victim, survivor = rest
        wait_for(victim.all_committed, "the victim's commits")
        victim.kill()
        wait_for(
            lambda: stable_cover(group_broker, group, [survivor]), "eviction", timeout=DEADLINE_S
        )
        assert survivor.assigned == list(range(PARTITIONS))
        third = [f"c-{i}" for i in range(60)]
        produce(bootstrap, topic, third)
        consumed = lambda: sorted(v for w in workers for v in w.values())  # noqa: E731
        wait_for(lambda: len(consumed()) >= len(first) + len(second) + len(third), "after eviction")
        assert consumed() == sorted(first + second + third), "resumed from the committed offsets"

        # a second group on the same topic sees every message
        other = Worker(client, bootstrap, topic, f"audit-{client}", tmp_path)
        workers.append(other)
        wait_for(lambda: len(other.values()) >= len(first + second + third), "second group")
        assert sorted(other.values()) == sorted(first + second + third)
        survivor.close()
        other.close()
        wait_for(lambda: describe(bootstrap, group) == ("Empty", 0), "empty group")
    finally:
        for w in workers:
            w.stop()


if __name__ == "__main__" and len(sys.argv) in (6, 7) and sys.argv[1] == "worker":
    worker_main(*sys.argv[2:])


@pytest.mark.timeout(120)
def test_static_member_restart_keeps_assignments_without_rebalance(group_broker, tmp_path):
    """KIP-345 with librdkafka: a static member (group.instance.id) that closes does not leave
    the group; restarted within its session timeout it gets its old assignment back and the
    other member is not rebalanced (its assignment never changes)."""
    bootstrap = group_broker.bootstrap_servers
    topic, group = "static-topic", "static-group"
    create_topic(bootstrap, topic)
    workers: list[Worker] = []
    try:
        a = Worker("confluent-kafka", bootstrap, topic, group, tmp_path, instance_id="inst-a")
        b = Worker("confluent-kafka", bootstrap, topic, group, tmp_path, instance_id="inst-b")
        workers += [a, b]
        wait_for(lambda: stable_cover(group_broker, group, [a, b]), "static group formed")
        b_history = len(b.history)
        a_assignment = a.assigned
        a.close()  # a static member's close sends no LeaveGroup
        assert describe(bootstrap, group) == ("Stable", 2)
        a2 = Worker("confluent-kafka", bootstrap, topic, group, tmp_path, instance_id="inst-a")
        workers.append(a2)
        wait_for(lambda: a2.assigned == a_assignment, "the old assignment back")
        produce(bootstrap, topic, [f"s-{i}" for i in range(60)])
        wait_for(lambda: len(a2.values()) + len(b.values()) >= 60, "messages consumed")
        assert describe(bootstrap, group) == ("Stable", 2)
        assert len(b.history) == b_history, f"the other member was rebalanced: {b.history}"
    finally:
        for w in workers:
            w.stop()


@pytest.mark.timeout(120)
def test_cooperative_sticky_rebalances_pass_through(group_broker, tmp_path):
    """librdkafka's cooperative-sticky assignor (KIP-429 incremental rebalances) needs nothing
    from the broker but passing its protocol and assignments through: members join one by one
    and one leaves, and every time the assignments end up disjoint and covering."""
    bootstrap = group_broker.bootstrap_servers
    topic, group = "coop-topic", "coop-group"
    create_topic(bootstrap, topic)
    workers: list[Worker] = []

    def start() -> Worker:
        w = Worker(
            "confluent-kafka", bootstrap, topic, group, tmp_path, assignor="cooperative-sticky"
        )
        workers.append(w)
        return w

    try:
        a = start()
        wait_for(lambda: stable_cover(group_broker, group, [a]), "one member")
        b = start()
        wait_for(lambda: stable_cover(group_broker, group, [a, b]), "two members")
        c = start()
        wait_for(lambda: stable_cover(group_broker, group, [a, b, c]), "three members")
        described = asyncio.run(describe_group(bootstrap, group))
        assert (described.protocol_type, described.protocol_data) == (
            "consumer",
            "cooperative-sticky",
        )
        produce(bootstrap, topic, [f"k-{i}" for i in range(60)])
        consumed = lambda: sorted(v for w in workers for v in w.values())  # noqa: E731
        wait_for(lambda: len(consumed()) >= 60, "messages consumed")
        assert consumed() == sorted(f"k-{i}" for i in range(60))
        b.close()
        wait_for(lambda: stable_cover(group_broker, group, [a, c]), "after a leave")
    finally:
        for w in workers:
            w.stop()
