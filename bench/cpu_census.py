"""Who had the cores while a broker's loop was starved (``--cpu-census`` of bench/scale_cluster.py).

A ``starved`` stall (kafkalite/observability/loop_stall.py) is time the broker's process did
not run at all: on a box of two cores shared by three brokers, their ZooKeeper and the
benchmark's own clients, some other thread had the CPU. ``CpuCensus`` samples, in a thread of
the benchmark, the time on CPU of every thread of each watched process from
``/proc/<pid>/task/<tid>/schedstat`` (its first field, nanoseconds), every ``interval_s``. A
broker's thread is its ``main`` thread (the event loop) or one of its ``other`` threads (the
controller's, the workers, the coordination client); a Java thread is named as the JVM names
it; the benchmark's own threads by their names (``MainThread``, the load's ``Thread-3
(_produce)``, librdkafka's ``rdk:broker1``, the census's own ``census``).

``attribute`` (a pure function, tested in tests/bench/test_cpu_census.py) adds up, for each
starved stall of a phase, the CPU each of them took in the stall's window: the samples taken
from the stall's start to one interval after its end. Stalls are stamped on the broker's loop
clock, the monotonic clock the census samples on.

Reading the files costs CPU too (the ``bench/census`` entry): a run with the census is not
comparable with one without.
"""

from __future__ import annotations

import bisect
import collections
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

Sample = tuple[float, str, int]
"""(monotonic time read, "role/thread", nanoseconds on CPU since the previous read)."""

TOP = 8
"""Entries kept per phase, the largest first."""


def _thread_label(role: str, pid: int, tid: int, java: bool, census_tid: int | None) -> str:
    if tid == census_tid:
        return f"{role}/census"
    if pid == os.getpid():  # this benchmark: its Python threads by name, the others by comm
        named = {t.native_id: t.name for t in threading.enumerate()}
        if tid in named:
            return f"{role}/{named[tid]}"
    if java or pid == os.getpid():
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                return f"{role}/{f.read().strip() or tid}"
        except OSError:
            return f"{role}/{tid}"
    if tid == pid:
        return f"{role}/main"
    return f"{role}/other"


class CpuCensus:
    """Samples the threads of ``roles()`` (role -> pid, read again at every sample: a
    restarted broker is a new process) every ``interval_s`` until ``stop()``."""

    def __init__(self, roles: Callable[[], dict[str, int]], interval_s: float = 0.02) -> None:
        self.roles = roles
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self._last: dict[tuple[int, int], int] = {}
        self._labels: dict[tuple[int, int], str] = {}
        self._java: dict[int, bool] = {}
        self._census_tid: int | None = None
        """The census's own thread, counted apart from the benchmark's other threads."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-census", daemon=True)

    def start(self) -> CpuCensus:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        self._census_tid = threading.get_native_id()
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        now = time.monotonic()
        seen: dict[tuple[int, int], int] = {}
        for role, pid in self.roles().items():
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue  # gone (a killed broker) or not yet started
            if pid not in self._java:
                try:
                    with open(f"/proc/{pid}/comm") as f:
                        self._java[pid] = f.read().strip() == "java"
                except OSError:
                    continue
            for name in tids:
                key = (pid, int(name))
                try:
                    with open(f"/proc/{pid}/task/{name}/schedstat") as f:
                        on_cpu = int(f.read().split()[0])
                except (OSError, ValueError, IndexError):
                    continue
                seen[key] = on_cpu
                before = self._last.get(key)
                if before is not None and on_cpu > before:
                    label = self._labels.get(key)
                    if label is None:
                        label = self._labels[key] = _thread_label(
                            role, pid, key[1], self._java[pid], self._census_tid
                        )
                    self.samples.append((now, label, on_cpu - before))
        self._last = seen


def starved_windows(stalls: Iterable[dict[str, Any]]) -> list[tuple[float, float]]:
    """(start, end) on the loop's clock of each ``starved`` stall (bench/loop_stalls.py's
    ``parse_stalls`` entries)."""
    return [
        (float(s["started_at"]), float(s["ended_at"]))
        for s in stalls
        if s.get("cause") == "starved" and isinstance(s.get("ended_at"), (int, float))
    ]


def attribute(
    samples: list[Sample],
    windows: dict[int, list[tuple[float, float]]],
    phases: list[tuple[str, float, float]],
    interval_s: float,
) -> dict[str, Any]:
    """phase -> {stalls, starved_s, cpu_s: {"role/thread": seconds}} for the starved
    stalls of every broker (``windows``: broker -> its stalls' windows) that began in
    [start, end) of a phase: the CPU each thread took in the stall's window (samples read from
    its start to one ``interval_s`` after its end; a sample covers the interval before its
    read). ``TOP`` entries a phase, the largest first."""
    ordered = sorted(samples)
    times = [s[0] for s in ordered]
    out: dict[str, Any] = {}
    for phase, start, end in phases:
        stalls = 0
        starved = 0.0
        cpu: collections.Counter[str] = collections.Counter()
        for spans in windows.values():
            for began, ended in spans:
                if not start <= began < end:
                    continue
                stalls += 1
                starved += ended - began
                first = bisect.bisect_left(times, began)
                last = bisect.bisect_left(times, ended + interval_s)
                for _, label, ns in ordered[first:last]:
                    cpu[label] += ns / 1e9
        if stalls:
            out[phase] = {
                "stalls": stalls,
                "starved_s": round(starved, 3),
                "cpu_s": {k: round(v, 3) for k, v in cpu.most_common(TOP)},
            }
    return out
