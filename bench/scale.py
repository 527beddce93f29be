"""Scale benchmark: every row of the scale issue's table in one command, JSON out.

    PYTHONPATH=. .venv/bin/python bench/scale.py                       # everything (~15-25 min)
    PYTHONPATH=. .venv/bin/python bench/scale.py --only single --topics 2000
    PYTHONPATH=. .venv/bin/python bench/scale.py --out bench/results/scale.json

Three parts, each its own script that also runs alone, each row printed next to its target:

- ``single`` (bench/scale_single.py): one broker, N topics x 1 partition created through
  CreateTopics in batches; the idle broker's RSS and open descriptors; clean stop and start.
- ``cluster`` (bench/scale_cluster.py): ZooKeeper and 3 brokers, one topic of N partitions at
  RF 3; kill -9 of a broker and its restart; preferred election; SIGTERM of the broker leading
  the most; kill -9 of the controller; CreateTopics of 100 topics x 4 partitions; the
  event-loop lag every broker reports in /metrics through all of it, and a producer (acks=all)
  and a consumer running through every phase (per-phase latency, acknowledged records lost).
- ``connections`` (bench/scale_connections.py): 10,000 idle connections to one broker, memory
  per connection and returned after they close, a real client served meanwhile.

Figures, never assertions: a missed target is printed as such and the exit status is 0 unless a
part failed to run (1).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))
if str(BENCH_DIR.parent) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR.parent))

PARTS = ("single", "cluster", "connections")


def run_part(name: str, args: argparse.Namespace) -> dict[str, Any]:
    if name == "single":
        import scale_single

        return scale_single.main(topics=args.topics, batch=args.batch)
    if name == "cluster":
        import scale_cluster

        return scale_cluster.main(
            partitions=args.partitions,
            session_timeout_ms=args.session_timeout_ms,
            load_rate=args.load_rate,
        )
    import scale_connections

    return scale_connections.run(connections=args.connections, report=lambda line: print(line))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=PARTS, action="append", help="run only this part")
    parser.add_argument("--topics", type=int, default=10_000, help="single: topics to create")
    parser.add_argument("--batch", type=int, default=1_000, help="single: topics per request")
    parser.add_argument("--partitions", type=int, default=3_000, help="cluster: partitions")
    parser.add_argument("--session-timeout-ms", type=int, default=6_000)
    parser.add_argument(
        "--load-rate", type=float, default=200.0, help="cluster: producer records/s through it"
    )
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--out", help="also write the JSON there")
    args = parser.parse_args(argv)

    results: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    failed = False
    for name in args.only or PARTS:
        print(f"== {name}", file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            results[name] = run_part(name, args)
        except Exception as e:  # one part failing still reports the others
            failed = True
            traceback.print_exc()
            results[name] = {"error": f"{type(e).__name__}: {e}"}
        results[name]["seconds"] = round(time.monotonic() - started, 1)
    text = json.dumps(results, indent=2, default=str)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
