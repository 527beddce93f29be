"""One broker process (``kafkalite serve``) creating many partitions, per
``gc.freeze.min.objects``: its loop stalls and its garbage collector (prints JSON; not a test).

For each value given, a fresh broker process (``kafkalite.testing.Broker(subprocess=True)``)
creates ``--partitions`` partitions as topics of 1,000 (CreateTopics from confluent-kafka's
admin client) and waits until all are led. Printed: the creation's wall time; from the
``/metrics`` loop-lag histogram (a probe every 10 ms), how many probes ran meanwhile and how
many were more than 50, 100, 250 and 500 ms late; the worst stall gauge; from the broker's
log, its freezes (``gc_freeze``) and its full collections of 50 ms or more, each the longest
so far (``gc_full_pass``, ms). Values run in the order given: give both orders on a loaded
machine.

    PYTHONPATH=. .venv/bin/python bench/gc_serve_bench.py --partitions 10000 0 50000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
import urllib.request

from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import Broker

LATE = ("0.05", "0.1", "0.25", "0.5")


def _scrape(url: str) -> tuple[dict[str, float], float]:
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    buckets = {
        m.group(1): float(m.group(2))
        for m in re.finditer(
            r'^kafkalite_event_loop_lag_seconds_bucket\{le="([^"]+)"\} (\S+)$', text, re.M
        )
    }
    worst = re.search(r"^kafkalite_event_loop_lag_max_seconds (\S+)$", text, re.M)
    return buckets, float(worst.group(1)) if worst else 0.0


def _log_events(broker: Broker, event: str) -> list[dict]:
    found = []
    for line in broker.log_path.read_text().splitlines():
        if f'"{event}"' in line:
            try:
                found.append(json.loads(line))
            except ValueError:
                pass
    return found


def run(partitions: int, min_objects: str) -> dict:
    config = {"gc.freeze.min.objects": min_objects, "max.partitions": 2 * partitions + 1000}
    with Broker(config, subprocess=True) as broker:
        url = broker.admin_url
        assert url is not None
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        before, _ = _scrape(url)
        start = time.time()
        worst = 0.0
        for i in range(partitions // 1000):
            for future in admin.create_topics(
                [NewTopic(f"t{i}", 1000, 1)], request_timeout=120
            ).values():
                future.result(timeout=180)
            worst = max(worst, _scrape(url)[1])
        deadline = time.time() + 120
        while time.time() < deadline:
            topics = admin.list_topics(timeout=30).topics.values()
            led = sum(1 for t in topics for p in t.partitions.values() if p.leader >= 0)
            if led >= partitions:
                break
            time.sleep(0.5)
        created = time.time() - start
        for _ in range(3):  # the gauge keeps the worst of the last 10-20 s
            time.sleep(1)
            worst = max(worst, _scrape(url)[1])
        after, _ = _scrape(url)
        probes = after["+Inf"] - before["+Inf"]
        return {
            "gc.freeze.min.objects": min_objects,
            "partitions": partitions,
            "created_s": round(created, 1),
            "probes": round(probes),
            "probes_later_than_s": {le: round(probes - (after[le] - before[le])) for le in LATE},
            "worst_stall_s": round(worst, 3),
            "freezes": len(_log_events(broker, "gc_freeze")),
            "longest_full_passes_ms": [e["ms"] for e in _log_events(broker, "gc_full_pass")],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10000)
    parser.add_argument("values", nargs="+", help="gc.freeze.min.objects values, in order")
    args = parser.parse_args()
    runs = [run(args.partitions, value) for value in args.values]
    print(json.dumps({"load_average": os.getloadavg(), "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
