"""System test: the 3-broker scale scenario at test size (a few hundred partitions, RF 3).

Three `kafkalite serve` subprocesses on a real ZooKeeper (`zookeeper.session.timeout.ms=6000`),
one topic of `PARTITIONS` partitions at replication factor 3, then the operator's moves of the
scale benchmark (`bench/scale_cluster.py`), each checked for correctness only, never for time:

1. creation: every partition has a leader and a full ISR, and no broker's ZooKeeper session
   expired (registrations keep their czxid; no broker logged an expiry);
2. kill -9 of a broker that is not the controller: no partition is left led by it once its
   session expired; restarted, it is back in every ISR. The brokers that kept running never
   lose their sessions, through every phase. The restarted broker itself may see the session
   it opened first expire while it loads its logs on a loaded machine (log loading holds its
   event loop: a storage-side matter); what is asserted for it is that it registers on a new
   session and serves instead of failing start-up;
3. a preferred-leader election (ElectLeaders, all partitions): every partition is led by its
   first replica again;
4. SIGTERM of the broker leading the most partitions that is not the controller: right after
   its exit, the Metadata of every other broker shows no partition leaderless or led by it
   (the controlled shutdown answers once the other brokers know the new leaders);
5. SIGTERM of the controller itself, which decides its own controlled shutdown: right after its
   exit the last broker shows every partition led by itself, and it becomes the controller.

What each broker tells clients is read from that broker itself (a fresh client bootstrapped on
it alone). Every wait is a condition with a generous deadline (the machine may be loaded),
never a sleep.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextlib import closing
from typing import Any, TypeVar

import pytest
from confluent_kafka import ElectionType
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.coord import open_store
from kafkalite.testing import Cluster, ZooKeeperServer
from kafkalite.testing import wait_for as shared_wait_for

pytestmark = pytest.mark.timeout(600)

T = TypeVar("T")
CHROOT = "/kafkalite"
BROKER_IDS = (1, 2, 3)
PARTITIONS = 240
TOPIC = "wide"
DEADLINE_S = 120.0
EXPIRY_MARKS = ("coordination session expired", "treating it as expired")


def wait_for(condition: Callable[[], T], what: str, deadline_s: float = DEADLINE_S) -> T:
    """Poll `condition` until it returns something truthy (returned); fail after the deadline."""
    return shared_wait_for(condition, what, timeout=deadline_s, interval=0.1)


def partitions_seen_by(cluster: Cluster, broker_id: int) -> dict[int, Any] | None:
    """The topic's partitions (leader, replicas, isr) in this broker's own Metadata answer."""
    from kafkalite.client.client import KafkaClient

    async def ask() -> dict[int, Any] | None:
        client = KafkaClient(
            cluster.bootstrap_of(broker_id), client_id="scale-test", request_timeout=10.0
        )
        try:
            await client.start()
            await client.refresh_metadata(topics=[TOPIC])
            return {
                tp.partition: info for tp, info in client.partitions.items() if tp.topic == TOPIC
            }
        except Exception:
            return None
        finally:
            await client.close()

    return asyncio.run(ask())


def all_led_with_full_isr(cluster: Cluster, broker_id: int) -> dict[int, Any] | None:
    seen = partitions_seen_by(cluster, broker_id)
    if seen is None or len(seen) != PARTITIONS:
        return None
    if all(p.leader >= 0 and len(p.isr) == 3 for p in seen.values()):
        return seen
    return None


def expiries_logged(cluster: Cluster, broker_ids=BROKER_IDS) -> list[str]:
    return [
        f"broker {b}: {line}"
        for b in broker_ids
        for line in cluster.processes[b].log_text().splitlines()
        if any(mark in line for mark in EXPIRY_MARKS)
    ]


def logs(cluster: Cluster) -> str:
    return "\n".join(
        f"=== broker {i} ===\n{b.log_tail(40)}" for i, b in sorted(cluster.processes.items())
    )


class ZkSession:
    """A session of the test's own on the cluster's ZooKeeper, for what only ZooKeeper knows:
    each broker's registration (its czxid changes when it registers on a new session) and the
    controller. The session lives on a loop of its own thread, so it keeps its heartbeats
    while the test waits."""

    def __init__(self, connect: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.store = open_store(connect, None, 30000)
        self.session = self._run(self.store.open_session())

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def close(self) -> None:
        try:
            self._run(self.store.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()

    def registrations(self) -> dict[int, int]:
        """broker id -> czxid of its registration (a new session registers with a new one)."""

        async def read() -> dict[int, int]:
            out = {}
            for child in await self.session.get_children("/brokers/ids"):
                stat = await self.session.exists(f"/brokers/ids/{child}")
                if stat is not None:
                    out[int(child)] = stat.czxid
            return out

        return self._run(read())

    def controller(self) -> int:
        """The active controller's broker id; -1 while none is elected (no /controller)."""
        from kafkalite.coord.errors import NoNode
        from kafkalite.zk import data as paths

        try:
            data, _ = self._run(self.session.get_data(paths.CONTROLLER))
        except NoNode:
            return -1
        return paths.decode_controller(data).broker_id


@pytest.fixture
def running(tmp_path):
    """The cluster and a ZooKeeper session of the test's own."""
    with ZooKeeperServer(tmp_path / "zk", max_session_timeout_ms=60000) as zk:
        cluster = Cluster(
            brokers=len(BROKER_IDS),
            config={
                "auto.leader.rebalance.enable": "false",
                "controlled.shutdown.retry.backoff.ms": "200",
            },
            zookeeper_connect=zk.connect_string(CHROOT),
            session_timeout_ms=6000,
            subprocess=True,
            data_dir=tmp_path / "brokers",
            admin=False,
            start_timeout=90,
        )
        with cluster, closing(ZkSession(zk.connect_string(CHROOT))) as session:
            try:
                yield cluster, session
            finally:
                print(logs(cluster))


def test_a_few_hundred_partitions_survive_kill_restart_election_and_controlled_shutdown(
    running,
):
    cluster, zk = running
    sessions = zk.registrations()
    assert set(sessions) == set(BROKER_IDS)
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})

    # 1. creation
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], operation_timeout=60)[TOPIC].result(120)
    for broker_id in BROKER_IDS:
        wait_for(
            lambda b=broker_id: all_led_with_full_isr(cluster, b),
            f"broker {broker_id}: every partition led with a full ISR",
        )
    assert zk.registrations() == sessions, "a broker registered again: its session expired"
    assert expiries_logged(cluster) == []

    # 2. kill -9 of a broker that is not the controller, then its restart
    controller = zk.controller()
    victim = next(b for b in BROKER_IDS if b != controller)
    cluster.kill(victim, wait=False)  # SIGKILL
    wait_for(lambda: victim not in zk.registrations(), "the killed broker's session expiry")

    def re_led() -> bool:
        seen = partitions_seen_by(cluster, controller)
        return seen is not None and all(p.leader not in (-1, victim) for p in seen.values())

    wait_for(re_led, "every partition led by a live broker")
    cluster.restart(victim, timeout=90)
    for broker_id in BROKER_IDS:
        wait_for(
            lambda b=broker_id: all_led_with_full_isr(cluster, b),
            f"broker {broker_id}: the restarted broker back in every ISR",
        )

    # 3. preferred-leader election
    admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=120)

    def preferred() -> dict[int, Any] | None:
        seen = all_led_with_full_isr(cluster, controller)
        if seen is not None and all(p.leader == p.replicas[0] for p in seen.values()):
            return seen
        return None

    seen = wait_for(preferred, "leaders back on their preferred replicas")
    survivors = [b for b in BROKER_IDS if b != victim]
    registered = zk.registrations()
    assert {b: registered.get(b) for b in survivors} == {b: sessions[b] for b in survivors}

    # 4. SIGTERM of the broker leading the most partitions that is not the controller
    counts = {b: sum(1 for p in seen.values() if p.leader == b) for b in BROKER_IDS}
    assert zk.controller() == controller
    stopped = max((b for b in BROKER_IDS if b != controller), key=lambda b: counts[b])
    assert counts[stopped] > 0
    assert cluster.processes[stopped].stop(timeout=120) == 0
    for broker_id in BROKER_IDS:
        if broker_id == stopped:
            continue
        after = partitions_seen_by(cluster, broker_id)
        assert after is not None and len(after) == PARTITIONS
        stranded = sorted(p for p, info in after.items() if info.leader in (-1, stopped))
        assert stranded == [], f"broker {broker_id} shows {len(stranded)} partitions stranded"
    assert "controlled shutdown succeeded" in cluster.processes[stopped].log_text()
    assert expiries_logged(cluster, survivors) == []

    # 5. SIGTERM of the controller, which still leads its share
    last = next(b for b in BROKER_IDS if b not in (stopped, controller))
    assert counts[controller] > 0 and zk.controller() == controller
    assert cluster.processes[controller].stop(timeout=120) == 0
    after = partitions_seen_by(cluster, last)
    assert after is not None and len(after) == PARTITIONS
    stranded = sorted(p for p, info in after.items() if info.leader != last)
    assert stranded == [], f"broker {last} shows {len(stranded)} partitions not led by it"
    assert "controlled shutdown succeeded" in cluster.processes[controller].log_text()
    wait_for(lambda: zk.controller() == last, f"broker {last} elected controller")
    assert expiries_logged(cluster, [last]) == []
