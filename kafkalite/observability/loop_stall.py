"""What held the event loop: a watchdog thread that names each long stall while it happens.

The loop-lag monitor (loop_lag.py) says *that* the loop was held and for how long, after the
fact. A `StallReporter` says *by what*: a daemon thread wakes every half
``loop.stall.report.ms`` (50 ms by default) and compares the time with the moment the
monitor's next probe is due. When the probe is overdue by more than ``loop.stall.report.ms``,
a stall has begun; until the probe runs, the thread samples the loop thread's stack at every
wake (``sys._current_frames()``). It also reads
three clocks at every wake: the loop thread's CPU time, the process's, and the time spent in
garbage collections (a ``gc.callbacks`` hook, whatever thread collected). When the probe runs
again it logs one structured line, ``loop stalled``:

- ``started_at``/``ended_at`` (``time.monotonic()``, the clock of the controller's stamped
  lines: one clock for every process of a host), ``stalled_s`` (the late probe's lag);
- ``loop_cpu_s``, ``process_cpu_s``, ``gc_s`` over ``window_s``: from the last wake before the
  probe fell due to the wake that saw it run (so the window holds the whole stall and at most
  a wake interval on either side), and ``gc_generation`` (the highest generation collected
  meanwhile, or None);
- ``cause``: the largest share of the window's time among ``gc`` (collections, whatever thread
  ran them), ``held`` (the loop thread's own CPU: its callback ran Python or C code), ``gil``
  (the process's other threads' CPU: the controller's thread, the coordination client's; the
  loop thread waited for the interpreter) and ``starved`` (the time the process did not run:
  other processes had the cores);
- ``frames``: the sampled stacks, at most 8 distinct entries with their sample counts, most
  first. An entry is the innermost frame and, when that is not kafkalite's own code, the
  innermost kafkalite frame below it (``"asyncio/events.py:80 _run <- kafkalite/…:42 f"``).
  Empty when no sample could be taken: a C call that keeps the interpreter (a long
  ``bytes.join``, a collection) leaves the watchdog no turn until it returns.

The count of stalls by cause is exported (``kafkalite_loop_stalls_total{cause=...}``).

Invariants:

- One reporter per loop (`start_stall_reporter` is idempotent, like the lag monitor) and one
  ``gc.callbacks`` hook per process.
- A loop that is not running (between two runs, or closed) has no stalls: its probes are not
  late, they are not scheduled. The thread ends when its loop is closed or collected.
- Healthy, its cost is one wake per half threshold: two clock reads and a comparison, plus
  the two CPU clocks. A wake needs the interpreter: when the loop runs Python, the loop
  thread gives it up and waits to get it back, which on a loaded machine can cost it a
  scheduling delay: waking every 10 ms slowed a busy loop thread by 10-25% at load 2.8, every
  50 ms not measurably (decision 0055).
"""

from __future__ import annotations

import asyncio
import collections
import gc
import os
import sys
import threading
import time
import weakref
from typing import Any

import structlog

from kafkalite.observability.loop_lag import LoopLagMonitor

log = structlog.get_logger(__name__)

DEFAULT_REPORT_MS = 100
MAX_FRAMES = 8
CAUSES = ("gc", "held", "gil", "starved")


# ---------------------------------------------------------------------- the collector's time


class _GcClock:
    """Time spent in garbage collections, process-wide, and the recent ones' generations."""

    def __init__(self) -> None:
        self.total_s = 0.0
        self.by_thread: dict[int, float] = {}
        """Collection time by the thread that collected (a thread's own share of its CPU)."""
        self._started: dict[int, float] = {}
        self.recent: collections.deque[tuple[float, int]] = collections.deque(maxlen=64)
        """(end on time.monotonic(), generation) of the last collections."""

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        now = time.monotonic()
        thread = threading.get_ident()
        if phase == "start":
            self._started[thread] = now
            return
        began = self._started.pop(thread, None)
        if began is not None:
            self.total_s += now - began
            self.by_thread[thread] = self.by_thread.get(thread, 0.0) + now - began
            self.recent.append((now, info.get("generation", 0)))

    def highest_generation_since(self, since: float) -> int | None:
        generations = [g for end, g in list(self.recent) if end >= since]
        return max(generations) if generations else None


_gc_clock: _GcClock | None = None
_gc_lock = threading.Lock()


def _install_gc_clock() -> _GcClock:
    global _gc_clock
    with _gc_lock:
        if _gc_clock is None:
            _gc_clock = _GcClock()
            gc.callbacks.append(_gc_clock)
        return _gc_clock


# ---------------------------------------------------------------------- classification


def classify(
    window_s: float,
    loop_cpu_s: float,
    process_cpu_s: float,
    gc_s: float,
    gc_on_loop_s: float = 0.0,
) -> str:
    """The cause of a stall: the largest of four shares of its window (module docstring). The
    collector's time (``gc_s``, of which ``gc_on_loop_s`` on the loop's thread) counts once,
    as ``gc``; the loop thread's other CPU is ``held``, the other threads' other CPU is
    ``gil``, the time the process did not run at all is ``starved``."""
    loop_own = max(0.0, loop_cpu_s - gc_on_loop_s)
    others = max(0.0, process_cpu_s - loop_cpu_s - (gc_s - gc_on_loop_s))
    off_cpu = max(0.0, window_s - max(process_cpu_s, gc_s))
    shares = {"gc": gc_s, "held": loop_own, "gil": others, "starved": off_cpu}
    return max(CAUSES, key=lambda cause: shares[cause])


def _where(frame: Any) -> str:
    filename = frame.f_code.co_filename
    at = filename.rfind(f"{os.sep}kafkalite{os.sep}")
    if at >= 0:
        short = filename[at + 1 :]
    else:
        short = "/".join(filename.split(os.sep)[-2:])
    return f"{short}:{frame.f_lineno} {frame.f_code.co_name}"


def describe_stack(frame: Any) -> str:
    """One sample's entry: the innermost frame, and the innermost kafkalite frame below it
    when the innermost is not kafkalite's."""
    inner = _where(frame)
    if inner.startswith("kafkalite/"):
        return inner
    caller = frame.f_back
    while caller is not None:
        where = _where(caller)
        if where.startswith("kafkalite/"):
            return f"{inner} <- {where}"
        caller = caller.f_back
    return inner


# ---------------------------------------------------------------------- the reporter


def _thread_cpu_clock(ident: int) -> int | None:
    try:
        return time.pthread_getcpuclockid(ident)
    except (AttributeError, OSError):  # not on this platform
        return None


class StallReporter:
    """The watchdog of one loop (module docstring). `check(now)` is one wake's work, called
    by the thread; tests drive it directly."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        monitor: LoopLagMonitor,
        loop_thread: int,
        report_after_s: float = DEFAULT_REPORT_MS / 1000,
    ) -> None:
        self._loop = weakref.ref(loop)
        self.monitor = monitor
        self.report_after_s = report_after_s
        self.loop_thread = loop_thread
        self._cpu_clock = _thread_cpu_clock(loop_thread)
        self._gc = _install_gc_clock()
        self.counts = dict.fromkeys(CAUSES, 0)
        self.checks = 0
        self.reported: list[dict[str, Any]] = []
        """The last reports (at most 16), newest last (the log has them all)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stall: dict[str, Any] | None = None
        self.wake_s = max(monitor.interval, report_after_s / 2)
        self._last = (time.monotonic(), self._clocks())

    # -- clocks

    def _clocks(self) -> tuple[float, float, float, float]:
        loop_cpu = time.clock_gettime(self._cpu_clock) if self._cpu_clock is not None else 0.0
        gc_on_loop = self._gc.by_thread.get(self.loop_thread, 0.0)
        return loop_cpu, time.process_time(), self._gc.total_s, gc_on_loop

    # -- running

    def start(self) -> StallReporter:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="kafkalite-loop-stall", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.wake_s):
            loop = self._loop()
            if loop is None or loop.is_closed():
                return
            if not loop.is_running() or not self.monitor.running:
                self._stall = None
                continue
            self.check(time.monotonic())

    def check(self, now: float) -> None:
        """One wake: begin, sample or end a stall."""
        self.checks += 1
        clocks = self._clocks()
        due = self.monitor.due
        stall = self._stall
        if stall is not None and due != stall["due"]:
            self._end(stall, clocks, now)
            self._stall = stall = None
        if stall is None:
            overdue = now - due
            if overdue > self.report_after_s:
                # begun when the probe was due; the window starts at the last wake that saw
                # the loop on time
                since, then = self._last
                self._stall = stall = {"due": due, "since": since, "clocks": then, "samples": {}}
            else:
                if overdue <= self.monitor.interval:
                    self._last = (now, clocks)
                return
        frame = sys._current_frames().get(self.loop_thread)
        if frame is not None:
            entry = describe_stack(frame)
            stall["samples"][entry] = stall["samples"].get(entry, 0) + 1

    def _end(
        self, stall: dict[str, Any], clocks: tuple[float, float, float, float], now: float
    ) -> None:
        began = stall["due"]
        ended = next((ran for due, ran in list(self.monitor.runs) if due == began), None)
        if ended is None:  # the watchdog itself was kept from running for many probes
            ended = time.monotonic()
        stalled = max(0.0, ended - began)
        loop_cpu, process_cpu, gc_s, gc_on_loop = (
            at_end - at_start for at_end, at_start in zip(clocks, stall["clocks"], strict=True)
        )
        window = max(stalled, now - stall["since"])
        cause = classify(window, loop_cpu, process_cpu, gc_s, gc_on_loop)
        self.counts[cause] += 1
        samples = stall["samples"]
        frames = sorted(samples.items(), key=lambda item: -item[1])[:MAX_FRAMES]
        report = {
            "started_at": round(began, 4),
            "ended_at": round(ended, 4),
            "stalled_s": round(stalled, 4),
            "window_s": round(window, 4),
            "loop_cpu_s": round(loop_cpu, 4),
            "process_cpu_s": round(process_cpu, 4),
            "gc_s": round(gc_s, 4),
            "gc_on_loop_s": round(gc_on_loop, 4),
            "gc_generation": self._gc.highest_generation_since(began),
            "cause": cause,
            "frames": [[entry, count] for entry, count in frames],
            "samples": sum(samples.values()),
        }
        self.reported = [*self.reported[-15:], report]
        log.info("loop stalled", **report)


_reporters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StallReporter] = (
    weakref.WeakKeyDictionary()
)


def start_stall_reporter(
    monitor: LoopLagMonitor, report_after_ms: int = DEFAULT_REPORT_MS
) -> StallReporter | None:
    """The running loop's reporter, started on first use (None when ``report_after_ms`` is 0).
    Called on the loop's own thread."""
    if report_after_ms <= 0:
        return None
    loop = asyncio.get_running_loop()
    reporter = _reporters.get(loop)
    if reporter is None:
        reporter = _reporters[loop] = StallReporter(
            loop, monitor, threading.get_ident(), report_after_ms / 1000
        ).start()
    return reporter


def stall_reporter(loop: asyncio.AbstractEventLoop | None = None) -> StallReporter | None:
    """The running (or given) loop's reporter, if one was started."""
    if loop is None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
    return _reporters.get(loop)
