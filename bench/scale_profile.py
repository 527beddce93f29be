"""Where each phase of ``bench/scale_cluster.py`` spends its brokers' loops (prints JSON; not a
test): the cluster bench run once, every live broker process sampled by ``py-spy`` per phase.

The bench runs in a child of this script, unchanged: the child imports
``bench/scale_cluster.py`` as a module and wraps the setter of ``LagSampler.phase`` (the one
place where the bench names a phase) so that each new phase is announced on the child's stderr;
the child then waits until this script has stopped the previous phase's recorders and attached
new ones before the phase's work (and its timing) begins. Its own arguments are passed through
(``--partitions``, ``--topics``, ``--topic-partitions``, ``--session-timeout-ms``,
``--keep-dir``, ``--src``); ``--baseline-src`` is not supported here (one tree per run). Phases:
``start`` (ZooKeeper and the three brokers starting, announced by this script), then the bench's
``create``, ``kill``, ``restart``, ``preferred_election``, ``sigterm``, ``controller_kill``,
``create_topics``. A phase lasts until the next one is announced, so ``sigterm`` includes the
stopped broker's restart and rebalance and ``controller_kill`` the old controller's restart, as
the bench's own lag figures do.

Each broker process (``python -m kafkalite serve``, a descendant of the child; a restarted
broker is a new process and is attached when it appears) is recorded with
``py-spy record --format speedscope --threads --idle --nonblocking`` at ``--rate`` samples a
second: ``--nonblocking`` does not stop the broker to read its stack (a stack can then be torn,
rarely), ``--idle`` keeps the samples of a waiting thread so that a thread's busy share is its
non-idle samples over all its samples. A sample counts as idle when its innermost frame is a
wait: a selector's ``select`` (an asyncio loop with nothing to do), a lock's or queue's wait, a
pool worker waiting for work. A sample that waits for the GIL after a blocking call shows the
frame of that call, so "busy" means "not back in its selector", which is what a loop's lag
measures.

Per phase and broker the script writes the collapsed stacks (``<phase>/broker-<id>-<pid>.txt``,
one ``thread;frame;...;frame count`` line per distinct stack) next to the speedscope file, and
reports for the main thread (the asyncio loop) and for the controller's and coordination
threads: the busy share of the phase, the longest run of consecutive busy samples (the longest
the loop was held, at the phase's mean sampling interval, which is what ``py-spy`` managed on a
loaded machine; callbacks of one kind that follow each other at once, such as Metadata
requests polled back to back, make one run, so it bounds a single stall from above), the top frames by own time and by cumulative time, and the callbacks the loop
ran (the frame under ``Handle._run``: which task or callback held it), overall and within that
longest run. Beside them, the phase's figures and loop-lag figures from the bench's own JSON.

    PYTHONPATH=. .venv/bin/python bench/scale_profile.py --partitions 10000 [--rate 25]
        [--out bench/results/scale_profile-10000]
    PYTHONPATH=. .venv/bin/python bench/scale_profile.py --reanalyse DIR [--top 8]
        # summarise a finished run's profiles again (e.g. with more or fewer frames)

Output (``--out``, default ``bench/results/scale_profile-<partitions>-<time>``, which is
ignored by git): ``figures.json`` (the bench's own output), ``summary.json`` (what is printed),
``bench.log`` (the child's stderr), one directory per phase with the profiles.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
PY_SPY = str(Path(sys.executable).with_name("py-spy"))
MARK = "SCALE_PROFILE_PHASE "
GO = "go\n"
# innermost frames that mean the thread waits (function name, the part after the last dot) ...
IDLE_LEAVES = {"select", "poll", "epoll", "wait", "_worker", "get", "acquire", "sleep", "join"}
# ... or a loop's own frame with nothing of Python's under it: uvloop waits and dispatches in C,
# so an idle loop shows its runner as the innermost frame and a callback appears right under it
LOOP_RUNNERS = (
    "Runner.run",
    "CoordinationThread._run",
    "BaseEventLoop.run_forever",
    "BaseEventLoop.run_until_complete",
    "BaseEventLoop._run_once",
    "Handle._run",
)
# the bench's phase -> its row in the bench's figures
FIGURE_OF_PHASE = {
    "create": "create_topic",
    "kill": "kill9_releader",
    "restart": "restart",
    "preferred_election": "preferred_election",
    "sigterm": "sigterm",
    "controller_kill": "controller_kill9",
    "create_topics": "create_topics_batch",
}
PASSED_THROUGH = (
    ("--partitions", int, 3000),
    ("--topics", int, 100),
    ("--topic-partitions", int, 4),
    ("--session-timeout-ms", int, 6000),
    ("--keep-dir", str, None),
    ("--src", str, None),
)


# -- the child: the bench itself, announcing its phases ------------------------------------------


def _child(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    for flag, kind, default in PASSED_THROUGH:
        parser.add_argument(flag, type=kind, default=default)
    args = parser.parse_args(argv)
    script = BENCH_DIR / "scale_cluster.py"
    sys.argv = [str(script), *argv]  # the bench reads ``--src`` from its argv at import
    spec = importlib.util.spec_from_file_location("scale_cluster", script)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["scale_cluster"] = bench
    spec.loader.exec_module(bench)

    def announce(name: str) -> None:
        sys.stderr.write(f"{MARK}{name}\n")
        sys.stderr.flush()
        sys.stdin.readline()  # the parent's recorders are attached to this phase

    phase = bench.LagSampler.phase

    def set_phase(self: Any, name: str) -> None:
        phase.fset(self, name)  # scrapes: the lag of the phase that ends stays with it
        announce(name)

    bench.LagSampler.phase = property(phase.fget, set_phase)
    announce("start")
    figures = bench.main(
        args.partitions, args.topics, args.topic_partitions, args.session_timeout_ms, args.keep_dir
    )
    announce("end")
    figures["src"] = bench.SRC
    figures["load_average"] = os.getloadavg()
    print(json.dumps(figures, indent=2))


# -- the parent: recorders per phase and broker ---------------------------------------------------


def _children_of(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def _brokers(root: int) -> dict[int, int]:
    """pid -> broker id of every ``kafkalite serve`` process under ``root``."""
    out = {}
    for pid in _children_of(root):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            if "kafkalite" in argv and "serve" in argv:
                ids = [a.split("=", 1)[1] for a in argv if a.startswith("broker.id=")]
                out[pid] = int(ids[0]) if ids else -1
    return out


class Recorder:
    """One ``py-spy record`` of one broker process for one phase."""

    def __init__(self, phase_dir: Path, pid: int, broker_id: int, rate: int) -> None:
        self.pid, self.broker_id, self.rate = pid, broker_id, rate
        self.path = phase_dir / f"broker-{broker_id}-{pid}.speedscope.json"
        self.started = time.monotonic()
        self.stopped: float | None = None
        self.ended: float | None = None  # when py-spy was seen gone with its broker (killed)
        self.attempts = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._launch()

    def _launch(self) -> None:
        self.attempts += 1
        self.proc = subprocess.Popen(
            [PY_SPY, "record", "--pid", str(self.pid), "--rate", str(self.rate)]
            + ["--format", "speedscope", "--threads", "--idle", "--nonblocking"]
            + ["--output", str(self.path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def attached(self, timeout: float) -> bool:
        """Wait for py-spy's "Sampling process" line (it has found the interpreter)."""
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                return False
            if b"Sampling process" in line:
                self.started = time.monotonic()
                return True
        return False

    def retry_if_failed(self) -> None:
        """A broker that has just been spawned may not have an interpreter py-spy can read
        yet: py-spy then exits at once; try again while the broker lives."""
        if self.proc is not None and self.proc.poll() not in (None, 0) and self.attempts < 20:
            if Path(f"/proc/{self.pid}").exists() and not self.path.exists():
                time.sleep(0.2)
                self.started = time.monotonic()
                self._launch()

    def note_end(self) -> None:
        """A broker killed in the phase ends its recording then, not at the phase's end."""
        if self.ended is None and self.proc is not None and self.proc.poll() is not None:
            if not Path(f"/proc/{self.pid}").exists():
                self.ended = time.monotonic()

    def stop(self) -> None:
        assert self.proc is not None
        self.note_end()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
        self.stopped = self.ended or time.monotonic()


def _run_profiled(args: argparse.Namespace, passthrough: list[str], out: Path) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", *passthrough],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdin and child.stdout and child.stderr
    recorders: dict[str, list[Recorder]] = {}
    current: list[str] = []  # the phase being recorded, if any
    lock = threading.Lock()
    done = threading.Event()
    phases_seen: list[tuple[str, float]] = []
    bench_log = (out / "bench.log").open("w")

    def attach_new() -> None:
        """Record every broker process of the current phase not recorded yet."""
        with lock:
            if not current:
                return
            phase = current[0]
            have = {r.pid for r in recorders[phase]}
            for r in recorders[phase]:
                r.retry_if_failed()
                r.note_end()
            for pid, broker_id in _brokers(child.pid).items():
                if pid not in have:
                    recorders[phase].append(Recorder(out / phase, pid, broker_id, args.rate))

    def poll_brokers() -> None:
        while not done.wait(0.3):
            attach_new()

    poller = threading.Thread(target=poll_brokers, daemon=True)
    poller.start()
    stdout_chunks: list[str] = []
    reader = threading.Thread(target=lambda: stdout_chunks.append(child.stdout.read()))
    reader.start()
    for line in child.stderr:
        if not line.startswith(MARK):
            bench_log.write(line)
            continue
        name = line[len(MARK) :].strip()
        phases_seen.append((name, time.time()))
        print(f"[scale_profile] phase {name}", file=sys.stderr, flush=True)
        with lock:
            for recorder in recorders.get(current[0], []) if current else []:
                recorder.stop()
            current[:] = [] if name == "end" else [name]
            if current:
                (out / name).mkdir(parents=True, exist_ok=True)
                recorders[name] = []
        attach_new()
        with lock:
            for recorder in recorders.get(name, []):
                recorder.attached(10)
        child.stdin.write(GO)
        child.stdin.flush()
    done.set()
    poller.join(5)
    with lock:
        for recorder in recorders.get(current[0], []) if current else []:
            recorder.stop()
    child.wait()
    reader.join()
    bench_log.close()
    text = "".join(stdout_chunks)
    (out / "figures.json").write_text(text)
    try:
        figures = json.loads(text)
    except ValueError:
        figures = {"error": f"the bench printed no JSON (exit {child.returncode}); see bench.log"}
    return {
        "figures": figures,
        "phases": [[name, time.strftime("%H:%M:%S", time.gmtime(at))] for name, at in phases_seen],
        "recorders": recorders,
    }


# -- reading the profiles -------------------------------------------------------------------------


def _frame_label(frame: dict[str, Any], with_line: bool = False) -> str:
    file = frame.get("file") or "?"
    file = re.sub(r"^.*/(site-packages|lib/python3\.\d+)/", "", file)
    if "/kafkalite/" in file:
        file = "kafkalite/" + file.rsplit("/kafkalite/", 1)[1]
    line = f":{frame.get('line')}" if with_line else ""
    return f"{frame.get('name')} ({file}{line})"


def _function(frame: str) -> str:
    return frame.split(" (", 1)[0]


def _is_idle(stack: list[str]) -> bool:
    if not stack:
        return True
    leaf = _function(stack[-1])
    return leaf in LOOP_RUNNERS or leaf.rsplit(".", 1)[-1] in IDLE_LEAVES


def _callback(stack: list[str]) -> str | None:
    """The frame the thread's loop called (a task's step shows its coroutine): the one under
    the innermost loop runner."""
    for i in range(len(stack) - 2, -1, -1):
        if _function(stack[i]) in LOOP_RUNNERS:
            rest = [f for f in stack[i + 1 :] if not f.startswith("Task.__step")]
            return rest[0] if rest else None
    return None


def _top(counter: Counter[str], total: int, n: int) -> list[list[Any]]:
    return [[label, round(count / total, 3)] for label, count in counter.most_common(n) if total]


def _thread_report(samples: list[list[str]], interval: float, n: int) -> dict[str, Any]:
    total = len(samples)
    busy = [s for s in samples if not _is_idle(s)]
    own: Counter[str] = Counter(s[-1] for s in busy)
    cumulative: Counter[str] = Counter()
    callbacks: Counter[str] = Counter()
    for s in busy:
        cumulative.update(set(s))
        callbacks[_callback(s) or "(outside a loop callback)"] += 1
    # the longest run of consecutive busy samples: the longest the thread was held
    best, best_start, run, run_start = 0, 0, 0, 0
    for i, s in enumerate(samples):
        if _is_idle(s):
            run = 0
        else:
            if run == 0:
                run_start = i
            run += 1
            if run > best:
                best, best_start = run, run_start
    stall = samples[best_start : best_start + best]
    stall_callbacks: Counter[str] = Counter(_callback(s) or "(outside)" for s in stall)
    stall_own: Counter[str] = Counter(s[-1] for s in stall)
    return {
        "samples": total,
        "busy_share": round(len(busy) / total, 3) if total else None,
        "busy_s": round(len(busy) * interval, 2),
        "longest_busy_s": round(best * interval, 2),
        "top_own": _top(own, total, n),
        "top_cumulative": _top(
            Counter({k: v for k, v in cumulative.items() if not k.startswith(_LOOP_FRAMES)}),
            total,
            n,
        ),
        "callbacks": _top(callbacks, total, n),
        "longest_busy": {
            "callbacks": _top(stall_callbacks, max(best, 1), 3),
            "top_own": _top(stall_own, max(best, 1), 5),
        },
    }


_LOOP_FRAMES = (
    "thread (",
    "<module> (",
    "main (kafkalite/__main__",
    "run (asyncio/runners",
    "serve (kafkalite/server/kafka_server",
    "Runner.run (",
    "BaseEventLoop.run",
    "BaseEventLoop._run_once",
    "Handle._run (",
    "Thread._bootstrap",
    "Thread.run (",
    "_run_module_as_main",
    "_run_code",
)


def _read_profile(recorder: Recorder, n: int) -> dict[str, Any]:
    wall = (recorder.stopped or time.monotonic()) - recorder.started
    out: dict[str, Any] = {"pid": recorder.pid, "wall_s": round(wall, 2)}
    try:
        data = json.loads(recorder.path.read_text())
    except (OSError, ValueError):
        out["error"] = "no profile (the process ended before py-spy could attach?)"
        return out
    frames = [_frame_label(f) for f in data["shared"]["frames"]]
    frames_lines = [_frame_label(f, True) for f in data["shared"]["frames"]]
    collapsed: Counter[str] = Counter()
    threads: dict[str, Any] = {}
    for profile in data["profiles"]:
        # 'Thread 123 "MainThread"': the main thread's id is the process's (its name can be
        # empty when py-spy attached while the interpreter started)
        tid, _, quoted = profile["name"].partition(" ")[2].partition(" ")
        name = quoted.strip('"') or f"thread-{tid}"
        if tid == str(recorder.pid):
            name = "MainThread"
        stacks = [[frames[i] for i in sample] for sample in profile["samples"]]
        for sample in profile["samples"]:
            collapsed[";".join([name, *(frames_lines[i] for i in sample)])] += 1
        interval = wall / len(stacks) if stacks else 1.0 / recorder.rate
        report = _thread_report(stacks, interval, n)
        report["mean_interval_ms"] = round(interval * 1000, 1)
        threads[name] = report
    collapsed_path = recorder.path.with_name(recorder.path.name.replace(".speedscope.json", ".txt"))
    collapsed_path.write_text("".join(f"{k} {v}\n" for k, v in sorted(collapsed.items())))
    main = threads.pop("MainThread", None)
    out["main"] = main
    out["controller"] = next((v for k, v in threads.items() if k.startswith("controller-")), None)
    # the other threads: busy share only (the coordination thread and file-work pools)
    out["other_threads"] = {
        k: {"busy_share": v["busy_share"], "longest_busy_s": v["longest_busy_s"]}
        for k, v in sorted(threads.items())
        if not k.startswith("controller-")
    }
    out["coordination"] = {
        k: v for k, v in threads.items() if "coord" in k.lower() or "zk" in k.lower()
    }
    return out


def _save_recorders(run: dict[str, Any], out: Path) -> None:
    rows = {
        phase: [
            [r.pid, r.broker_id, r.rate, str(r.path), (r.stopped or r.started) - r.started]
            for r in recorders
        ]
        for phase, recorders in run["recorders"].items()
    }
    (out / "recorders.json").write_text(json.dumps(rows))


def _load_run(out: Path) -> dict[str, Any]:
    """A finished run's output read back (``--reanalyse``)."""
    recorders: dict[str, list[Recorder]] = {}
    for phase, rows in json.loads((out / "recorders.json").read_text()).items():
        for pid, broker_id, rate, path, wall in rows:
            recorder = Recorder.__new__(Recorder)
            recorder.pid, recorder.broker_id, recorder.rate = pid, broker_id, rate
            recorder.path, recorder.started, recorder.stopped = Path(path), 0.0, wall
            recorders.setdefault(phase, []).append(recorder)
    try:
        figures = json.loads((out / "figures.json").read_text())
    except ValueError:
        figures = {}
    return {"figures": figures, "recorders": recorders}


def _summary(run: dict[str, Any], n: int) -> dict[str, Any]:
    figures = run["figures"]
    probes = figures.get("event_loop_lag_probes", {}).get("by_phase_and_broker", {})
    gauge = figures.get("event_loop_lag_max_s", {}).get("by_phase", {})
    phases: dict[str, Any] = {}
    for phase, recorders in run["recorders"].items():
        entry: dict[str, Any] = {
            "figure": figures.get(FIGURE_OF_PHASE.get(phase, ""), None),
            "loop_lag_max_s": gauge.get(phase),
            "loop_lag_probes": probes.get(phase),
            "brokers": {},
        }
        for recorder in recorders:
            key = f"{recorder.broker_id}/{recorder.pid}"
            entry["brokers"][key] = _read_profile(recorder, n)
        phases[phase] = entry
    return {
        "load_average": figures.get("load_average"),
        "src": figures.get("src"),
        "error": figures.get("error"),
        "sessions_expired_total": figures.get("sessions_expired_total"),
        "phases": phases,
    }


def _print(summary: dict[str, Any]) -> None:
    for phase, entry in summary["phases"].items():
        print(f"== {phase}: figure {json.dumps(entry['figure'])}")
        print(f"   loop lag max {entry['loop_lag_max_s']}, probes {entry['loop_lag_probes']}")
        for key, broker in entry["brokers"].items():
            main = broker.get("main")
            if not main:
                print(f"   broker {key}: {broker.get('error')}")
                continue
            print(
                f"   broker {key}: {broker['wall_s']} s recorded, main busy "
                f"{main['busy_share']:.0%} ({main['busy_s']} s), longest held "
                f"{main['longest_busy_s']} s by {main['longest_busy']['callbacks'][:1]}"
            )
            for label, share in main["top_own"][:5]:
                print(f"      own {share:6.1%} {label}")
            for label, share in main["top_cumulative"][:8]:
                print(f"      cum {share:6.1%} {label}")
            for label, share in main["callbacks"][:5]:
                print(f"      cb  {share:6.1%} {label}")
            controller = broker.get("controller")
            if controller and controller["busy_share"]:
                print(
                    f"      controller thread busy {controller['busy_share']:.0%}, longest "
                    f"{controller['longest_busy_s']} s; own: {controller['top_own'][:3]}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=25, help="py-spy samples a second")
    parser.add_argument("--top", type=int, default=15, help="frames kept per list")
    parser.add_argument("--out", help="output directory (default under bench/results/)")
    parser.add_argument("--reanalyse", help="summarise a finished run's output directory again")
    args, passthrough = parser.parse_known_args()
    if args.reanalyse:
        out = Path(args.reanalyse)
        summary = _summary(_load_run(out), args.top)
        summary["run"] = json.loads((out / "summary.json").read_text()).get("run", {})
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        _print(summary)
        return
    partitions = next(
        (passthrough[i + 1] for i, a in enumerate(passthrough[:-1]) if a == "--partitions"),
        "3000",
    )
    out = Path(
        args.out
        or BENCH_DIR / "results" / f"scale_profile-{partitions}-{time.strftime('%Y%m%dT%H%M')}"
    )
    out.mkdir(parents=True, exist_ok=True)
    started = os.getloadavg()
    run = _run_profiled(args, passthrough, out)
    _save_recorders(run, out)
    summary = _summary(run, args.top)
    summary["run"] = {
        "load_average_at_start": started,
        "rate": args.rate,
        "arguments": passthrough,
        "phases_started_utc": run["phases"],
        "out": str(out),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    _print(summary)
    print(f"[scale_profile] written under {out}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
    else:
        main()
