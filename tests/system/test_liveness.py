"""System test: a cluster with a few hundred partitions lives through the operator's moves of the
scale benchmark with a producer running, checked for correctness only (timing is in
``bench/scale_cluster.py`` and ``bench/delete_topics.py``, never asserted here).

Three brokers of ``kafkalite.testing.Cluster`` (in-process, the embedded coordination store with
real sessions), a topic of ``PARTITIONS`` partitions at RF 3 and a ``ledger`` topic a producer
(acks=all, idempotent, ``min.insync.replicas=2``) writes to through every phase:

1. kill of a broker that is not the controller (its session ends): nothing stays led by it;
2. its restart: back in every ISR;
3. a preferred-leader election (ElectLeaders, all partitions): every partition led by its first
   replica;
4. controlled shutdown of the broker leading the most partitions: nothing led by it once it is
   gone; then its restart, back in every ISR;
5. controlled shutdown of the controller itself (another broker takes over), then its restart
   at once: back in every ISR;
6. deletion of a batch of topics while the producer runs.

At the end: every partition is led by a live member of its ISR; every record the producer saw
acknowledged is read back at its offset with its value; every broker exports the event-loop
lag (its gauge and histogram) and the stall counter on ``/metrics``. Every wait is a condition
with a deadline.
"""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import Cluster
from kafkalite.testing import wait_for as shared_wait_for

pytestmark = pytest.mark.timeout(600)

T = TypeVar("T")
PARTITIONS = 300
WIDE = "wide"
LEDGER = "ledger"
LEDGER_PARTITIONS = 6
DEADLINE_S = 120.0


def wait_for(condition: Callable[[], T], what: str, deadline_s: float = DEADLINE_S) -> T:
    """Poll `condition` until it returns something truthy (returned); fail after the deadline."""
    return shared_wait_for(condition, what, timeout=deadline_s, interval=0.1)


class LedgerProducer:
    """acks=all, idempotent: keeps every acknowledged (partition, offset) -> value."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 300_000,
            }
        )
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.failed.append(str(error))
        else:
            self.acked[(message.partition(), message.offset())] = message.value()

    def _run(self) -> None:
        while not self._stop.is_set():
            value = f"record-{self.sent}".encode()
            try:
                self.producer.produce(
                    LEDGER,
                    value,
                    partition=self.sent % LEDGER_PARTITIONS,
                    on_delivery=self._delivered,
                )
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.005)

    def start(self) -> LedgerProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        remaining = self.producer.flush(120)
        assert remaining == 0, f"{remaining} records never acknowledged nor failed"


def states(cluster: Cluster, topic: str) -> dict[int, Any]:
    return cluster.partitions(topic, timeout=60)


def led_by(cluster: Cluster, topic: str) -> dict[int, int]:
    counts: dict[int, int] = {}
    for state in states(cluster, topic).values():
        counts[state.leader] = counts.get(state.leader, 0) + 1
    return counts


def all_in_isr(cluster: Cluster, broker_id: int) -> bool:
    return all(
        broker_id in s.isr and len(s.isr) == len(s.replicas)
        for topic in (WIDE, LEDGER)
        for s in states(cluster, topic).values()
    )


def none_led_by(cluster: Cluster, broker_id: int) -> bool:
    return all(
        s.leader not in (-1, broker_id)
        for topic in (WIDE, LEDGER)
        for s in states(cluster, topic).values()
    )


def every_partition_led_by_a_live_isr_member(cluster: Cluster) -> list[str]:
    live = set(cluster.running_brokers)
    return [
        f"{topic}-{p}: leader {s.leader}, isr {s.isr}, live {sorted(live)}"
        for topic in (WIDE, LEDGER)
        for p, s in sorted(states(cluster, topic).items())
        if s.leader not in live or s.leader not in s.isr
    ]


def create_topics(admin: AdminClient, topics: dict[str, int]) -> None:
    """Create ``topics`` (name -> partitions, RF 3). A local helper rather than
    ``Cluster.create_topic``: on a loaded machine a creation may answer after the client's
    timeout, and its retry then meets TOPIC_ALREADY_EXISTS, which here means done."""
    futures = admin.create_topics(
        [NewTopic(name, count, 3) for name, count in topics.items()],
        operation_timeout=60,
        request_timeout=120,
    )
    for future in futures.values():
        try:
            future.result(180)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def metrics_text(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as answer:
        return answer.read().decode()


@pytest.fixture(scope="module")
def cluster():
    with Cluster(
        brokers=3,
        config={
            "min.insync.replicas": 2,
            "auto.leader.rebalance.enable": False,
            "controlled.shutdown.retry.backoff.ms": 200,
        },
    ) as cluster:
        yield cluster


def test_partitions_stay_led_and_no_acknowledged_record_is_lost_through_failures(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    create_topics(admin, {WIDE: PARTITIONS, LEDGER: LEDGER_PARTITIONS})
    cluster.wait_for_leaders(WIDE, LEDGER, full_isr=True, timeout=DEADLINE_S)
    producer = LedgerProducer(cluster.bootstrap_servers).start()
    try:
        wait_for(lambda: len(producer.acked) >= 50, "the producer's first acknowledgements")

        # 1-2. kill of a broker that is not the controller, then its restart
        victim = next(b for b in cluster.broker_ids if b != cluster.controller())
        cluster.kill(victim)
        wait_for(lambda: none_led_by(cluster, victim), f"no partition led by killed {victim}")
        acked = len(producer.acked)
        wait_for(lambda: len(producer.acked) > acked, "acknowledgements with a broker down")
        cluster.restart(victim)
        wait_for(lambda: all_in_isr(cluster, victim), f"broker {victim} back in every ISR")

        # 3. preferred-leader election of every partition
        admin.elect_leaders(ElectionType.PREFERRED, None).result(60)

        def preferred() -> bool:
            return all(
                s.leader == s.replicas[0]
                for topic in (WIDE, LEDGER)
                for s in states(cluster, topic).values()
            )

        wait_for(preferred, "every partition led by its preferred replica")

        # 4. controlled shutdown of the broker leading the most, then its restart
        counts = led_by(cluster, WIDE)
        stopped = max((b for b in counts if b >= 0), key=lambda b: counts[b])
        cluster.stop_broker(stopped)
        assert none_led_by(cluster, stopped), "the controlled shutdown moved every leadership"
        acked = len(producer.acked)
        wait_for(lambda: len(producer.acked) > acked, "acknowledgements after the shutdown")
        cluster.restart(stopped)
        wait_for(lambda: all_in_isr(cluster, stopped), f"broker {stopped} back in every ISR")

        # 5. controlled shutdown of the controller, restarted at once (the new controller may
        # see it registered again before it handled its going: a bounced broker)
        old = cluster.controller()
        cluster.stop_broker(old)
        assert none_led_by(cluster, old), "the controller's shutdown moved every leadership"
        cluster.restart(old)
        wait_for(lambda: all_in_isr(cluster, old), f"broker {old} back in every ISR")

        # 6. a batch of topics deleted while the producer runs
        doomed = [f"doomed-{i}" for i in range(20)]
        create_topics(admin, dict.fromkeys(doomed, 4))
        cluster.wait_for_leaders(*doomed, timeout=DEADLINE_S)
        for future in admin.delete_topics(doomed, operation_timeout=60).values():
            future.result(120)
        wait_for(
            lambda: not set(doomed) & set(admin.list_topics(timeout=30).topics),
            "the deleted topics gone",
        )
        acked = len(producer.acked)
        wait_for(lambda: len(producer.acked) > acked, "acknowledgements after the deletion")
    finally:
        producer.stop()

    assert producer.failed == []
    wait_for(
        lambda: not every_partition_led_by_a_live_isr_member(cluster),
        "every partition led by a live ISR member",
    )
    read = {(m.partition, m.offset): m.value for m in cluster.consume_all(LEDGER, timeout=120)}
    lost = {key: value for key, value in producer.acked.items() if read.get(key) != value}
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost.items())[:5]}"

    for broker_id in cluster.running_brokers:
        url = cluster.admin_url_of(broker_id)
        assert url is not None
        text = metrics_text(url)
        assert "kafkalite_event_loop_lag_max_seconds " in text
        assert 'kafkalite_event_loop_lag_seconds_bucket{le="0.05"}' in text
        assert "kafkalite_event_loop_lag_seconds_count " in text
        assert 'kafkalite_loop_stalls_total{cause="gc"}' in text  # the stall reporter runs
