"""The three-broker cluster of the system tests (``kafkalite.testing.Cluster``: kafkalite
subprocesses on one real ZooKeeper) and what the tests read of it: ZooKeeper's znodes, each
broker's Metadata answer, and waits with deadlines."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import Cluster, ZooKeeperServer
from kafkalite.testing import wait_for as shared_wait_for

T = TypeVar("T")

CHROOT = "/kafkalite"
BROKER_IDS = (1, 2, 3)
SESSION_TIMEOUT_MS = 6000
REPLICA_LAG_TIME_MAX_MS = 2000
# A SIGKILLed broker is noticed after its session expires, then the controller elects and
# tells the brokers; the clients find the new leader on their next metadata refresh.
FAILOVER_DEADLINE_S = 45.0


def wait_for(condition: Callable[[], T], what: str, deadline_s: float = FAILOVER_DEADLINE_S) -> T:
    """Poll `condition` until it returns something truthy (returned); fail after the deadline."""
    return shared_wait_for(condition, what, timeout=deadline_s, interval=0.1)


# -- ZooKeeper reads ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


class ZkReader:
    """Synchronous reads of the cluster's znodes through one aiozk client on its own loop."""

    def __init__(self, servers: str, chroot: str) -> None:
        import aiozk

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._client = aiozk.ZKClient(servers, chroot=chroot, session_timeout=10)
        self._run(self._client.start())

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(15)

    def get(self, path: str) -> bytes | None:
        from aiozk import exc

        try:
            return self._run(self._client.get_data(path))
        except exc.NoNode:
            return None

    def controller(self) -> int | None:
        data = self.get("/controller")
        return None if data is None else int(json.loads(data)["brokerid"])

    def controller_epoch(self) -> int:
        data = self.get("/controller_epoch")
        return -1 if data is None else int(data)

    def registered_brokers(self) -> set[int]:
        from aiozk import exc

        try:
            return {int(b) for b in self._run(self._client.get_children("/brokers/ids"))}
        except exc.NoNode:
            return set()

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        data = self.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        if data is None:
            return None
        obj = json.loads(data)
        return PartitionState(int(obj["leader"]), int(obj["leader_epoch"]), tuple(obj["isr"]))

    def close(self) -> None:
        try:
            self._run(self._client.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()


# -- what a broker tells clients -------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerView:
    """One broker's Metadata answer: its controller, live brokers and partition leaders."""

    controller_id: int
    brokers: frozenset[int]
    leaders: dict[tuple[str, int], int]


def broker_view(bootstrap: str, topics: list[str]) -> BrokerView | None:
    """Ask the broker at `bootstrap` itself (a fresh client's first connection); None if it
    does not answer."""
    from kafkalite.client.client import KafkaClient

    async def ask() -> BrokerView | None:
        client = KafkaClient(bootstrap, client_id="system-test", request_timeout=5.0)
        try:
            await client.start()
            await client.refresh_metadata(topics=topics)
            return BrokerView(
                client.controller_id,
                frozenset(client.brokers),
                {(tp.topic, tp.partition): info.leader for tp, info in client.partitions.items()},
            )
        except Exception:
            return None
        finally:
            await client.close()

    return asyncio.run(ask())


# -- the cluster ----------------------------------------------------------------------------------


@contextmanager
def system_cluster(
    zk: ZooKeeperServer, base_dir: Path, config: Mapping[str, str] | None = None
) -> Iterator[tuple[Cluster, ZkReader]]:
    """The three brokers started on ``zk`` (chroot ``CHROOT``) and a reader of its znodes;
    the brokers are killed at the end."""
    cluster = Cluster(
        brokers=len(BROKER_IDS),
        config={
            "replica.lag.time.max.ms": str(REPLICA_LAG_TIME_MAX_MS),
            "replica.fetch.wait.max.ms": "200",
            "replica.fetch.backoff.ms": "200",
            "controlled.shutdown.retry.backoff.ms": "200",
            **(config or {}),
        },
        zookeeper_connect=zk.connect_string(CHROOT),
        session_timeout_ms=SESSION_TIMEOUT_MS,
        subprocess=True,
        data_dir=base_dir / "brokers",
        admin=False,
    )
    with cluster, closing(ZkReader(zk.servers, CHROOT)) as reader:
        yield cluster, reader


def start_all(cluster: Cluster, zk: ZkReader) -> None:
    """Start every stopped broker, each once its previous ZooKeeper registration is gone
    (after a kill -9 the ephemeral ``/brokers/ids/<id>`` lives until the old session
    expires)."""
    for broker_id in cluster.broker_ids:
        if broker_id not in cluster.running_brokers:
            wait_for(
                lambda b=broker_id: b not in zk.registered_brokers(),
                f"the old registration of broker {broker_id} to expire",
            )
            cluster.restart(broker_id)


def create_topic(
    cluster: Cluster,
    zk: ZkReader,
    topic: str,
    partitions: int,
    config: dict[str, str] | None = None,
) -> bool:
    """Create ``topic`` (replication factor 3) and wait until ZooKeeper shows a leader and a
    full ISR for every partition."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(topic, partitions, 3, config=config or {})
    admin.create_topics([new], operation_timeout=30)[topic].result(60)
    return wait_for(
        lambda: all(
            (s := zk.partition_state(topic, p)) is not None and s.leader >= 0 and len(s.isr) == 3
            for p in range(partitions)
        ),
        f"{topic}: a leader and a full ISR for every partition",
    )


def logs(cluster: Cluster) -> str:
    return "\n".join(
        f"=== broker {i} ===\n{b.log_tail(60)}" for i, b in sorted(cluster.processes.items())
    )
