"""Coordination-store figures (prints numbers; not a test).

Operations per second, one session, each operation awaited before the next (latency-bound, the
way the controller uses the store), on:

- embedded, in memory (no data dir): the floor, pure Python overhead;
- embedded, journal fsynced per transaction (the default, durable);
- ZooKeeper 3.8 standalone through aiozk, started here by tests/harness/zookeeper.py
  (``forceSync=no``: the server does not fsync, as in the tests).

Measured: create (persistent, 100-byte payload), get_data, CAS set_data (expected version
tracked locally), and multi with 100 operations (creates) per transaction, reported both as
transactions/s and operations/s.

    PYTHONPATH=. .venv/bin/python bench/coord_bench.py [--count 2000] [--multis 50]
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
from tests.harness.zookeeper import ZooKeeperServer  # noqa: E402

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
    args = parser.parse_args()

    results: dict[str, dict[str, float]] = {}
    results["embedded (memory)"] = await measure(EmbeddedStore(None), args.count, args.multis)
    with tempfile.TemporaryDirectory() as directory:
        store = EmbeddedStore(directory, fsync=True)
        results["embedded (fsync)"] = await measure(store, args.count, args.multis)
        await store.close()
    with ZooKeeperServer() as server:
        store = open_store(server.connect_string("/bench"), None, 18000)
        results["zookeeper (aiozk)"] = await measure(store, args.count, args.multis)
        await store.close()

    names = list(next(iter(results.values())))
    print(f"coord bench: {args.count} ops per kind, {args.multis} multis of 100 ops; ops/s")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    print(f"{'':20}" + "".join(f"{name:>16}" for name in names))
    for backend, figures in results.items():
        print(f"{backend:20}" + "".join(f"{figures[name]:>16,.0f}" for name in names))


if __name__ == "__main__":
    asyncio.run(main())
