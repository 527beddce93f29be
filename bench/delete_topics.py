"""Deleting topics must not hold the broker's event loop (prints JSON; not a test).

One ``kafkalite serve`` subprocess (kafkalite.testing.Broker). ``--topics`` topics of
``--partitions`` partitions each are created and written to, then two phases of the same
length are measured on that broker:

- ``idle`` (the baseline, same run): nothing happens but the probes;
- ``delete``: one DeleteTopics of every topic, measured until the topics are gone from the
  Metadata and their directories from the log dir.

In both, a client thread sends a Metadata request (for one surviving topic) in a loop and
records each answer's latency, and the broker's ``/metrics`` is scraped before and after: the
difference of the ``kafkalite_event_loop_lag_seconds`` histogram gives the probes of the phase
by lag bucket, and ``kafkalite_event_loop_lag_max_seconds`` read at the end of the phase gives
the worst stall of the last 10-20 s (phases are separated by a window so it is the phase's own).

    PYTHONPATH=. .venv/bin/python bench/delete_topics.py [--topics 100] [--partitions 4]
        [--baseline-src DIR]   # also the same run on DIR's kafkalite (e.g. `git archive`)

The loop-lag figures: ``worst_bucket_le`` is the upper bound of the highest histogram bucket
any probe of the phase fell in (the phase's own worst stall is at most that); ``max_s_gauge``
is the broker's gauge read at the end of the phase (its worst stall of the last 10-20 s).

Target: the loop never held > 100 ms while 400 partitions are deleted.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

# ``--src DIR`` runs the same bench on another tree's kafkalite (the broker imports it too).
_SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv else None
sys.path.insert(0, _SRC or str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkalite.observability.loop_lag import LAG_WINDOW_S  # noqa: E402
from kafkalite.testing import Broker  # noqa: E402

KEEP = "keep"
BUCKET = re.compile(r'^kafkalite_event_loop_lag_seconds_bucket\{le="([^"]+)"\}\s+(\S+)', re.M)
GAUGE = re.compile(r"^kafkalite_event_loop_lag_max_seconds\s+(\S+)", re.M)


def scrape(url: str) -> tuple[dict[str, float], float]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as answer:
        text = answer.read().decode()
    buckets = {le: float(count) for le, count in BUCKET.findall(text)}
    gauge = GAUGE.search(text)
    return buckets, float(gauge.group(1)) if gauge else float("nan")


def lag_summary(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """Probes of the phase per bucket (non-cumulative) and the highest bucket reached."""
    bounds = sorted(after, key=lambda le: float("inf") if le == "+Inf" else float(le))
    counts, previous = {}, 0.0
    for le in bounds:
        cumulative = after[le] - before.get(le, 0.0)
        counts[le] = int(cumulative - previous)
        previous = cumulative
    worst = [le for le in bounds if counts[le] > 0]
    over_100ms = sum(n for le, n in counts.items() if le == "+Inf" or float(le) > 0.1)
    return {
        "probes": int(previous),
        "worst_bucket_le": worst[-1] if worst else None,
        "probes_over_100ms": over_100ms,
    }


class MetadataProbe:
    """Metadata requests in a loop from a client thread: the latency a client sees."""

    def __init__(self, bootstrap: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.monotonic()
            try:
                self.admin.list_topics(topic=KEEP, timeout=60)
            except Exception:
                continue
            self.latencies.append(time.monotonic() - start)
            time.sleep(0.005)

    def __enter__(self) -> MetadataProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(90)

    def summary(self) -> dict[str, Any]:
        values = sorted(self.latencies)
        if not values:
            return {"requests": 0}
        return {
            "requests": len(values),
            "p50_ms": round(values[len(values) // 2] * 1000, 1),
            "p99_ms": round(values[min(len(values) - 1, int(len(values) * 0.99))] * 1000, 1),
            "max_ms": round(values[-1] * 1000, 1),
        }


def wait(condition: Any, deadline_s: float, what: str) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


def main(topics: int = 100, partitions: int = 4) -> dict[str, Any]:
    names = [f"del-{i:04d}" for i in range(topics)]
    with Broker(subprocess=True, config={"log.level": "INFO"}) as broker:
        assert broker.admin_url is not None
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for future in admin.create_topics(
            [NewTopic(KEEP, 1, 1)] + [NewTopic(n, partitions, 1) for n in names],
            operation_timeout=60,
            request_timeout=120,
        ).values():
            future.result(180)
        broker.wait_for_leaders(KEEP, timeout=120)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
        for n in names:
            for p in range(partitions):
                producer.produce(n, b"x" * 100, partition=p)
        producer.flush(120)

        def topic_dirs() -> int:
            return sum(1 for d in broker.log_dir.iterdir() if d.name.startswith("del-"))

        figures: dict[str, Any] = {"topics": topics, "partitions_each": partitions}
        # The gauge covers the last 10-20 s: start each phase after a quiet full window.
        time.sleep(2 * LAG_WINDOW_S)
        # Baseline: the idle broker for as long as the deletion is expected to take at most.
        before, _ = scrape(broker.admin_url)
        with MetadataProbe(broker.bootstrap_servers) as probe:
            time.sleep(5.0)
        after, gauge = scrape(broker.admin_url)
        figures["idle"] = {
            "seconds": 5.0,
            "src": str(Path(sys.modules["kafkalite"].__file__).parent),
            "loop_lag": lag_summary(before, after) | {"max_s_gauge": gauge},
            "metadata": probe.summary(),
        }

        time.sleep(2 * LAG_WINDOW_S)
        before, _ = scrape(broker.admin_url)
        with MetadataProbe(broker.bootstrap_servers) as probe:
            start = time.monotonic()
            for future in admin.delete_topics(
                names, operation_timeout=120, request_timeout=180
            ).values():
                future.result(240)
            answered = time.monotonic() - start
            wait(lambda: topic_dirs() == 0, 240, "log directories removed")
            gone = time.monotonic() - start
        after, gauge = scrape(broker.admin_url)
        figures["delete"] = {
            "answered_s": round(answered, 2),
            "dirs_removed_s": round(gone, 2),
            "loop_lag": lag_summary(before, after) | {"max_s_gauge": gauge},
            "metadata": probe.summary(),
            "target": "loop never held > 100 ms",
        }
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--src", help="run on this tree's kafkalite instead of this one's")
    parser.add_argument("--baseline-src", help="also run the bench on this tree, in a child")
    args = parser.parse_args()
    result: dict[str, Any] = {"this_tree": main(args.topics, args.partitions)}
    if args.baseline_src:
        import subprocess

        child = subprocess.run(
            [sys.executable, __file__, "--src", args.baseline_src]
            + ["--topics", str(args.topics), "--partitions", str(args.partitions)],
            capture_output=True,
            text=True,
            check=True,
        )
        result["baseline_src"] = json.loads(child.stdout)["this_tree"]
    print(json.dumps(result, indent=2))
