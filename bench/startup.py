"""How fast kafkalite is ready for a test: cold starts, fixture set-up, a 3-broker cluster.

    PYTHONPATH=. .venv/bin/python bench/startup.py [--runs 10] [--baseline-src DIR] [--json OUT]

Figures (median of ``--runs``, min-max beside it):

- subprocess: ``python -m kafkalite serve`` spawned on a free port; the time from the spawn to
  the port accepting a connection, and to the first acknowledged produce (acks=1, a new topic
  auto-created) by a client already running in this process (kafkalite's own, retrying every
  5 ms);
- in-process: a fresh interpreter runs ``Broker().start()`` then ``produce``; the time from the
  spawn to the produce acknowledged (interpreter start included), and inside the child from
  its first ``import kafkalite.testing``;
- the pytest fixtures' set-up plus teardown per test, function scope (``kafkalite_broker``: a
  broker per test) and session scope (``kafkalite_broker_session``: a namespace per test),
  from ``--durations`` of a generated project of 10 tests each;
- ``Cluster(brokers=3)`` in-process: start to every broker registered and known to all, in a
  warm interpreter; and cold (a fresh interpreter, imports included) to the first produce.

Each cold start also reports the CPU seconds the process used until its first produce: on a
machine that other work loads, wall-clock figures measure the load as much as kafkalite, CPU
seconds much less so.

``--baseline-src DIR`` measures the subprocess start of another checkout too (its ``kafkalite``
package in DIR), in the same run, as the baseline. testcontainers is quoted, not run (it needs
Docker): see the README's performance section.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(values), 3),
        "min_s": round(min(values), 3),
        "max_s": round(max(values), 3),
    }


def env_with(src: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)
    return env


def subprocess_start(src: Path) -> tuple[float, float, float]:
    """Seconds from spawning `python -m kafkalite serve` to its port open, and to a produce;
    and the CPU seconds the process used until it was stopped right after (less sensitive to
    what else the machine runs than the wall-clock figures)."""
    from kafkalite.testing import _ops

    _ops.RETRY_BACKOFF_S = 0.005
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="kafkalite-startup-") as data:
        began = time.perf_counter()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kafkalite",
                "serve",
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--override",
                f"log.dirs={data}/logs",
                "--override",
                "admin.listener=",
            ],
            cwd=data,
            env=env_with(src),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if process.poll() is not None:
                        raise RuntimeError("the broker exited") from None
                    time.sleep(0.005)
            port_open = time.perf_counter() - began
            asyncio.run(_ops.produce(f"127.0.0.1:{port}", "startup", [b"x"], acks=1, timeout=30))
            produced = time.perf_counter() - began
        finally:
            process.kill()
            _, _, usage = os.wait4(process.pid, 0)
            process.returncode = -9
    return port_open, produced, usage.ru_utime + usage.ru_stime


IN_PROCESS_CHILD = textwrap.dedent(
    """
    import json, time
    began = time.perf_counter()
    from kafkalite.testing import Broker
    broker = Broker(admin=False).start()
    ready = time.perf_counter() - began
    broker.produce("startup", [b"x"], acks=1)
    produced = time.perf_counter() - began
    cpu = time.process_time()  # every thread of the process, interpreter start included
    print(json.dumps({"ready": ready, "produced": produced, "cpu": cpu}), flush=True)
    broker.close()
    """
)


CLUSTER_CHILD = textwrap.dedent(
    """
    import json, time
    began = time.perf_counter()
    from kafkalite.testing import Cluster
    cluster = Cluster(brokers=3, admin=False).start()
    ready = time.perf_counter() - began
    cluster.produce("startup", [b"x"], acks=1)
    produced = time.perf_counter() - began
    cpu = time.process_time()
    print(json.dumps({"ready": ready, "produced": produced, "cpu": cpu}), flush=True)
    cluster.close()
    """
)


def in_process_start(child: str = IN_PROCESS_CHILD) -> tuple[float, float, float, float]:
    """Spawn to produce acknowledged; inside the child: import to ready, import to produce;
    the child's CPU seconds until then."""
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", child],
        env=env_with(REPO),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = process.stdout.readline()
    wall = time.perf_counter() - began
    process.wait(60)
    inside = json.loads(line)
    return wall, inside["ready"], inside["produced"], inside["cpu"]


FIXTURE_PROJECT = textwrap.dedent(
    """
    import pytest

    @pytest.mark.parametrize("i", range({runs}))
    def test_function_scope(kafkalite_broker, i):
        kafkalite_broker.produce("t", [b"x"], acks=1)

    @pytest.mark.parametrize("i", range({runs}))
    def test_session_scope(kafkalite_broker_session, i):
        kafkalite_broker_session.produce("t", [b"x"], acks=1)
    """
)


def fixture_setup(runs: int) -> dict[str, list[float]]:
    """Set-up + teardown of each test, from pytest's --durations."""
    with tempfile.TemporaryDirectory(prefix="kafkalite-fixtures-") as project:
        Path(project, "test_fixtures.py").write_text(FIXTURE_PROJECT.format(runs=runs))
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:kafkalite",
                "-p",
                "kafkalite.testing.pytest_plugin",
                "-p",
                "no:randomly",
                "-p",
                "no:cacheprovider",
                "--durations=0",
                "-vv",
                "-q",
                "test_fixtures.py",
            ],
            cwd=project,
            env=env_with(REPO),
            capture_output=True,
            text=True,
            timeout=600,
        )
    if result.returncode != 0:
        raise RuntimeError(result.stdout[-3000:])
    per_test: dict[str, float] = {}
    for seconds, phase, test in re.findall(r"([\d.]+)s (setup|teardown) +(\S+)", result.stdout):
        if phase in ("setup", "teardown"):
            per_test[test] = per_test.get(test, 0.0) + float(seconds)
    found: dict[str, list[float]] = {"function": [], "session": []}
    for test, seconds in per_test.items():
        found["function" if "function_scope" in test else "session"].append(seconds)
    # pytest hides durations under 5 ms: those tests count as 0.005
    for scope in found:
        found[scope] += [0.005] * (runs - len(found[scope]))
    return found


def cluster_start(runs: int) -> list[float]:
    from kafkalite.testing import Cluster

    with Cluster(brokers=3, admin=False):  # warm-up: imports, first loop
        pass
    found = []
    for _ in range(runs):
        began = time.perf_counter()
        cluster = Cluster(brokers=3, admin=False).start()
        found.append(time.perf_counter() - began)
        cluster.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--baseline-src", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results: dict[str, object] = {"runs": args.runs}

    def report(name: str, values: list[float]) -> None:
        results[name] = summary(values)
        s = results[name]
        print(
            f"{name:45s} median {s['median_s']:.3f} s  (min {s['min_s']:.3f}, max {s['max_s']:.3f})"
        )

    starts, base = [], []
    for _ in range(args.runs):  # interleaved with the baseline: both see the same machine
        starts.append(subprocess_start(REPO))
        if args.baseline_src is not None:
            base.append(subprocess_start(args.baseline_src))
    report("subprocess: spawn to port open", [s[0] for s in starts])
    report("subprocess: spawn to first produce", [s[1] for s in starts])
    report("subprocess: CPU seconds to first produce", [s[2] for s in starts])
    if base:
        report("baseline subprocess: spawn to port open", [s[0] for s in base])
        report("baseline subprocess: spawn to first produce", [s[1] for s in base])
        report("baseline subprocess: CPU seconds to first produce", [s[2] for s in base])
    cold = [in_process_start() for _ in range(args.runs)]
    report("in-process: spawn to first produce", [c[0] for c in cold])
    report("in-process: import to broker ready", [c[1] for c in cold])
    report("in-process: import to first produce", [c[2] for c in cold])
    report("in-process: CPU seconds to first produce", [c[3] for c in cold])
    fixtures = fixture_setup(args.runs)
    report("fixture kafkalite_broker: setup+teardown", fixtures["function"])
    report("fixture kafkalite_broker_session: setup+teardown", fixtures["session"])
    report("Cluster(brokers=3) in-process start (warm)", cluster_start(args.runs))
    cold_cluster = [in_process_start(CLUSTER_CHILD) for _ in range(args.runs)]
    report("Cluster(brokers=3) cold: spawn to first produce", [c[0] for c in cold_cluster])
    report("Cluster(brokers=3) cold: import to all registered", [c[1] for c in cold_cluster])
    report("Cluster(brokers=3) cold: CPU seconds to produce", [c[3] for c in cold_cluster])
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
