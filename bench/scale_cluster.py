"""Cluster scale figures (prints JSON; not a test): the scale targets' rows for 3 brokers on ZooKeeper.

Starts a real ZooKeeper and three ``kafkalite serve`` processes (kafkalite.testing.Broker), with
``zookeeper.session.timeout.ms=6000``, then runs in order:

1. one topic of ``--partitions`` partitions at RF 3: time until every partition has a leader
   and a full ISR in a broker's Metadata, and whether any broker's session expired meanwhile
   (its ``/brokers/ids/<id>`` registration changed czxid, or its log says so);
2. kill -9 of a broker that is not the controller: time from the expiry of its session (its
   registration disappears) until no partition names it as leader;
3. that broker restarted: time until it serves (answers ApiVersions) and until it is back in
   every ISR;
4. a preferred-leader election (ElectLeaders, all partitions): time until every partition is
   led by its first replica;
5. SIGTERM of the broker leading the most partitions among those that are not the controller:
   time to exit, then the partitions the Metadata shows leaderless or still led by it right
   after the exit (it is restarted and rebalanced afterwards);
6. the same SIGTERM of the controller itself, whose controlled shutdown it decides and whose
   requests it sends while it stops (``sigterm_controller``);
7. kill -9 of the controller: time from the expiry of its session until a surviving broker
   reports the new controller and every partition led by a live broker;
8. CreateTopics of ``--topics`` topics x ``--topic-partitions`` partitions at RF 3, one request:
   time until the request answered and until every partition has a leader.

The two failover phases (2 and 7) also return a ``timeline``: in seconds from the moment the
bench saw the session expire, the controller's own stamps from its brokers' logs (each slow
event: queued, started, the end of each phase, its thread's CPU; each bulk request: queued,
sent, answered by which broker) and the bench's Metadata polls (start, end, whether it showed
the outcome). ``time.monotonic`` is one clock for every process of the host. Its
``watcher_told_s`` is when the polled broker answered the first UpdateMetadata sent after the
expiry: the polls' own resolution (a Metadata of every partition, then a wait as long) is
left out of it.

From before the first phase to the end a producer (acks=all, idempotent, ``--load-rate``
records/s, 200 by default) writes to a topic of its own (6 partitions, RF 3,
min.insync.replicas 2) and a consumer reads it (bench/phase_load.py). ``producer_consumer``
gives per phase the records sent, acknowledged and failed, the produce and end-to-end latency
(p50, p99, max), and ``acknowledged_lost``: acknowledged records the consumer never read once
the producer flushed and the consumer caught up (target 0).

``loop_stalls`` gives per phase and broker the ``loop stalled`` lines of the brokers' logs
(kafkalite/observability/loop_stall.py, over ``loop.stall.report.ms``, 100 ms): their count by
cause (gc, held, gil, starved) and the worst with its cause and top frames (bench/loop_stalls.py).

``--gc-census`` (decisions 0052, 0072) counts, at the end of each phase, in each running
broker, the cyclic garbage its freezer kept: a sitecustomize hook (GC_CENSUS_HOOK) answers
SIGUSR2 with the objects frozen, the garbage a normal collection finds, then what a collection
finds once they are unfrozen (``kept_by_freeze``: garbage that became cyclic after being
frozen, which nothing would ever free) with its most common types; it then frees that garbage
and freezes again, so each count is what came since the broker's previous one. Start-up's own
share (import-time cycles, ZooKeeper's NodeExists tracebacks) is 1,700-2,100 objects in a
broker's first count. ``gc_census`` gives {phase: {broker: count}}. A census walks the whole
heap twice (0.2-0.5 s of each broker's loop, taken in the phase that ends), so the time figures
of such a run are not comparable with a plain run's.

``--cpu-census`` samples every thread's time on CPU of the brokers, their ZooKeeper and this
benchmark every 20 ms (bench/cpu_census.py); ``starved_cpu`` gives per phase the brokers'
``starved`` stalls (the stall report's, so with ``loop.stall.report.ms`` set) and the CPU each
thread took in their windows: who had the cores while a broker's loop did not run.

Through every phase each broker's ``/metrics`` is scraped (every ``SCRAPE_INTERVAL_S``) for
``kafkalite_event_loop_lag_max_seconds`` (when the gauge exists) and the maximum is reported.

``main(...)`` returns the figures as a dict, each next to its target; ``bench/scale.py`` calls
it. Standalone:

    PYTHONPATH=. .venv/bin/python bench/scale_cluster.py [--partitions 3000] [--topics 100]
        [--baseline-src DIR]   # then the same phases on DIR's kafkalite (e.g. `git archive`),
                               # in a child, one after the other in the same run
        [--skip preferred_election,sigterm,sigterm_controller,create_topics]   # phases left out
        [--load-rate 200]          # the producer's records/s through the phases (0: none)
        [--gc-census]              # the cyclic garbage each broker's freezer kept, per phase
        [--cpu-census]             # who had the CPU while a broker's loop was starved
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

GC_CENSUS_HOOK = r"""
# Written as sitecustomize.py into a directory on the brokers' PYTHONPATH by
# bench/scale_cluster.py --gc-census: in a `kafkalite serve` process, SIGUSR2 writes
# <SCALE_GC_CENSUS_OUT>.<pid>.json (the module docstring of bench/scale_cluster.py).
import os
import sys

if os.environ.get("SCALE_GC_CENSUS_OUT") and "serve" in getattr(sys, "orig_argv", ()):
    import signal

    def _gc_census(signum, frame):
        import collections
        import gc
        import json

        # The broker's freezer (a gc callback) would freeze what these collections leave,
        # the garbage saved for counting included: it is set aside meanwhile.
        callbacks = gc.callbacks[:]
        gc.callbacks.clear()
        try:
            frozen = gc.get_freeze_count()
            normal = gc.collect()
            gc.unfreeze()
            gc.set_debug(gc.DEBUG_SAVEALL)
            try:
                kept = gc.collect()
                types = collections.Counter(
                    f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage
                )
            finally:
                gc.garbage.clear()
                gc.set_debug(0)
            gc.collect()  # frees what was found: the next census counts only what came since
            gc.freeze()
        finally:
            gc.callbacks[:] = callbacks
        out = f"{os.environ['SCALE_GC_CENSUS_OUT']}.{os.getpid()}.json"
        with open(out + ".part", "w") as f:
            json.dump(
                {
                    "frozen": frozen,
                    "garbage_found_normally": normal,
                    "kept_by_freeze": kept,
                    "kept_types": types.most_common(12),
                },
                f,
            )
        os.replace(out + ".part", out)

    signal.signal(signal.SIGUSR2, _gc_census)
"""


def _source_tree() -> str:
    """``--src DIR`` (the baseline's child) or this script's own tree: the kafkalite imported
    here and by the brokers this bench starts (they inherit PYTHONPATH)."""
    if "--src" in sys.argv:
        return str(Path(sys.argv[sys.argv.index("--src") + 1]).resolve())
    return str(Path(__file__).resolve().parent.parent)


SRC = _source_tree()
sys.path.insert(0, SRC)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [SRC, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != SRC)]
)

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ of this script's tree
from cpu_census import CpuCensus, attribute, starved_windows  # noqa: E402
from loop_stalls import parse_stalls, stalls_by_phase  # noqa: E402
from metadata_view import MetadataView  # noqa: E402
from phase_load import PhaseLoad  # noqa: E402

from kafkalite.cli.common import parse_pairs  # noqa: E402
from kafkalite.coord import open_store  # noqa: E402
from kafkalite.testing import (  # noqa: E402
    Broker,  # noqa: E402
    ZooKeeperServer,  # noqa: E402
    api_versions_ok,
    free_port,
)

CHROOT = "/kafkalite"
BROKER_IDS = (1, 2, 3)
TOPIC = "scale"
LOAD_TOPIC = "scale-load"
LOAD_TOPIC_PARTITIONS = 6
LAG_GAUGE = "kafkalite_event_loop_lag_max_seconds"
LAG_HISTOGRAM = "kafkalite_event_loop_lag_seconds"
SESSION_EXPIRED_MARK = "coordination session expired"


class PhaseTimeout(Exception):
    pass


def wait_until(condition: Callable[[], Any], deadline_s: float, what: str) -> Any:
    """Poll ``condition`` until truthy; raise PhaseTimeout after ``deadline_s``. Between two
    polls it waits as long as the last poll took (20 ms at least, 1 s at most): a poll is a
    full Metadata of every partition, and polling back to back held the polled broker's loop
    for most of a phase at 10,000 partitions (bench/scale_profile.py, when a poll was a new
    confluent-kafka client). A figure's resolution is one poll and one wait: on a kept
    connection (``ClusterBench.metadata``) 20-60 ms while the brokers work."""
    deadline = time.monotonic() + deadline_s
    while True:
        began = time.monotonic()
        value = condition()
        if value:
            return value
        now = time.monotonic()
        if now > deadline:
            raise PhaseTimeout(f"{what}: not done after {deadline_s}s")
        time.sleep(min(1.0, max(0.02, now - began)))


SCRAPE_INTERVAL_S = 5.0
"""Between two scrapes of every broker's /metrics (and at each change of phase). A scrape at
10,000 partitions writes every per-partition family, about 50 ms of a broker's CPU: once a
second it was 5% of a core per broker, taken from the brokers being measured. The gauge's
window (10-20 s) and the histogram's counts lose nothing at this interval."""


class LagSampler:
    """Scrapes every broker's /metrics every ``SCRAPE_INTERVAL_S`` in a thread, and when a
    phase ends. Per phase it keeps the
    maximum of the event-loop lag gauge (the worst stall of the broker's last 10-20 s, so a
    stall shows in the phase after it too) and, per broker, the probes of the phase by lag
    from the ``kafkalite_event_loop_lag_seconds`` histogram (the difference of two scrapes; a
    restarted broker's histogram starts again from zero): how many probes ran more than 50 ms
    and more than 250 ms late, and the upper bound of the worst bucket reached."""

    def __init__(self, urls: dict[int, str]) -> None:
        self.urls = urls
        self._phase = "start"
        self.phase_times: list[tuple[str, float, float]] = []
        """(phase, start, end) on time.monotonic(), the phases that ended."""
        self._phase_start = time.monotonic()
        self.max_by_phase: dict[str, float] = {}
        self.histograms: dict[str, dict[int, dict[str, float]]] = {}
        self._last: dict[int, dict[str, float]] = {}
        self.seen_gauge = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def phase(self) -> str:
        return self._phase

    @phase.setter
    def phase(self, name: str) -> None:
        self._scrape_all()  # what happened until now belongs to the phase that ends
        with self._lock:
            now = time.monotonic()
            self.phase_times.append((self._phase, self._phase_start, now))
            self._phase, self._phase_start = name, now

    def start(self) -> LagSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._scrape_all()
        with self._lock:
            self.phase_times.append((self._phase, self._phase_start, time.monotonic()))

    def _run(self) -> None:
        while not self._stop.wait(SCRAPE_INTERVAL_S):
            self._scrape_all()

    def _scrape_all(self) -> None:
        gauge = re.compile(rf"^{LAG_GAUGE}(?:{{[^}}]*}})?\s+([0-9.eE+-]+)", re.MULTILINE)
        bucket = re.compile(rf'^{LAG_HISTOGRAM}_bucket{{le="([^"]+)"}}\s+(\S+)', re.MULTILINE)
        for broker_id, url in self.urls.items():
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    text = answer.read().decode("utf-8", "replace")
            except OSError:
                continue
            with self._lock:
                phase = self._phase
                for match in gauge.finditer(text):
                    self.seen_gauge = True
                    value = float(match.group(1))
                    current = self.max_by_phase.get(phase, 0.0)
                    self.max_by_phase[phase] = max(current, value)
                now = {le: float(count) for le, count in bucket.findall(text)}
                before = self._last.get(broker_id, {})
                if now.get("+Inf", 0.0) < before.get("+Inf", 0.0):
                    before = {}  # restarted: its histogram began again
                acc = self.histograms.setdefault(phase, {}).setdefault(broker_id, {})
                for le, count in now.items():
                    acc[le] = acc.get(le, 0.0) + count - before.get(le, 0.0)
                self._last[broker_id] = now

    def probes_by_phase(self) -> dict[str, dict[int, dict[str, Any]]]:
        """phase -> broker -> probes, probes over 50 ms and 250 ms, worst bucket bound."""
        out: dict[str, dict[int, dict[str, Any]]] = {}
        with self._lock:
            for phase, brokers in self.histograms.items():
                for broker_id, cumulative in brokers.items():
                    bounds = sorted(cumulative, key=_bound)
                    total = cumulative.get("+Inf", 0.0)
                    at_most = {le: cumulative[le] for le in bounds}
                    worst = None
                    previous = 0.0
                    for le in bounds:
                        if at_most[le] > previous:
                            worst = le
                        previous = at_most[le]
                    p99 = next((le for le in bounds if at_most[le] >= 0.99 * total), None)
                    out.setdefault(phase, {})[broker_id] = {
                        "probes": int(total),
                        "p99_le": p99,
                        "over_50ms": int(total - at_most.get("0.05", total)),
                        "over_250ms": int(total - at_most.get("0.25", total)),
                        "worst_bucket_le": worst,
                    }
        return out


TIMELINE_SETTLE_S = 3.0
"""Waited after a failover phase's outcome before its timeline is read from the logs: the
controller logs a request's answer after the broker answered, which may be after a poll saw
its effect. Not part of any figure."""
TIMELINE_EVENTS = {
    "controller event processed",
    "controller event phases",
    "controller request answered",
}


def controller_timeline(
    brokers: dict[int, Broker], origin: float, since: float, until: float
) -> list[dict[str, Any]]:
    """The controller's stamped log lines (see the module docstring) of every broker whose
    stamp falls in [since, until], as offsets in seconds from ``origin``, in time order."""
    out = []
    for broker_id, broker in brokers.items():
        for line in broker.log_text().splitlines():
            if not line.startswith("{") or '"controller ' not in line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("event") not in TIMELINE_EVENTS:
                continue
            stamp = entry.get("started_at", entry.get("queued_at", entry.get("enqueued_at")))
            if stamp is None or not since <= stamp <= until:
                continue
            row: dict[str, Any] = {"on": broker_id, "what": entry["event"]}
            for key, value in entry.items():
                if key.endswith("_at") and isinstance(value, float):
                    row[key] = round(value - origin, 3)
                elif key not in ("event", "level", "timestamp", "logger"):
                    row[key] = value
            out.append(row)
    return sorted(out, key=lambda r: min(v for k, v in r.items() if k.endswith("_at")))


def watcher_told_s(logged: list[dict[str, Any]], watcher: int) -> float | None:
    """From a phase's timeline: when the watching broker answered the first UpdateMetadata
    queued after the expiry (the elections' UpdateMetadata: the earliest moment its Metadata
    could show the outcome), or None when no such line was logged (a tree without stamps)."""
    answered = [
        row["answered_at"]
        for row in logged
        if row["what"] == "controller request answered"
        and row.get("api") == "UPDATE_METADATA"
        and row.get("broker") == watcher
        and row.get("partitions", 0) > 0
        and row.get("queued_at", -1.0) >= -0.5
    ]
    return min(answered, default=None)


class PollLog:
    """Wraps a wait_until condition: records each poll's start and end (seconds from
    ``origin``) and whether it showed the outcome."""

    def __init__(self, condition: Callable[[], Any], origin: float) -> None:
        self.condition = condition
        self.origin = origin
        self.polls: list[tuple[float, float, bool]] = []

    def __call__(self) -> Any:
        began = time.monotonic()
        value = self.condition()
        self.polls.append(
            (round(began - self.origin, 3), round(time.monotonic() - self.origin, 3), bool(value))
        )
        return value


def _bound(le: str) -> float:
    return float("inf") if le == "+Inf" else float(le)


class ClusterBench:
    def __init__(
        self,
        base: Path,
        session_timeout_ms: int,
        broker_config: dict[str, str] | None = None,
        gc_census: bool = False,
    ) -> None:
        self.census_out: Path | None = None
        """Where GC_CENSUS_HOOK writes (``--gc-census``); None: no census."""
        self.gc_census: dict[str, dict[int, Any]] = {}
        env = None
        if gc_census:
            hook_dir = base / "gc-census"
            hook_dir.mkdir()
            (hook_dir / "sitecustomize.py").write_text(GC_CENSUS_HOOK)
            self.census_out = hook_dir / "census"
            env = {"PYTHONPATH": str(hook_dir), "SCALE_GC_CENSUS_OUT": str(self.census_out)}
        self.zk = ZooKeeperServer(base / "zk", max_session_timeout_ms=60000)
        self.zk.start()
        self.admin_ports = {b: free_port() for b in BROKER_IDS}
        self.brokers = {
            b: Broker(
                data_dir=base / f"broker-{b}",
                broker_id=b,
                config={
                    "zookeeper.connect": self.zk.connect_string(CHROOT),
                    "zookeeper.session.timeout.ms": str(session_timeout_ms),
                    "default.replication.factor": "3",
                    "min.insync.replicas": "2",
                    # the consumer's group: its offsets replicated as a cluster's are (the
                    # testing default, 1, cannot take acks=all writes under min.insync 2)
                    "offsets.topic.replication.factor": "3",
                    "offsets.topic.num.partitions": "3",
                    "replica.lag.time.max.ms": "10000",
                    "controlled.shutdown.retry.backoff.ms": "200",
                    "auto.leader.rebalance.enable": "false",
                    "admin.listener": f"http://127.0.0.1:{self.admin_ports[b]}",
                    **(broker_config or {}),
                },
                subprocess=True,
                env=env,
            )
            for b in BROKER_IDS
        }
        for broker in self.brokers.values():
            broker.spawn()
        for broker in self.brokers.values():
            broker.wait_ready(120)
        self._zk_loop = asyncio.new_event_loop()
        threading.Thread(target=self._zk_loop.run_forever, daemon=True).start()
        self.zk_store = open_store(self.zk.connect_string(CHROOT), None, 30000)
        self.zk_session = self._zk_run(self.zk_store.open_session())
        self.views: dict[int, MetadataView] = {}
        self.sampler = LagSampler(
            {b: f"http://127.0.0.1:{p}/metrics" for b, p in self.admin_ports.items()}
        ).start()

    def _zk_run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._zk_loop).result(30)

    def enter_phase(self, phase: str) -> None:
        """Start ``phase`` (the lag sampler's label), after the census of the phase that
        ended when ``--gc-census`` is on."""
        self.take_gc_census()
        self.sampler.phase = phase

    def take_gc_census(self) -> None:
        """Signal each running broker's GC_CENSUS_HOOK and keep what it wrote under the
        phase that ended (the module docstring)."""
        if self.census_out is None:
            return
        census: dict[int, Any] = {}
        for broker_id, broker in self.brokers.items():
            process = broker.process
            if process is None or process.poll() is not None:
                continue
            written = Path(f"{self.census_out}.{process.pid}.json")
            written.unlink(missing_ok=True)
            os.kill(process.pid, signal.SIGUSR2)
            wait_until(written.exists, 60, f"broker {broker_id}'s gc census")
            census[broker_id] = json.loads(written.read_text())
        self.gc_census[self.sampler.phase] = census

    def close(self) -> None:
        if self.sampler._thread.is_alive():
            self.sampler.stop()
        for view in self.views.values():
            view.close()
        with contextlib.suppress(Exception):
            self._zk_run(self.zk_store.close())
        self._zk_loop.call_soon_threadsafe(self._zk_loop.stop)
        for broker in self.brokers.values():
            broker.kill()
        self.zk.stop()

    # -- views ----------------------------------------------------------------------------------

    def admin(self, broker_ids: tuple[int, ...] | None = None) -> AdminClient:
        ids = broker_ids or tuple(b for b, p in self.brokers.items() if p.running)
        return AdminClient({"bootstrap.servers": ",".join(self.brokers[b].bootstrap for b in ids)})

    def metadata(self, broker_id: int, topics: list[str] | None = None) -> Any | None:
        """One broker's own Metadata answer, or None (bench/metadata_view.py: a connection kept
        to each broker, a poll of 10,000 partitions about 18 ms of the bench's CPU)."""
        view = self.views.get(broker_id)
        if view is None:
            broker = self.brokers[broker_id]
            view = self.views[broker_id] = MetadataView(broker.host, broker.port)
        return view.get(None if topics is None or len(topics) > 1 else topics)

    def partitions(self, md: Any, topics: list[str]) -> list[Any]:
        out = []
        for topic in topics:
            t = md.topics.get(topic)
            if t is None or t.error is not None:
                return []
            out.extend(t.partitions.values())
        return out

    def any_live(self, avoid: tuple[int, ...] = ()) -> int:
        """A running broker, one not in ``avoid`` if there is one (the bench does not poll the
        broker whose recovery it measures)."""
        running = [b for b, p in self.brokers.items() if p.running]
        return next((b for b in running if b not in avoid), running[0])

    def registration_czxids(self) -> dict[int, int]:
        """broker id -> czxid of its ``/brokers/ids/<id>`` (a new session registers anew)."""

        async def read() -> dict[int, int]:
            out = {}
            for child in await self.zk_session.get_children("/brokers/ids"):
                stat = await self.zk_session.exists(f"/brokers/ids/{child}")
                if stat is not None:
                    out[int(child)] = stat.czxid
            return out

        return self._zk_run(read())

    def registered(self) -> set[int]:
        return set(self.registration_czxids())

    def controller(self) -> int:
        md = self.metadata(self.any_live())
        return md.controller_id if md is not None else -1

    def expirations_logged(self) -> int:
        return sum(b.log_text().count(SESSION_EXPIRED_MARK) for b in self.brokers.values())

    def all_led_with_full_isr(
        self, topics: list[str], expected: int, avoid: tuple[int, ...] = ()
    ) -> bool:
        md = self.metadata(self.any_live(avoid), topics)
        if md is None:
            return False
        parts = self.partitions(md, topics)
        return len(parts) == expected and all(
            p.leader >= 0 and len(p.isrs) == len(p.replicas) for p in parts
        )

    def led_by(self, md: Any, topics: list[str]) -> dict[int, int]:
        counts: dict[int, int] = {}
        for p in self.partitions(md, topics):
            counts[p.leader] = counts.get(p.leader, 0) + 1
        return counts

    def preferred_election(self, topics: list[str], deadline: float) -> float:
        from confluent_kafka import ElectionType

        start = time.monotonic()
        admin = self.admin()
        future = admin.elect_leaders(ElectionType.PREFERRED, None)
        future.result(timeout=deadline)

        def balanced() -> bool:
            md = self.metadata(self.any_live(), topics)
            parts = self.partitions(md, topics) if md is not None else []
            return bool(parts) and all(p.leader == p.replicas[0] for p in parts)

        wait_until(balanced, deadline, "leaders on their preferred replicas")
        return time.monotonic() - start


def main(
    partitions: int = 3000,
    topics: int = 100,
    topic_partitions: int = 4,
    session_timeout_ms: int = 6000,
    keep_dir: str | None = None,
    skip: frozenset[str] = frozenset(),
    load_rate: float = 200.0,
    broker_config: dict[str, str] | None = None,
    gc_census: bool = False,
    cpu_census: bool = False,
) -> dict[str, Any]:
    """Run the phases (module docstring) and return {row: {figure..., target}}. With
    ``keep_dir`` the ZooKeeper and broker data and logs are kept there; the phases named in
    ``skip`` (``preferred_election``, ``sigterm``, ``sigterm_controller``, ``create_topics``)
    are left out;
    ``load_rate`` is the producer's records per second (0: no producer and consumer);
    ``broker_config`` is added to every broker's properties (e.g. ``loop.stall.report.ms``);
    ``gc_census`` adds ``gc_census`` and ``cpu_census`` adds ``starved_cpu`` (module
    docstring)."""
    figures: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        if keep_dir is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="kafkalite-scale-"))
        else:
            tmp = keep_dir
            Path(tmp).mkdir(parents=True, exist_ok=True)
        bench = ClusterBench(Path(tmp), session_timeout_ms, broker_config, gc_census)
        census = CpuCensus(lambda: watched_processes(bench)).start() if cpu_census else None
        load = None
        try:
            if load_rate > 0:
                load = start_load(bench, load_rate)
            _run(bench, figures, partitions, topics, topic_partitions, skip)
            if gc_census:
                bench.take_gc_census()  # the last phase's
                figures["gc_census"] = bench.gc_census
        except PhaseTimeout as error:
            figures["error"] = str(error)
        finally:
            if load is not None:
                bench.sampler.phase = "drain"
                figures["producer_consumer"] = load.finish()
            bench.sampler.stop()
            figures["event_loop_lag_probes"] = {
                "by_phase_and_broker": bench.sampler.probes_by_phase(),
                "target": "no probe over 200 ms (p99 <= 50 ms) on any broker in any phase",
            }
            figures["loop_stalls"] = stalls_by_phase(
                {b: broker.log_text() for b, broker in bench.brokers.items()},
                bench.sampler.phase_times,
                reporter=(Path(SRC) / "kafkalite" / "observability" / "loop_stall.py").exists(),
            )
            if census is not None:
                census.stop()
                figures["starved_cpu"] = attribute(
                    census.samples,
                    {
                        b: starved_windows(parse_stalls(broker.log_text()))
                        for b, broker in bench.brokers.items()
                    },
                    bench.sampler.phase_times,
                    census.interval_s,
                )
            figures["event_loop_lag_max_s"] = {
                "by_phase": dict(bench.sampler.max_by_phase),
                "max": max(bench.sampler.max_by_phase.values(), default=None),
                "gauge_found": bench.sampler.seen_gauge,
                "target": "<= 0.2 s on every broker through every phase",
            }
            bench.close()
    return figures


def watched_processes(bench: ClusterBench) -> dict[str, int]:
    """The processes of the CPU census: this benchmark, ZooKeeper and each running broker."""
    out = {"bench": os.getpid()}
    if bench.zk.process is not None:
        out["zookeeper"] = bench.zk.process.pid
    for broker_id, broker in bench.brokers.items():
        if broker.proc is not None:
            out[f"broker-{broker_id}"] = broker.proc.pid
    return out


def start_load(bench: ClusterBench, rate: float) -> PhaseLoad:
    """The producer and consumer of bench/phase_load.py on a topic of their own (RF 3,
    min.insync.replicas 2), started before the first phase and reading when it begins."""
    admin = bench.admin()
    topic = NewTopic(LOAD_TOPIC, LOAD_TOPIC_PARTITIONS, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([topic], operation_timeout=60)[LOAD_TOPIC].result(120)
    wait_until(
        lambda: bench.all_led_with_full_isr([LOAD_TOPIC], LOAD_TOPIC_PARTITIONS),
        120,
        "the load topic led",
    )
    bootstrap = ",".join(b.bootstrap for b in bench.brokers.values())
    load = PhaseLoad(bootstrap, LOAD_TOPIC, lambda: bench.sampler.phase, rate).start()
    # the consumer in its group and reading before the first phase: its group's offsets
    # topic, created on its first FindCoordinator, would otherwise queue behind the first
    # phase's creation at the controller and its wait be counted as that phase's latency
    wait_until(lambda: load.recorder.consumed, 120, "the load's first record consumed")
    return load


def _run(
    bench: ClusterBench,
    figures: dict,
    partitions: int,
    topics: int,
    topic_partitions: int,
    skip: frozenset[str] = frozenset(),
) -> None:
    names = [TOPIC]
    czxids = bench.registration_czxids()
    expired_before = bench.expirations_logged()

    # 1. one topic, RF 3
    bench.enter_phase("create")
    start = time.monotonic()
    admin = bench.admin()
    answer_error = None
    try:
        admin.create_topics([NewTopic(TOPIC, partitions, 3)], operation_timeout=60)[TOPIC].result(
            120
        )
    except Exception as error:  # the request timed out: the topic may still be created
        answer_error = str(error)
    answered = time.monotonic() - start
    wait_until(lambda: bench.all_led_with_full_isr(names, partitions), 300, "creation")
    figures["create_topic"] = {
        "partitions": partitions,
        "answered_s": round(answered, 2),
        "answer_error": answer_error,
        "all_led_full_isr_s": round(time.monotonic() - start, 2),
        "sessions_expired": int(
            bench.registration_czxids() != czxids or bench.expirations_logged() > expired_before
        ),
        "target": "<= 10 s; no session expires",
    }

    # 2. kill -9 of a broker that is not the controller
    bench.enter_phase("kill")
    controller = bench.controller()
    victim = next(b for b in BROKER_IDS if b != controller)
    md = wait_until(lambda: bench.metadata(controller, names), 60, "the controller's Metadata")
    victim_led = bench.led_by(md, names).get(victim, 0)
    bench.brokers[victim].kill()
    wait_until(lambda: victim not in bench.registered(), 60, "session expiry")
    expired_at = time.monotonic()

    # asked of the third broker, not of the controller's: the poll would compete with the
    # controller's thread for that broker's interpreter
    watcher = next(b for b in BROKER_IDS if b not in (victim, controller))

    def re_led() -> bool:
        md = bench.metadata(watcher, names)
        parts = bench.partitions(md, names) if md is not None else []
        return bool(parts) and all(p.leader not in (victim, -1) for p in parts)

    polls = PollLog(re_led, expired_at)
    wait_until(polls, 60, "re-leading after kill -9")
    done_at = time.monotonic()
    time.sleep(TIMELINE_SETTLE_S)  # the lines of requests answered as the poll succeeded
    logged = controller_timeline(bench.brokers, expired_at, expired_at - 10, done_at + 5)
    figures["kill9_releader"] = {
        "partitions_led": victim_led,
        "after_expiry_s": round(done_at - expired_at, 3),
        "watcher_told_s": watcher_told_s(logged, watcher),
        "target": "<= 1 s after its session expires",
        "timeline": {
            "controller": controller,
            "watcher": watcher,
            "metadata_polls": polls.polls,
            "logged": logged,
        },
    }

    # 3. restart
    bench.enter_phase("restart")
    start = time.monotonic()
    broker = bench.brokers[victim]
    broker.spawn()
    wait_until(
        lambda: (
            (broker.proc.poll() is None or _raise(f"broker exited:\n{broker.log_tail()}"))
            and _api_ok(broker)
        ),
        120,
        "restarted broker serving",
    )
    serving = time.monotonic() - start
    wait_until(
        lambda: bench.all_led_with_full_isr(names, partitions, avoid=(victim,)),
        300,
        "ISR rejoin",
    )
    figures["restart"] = {
        "serving_s": round(serving, 2),
        "back_in_every_isr_s": round(time.monotonic() - start, 2),
        "target": "serving <= 3 s, back in every ISR <= 10 s",
    }

    # 4. preferred election
    if "preferred_election" not in skip:
        bench.enter_phase("preferred_election")
        figures["preferred_election"] = {
            "seconds": round(bench.preferred_election(names, 120), 2),
            "target": "<= 2 s",
        }

    if "sigterm" not in skip:
        _sigterm(bench, figures, names, partitions, controller=False)
    if "sigterm_controller" not in skip:
        _sigterm(bench, figures, names, partitions, controller=True)
    if {"sigterm", "sigterm_controller"} <= skip:
        bench.preferred_election(names, 120)  # the controller kill starts balanced either way

    _controller_kill(bench, figures, names, partitions)
    if "create_topics" not in skip:
        _create_topics(bench, figures, topics, topic_partitions)
    figures["sessions_expired_total"] = bench.expirations_logged() - expired_before


def _sigterm(
    bench: ClusterBench, figures: dict, names: list[str], partitions: int, *, controller: bool
) -> None:
    # 5. SIGTERM of the broker leading the most partitions that is not the controller, or
    # 6. of the controller (which decides its own controlled shutdown)
    phase = "sigterm_controller" if controller else "sigterm"
    bench.enter_phase(phase)
    md = wait_until(lambda: bench.metadata(bench.any_live(), names), 60, "a broker's Metadata")
    counts = bench.led_by(md, names)
    active = bench.controller()
    if controller:
        stopped = active
    else:
        stopped = max((b for b in counts if b not in (-1, active)), key=lambda b: counts[b])
    start = time.monotonic()
    bench.brokers[stopped].stop(timeout=120)
    exit_s = time.monotonic() - start
    other = next(b for b in BROKER_IDS if b != stopped)
    md = bench.metadata(other, names)
    parts = bench.partitions(md, names) if md is not None else []
    figures[phase] = {
        "broker": stopped,
        "was_controller": stopped == active,
        "partitions_led": counts.get(stopped, 0),
        "exit_s": round(exit_s, 2),
        "leaderless_or_led_by_it": sum(1 for p in parts if p.leader in (-1, stopped)),
        "metadata_partitions": len(parts),
        "target": "exits <= 3 s; 0 partitions leaderless or led by it",
    }
    wait_until(lambda: stopped not in bench.registered(), 60, "stopped broker deregistered")
    bench.brokers[stopped].start(timeout=120)
    wait_until(lambda: bench.all_led_with_full_isr(names, partitions), 300, "ISR rejoin")
    bench.preferred_election(names, 120)


def _controller_kill(bench: ClusterBench, figures: dict, names: list[str], partitions: int) -> None:
    # 7. kill -9 of the controller
    bench.enter_phase("controller_kill")
    controller = bench.controller()
    bench.brokers[controller].kill()
    wait_until(lambda: controller not in bench.registered(), 60, "controller session expiry")
    expired_at = time.monotonic()
    survivor = next(b for b in BROKER_IDS if b != controller)

    def new_controller_sent_all() -> bool:
        md = bench.metadata(survivor, names)
        if md is None or md.controller_id in (-1, controller):
            return False
        parts = bench.partitions(md, names)
        return bool(parts) and all(p.leader not in (-1, controller) for p in parts)

    polls = PollLog(new_controller_sent_all, expired_at)
    wait_until(polls, 60, "new controller's metadata")
    done_at = time.monotonic()
    time.sleep(TIMELINE_SETTLE_S)  # the lines of requests answered as the poll succeeded
    logged = controller_timeline(bench.brokers, expired_at, expired_at - 10, done_at + 5)
    figures["controller_kill9"] = {
        "after_expiry_s": round(done_at - expired_at, 3),
        "watcher_told_s": watcher_told_s(logged, survivor),
        "target": "<= 2 s after expiry",
        "timeline": {
            "old_controller": controller,
            "watcher": survivor,
            "metadata_polls": polls.polls,
            "logged": logged,
        },
    }
    bench.brokers[controller].start(timeout=120)
    wait_until(lambda: bench.all_led_with_full_isr(names, partitions), 300, "ISR rejoin")


def _create_topics(bench: ClusterBench, figures: dict, topics: int, topic_partitions: int) -> None:
    # 8. CreateTopics of many small topics in one request
    bench.enter_phase("create_topics")
    new = [NewTopic(f"small-{i:04d}", topic_partitions, 3) for i in range(topics)]
    start = time.monotonic()
    admin = bench.admin()
    futures = admin.create_topics(new, operation_timeout=30, request_timeout=60)
    errors = 0
    for future in futures.values():
        try:
            future.result(120)
        except Exception:
            errors += 1
    answered = time.monotonic() - start
    small = [t.topic for t in new]
    wait_until(
        lambda: bench.all_led_with_full_isr(small, topics * topic_partitions),
        300,
        "small topics led",
    )
    figures["create_topics_batch"] = {
        "topics": topics,
        "partitions_each": topic_partitions,
        "answered_s": round(answered, 2),
        "errors": errors,
        "all_led_s": round(time.monotonic() - start, 2),
        "target": "<= 1 s",
    }


def _raise(message: str) -> bool:
    raise PhaseTimeout(message)


def _api_ok(broker: Broker) -> bool:
    return api_versions_ok(broker.host, broker.port)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--topic-partitions", type=int, default=4)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--keep-dir", help="keep data and logs there (default: a temporary dir)")
    parser.add_argument("--src", help="run on this tree's kafkalite instead of this one's")
    parser.add_argument("--baseline-src", help="then the same run on this tree, in a child")
    parser.add_argument(
        "--skip",
        default="",
        help="phases left out: preferred_election,sigterm,sigterm_controller,create_topics",
    )
    parser.add_argument(
        "--load-rate",
        type=float,
        default=200.0,
        help="records/s of the producer running through the phases (0: none)",
    )
    parser.add_argument(
        "--broker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a property added to every broker's (repeatable), e.g. loop.stall.report.ms=40",
    )
    parser.add_argument(
        "--gc-census",
        action="store_true",
        help="per phase, the cyclic garbage each broker's freezer kept (module docstring)",
    )
    parser.add_argument(
        "--cpu-census",
        action="store_true",
        help="per phase, the CPU each thread on the box took while a broker's loop was starved",
    )
    args = parser.parse_args()
    skipped = frozenset(p for p in args.skip.split(",") if p)
    extra = parse_pairs(args.broker_config, "--broker-config")
    figures = main(
        args.partitions,
        args.topics,
        args.topic_partitions,
        args.session_timeout_ms,
        args.keep_dir,
        skipped,
        args.load_rate,
        extra,
        args.gc_census,
        args.cpu_census,
    )
    figures["src"] = SRC
    figures["load_average"] = os.getloadavg()
    if not args.baseline_src:
        print(json.dumps(figures, indent=2))
        sys.exit(0)
    import subprocess

    command = [sys.executable, __file__, "--src", args.baseline_src]
    for flag, value in (
        ("--partitions", args.partitions),
        ("--topics", args.topics),
        ("--topic-partitions", args.topic_partitions),
        ("--session-timeout-ms", args.session_timeout_ms),
        ("--skip", args.skip),
        ("--load-rate", args.load_rate),
    ):
        command += [flag, str(value)]
    for item in args.broker_config:
        command += ["--broker-config", item]
    if args.gc_census:
        command.append("--gc-census")
    if args.cpu_census:
        command.append("--cpu-census")
    if args.keep_dir:
        command += ["--keep-dir", str(Path(args.keep_dir) / "baseline")]
    child = subprocess.run(command, capture_output=True, text=True, check=True)
    print(json.dumps({"this_tree": figures, "baseline_src": json.loads(child.stdout)}, indent=2))
