"""Coordination-store figures (prints numbers; not a test).

Operations per second, one session, each operation awaited before the next (latency-bound, the
way the controller uses the store), on:

- embedded, in memory (no data dir): the floor, pure Python overhead; and the same store
  behind a coordination thread (``ThreadedStore``): the difference is the cost of the hop to the
  thread and back, printed in microseconds per call;
- embedded, journal fsynced per transaction (the default, durable);
- ZooKeeper 3.8 standalone through aiozk, started here by kafkalite.testing.ZooKeeperServer
  (``forceSync=no``: the server does not fsync, as in the tests), twice: the aiozk client on the
  caller's loop (``AiozkStore``, the same-run baseline) and on its coordination thread
  (``ZooKeeperStore``, what the broker uses: each call crosses to that thread and back).

Measured: create (persistent, 100-byte payload), get_data, CAS set_data (expected version
tracked locally), and multi with 100 operations (creates) per transaction, reported both as
transactions/s and operations/s.

    PYTHONPATH=. .venv/bin/python bench/coord_bench.py [--count 2000] [--multis 50] [--zk-rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkalite.coord import CoordStore, CreateOp, open_store  # noqa: E402
from kafkalite.coord.embedded import EmbeddedStore  # noqa: E402
from kafkalite.coord.threaded import ThreadedStore  # noqa: E402
from kafkalite.coord.zookeeper import AiozkStore  # noqa: E402
from kafkalite.testing import ZooKeeperServer  # noqa: E402

PAYLOAD = b"x" * 100


async def measure(store: CoordStore, count: int, multis: int) -> dict[str, float]:
    session = await store.open_session()
    await session.ensure_path("/bench")
    figures: dict[str, float] = {}

    start = time.perf_counter()
    for i in range(count):
        await session.create(f"/bench/n{i}", PAYLOAD)
    figures["create"] = count / (time.perf_counter() - start)

    start = time.perf_counter()
    for i in range(count):
        await session.get_data(f"/bench/n{i}")
    figures["get"] = count / (time.perf_counter() - start)

    version = 0
    start = time.perf_counter()
    for _ in range(count):
        stat = await session.set_data("/bench/n0", PAYLOAD, version)
        version = stat.version
    figures["cas set"] = count / (time.perf_counter() - start)

    await session.ensure_path("/bench/multi")
    start = time.perf_counter()
    for m in range(multis):
        await session.multi([CreateOp(f"/bench/multi/m{m}-{i}", PAYLOAD) for i in range(100)])
    elapsed = time.perf_counter() - start
    figures["multi(100) txn"] = multis / elapsed
    figures["multi(100) ops"] = multis * 100 / elapsed

    await session.delete_recursive("/bench")
    await session.close()
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--multis", type=int, default=50)
    parser.add_argument("--zk-rounds", type=int, default=2)
    args = parser.parse_args()

    results: dict[str, dict[str, float]] = {}
    results["embedded (memory)"] = await measure(EmbeddedStore(None), args.count, args.multis)
    store = ThreadedStore(thread_name="bench", make_inner=lambda: EmbeddedStore(None))
    results["embedded (memory), thread"] = await measure(store, args.count, args.multis)
    await store.close()
    with tempfile.TemporaryDirectory() as directory:
        store = EmbeddedStore(directory, fsync=True)
        results["embedded (fsync)"] = await measure(store, args.count, args.multis)
        await store.close()
    with ZooKeeperServer() as server:
        # Alternated, best of each: the JVM warms up and the machine's load drifts meanwhile.
        for round_ in range(args.zk_rounds):
            for name, store in (
                (
                    "zookeeper, same loop",
                    AiozkStore(server.servers, chroot=f"/same-{round_}", session_timeout_ms=18000),
                ),
                ("zookeeper, thread", open_store(server.connect_string(f"/thread-{round_}"), None)),
            ):
                figures = await measure(store, args.count, args.multis)
                await store.close()
                best = results.setdefault(name, figures)
                for kind, value in figures.items():
                    best[kind] = max(best[kind], value)

    names = list(next(iter(results.values())))
    print(f"coord bench: {args.count} ops per kind, {args.multis} multis of 100 ops; ops/s")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    print(f"{'':26}" + "".join(f"{name:>16}" for name in names))
    for backend, figures in results.items():
        print(f"{backend:26}" + "".join(f"{figures[name]:>16,.0f}" for name in names))
    direct, threaded = results["embedded (memory)"], results["embedded (memory), thread"]
    hop = {name: 1e6 / threaded[name] - 1e6 / direct[name] for name in ("create", "get", "cas set")}
    print("thread hop, µs per call: " + ", ".join(f"{k} {v:.0f}" for k, v in hop.items()))


if __name__ == "__main__":
    asyncio.run(main())
