"""Scale on one broker: topic creation, idle footprint, stop and start.

Run: ``PYTHONPATH=. .venv/bin/python bench/scale_single.py`` (``--topics``, ``--batch``,
``--profile FILE`` to run the broker under cProfile, ``--reuse-dir DIR`` to keep the data
directory and, when a run with the same ``--topics`` left it, measure the restart alone).
Prints JSON; ``main()`` returns the same dict (``bench/scale.py`` calls it). Asserts nothing:
each figure is printed next to its target.

Scenarios, on one broker subprocess (``kafkalite.testing.Broker``) on the embedded store:

1. CreateTopics of ``--topics`` single-partition topics through confluent-kafka's AdminClient,
   ``--batch`` topics per request, each request waited for before the next: partitions/s
   overall, each batch's seconds (the last against the first), broker CPU per partition
   (utime + stime of the broker process over the whole creation, from /proc);
2. the broker idle with those partitions: RSS and open file descriptors (from /proc);
3. SIGTERM to exit (clean stop), then spawn to serving (Metadata lists the broker and a
   controller, and every topic has a leader), and whether the broker logged the
   "serving before the controller's metadata arrived" wait; the broker's start-up milestones
   (seconds from its "starting" line, among them when its controller's LeaderAndIsr and
   UpdateMetadata to it were answered) and its own phase clock (``step ...``);
4. the restarted broker idle: its CPU per second over ``--idle-seconds`` (what the periodic
   work of that many partitions costs with no client).

The broker processes read compiled modules from a cache outside the tree (``PYTHONPYCACHEPREFIX``,
``PYTHONDONTWRITEBYTECODE`` unset), as an installed broker does; set ``PYTHONPYCACHEPREFIX`` to
reuse one. To compare with another tree, run that tree's copy of this script the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ of this script's tree

from metadata_view import MetadataView  # noqa: E402

from kafkalite.testing import (
    Broker,  # noqa: E402
    api_versions_ok,  # noqa: E402
)

CLK_TCK = os.sysconf("SC_CLK_TCK")
METADATA_WAIT_MESSAGE = "serving before the controller's metadata arrived"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


MILESTONES = frozenset(
    {
        "starting",
        "listening",
        "registered",
        "controller ready",
        "controller metadata arrived",
        "started",
    }
)
"""The start-up lines of the broker's log that ``phases`` times."""


def phases(log_text: str) -> dict[str, float]:
    """Seconds from the broker's "starting" line to each start-up milestone it logged."""
    from datetime import datetime

    marks: dict[str, float] = {}
    steps: dict[str, float] = {}
    for line in log_text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        event = entry.get("event")
        if event == "controller request answered" and entry.get("api"):
            # the controller's LeaderAndIsr and UpdateMetadata to this broker, by their answers
            event = f"{entry['api']} answered"
        elif event not in MILESTONES:
            continue
        if event in marks:
            continue
        marks[event] = datetime.fromisoformat(entry["timestamp"].rstrip("Z")).timestamp()
        if event == "started":
            # The broker's own phase clock (seconds from its start-up's beginning).
            steps = {f"step {k}": v for k, v in (entry.get("phases") or {}).items()}
    start = marks.get("starting")
    if not start:
        return {}
    return {k: round(v - start, 2) for k, v in marks.items()} | steps


class ProfiledBroker(Broker):
    """The broker under cProfile (the profile is written when it exits cleanly)."""

    def __init__(self, *args, profile: str | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.profile = profile

    def command(self) -> list[str]:
        cmd = super().command()
        if self.profile:
            out = f"{self.profile}.{self.starts}"
            cmd = [cmd[0], "-m", "cProfile", "-o", out, *cmd[1:]]
        return cmd


def create_topics(bootstrap: str, names: list[str], batch: int) -> list[float]:
    """Seconds per CreateTopics batch (each waited for until every topic is created)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 120_000})
    seconds = []
    for i in range(0, len(names), batch):
        chunk = names[i : i + batch]
        start = time.perf_counter()
        futures = admin.create_topics(
            [NewTopic(n, num_partitions=1, replication_factor=1) for n in chunk],
            request_timeout=300,
            operation_timeout=300,
        )
        for future in futures.values():
            future.result()
        seconds.append(time.perf_counter() - start)
    return seconds


def all_led(view: MetadataView, count: int) -> bool:
    """Whether the broker's Metadata shows ``count`` scale topics, each led."""
    md = view.get()
    if md is None:
        return False
    led = sum(
        1
        for name, t in md.topics.items()
        if name.startswith("scale-")
        and t.error is None
        and t.partitions
        and all(p.leader >= 0 for p in t.partitions.values())
    )
    return led >= count


def wait_all_led(broker: Broker, topics: int) -> None:
    """Until the broker answers ApiVersions and its Metadata shows every topic led. The
    Metadata is asked on a connection kept between polls (bench/metadata_view.py): a poll of
    10,000 topics through confluent-kafka's AdminClient took 0.18-0.31 s (0.10-0.14 s of the
    bench's CPU, on the cores the starting broker uses), this one 0.07-0.08 s (0.03-0.05 s);
    the poll's length is the figure's resolution. A request sent while the broker starts is
    answered as soon as it serves Metadata."""
    deadline = time.perf_counter() + 300
    view = MetadataView(broker.host, broker.port, timeout_s=60)
    try:
        while not (api_versions_ok(broker.host, broker.port) and all_led(view, topics)):
            if broker.proc.poll() is not None or time.perf_counter() > deadline:
                raise RuntimeError(f"start failed:\n{broker.log_tail()}")
            time.sleep(0.02)  # readiness polling interval
    finally:
        view.close()


def create_and_measure(broker: Broker, names: list[str], batch: int, result: dict) -> None:
    """Scenarios 1 and 2: the creation's figures and the idle footprint, into ``result``."""
    topics = len(names)
    pid = broker.proc.pid
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    batches = create_topics(broker.bootstrap, names, batch)
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0
    result["create"] = {
        "partitions_per_s": {"value": round(topics / elapsed), "target": ">= 2000"},
        "last_over_first_batch": {
            "value": round(batches[-1] / batches[0], 2),
            "target": "<= 1.2",
        },
        "broker_cpu_ms_per_partition": {
            "value": round(cpu * 1000 / topics, 3),
            "target": "<= 1.0",
        },
        "batch_seconds": [round(s, 3) for s in batches],
        "total_seconds": round(elapsed, 2),
    }
    time.sleep(3)  # let the broker settle before the idle figures (a measurement, not a sync)
    result["idle"] = {
        "rss_mb": {"value": round(rss_mb(pid), 1), "target": "<= 300"},
        "open_fds": {"value": open_fds(pid), "target": "<= 2000"},
    }


def idle_cpu(pid: int, seconds: float) -> dict:
    """The broker's CPU (every thread) per second of wall time while nobody talks to it, after
    a few seconds to settle: what its periodic work costs at this many partitions."""
    time.sleep(3)  # the start-up's tail (the registry's imports, the first checkpoints)
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    time.sleep(seconds)  # a measurement window, not a synchronisation
    share = (cpu_seconds(pid) - cpu0) / (time.perf_counter() - t0)
    return {"seconds": seconds, "cpu_share_of_a_core": round(share, 4)}


def main(
    topics: int = 10_000,
    batch: int = 1_000,
    profile: str | None = None,
    reuse_dir: str | None = None,
    idle_s: float = 10.0,
) -> dict:
    # The broker's compiled modules are cached (outside the tree) as an installed package's
    # are: with PYTHONDONTWRITEBYTECODE each spawn compiled kafkalite again (about 0.5-1 s of
    # CPU counted in "start to serving"). The first start writes the cache, the restart reads it.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.setdefault("PYTHONPYCACHEPREFIX", tempfile.mkdtemp(prefix="kafkalite-pyc-"))
    # --reuse-dir: a directory a previous run with the same --topics left (its broker stopped
    # cleanly) skips the creation; the start before the measured one writes the bytecode cache.
    marker = Path(reuse_dir, ".scale_single_topics") if reuse_dir else None
    reused = marker is not None and marker.exists() and marker.read_text() == str(topics)
    if reuse_dir:
        Path(reuse_dir).mkdir(parents=True, exist_ok=True)
    data_dir = reuse_dir or tempfile.mkdtemp(prefix="kafkalite-scale-")
    broker = ProfiledBroker(
        data_dir=data_dir,
        subprocess=True,
        admin=False,
        profile=profile,
        config={"num.partitions": "1", "log.retention.check.interval.ms": "300000"},
    )
    result: dict = {
        "topics": topics,
        "batch": batch,
        "data_dir": data_dir,
        "reused": reused,
        "pycache": os.environ["PYTHONPYCACHEPREFIX"],
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
    }
    names = [f"scale-{i:05d}" for i in range(topics)]
    try:
        broker.start(timeout=120)
        if reused:
            wait_all_led(broker, topics)
        else:
            create_and_measure(broker, names, batch, result)
            if marker is not None:
                marker.write_text(str(topics))
        t0 = time.perf_counter()
        broker.stop(timeout=120)
        stop_s = time.perf_counter() - t0
        log_before = len(broker.log_text())
        t0 = time.perf_counter()
        broker.spawn()
        wait_all_led(broker, topics)
        start_s = time.perf_counter() - t0
        # The broker's CPU from spawn to serving (every thread, user and system): on a loaded
        # machine the wall time above mostly measures the other processes.
        start_cpu = cpu_seconds(broker.proc.pid)
        restart_log = broker.log_text()[log_before:]
        waited = METADATA_WAIT_MESSAGE in restart_log
        result["restart_phases_s"] = phases(restart_log)
        result["restart"] = {
            "clean_stop_s": {"value": round(stop_s, 2), "target": "<= 3"},
            "start_to_serving_s": {"value": round(start_s, 2), "target": "<= 2"},
            "broker_cpu_s_to_serving": round(start_cpu, 2),
            "serving_before_metadata_wait": {"value": waited, "target": False},
            "rss_mb_after_restart": round(rss_mb(broker.proc.pid), 1),
            "open_fds_after_restart": open_fds(broker.proc.pid),
        }
        result["idle_after_restart"] = idle_cpu(broker.proc.pid, idle_s)
        broker.stop(timeout=120)
        # The "started" line (with the broker's phase clock) may come after serving began.
        result["restart_phases_s"] = phases(broker.log_text()[log_before:])
    finally:
        broker.kill()
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--profile", help="run the broker under cProfile, writing FILE.<start>")
    parser.add_argument(
        "--idle-seconds",
        type=float,
        default=10.0,
        help="after the restart, the broker's CPU is measured idle over this long",
    )
    parser.add_argument(
        "--reuse-dir",
        help="keep the data in DIR; when a run with the same --topics left it, skip the creation",
    )
    args = parser.parse_args()
    print(
        json.dumps(
            main(args.topics, args.batch, args.profile, args.reuse_dir, args.idle_seconds),
            indent=2,
        )
    )
