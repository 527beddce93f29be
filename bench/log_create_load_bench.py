"""Creating and loading many logs in-process (prints one line per run; not a test): the
LogManager creates ``--partitions`` logs (``create_logs``, in its worker thread, as a
LeaderAndIsr does), a record is written to every third, the manager shuts down cleanly, and a
new manager's loaders run in the main thread (a restart's log loading, without the thread
pool, so its CPU is the process's). Printed: creation wall and CPU seconds, the files in the
partition directories, ``LogManager.startup``'s wall and CPU seconds (its loading threads, as a
broker starts), the main-thread load's wall and CPU seconds and CPU per log, the load average.
``--baseline-src DIR`` alternates the runs with another tree's kafkalite (a ``git archive``
of the base commit) in children, ``--repeats`` pairs.

    PYTHONPATH=. .venv/bin/python bench/log_create_load_bench.py --partitions 10000 \\
        --baseline-src /tmp/base --repeats 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_once(partitions: int) -> str:
    from kafkalite.protocol.records import Record, build_batch
    from kafkalite.storage.config import LogConfig
    from kafkalite.storage.log_manager import LogManager

    root = tempfile.mkdtemp(prefix="log-create-load-")
    try:
        logs_dir = os.path.join(root, "logs")
        manager = LogManager([logs_dir], LogConfig())
        manager.startup()
        record = Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v" * 100)
        batch = bytearray(build_batch([record], base_timestamp=1000))
        wall, cpu = time.perf_counter(), time.process_time()
        asyncio.run(manager.create_logs([("t", p, None, True) for p in range(partitions)]))
        create = (time.perf_counter() - wall, time.process_time() - cpu)
        for p in range(0, partitions, 3):
            manager.get_log("t", p).append_as_leader(bytearray(batch), 0)
        manager.shutdown()
        files = sum(
            len(os.listdir(os.path.join(logs_dir, name)))
            for name in os.listdir(logs_dir)
            if name.startswith("t-")
        )
        # The broker's start-up: LogManager.startup with its loading threads (wall and the
        # process's CPU, every thread's), then a clean stop again.
        starter = LogManager([logs_dir], LogConfig())
        wall, cpu = time.perf_counter(), time.process_time()
        starter.startup()
        startup = (time.perf_counter() - wall, time.process_time() - cpu)
        starter.shutdown()
        loader = LogManager([logs_dir], LogConfig())
        plan = loader._plan_dir(logs_dir)
        wall, cpu = time.perf_counter(), time.process_time()
        for _, load in plan:
            load()
        load_wall, load_cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return (
        f"create wall {create[0]:.2f} s, cpu {create[1]:.2f} s; {files} files in the "
        f"partition directories; startup (threads) wall {startup[0]:.2f} s, cpu "
        f"{startup[1]:.2f} s; load wall {load_wall:.2f} s, cpu {load_cpu:.2f} s "
        f"({1e3 * load_cpu / partitions:.3f} ms a log); load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10000)
    parser.add_argument("--baseline-src", help="alternate with this tree's kafkalite")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(run_once(args.partitions))
        return
    trees = [("this tree", str(Path(__file__).resolve().parent.parent))]
    if args.baseline_src:
        trees.append(("baseline", args.baseline_src))
    for _ in range(args.repeats):
        for name, src in trees:
            out = subprocess.run(
                [sys.executable, __file__, "--partitions", str(args.partitions), "--one"],
                env=dict(os.environ, PYTHONPATH=src),
                cwd=src,
                capture_output=True,
                text=True,
                check=True,
            )
            print(f"{name}: {out.stdout.strip()}", flush=True)


if __name__ == "__main__":
    main()
