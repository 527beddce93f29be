"""``Cluster``: several kafkalite brokers for a test, with fault injection.

    with Cluster(brokers=3) as cluster:
        cluster.create_topic("orders", partitions=3, replication_factor=3)
        leader = cluster.partitions("orders")[0].leader
        cluster.kill(leader)          # returns once another broker leads partition 0
        cluster.restart(leader)       # returns once every broker sees it again

The brokers run in this process on one event loop in a daemon thread, and share one embedded
coordination store (in memory) with real sessions, ephemeral nodes and watches, so a broker
that dies, is cut off or freezes loses its registration as it would on ZooKeeper: its session
expires, the controller elects new leaders and shrinks the ISRs, and it registers again when it
comes back. ``zookeeper_connect="host:port/chroot"`` runs the same brokers on a real ZooKeeper
instead (the shared tests prove both behave the same; fault injection that acts on the
session needs the embedded store).

Every broker sits behind a loopback proxy (``proxy.py``) that it advertises, so clients and the
other brokers reach it through the proxy and network faults are real to both: ``isolate``,
``partition``, ``pause``, ``slow``. Each fault returns once the cluster has observed it (checked
through the Kafka protocol, as a client would see it), or raises TimeoutError.

How faults map to what a ZooKeeper-mode Kafka cluster lives through:

- ``kill(b)``: the broker stops without a controlled shutdown and its session ends at once (a
  kill -9 followed by the session timeout, without waiting for it);
- ``restart(b)``: starts it again on its data (recovery, registration, catch-up);
- ``pause(b, seconds)``: every byte to and from it is held and its session is cut off from the
  store (it expires after ``zookeeper.session.timeout.ms``); after ``seconds`` it comes back as
  a zombie that must find out it was replaced. Unlike SIGSTOP, its own timers keep running;
- ``isolate(b)`` / ``partition({1}, {2, 3})``: links between the sides are cut (connections
  reset, new ones refused), and every side but the largest loses the store (its sessions
  expire); ``heal()`` undoes all of it;
- ``slow(b, latency_ms)``: every chunk to and from the broker waits that long;
- ``fail_log_dir(b)``: its log dir fails as on an I/O error (partitions offline, the
  controller moves their leadership);
- ``expire_session(b)``: the store expires its session now (the broker registers again).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._helpers import Helpers
from ._loop import LoopThread
from .broker import TEST_DEFAULTS, _settings, quiet_logging
from .proxy import CLIENT, ProxyNetwork, RawProxy

START_TIMEOUT_S = 60.0
FAULT_TIMEOUT_S = 60.0
SESSION_TIMEOUT_MS = 3000
POLL_S = 0.05


@dataclass
class ClusterView:
    """What one broker answers to Metadata: live brokers, controller, partition leaders."""

    brokers: set[int]
    controller: int
    leaders: dict[tuple[str, int], int] = field(default_factory=dict)
    isr: dict[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)


class _StoreView:
    """One broker's handle on the shared embedded store: closing it leaves the store open (it
    is the cluster's), and a broker cut off from the store gets suspended sessions."""

    kind = "embedded"

    def __init__(self, cluster: Cluster, broker_id: int) -> None:
        self._cluster = cluster
        self._broker_id = broker_id
        self.session_ids: list[int] = []

    async def open_session(
        self, timeout_ms: int | None = None, *, connection_timeout_ms: int | None = None
    ) -> Any:
        store = self._cluster.store
        session = await store.open_session(timeout_ms, connection_timeout_ms=connection_timeout_ms)
        self.session_ids.append(session.session_id)
        if self._broker_id in self._cluster._off_store:
            store.suspend_session(session.session_id)
        return session

    async def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster.store, name)


class Cluster(Helpers):
    """``brokers`` brokers (ids 1..n). ``start()`` / ``stop()`` or a (sync or async) context
    manager; the faults are methods. Not thread-safe: drive it from one thread. ``config``
    applies to every broker, ``broker_configs`` (by broker id) over it to one broker, e.g.
    ``{1: {"broker.rack": "r1"}, 2: {"broker.rack": "r2"}}``."""

    def __init__(
        self,
        brokers: int = 3,
        config: Mapping[str, Any] | None = None,
        *,
        zookeeper_connect: str | None = None,
        subprocess: bool = False,
        data_dir: str | os.PathLike[str] | None = None,
        keep_data: bool = False,
        admin: bool = True,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        start_timeout: float = START_TIMEOUT_S,
        broker_configs: Mapping[int, Mapping[str, Any]] | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError("brokers: at least 1")
        if subprocess and not zookeeper_connect:
            raise ValueError(
                "subprocess=True needs zookeeper_connect: brokers in several processes share "
                "their coordination store through a ZooKeeper (the embedded store lives in "
                "one process)"
            )
        self.subprocess = subprocess
        self.broker_ids = list(range(1, brokers + 1))
        self.zookeeper_connect = zookeeper_connect
        self.keep_data = keep_data or data_dir is not None
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.admin = admin
        self.session_timeout_ms = session_timeout_ms
        self.start_timeout = start_timeout
        self.overrides = _settings(config)
        # Per broker, over ``config``: what differs between brokers ({1: {"broker.rack": "a"}}).
        self.broker_overrides = {b: _settings(c) for b, c in (broker_configs or {}).items()}
        self.servers: dict[int, Any] = {}  # in-process brokers: their KafkaServer
        self.processes: dict[int, Any] = {}  # subprocess brokers: their testing.Broker
        self._zookeeper_proxies: dict[int, RawProxy] = {}
        self.store: Any = None
        self.network: ProxyNetwork | None = None
        self._thread: LoopThread | None = None
        self._views: dict[int, _StoreView] = {}
        self._off_store: set[int] = set()
        self._paused: dict[int, asyncio.TimerHandle] = {}

    # -- addresses --

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{self._proxy_port(b)}" for b in self.broker_ids)

    @property
    def helper_bootstrap(self) -> str:
        """Running brokers a client can reach first (not frozen, not cut off from clients, nor
        from the store: a broker on the minority side of a partition answers stale metadata),
        then the rest."""
        network = self.network
        reachable = [
            b
            for b in self.running_brokers
            if network is not None
            and b not in self._off_store
            and not network.is_cut(CLIENT, b)
            and network.link(CLIENT, b).flowing.is_set()
        ]
        rest = [b for b in self.broker_ids if b not in reachable]
        return self.bootstrap_of(*reachable, *rest)

    def bootstrap_of(self, *broker_ids: int) -> str:
        return ",".join(f"127.0.0.1:{self._proxy_port(b)}" for b in broker_ids)

    def _proxy_port(self, broker_id: int) -> int:
        if self.network is None:
            raise RuntimeError("the cluster has not been started")
        return self.network.proxies[broker_id].port

    @property
    def admin_url(self) -> str | None:
        """The admin API of the first running broker (each has its own: ``admin_url_of``)."""
        for broker_id in self.broker_ids:
            url = self.admin_url_of(broker_id)
            if url:
                return url
        return None

    def schema_registry_url_of(self, broker_id: int) -> str | None:
        """The Schema Registry of one running broker (every broker serves it), in process or
        subprocess."""
        server = self.servers.get(broker_id)
        if server is not None:
            return server.schema_registry_url
        process = self.processes.get(broker_id)
        return process.schema_registry_url if process is not None else None

    def admin_url_of(self, broker_id: int) -> str | None:
        server = self.servers.get(broker_id)
        return server.admin_url if server is not None else None

    @property
    def running_brokers(self) -> list[int]:
        return [
            b
            for b in self.broker_ids
            if b in self.servers or (b in self.processes and self.processes[b].running)
        ]

    def settings(self, broker_id: int) -> dict[str, str]:
        assert self.data_dir is not None and self.network is not None
        replication = str(min(3, len(self.broker_ids)))
        settings = {
            **TEST_DEFAULTS,
            "offsets.topic.replication.factor": replication,
            "default.replication.factor": replication,
            "zookeeper.session.timeout.ms": str(self.session_timeout_ms),
            "broker.id": str(broker_id),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self._proxy_port(broker_id)}",
            "log.dirs": str(self.data_dir / f"broker-{broker_id}" / "logs"),
            "admin.listener": "http://127.0.0.1:0" if self.admin else "",
            **self.overrides,
            **self.broker_overrides.get(broker_id, {}),
        }
        if self.zookeeper_connect:
            settings["zookeeper.connect"] = self.zookeeper_connect
            proxy = self._zookeeper_proxies.get(broker_id)
            if proxy is not None:  # its own way to ZooKeeper, which faults can cut
                from kafkalite.coord import parse_connect

                chroot = parse_connect(self.zookeeper_connect)[1] or ""
                settings["zookeeper.connect"] = f"127.0.0.1:{proxy.port}{chroot}"
        return settings

    # -- life cycle --

    def start(self) -> Cluster:
        if self._thread is not None:
            raise RuntimeError("cluster already running")
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="kafkalite-cluster-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._thread = LoopThread("kafkalite-cluster").start()
        try:
            self._thread.run(self._start(), self.start_timeout + 5)
        except BaseException:
            self.stop()
            raise
        return self

    async def _start(self) -> None:
        self.network = ProxyNetwork()
        for broker_id in self.broker_ids:
            await self.network.add(broker_id)
        if not self.zookeeper_connect:
            from kafkalite.coord.embedded import EmbeddedStore

            self.store = EmbeddedStore(None, session_timeout_ms=self.session_timeout_ms)
        else:
            from kafkalite.coord import parse_connect

            servers = parse_connect(self.zookeeper_connect)[0].split(",")
            if len(servers) == 1:  # (an ensemble is reached directly: no store faults)
                host, port = servers[0].rsplit(":", 1)
                for broker_id in self.broker_ids:
                    proxy = await RawProxy(host, int(port)).start()
                    self._zookeeper_proxies[broker_id] = proxy
        await asyncio.gather(*(self._start_broker(b) for b in self.broker_ids))
        await self._wait_observed(
            self.broker_ids,
            lambda view: set(self.broker_ids) <= view.brokers and view.controller >= 0,
            self.start_timeout,
            "every broker registered and known to every broker",
        )

    async def _start_broker(self, broker_id: int) -> None:
        if self.subprocess:
            await self._start_process(broker_id)
            return
        from kafkalite.config import BrokerConfig
        from kafkalite.server import KafkaServer

        config = BrokerConfig.load(overrides=self.settings(broker_id), environ={})
        quiet_logging(config.log_level)
        store = None
        if self.store is not None:
            store = self._views.setdefault(broker_id, _StoreView(self, broker_id))
        server = KafkaServer(config, store=store)
        assert self.network is not None
        proxy = self.network.proxies[broker_id]
        proxy.starting()

        async def forward_once_bound() -> None:
            # the controller of a cluster starting together talks to this broker before its
            # start-up returns: forward as soon as the listener is bound
            while not server.bound_endpoints:
                await asyncio.sleep(0.005)
            proxy.set_target(server.bound_endpoints[0].port)

        binding = asyncio.create_task(forward_once_bound())
        try:
            await server.startup()
        finally:
            binding.cancel()
        self.servers[broker_id] = server
        proxy.set_target(server.bound_endpoints[0].port)

    async def _start_process(self, broker_id: int) -> None:
        from .broker import Broker
        from .proxy import free_port

        broker = self.processes.get(broker_id)
        if broker is None:
            assert self.data_dir is not None
            own = ("broker.id", "listeners", "log.dirs", "admin.listener", "log.level")
            overrides = {k: v for k, v in self.settings(broker_id).items() if k not in own}
            broker = Broker(
                overrides,
                broker_id=broker_id,
                subprocess=True,
                data_dir=self.data_dir / f"broker-{broker_id}",
                admin=self.admin,
                start_timeout=self.start_timeout,
            )
            # a port known before it starts: the controller reaches it through its proxy
            # while it starts
            broker.port = free_port()
            broker._wait_until_ready = False  # it may start cut off from the controller
            self.processes[broker_id] = broker
        assert self.network is not None
        self.network.proxies[broker_id].set_target(broker.port)
        await asyncio.to_thread(broker.start)

    def stop(self) -> None:
        """Stop every broker, the proxies and the loop; data stays. In-process brokers stop
        without a controlled shutdown (logs flushed, checkpoints written); subprocess brokers
        are killed."""
        if self._thread is None:
            return
        try:
            if self._thread.running:
                self._thread.run(self._stop(), FAULT_TIMEOUT_S)
        finally:
            self._thread.stop()
            self._thread = None

    async def _stop(self) -> None:
        for handle in self._paused.values():
            handle.cancel()
        self._paused.clear()
        if self.network is not None:
            self.network.heal()
        self._resume_store(list(self._off_store))
        servers, self.servers = self.servers, {}
        processes, self.processes = self.processes, {}
        # all at once and without moving leaderships first: the whole cluster goes (each
        # broker still flushes its logs and writes its checkpoints)
        await asyncio.gather(
            *(server.shutdown(controlled=False) for server in servers.values()),
            return_exceptions=True,
        )
        # processes are killed: SIGTERM to all would have each controlled shutdown wait for a
        # controller that is stopping too (10 s and more); their data is left as after a crash
        for broker in processes.values():
            with contextlib.suppress(Exception):
                await asyncio.to_thread(broker.kill)
                await asyncio.to_thread(broker.close)
        if self.network is not None:
            await self.network.close()
        for proxy in self._zookeeper_proxies.values():
            await proxy.close()
        if self.store is not None:
            await self.store.close()

    def close(self) -> None:
        try:
            self.stop()
        finally:
            if self._own_dir and not self.keep_data and self.data_dir is not None:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def _run(self, coro: Any, timeout: float) -> Any:
        if self._thread is None:
            coro.close()
            raise RuntimeError("the cluster is not running")
        return self._thread.run(coro, timeout + 10)

    # -- what the cluster sees --

    async def view_from(self, broker_id: int) -> ClusterView:
        """Metadata as ``broker_id`` answers it to a client (through its proxy)."""
        from kafkalite.client import KafkaClient

        client = KafkaClient(
            self.bootstrap_of(broker_id),
            client_id="kafkalite-testing",
            request_timeout=2.0,
            connect_timeout=1.0,
        )
        try:
            await client.start()
            await client.refresh_metadata(None)
            return ClusterView(
                set(client.brokers),
                client.controller_id,
                {(tp.topic, tp.partition): info.leader for tp, info in client.partitions.items()},
                {(tp.topic, tp.partition): info.isr for tp, info in client.partitions.items()},
            )
        finally:
            await client.close()

    async def _wait_observed(
        self, observers: Iterable[int], predicate: Any, timeout: float, what: str
    ) -> None:
        """Wait until every observer's view satisfies ``predicate``."""
        await self._wait_views(
            observers, lambda views: all(predicate(view) for view in views), timeout, what
        )

    async def _wait_agreed(self, timeout: float, what: str) -> None:
        """Wait until the brokers that can know the cluster (running, not paused, not cut off
        from the store) answer the same metadata: a broker back from a freeze or a cut keeps
        answering what it knew before (a zombie leader, a full ISR) until the controller's
        requests reach it, and a client asking it meanwhile would be misled."""

        def shape(view: ClusterView) -> tuple:
            isr = {tp: tuple(sorted(replicas)) for tp, replicas in view.isr.items()}
            return view.brokers, view.controller, view.leaders, isr

        def agreed(views: list[ClusterView]) -> bool:
            return all(shape(view) == shape(views[0]) for view in views[1:])

        observers = [b for b in self._others([]) if b not in self._off_store]
        if len(observers) > 1:
            await self._wait_views(observers, agreed, timeout, what)

    async def _wait_views(
        self, observers: Iterable[int], check: Any, timeout: float, what: str
    ) -> None:
        """Wait until ``check`` holds for the observers' views, asked together each round."""
        observers = list(observers)
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                views = [await self.view_from(b) for b in observers]
                if check(views):
                    return
                last = views
            except Exception as e:  # a broker not answering yet: ask again
                last = e
            if time.monotonic() > deadline:
                raise TimeoutError(f"not observed within {timeout} s: {what} (last: {last!r})")
            await asyncio.sleep(POLL_S)

    def _gone(self, broker_ids: Iterable[int]) -> Any:
        gone = set(broker_ids)

        def predicate(view: ClusterView) -> bool:
            return not (gone & view.brokers) and not (gone & set(view.leaders.values()))

        return predicate

    def _others(self, broker_ids: Iterable[int]) -> list[int]:
        """The running brokers but ``broker_ids``, less the paused ones (which cannot answer:
        a fault on another broker while one is paused is observed by the rest)."""
        excluded = set(broker_ids) | set(self._paused)
        return [b for b in self.running_brokers if b not in excluded]

    def controller(self, timeout: float = FAULT_TIMEOUT_S) -> int:
        """The id of the active controller (as the running brokers agree on it)."""

        async def find() -> int:
            found: list[int] = []

            def agreed(view: ClusterView) -> bool:
                found.append(view.controller)
                return view.controller in self.running_brokers

            await self._wait_observed(self.running_brokers, agreed, timeout, "a controller")
            return found[-1]

        return self._run(find(), timeout)

    # -- faults --

    def kill(self, broker_id: int, timeout: float = FAULT_TIMEOUT_S, *, wait: bool = True) -> None:
        """Stop ``broker_id`` without a controlled shutdown, its session ended; returns when
        the other brokers no longer list it nor name it leader of anything, or at once with
        ``wait=False`` (a subprocess broker's session then expires on ZooKeeper later)."""
        self._run(self._kill(broker_id, timeout, wait), timeout)

    async def _kill(self, broker_id: int, timeout: float, wait: bool = True) -> None:
        assert self.network is not None
        handle = self._paused.pop(broker_id, None)
        if handle is not None:
            handle.cancel()
        if self.subprocess:
            # SIGKILL: its ZooKeeper session expires after the session timeout, as it would
            self.network.proxies[broker_id].set_target(None)
            await asyncio.to_thread(self.processes[broker_id].kill)
            others = self._others([broker_id])
            if others and wait:
                await self._wait_observed(
                    others, self._gone([broker_id]), timeout, f"broker {broker_id} gone"
                )
            return
        server = self.servers.pop(broker_id)
        self.network.proxies[broker_id].set_target(None)
        self.network.release(broker_id)
        shutdown = asyncio.create_task(server.shutdown(controlled=False))
        await asyncio.sleep(0)  # the shutdown has begun: the broker will not renew its session
        if self.store is not None and server.session is not None:
            self.store.expire_session(server.session.session_id)
        await shutdown
        self._resume_store([broker_id])
        others = self._others([broker_id])
        if others and wait:
            await self._wait_observed(
                others, self._gone([broker_id]), timeout, f"broker {broker_id} gone"
            )

    def restart(self, broker_id: int, timeout: float = FAULT_TIMEOUT_S) -> None:
        """Start a killed or stopped broker again on its data; returns when every running
        broker lists it."""
        self._run(self._restart(broker_id, timeout), timeout)

    async def _restart(self, broker_id: int, timeout: float) -> None:
        if broker_id in self.running_brokers:
            raise RuntimeError(f"broker {broker_id} is running")
        await self._start_broker(broker_id)
        await self._wait_observed(
            self.running_brokers,
            lambda view: set(self.running_brokers) <= view.brokers and view.controller >= 0,
            timeout,
            f"broker {broker_id} back",
        )

    def stop_broker(self, broker_id: int, timeout: float = FAULT_TIMEOUT_S) -> None:
        """A clean stop of one broker (controlled shutdown first, as SIGTERM)."""

        async def stop() -> None:
            if self.subprocess:
                await asyncio.to_thread(self.processes[broker_id].stop)  # SIGTERM
            else:
                await self.servers.pop(broker_id).shutdown()
            assert self.network is not None
            self.network.proxies[broker_id].set_target(None)
            others = self._others([broker_id])
            if others:
                await self._wait_observed(
                    others, self._gone([broker_id]), timeout, f"broker {broker_id} stopped"
                )

        self._run(stop(), timeout)

    def isolate(
        self, broker_id: int, timeout: float = FAULT_TIMEOUT_S, *, wait: bool = True
    ) -> None:
        """Cut ``broker_id`` off from clients, the other brokers and the store; returns when the
        others have replaced it (its session expired, new leaders elected), or at once with
        ``wait=False``."""
        self._need_store_control("isolate")
        others = [b for b in self.broker_ids if b != broker_id]

        async def isolate() -> None:
            assert self.network is not None
            self.network.cut_between([broker_id], [*others, CLIENT])
            self._cut_from_store([broker_id])
            if wait and self._others([broker_id]):
                await self._wait_observed(
                    self._others([broker_id]),
                    self._gone([broker_id]),
                    timeout,
                    f"broker {broker_id} isolated",
                )

        self._run(isolate(), timeout)

    def partition(
        self, *sides: Iterable[int], timeout: float = FAULT_TIMEOUT_S, wait: bool = True
    ) -> None:
        """Split the brokers into ``sides`` (a broker in none is on a side of its own). Links
        between sides are cut; the largest side (the first of equals) keeps the store, the
        others' sessions expire. Clients still reach every broker. Returns when the largest
        side has replaced the others."""
        self._need_store_control("partition")
        groups = [set(side) for side in sides]
        placed = set().union(*groups) if groups else set()
        groups += [{b} for b in self.broker_ids if b not in placed]
        majority = max(groups, key=len)
        minority = set(self.broker_ids) - majority

        async def split() -> None:
            assert self.network is not None
            for i, side in enumerate(groups):
                for other in groups[i + 1 :]:
                    self.network.cut_between(side, other)
            self._cut_from_store(minority)
            observers = [b for b in self.running_brokers if b in majority]
            if wait and observers and minority:
                await self._wait_observed(
                    observers, self._gone(minority), timeout, f"{sorted(minority)} cut off"
                )

        self._run(split(), timeout)

    def heal(self, timeout: float = FAULT_TIMEOUT_S) -> None:
        """Undo isolate, partition, pause and slow; returns when every running broker lists
        every running broker again."""

        async def heal() -> None:
            for broker_id, handle in list(self._paused.items()):
                handle.cancel()
                self._unpause(broker_id)
            assert self.network is not None
            self.network.heal()
            self._resume_store(list(self._off_store))
            await self._wait_observed(
                self.running_brokers,
                lambda view: set(self.running_brokers) <= view.brokers,
                timeout,
                "every broker back",
            )
            await self._wait_agreed(timeout, "every broker's metadata the same again")

        self._run(heal(), timeout)

    def pause(self, broker_id: int, seconds: float) -> None:
        """Freeze ``broker_id`` for ``seconds``: nothing flows to or from it and its session
        is cut off from the store (expiring after the session timeout); then it resumes as it
        was, a zombie if it was replaced meanwhile. Returns once frozen; ``resume`` ends it
        early, ``heal`` too."""
        if not self.subprocess:
            self._need_store_control("pause")

        async def pause() -> None:
            assert self.network is not None
            if self.subprocess:  # a real freeze: SIGSTOP
                await asyncio.to_thread(self.processes[broker_id].pause)
            else:
                self.network.hold(broker_id)
                self._cut_from_store([broker_id])
            loop = asyncio.get_running_loop()
            old = self._paused.pop(broker_id, None)
            if old is not None:
                old.cancel()
            self._paused[broker_id] = loop.call_later(seconds, self._unpause, broker_id)

        self._run(pause(), FAULT_TIMEOUT_S)

    def resume(self, broker_id: int) -> None:
        """End ``pause`` early; returns once the running brokers answer the same metadata (a
        resumed zombie has been told what changed while it was frozen)."""

        async def resume() -> None:
            handle = self._paused.pop(broker_id, None)
            if handle is not None:
                handle.cancel()
            self._unpause(broker_id)
            await self._wait_agreed(FAULT_TIMEOUT_S, f"broker {broker_id}'s metadata current")

        self._run(resume(), FAULT_TIMEOUT_S)

    def _unpause(self, broker_id: int) -> None:
        self._paused.pop(broker_id, None)
        broker = self.processes.get(broker_id)
        if broker is not None:
            broker.resume()  # SIGCONT (it waits for the kernel to show it running: short)
            return
        if self.network is not None:
            self.network.release(broker_id)
        self._resume_store([broker_id])

    def slow(self, broker_id: int, latency_ms: float) -> None:
        """Every chunk to and from ``broker_id`` waits ``latency_ms`` (0 ends it)."""

        async def slow() -> None:
            assert self.network is not None
            self.network.set_latency(broker_id, latency_ms)

        self._run(slow(), FAULT_TIMEOUT_S)

    def fail_log_dir(self, broker_id: int, timeout: float = FAULT_TIMEOUT_S) -> None:
        """Fail the broker's log dir as an I/O error would; returns when no broker names it
        leader of a partition any more (the controller moved them, or they are offline)."""

        if self.subprocess:
            raise NotImplementedError("fail_log_dir needs the brokers in this process")

        async def fail() -> None:
            import errno

            server = self.servers[broker_id]
            for log_dir in server.config.log_dir_list:
                server.log_manager.fail_log_dir(
                    log_dir, OSError(errno.EIO, "injected by kafkalite.testing", log_dir)
                )
            await self._wait_observed(
                self.running_brokers,
                lambda view: broker_id not in set(view.leaders.values()),
                timeout,
                f"no partition led by broker {broker_id}",
            )

        self._run(fail(), timeout)

    def expire_session(self, broker_id: int, timeout: float = FAULT_TIMEOUT_S) -> None:
        """Expire the broker's store session now; returns when it registered again on a new
        session and every running broker lists it."""
        self._need_embedded("expire_session")

        async def expire() -> None:
            from kafkalite.zk import data as paths

            server = self.servers[broker_id]
            old = server.session.session_id
            self.store.expire_session(old)
            deadline = time.monotonic() + timeout
            while True:
                session = server.session
                if session.session_id != old:
                    stat = await session.exists(paths.broker_path(broker_id))
                    if stat is not None and stat.ephemeral_owner == session.session_id:
                        break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"broker {broker_id} not registered again in {timeout} s")
                await asyncio.sleep(POLL_S)
            await self._wait_observed(
                self.running_brokers,
                lambda view: set(self.running_brokers) <= view.brokers and view.controller >= 0,
                timeout,
                f"broker {broker_id} registered again",
            )

        self._run(expire(), timeout)

    # -- the store side of faults --

    def _need_embedded(self, what: str) -> None:
        if self.store is None:
            raise NotImplementedError(
                f"{what} acts on the broker's coordination session: it needs the embedded "
                "store (a Cluster without zookeeper_connect)"
            )

    def _need_store_control(self, what: str) -> None:
        if self.store is None and not self._zookeeper_proxies:
            raise NotImplementedError(
                f"{what} cuts brokers off the coordination store: it needs the embedded store "
                "or a single ZooKeeper server (an ensemble is reached directly)"
            )

    def _cut_from_store(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self._off_store.add(broker_id)
            if broker_id in self._zookeeper_proxies:
                # its ZooKeeper connections reset and refused: the server expires the session
                self._zookeeper_proxies[broker_id].set_cut(True)
                continue
            server = self.servers.get(broker_id)
            if server is not None and server.session is not None:
                try:
                    self.store.suspend_session(server.session.session_id)
                except KeyError:
                    pass  # expired already: the session it opens next is suspended at birth

    def _resume_store(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self._off_store.discard(broker_id)
            if broker_id in self._zookeeper_proxies:
                self._zookeeper_proxies[broker_id].set_cut(False)
            view = self._views.get(broker_id)
            if view is not None and self.store is not None:
                for session_id in view.session_ids:
                    self.store.resume_session(session_id)  # a no-op for one that expired

    # -- awaitable twins of the faults (they run in a worker thread) --

    async def akill(self, broker_id: int, timeout: float = FAULT_TIMEOUT_S) -> None:
        await asyncio.to_thread(self.kill, broker_id, timeout)

    async def arestart(self, broker_id: int, timeout: float = FAULT_TIMEOUT_S) -> None:
        await asyncio.to_thread(self.restart, broker_id, timeout)

    async def aisolate(self, broker_id: int, timeout: float = FAULT_TIMEOUT_S) -> None:
        await asyncio.to_thread(self.isolate, broker_id, timeout)

    async def aheal(self, timeout: float = FAULT_TIMEOUT_S) -> None:
        await asyncio.to_thread(self.heal, timeout)

    def __repr__(self) -> str:
        store = self.zookeeper_connect or "embedded store"
        return f"<Cluster brokers={self.broker_ids} running={self.running_brokers} on {store}>"
