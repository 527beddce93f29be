"""What the garbage collector walks per partition (prints figures; not a test).

Two censuses, each counting the objects ``gc.get_objects()`` tracks before and after, by type,
and timing full collections over them with nothing of theirs frozen:

- ``logs``: N empty logs (topics of 1,000 partitions) made with a clean stop, then loaded by
  ``LogManager.startup`` with the collector off: its CPU, the tracked objects per loaded log.
- ``broker``: a ReplicaManager made to host N new partitions by one LeaderAndIsr (RF 3, a third
  led, one record appended to each led one): the tracked objects per hosted partition, and the
  LeaderAndIsr's CPU (user and system) with the collector off.

Run it with PYTHONPATH set to the tree to measure, in turns with the base tree's copy of it:

    PYTHONPATH=. .venv/bin/python bench/gc_census.py logs --partitions 10000 -v
    PYTHONPATH=. .venv/bin/python bench/gc_census.py broker --partitions 10000 -v
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import resource
import shutil
import tempfile
import time

from leader_and_isr_bench import new_partition_states

from kafkalite.broker.clock import SYSTEM_TIME
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.protocol.records import Record, build_batch
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log_manager import LogManager

FULL_PASSES = 3


def _census() -> collections.Counter[str]:
    return collections.Counter(type(o).__qualname__ for o in gc.get_objects())


def _full_passes_ms() -> tuple[float, float]:
    times = []
    for _ in range(FULL_PASSES):
        start = time.process_time()
        gc.collect()
        times.append((time.process_time() - start) * 1000)
    return min(times), max(times)


def _report(what: str, n: int, before: collections.Counter[str], verbose: bool) -> None:
    diff = _census() - before
    low, high = _full_passes_ms()
    print(
        f"{what}: {sum(diff.values()) / n:.2f} tracked objects each; a full collection "
        f"{low:.1f}-{high:.1f} ms of CPU over {len(gc.get_objects())} tracked objects"
    )
    if verbose:
        for name, count in diff.most_common(25):
            print(f"  {count / n:6.2f} {name}")


def census_logs(root: str, n: int, verbose: bool) -> None:
    logs_dir = os.path.join(root, "logs")
    made = LogManager([logs_dir], LogConfig())
    made.startup()
    for p in range(n):
        made.get_or_create_log(f"t{p // 1000}", p % 1000, None, True)
    made.shutdown()
    del made
    gc.collect()
    before = _census()
    gc.disable()
    cpu, wall = time.process_time(), time.perf_counter()
    manager = LogManager([logs_dir], LogConfig())
    manager.startup()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    gc.enable()
    print(f"LogManager.startup of {len(manager.all_logs())} logs: {cpu:.3f} s CPU, {wall:.3f} s")
    _report("a loaded log", n, before, verbose)
    manager.shutdown()


async def census_broker(root: str, n: int, verbose: bool) -> None:
    manager = LogManager([os.path.join(root, "logs")], LogConfig())
    manager.startup()
    replicas = ReplicaManager(1, manager, None, SYSTEM_TIME)
    states = new_partition_states(n)
    gc.collect()
    gc.freeze()  # what was made before: the census counts the partitions' objects only
    before = _census()
    gc.disable()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    await replicas.become_leader_or_follower_async(0, 1, states)
    after = resource.getrusage(resource.RUSAGE_SELF)
    gc.enable()
    print(
        f"LeaderAndIsr of {n} new partitions: user {after.ru_utime - usage.ru_utime:.3f} s, "
        f"system {after.ru_stime - usage.ru_stime:.3f} s"
    )
    record = Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v" * 100)
    batch = bytearray(build_batch([record], base_timestamp=1_000))
    for state in states:
        if state.leader == 1:
            tp = TopicPartition(state.topic, state.partition)
            await replicas.append_records(0, 1, {tp: batch})
    del states
    gc.collect()
    _report("a hosted partition", n, before, verbose)
    gc.unfreeze()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("logs", "broker"))
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("-v", "--verbose", action="store_true", help="the 25 commonest types")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="gc-census-")
    try:
        if args.what == "logs":
            census_logs(root, args.partitions, args.verbose)
        else:
            asyncio.run(census_broker(root, args.partitions, args.verbose))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
