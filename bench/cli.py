"""How fast the `kafkalite` command answers: the wall time of each command against a local broker,
beside baselines measured in the same run.

    PYTHONPATH=. .venv/bin/python bench/cli.py [--runs 10] [--json OUT]

A broker is started (``python -m kafkalite serve`` on free ports, with its admin API), a topic
``bench-cli`` of 3 partitions gets 100 records, then every command below runs ``--runs`` times,
interleaved (one round runs each command once, so a burst of load hits all of them alike), each
as a user types it: a new ``python -m kafkalite ...`` process. Baselines of the same rounds:
``python -c pass`` (the interpreter's start, which no command can beat) and ``kcat -L`` (a C
client's metadata request). A warm-up round first writes the ``.pyc`` files, as a user's second
call finds them (byte-code writing is enabled for the children even when the environment
disables it).

Figures: median wall seconds with min and max, the median CPU seconds (user + system of the child),
and the median less the median of ``python -c pass``. The targets: ``--help`` and ``--version``
0.15 s, a command 0.3 s (wall, on the 2-core machine the project is developed on); the verdict is
printed for the median and for the min (the min is what the command costs when other work does
not load the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOPIC = "bench-cli"
HELP_TARGET_S = 0.15
COMMAND_TARGET_S = 0.3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def start_broker(data: Path) -> tuple[subprocess.Popen, str, str]:
    port, admin = free_port(), free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafkalite",
            "serve",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"admin.listener=http://127.0.0.1:{admin}",
            "--override",
            f"log.dirs={data}",
        ],  # fmt: skip
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise SystemExit(f"the broker exited: {process.wait()}")
        if '"started"' in line:
            break
    # the broker logs on; nobody reads it from here on
    subprocess.Popen(["cat"], stdin=process.stdout, stdout=subprocess.DEVNULL)
    return process, f"127.0.0.1:{port}", f"http://127.0.0.1:{admin}"


def commands(bootstrap: str, admin_url: str, data: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (argv, stdin); the baselines first."""
    k = [sys.executable, "-m", "kafkalite"]
    b = ["-b", bootstrap]
    a = ["--admin-url", admin_url]
    return {
        "python -c pass (baseline)": ([sys.executable, "-c", "pass"], ""),
        "kcat -L (baseline)": (["kcat", "-L", "-b", bootstrap], ""),
        "kafkalite --help": ([*k, "--help"], ""),
        "kafkalite --version": ([*k, "--version"], ""),
        "kafkalite topics --help": ([*k, "topics", "--help"], ""),
        "topics list": ([*k, "topics", "list", *b], ""),
        "topics describe": ([*k, "topics", "describe", *b], ""),
        f"topics describe {TOPIC}": ([*k, "topics", "describe", TOPIC, *b], ""),
        "produce (1 record)": ([*k, "produce", TOPIC, *b], "one line\n"),
        "consume -n 10 --from-beginning": (
            [*k, "consume", TOPIC, "-n", "10", "--from-beginning", "-p", "0", *b],
            "",
        ),
        "cluster": ([*k, "cluster", *a], ""),
        f"cluster topics {TOPIC}": ([*k, "cluster", "topics", TOPIC, *a], ""),
        "groups list": ([*k, "groups", "list", *a], ""),
        "transactions list": ([*k, "transactions", "list", *a], ""),
        f"cluster elect-leaders {TOPIC}:0": (
            [*k, "cluster", "elect-leaders", f"{TOPIC}:0", *b],
            "",
        ),
        "users list": ([*k, "users", "list", *b], ""),
        f"storage verify {TOPIC}-0": (
            [*k, "storage", "verify", str(data / f"{TOPIC}-0")],
            "",
        ),
    }


def timed(argv: list[str], stdin: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run; a failed command is an error of the bench."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=child_env())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="kafkalite-bench-cli-") as tmp:
        data = Path(tmp) / "data"
        broker, bootstrap, admin_url = start_broker(data)
        try:
            k = [sys.executable, "-m", "kafkalite"]
            subprocess.run(
                [*k, "topics", "create", TOPIC, "-p", "3", "-b", bootstrap],
                check=True,
                env=child_env(),
                capture_output=True,
            )
            lines = "".join(f"k{i}:v{i}\n" for i in range(100))
            subprocess.run(
                [*k, "produce", TOPIC, "-K", ":", "-b", bootstrap],
                input=lines,
                text=True,
                check=True,
                env=child_env(),
                capture_output=True,
            )
            todo = commands(bootstrap, admin_url, data)
            for argv, stdin in todo.values():  # warm-up: .pyc files, the broker's first answers
                timed(argv, stdin)
            walls: dict[str, list[float]] = {name: [] for name in todo}
            cpus: dict[str, list[float]] = {name: [] for name in todo}
            for _ in range(args.runs):
                for name, (argv, stdin) in todo.items():
                    wall, cpu = timed(argv, stdin)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
        finally:
            broker.terminate()
            broker.wait(timeout=60)

    python = statistics.median(walls["python -c pass (baseline)"])
    rows = []
    for name in todo:
        target = HELP_TARGET_S if name in ("kafkalite --help", "kafkalite --version") else None
        if name.startswith(("topics", "produce", "consume", "cluster", "groups", "transactions")):
            target = COMMAND_TARGET_S
        if name.startswith(("users", "storage", "kafkalite topics --help")):
            target = COMMAND_TARGET_S
        median = statistics.median(walls[name])
        rows.append(
            {
                "command": name,
                "median_s": round(median, 3),
                "min_s": round(min(walls[name]), 3),
                "max_s": round(max(walls[name]), 3),
                "cpu_s": round(statistics.median(cpus[name]), 3),
                "over_python_s": round(median - python, 3),
                "target_s": target,
                "median_met": None if target is None else median <= target,
                "min_met": None if target is None else min(walls[name]) <= target,
            }
        )
    load = os.getloadavg()
    print(f"kafkalite command line, {args.runs} rounds, load average {load[0]:.1f} {load[1]:.1f}")
    print(f"{'command':40} {'median':>7} {'min':>6} {'max':>6} {'cpu':>6} {'-python':>8}  target")
    for r in rows:
        verdict = ""
        if r["target_s"] is not None:
            verdict = f"{r['target_s']:.2f} median {'met' if r['median_met'] else 'MISSED'}"
            verdict += f", min {'met' if r['min_met'] else 'MISSED'}"
        print(
            f"{r['command']:40} {r['median_s']:7.3f} {r['min_s']:6.3f} {r['max_s']:6.3f}"
            f" {r['cpu_s']:6.3f} {r['over_python_s']:8.3f}  {verdict}"
        )
    if args.json:
        args.json.write_text(json.dumps({"load_average": load, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
