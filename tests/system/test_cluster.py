"""System tests: a three-broker kafkalite cluster on a real ZooKeeper, with kill -9 faults.

Three `kafkalite serve` subprocesses share one ZooKeeper (chroot `/kafkalite`), elect a
controller through `/controller`, and replicate a topic with replication factor 3 and
`min.insync.replicas=2`. Faults are SIGKILLs, so a dead broker is noticed only when its
ZooKeeper session expires (`zookeeper.session.timeout.ms`), exactly as in Kafka.

The check (CONTRIBUTING.md, convention 15; Kafka's `replication_test.py`): the producer (acks=all, one
request in flight so per-partition order is the send order) keeps a ledger of every
acknowledged (partition, offset, value); after the faults every acknowledged offset is
consumed with its value, acknowledged offsets grow in send order per partition, and the
consumed offsets of a partition are strictly increasing (each offset once).

Scenarios: kill -9 of a partition leader (new leader from the ISR, ISR expansion after the
restart, then the rejoined broker alone serves the same log); an idempotent producer through
two leader kills (every value exactly once); SIGTERM of a leader (controlled shutdown moves the
leadership before the exit); kill -9 of a follower (ISR shrink in the partition state node);
kill -9 of the controller (another broker wins `/controller` with a higher
`/controller_epoch` and creates topics).

Cluster state is read straight from ZooKeeper (Kafka's znodes: `/controller`,
`/controller_epoch`, `/brokers/topics/<t>/partitions/<p>/state`). Every wait is a condition
with a deadline (`wait_for`), never a sleep. The cluster is shared by the tests of this module;
each test starts by bringing every broker back.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import Cluster, ZooKeeperServer
from tests.system.support import (
    BROKER_IDS,
    broker_view,
    create_topic,
    logs,
    start_all,
    system_cluster,
    wait_for,
)


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    base = tmp_path_factory.mktemp("cluster")
    with (
        ZooKeeperServer(base / "zk", max_session_timeout_ms=60000) as zk,
        system_cluster(zk, base) as (cluster, reader),
    ):
        yield cluster, reader


@pytest.fixture(scope="module")
def zk(running):
    """The cluster's znodes, read straight from ZooKeeper."""
    return running[1]


@pytest.fixture
def healthy_cluster(running, zk):
    """Every broker running at the start. The broker logs' tails are printed at teardown
    (pytest shows captured output of failed tests only)."""
    cluster = running[0]
    start_all(cluster, zk)
    yield cluster
    print(logs(cluster))


# -- the acknowledged-writes ledger -------------------------------------------------------------


@dataclass
class Ledger:
    """Acknowledged writes, in acknowledgement order per partition."""

    acked: dict[int, list[tuple[int, bytes]]] = field(default_factory=lambda: defaultdict(list))
    failed: list[tuple[bytes, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.acked.values())

    def on_delivery(self, err, msg) -> None:
        with self.lock:
            if err is None:
                self.acked[msg.partition()].append((msg.offset(), msg.value()))
            else:
                self.failed.append((msg.value(), str(err)))


class BackgroundProducer:
    """Produces `<prefix>-<n>` round-robin over the partitions until stopped (acks=all; the
    client retries through leader changes; one request in flight keeps the send order, or an
    idempotent producer's sequence numbers do)."""

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, prefix: str, *, idempotent: bool = False
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.prefix = prefix
        self.ledger = Ledger()
        self.sent = 0
        self._stop = threading.Event()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                # idempotence keeps the order with 5 in flight (sequence numbers)
                "enable.idempotence": idempotent,
                "max.in.flight.requests.per.connection": 5 if idempotent else 1,
                "retries": 1_000_000,
                "retry.backoff.ms": 100,
                "delivery.timeout.ms": 120_000,
                "request.timeout.ms": 10_000,
                "linger.ms": 5,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            value = f"{self.prefix}-{self.sent}".encode()
            try:
                self.producer.produce(
                    self.topic,
                    value,
                    partition=self.sent % self.partitions,
                    on_delivery=self.ledger.on_delivery,
                )
            except BufferError:
                self.producer.poll(0.1)
                continue
            self.sent += 1
            self.producer.poll(0.005)  # serve delivery callbacks; paces the stream
        assert self.producer.flush(120) == 0, "messages still unacknowledged after 120s"

    def stop(self) -> Ledger:
        self._stop.set()
        self._thread.join(180)
        assert not self._thread.is_alive(), "producer thread did not finish"
        return self.ledger

    def wait_acked(self, at_least: int, what: str) -> None:
        wait_for(lambda: self.ledger.count() >= at_least, what)


def consume_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of the topic up to each partition's high watermark, per partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"verifier-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:

        def watermarks() -> dict[int, int] | None:
            # right after a failover the client's metadata may still lack a leader: retry
            try:
                return {
                    p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                    for p in range(partitions)
                }
            except KafkaException:
                return None

        ends = wait_for(watermarks, f"{topic}: the high watermark of every partition", 60)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)

        def done() -> bool:
            for m in consumer.consume(500, 0.5):
                assert m.error() is None, m.error()
                got[m.partition()].append((m.offset(), m.value()))
            return all((got[p][-1][0] + 1 if got[p] else 0) >= ends[p] for p in range(partitions))

        wait_for(done, f"{topic}: every record up to the high watermarks {ends}", 60)
        return got
    finally:
        consumer.close()


def check_ledger(ledger: Ledger, consumed: dict[int, list[tuple[int, bytes]]]) -> int:
    """Every acknowledged (partition, offset, value) consumed, once per offset, in order."""
    assert not ledger.failed, f"deliveries failed: {ledger.failed[:5]}"
    total = 0
    for partition, acked in ledger.acked.items():
        offsets = [o for o, _ in acked]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), (
            f"partition {partition}: acknowledged offsets out of send order"
        )
        seen = [o for o, _ in consumed.get(partition, [])]
        assert all(a < b for a, b in zip(seen, seen[1:], strict=False)), (
            f"partition {partition}: consumed offsets not strictly increasing"
        )
        by_offset = dict(consumed.get(partition, []))
        missing = [(o, v) for o, v in acked if by_offset.get(o) != v]
        assert not missing, (
            f"partition {partition}: {len(missing)} acknowledged records lost or changed, "
            f"first {missing[:5]} (consumed there: {[by_offset.get(o) for o, _ in missing[:5]]})"
        )
        total += len(acked)
    return total


# -- the tests ------------------------------------------------------------------------------------


def test_leader_kill9_loses_no_acknowledged_write(healthy_cluster, zk):
    cluster = healthy_cluster
    topic, partitions = "ledger", 3
    create_topic(cluster, zk, topic, partitions, {"min.insync.replicas": "2"})
    victim_partition = 0
    before = zk.partition_state(topic, victim_partition)
    victim = before.leader

    producer = BackgroundProducer(cluster.bootstrap_servers, topic, partitions, "v").start()
    try:
        producer.wait_acked(300, "300 acknowledged writes before the kill")
        cluster.kill(victim)
        killed_at = producer.ledger.count()

        def new_leader():
            s = zk.partition_state(topic, victim_partition)
            return s if s is not None and s.leader not in (victim, -1) else None

        after = wait_for(new_leader, f"a new leader of {topic}-{victim_partition}")
        assert after.leader in before.isr
        assert after.leader_epoch > before.leader_epoch
        assert victim not in after.isr
        producer.wait_acked(killed_at + 300, "300 more acknowledged writes on the new leaders")

        cluster.restart(victim)
        wait_for(
            lambda: all(victim in zk.partition_state(topic, p).isr for p in range(partitions)),
            f"broker {victim} back in the ISR of every partition (ISR expansion)",
        )
        producer.wait_acked(producer.ledger.count() + 200, "writes acknowledged after rejoining")
    finally:
        ledger = producer.stop()

    consumed = consume_all(cluster.bootstrap_servers, topic, partitions)
    acked = check_ledger(ledger, consumed)
    assert acked >= 800

    # The rejoined broker's copy is the log: with the two others killed it is elected (it is
    # in every ISR) and serves the same records, acknowledged ones included.
    others = [b for b in BROKER_IDS if b != victim]
    for broker_id in others:
        cluster.kill(broker_id)
    wait_for(
        lambda: all(zk.partition_state(topic, p).leader == victim for p in range(partitions)),
        f"broker {victim} leading every partition alone",
    )
    # ZooKeeper first, then LeaderAndIsr/UpdateMetadata: wait until the broker says so too
    wait_for(
        lambda: (
            (v := broker_view(cluster.bootstrap_of(victim), [topic])) is not None
            and all(v.leaders.get((topic, p)) == victim for p in range(partitions))
        ),
        f"broker {victim}'s metadata naming itself leader of every partition",
    )
    alone = consume_all(cluster.bootstrap_of(victim), topic, partitions)
    check_ledger(ledger, alone)
    assert alone == consumed


def test_idempotent_producer_through_two_leader_kills(healthy_cluster, zk):
    """The producer state travels with the log: a follower that becomes leader accepts the
    idempotent producer's next sequence numbers and rejects its retries as duplicates, so
    every value is in the log exactly once."""
    cluster = healthy_cluster
    topic, partitions = "idempotent", 2
    create_topic(cluster, zk, topic, partitions, {"min.insync.replicas": "2"})
    producer = BackgroundProducer(
        cluster.bootstrap_servers, topic, partitions, "i", idempotent=True
    ).start()
    try:
        producer.wait_acked(200, "200 acknowledged writes")
        for partition in (0, 1):
            old = zk.partition_state(topic, partition).leader
            cluster.kill(old)
            wait_for(
                lambda p=partition, old=old: zk.partition_state(topic, p).leader not in (old, -1),
                f"a leader of {topic}-{partition} other than {old}",
            )
            producer.wait_acked(producer.ledger.count() + 200, "writes acknowledged after the kill")
            cluster.restart(old)
            wait_for(
                lambda old=old: all(
                    old in zk.partition_state(topic, p).isr for p in range(partitions)
                ),
                f"broker {old} back in the ISRs",
            )
    finally:
        ledger = producer.stop()

    consumed = consume_all(cluster.bootstrap_servers, topic, partitions)
    check_ledger(ledger, consumed)
    values = [v for records in consumed.values() for _, v in records]
    assert len(values) == len(set(values)), "a value was written twice"
    assert len(values) == producer.sent == ledger.count()


def test_controlled_shutdown_moves_leadership_before_stopping(healthy_cluster, zk):
    """SIGTERM: the broker asks the controller to move its leaderships away (ControlledShutdown)
    and exits 0; by then another ISR member leads and the stopped broker left the ISR."""
    cluster = healthy_cluster
    topic, partitions = "controlled", 2
    create_topic(cluster, zk, topic, partitions, {"min.insync.replicas": "2"})
    producer = BackgroundProducer(cluster.bootstrap_servers, topic, partitions, "t").start()
    try:
        producer.wait_acked(200, "200 acknowledged writes")
        before = zk.partition_state(topic, 0)
        assert cluster.processes[before.leader].stop() == 0
        after = zk.partition_state(topic, 0)
        assert after.leader in before.isr and after.leader != before.leader
        assert before.leader not in after.isr
        producer.wait_acked(producer.ledger.count() + 200, "writes acknowledged by the new leader")
        cluster.restart(before.leader)
        wait_for(
            lambda: all(
                before.leader in zk.partition_state(topic, p).isr for p in range(partitions)
            ),
            f"broker {before.leader} back in the ISRs",
        )
    finally:
        ledger = producer.stop()
    check_ledger(ledger, consume_all(cluster.bootstrap_servers, topic, partitions))


def test_follower_kill9_shrinks_the_isr(healthy_cluster, zk):
    cluster = healthy_cluster
    topic = "shrink"
    create_topic(cluster, zk, topic, 1, {"min.insync.replicas": "2"})
    state = zk.partition_state(topic, 0)
    controller = zk.controller()
    follower = next(b for b in state.isr if b not in (state.leader, controller))

    producer = BackgroundProducer(cluster.bootstrap_servers, topic, 1, "s").start()
    try:
        producer.wait_acked(100, "100 acknowledged writes before the kill")
        cluster.kill(follower)
        shrunk = wait_for(
            lambda: (s := zk.partition_state(topic, 0)) is not None and follower not in s.isr and s,
            f"broker {follower} removed from the ISR of {topic}-0",
        )
        assert shrunk.leader == state.leader, "the leader did not change"
        assert set(shrunk.isr) == set(state.isr) - {follower}
        # two in-sync replicas remain: min.insync.replicas=2 still accepts acks=all writes
        producer.wait_acked(producer.ledger.count() + 100, "writes acknowledged by a shrunk ISR")
    finally:
        ledger = producer.stop()
    check_ledger(ledger, consume_all(cluster.bootstrap_servers, topic, 1))

    cluster.restart(follower)
    wait_for(
        lambda: follower in zk.partition_state(topic, 0).isr,
        f"broker {follower} back in the ISR of {topic}-0",
    )


def test_controller_kill9_fails_over(healthy_cluster, zk):
    cluster = healthy_cluster
    old_controller = wait_for(zk.controller, "an active controller")
    old_epoch = zk.controller_epoch()
    cluster.kill(old_controller)

    new_controller = wait_for(
        lambda: (c := zk.controller()) is not None and c != old_controller and c,
        "another broker to become controller",
    )
    assert new_controller in BROKER_IDS
    assert zk.controller_epoch() > old_epoch
    # the new controller's UpdateMetadata reaches every live broker: clients find it
    live = frozenset(cluster.running_brokers)
    wait_for(
        lambda: all(
            (v := broker_view(cluster.bootstrap_of(b), [])) is not None
            and v.controller_id == new_controller
            and v.brokers == live
            for b in cluster.running_brokers
        ),
        f"every live broker's metadata naming controller {new_controller} and brokers {live}",
    )

    # the new controller creates topics: leaders on the live brokers only
    topic = "after-failover"
    admin = AdminClient({"bootstrap.servers": admin_bootstrap(cluster)})
    admin.create_topics([NewTopic(topic, 2, 2)], operation_timeout=30)[topic].result(60)
    states = wait_for(
        lambda: (
            all((s := zk.partition_state(topic, p)) is not None and s.leader >= 0 for p in (0, 1))
            and [zk.partition_state(topic, p) for p in (0, 1)]
        ),
        f"{topic}: leaders elected by the new controller",
    )
    for s in states:
        assert old_controller not in s.isr and s.leader != old_controller
    producer = Producer({"bootstrap.servers": admin_bootstrap(cluster), "acks": "all"})
    ledger = Ledger()
    for i in range(50):
        producer.produce(topic, f"c-{i}".encode(), partition=i % 2, on_delivery=ledger.on_delivery)
    assert producer.flush(60) == 0
    assert check_ledger(ledger, consume_all(admin_bootstrap(cluster), topic, 2)) == 50

    cluster.restart(old_controller)
    assert zk.controller() == new_controller, "a restarted broker does not take over"


def admin_bootstrap(cluster: Cluster) -> str:
    return cluster.bootstrap_of(*cluster.running_brokers)
