"""The stall reporter (kafkalite/observability/loop_stall.py) names what held a loop: a
callback of the loop's own, a garbage collection, another thread holding the interpreter; a
healthy loop reports nothing. The reporter runs its real thread against a real loop; a stall
is made by a callback that runs until the reporter has seen it begin, so no length of time is
assumed anywhere."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from types import SimpleNamespace

import pytest

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.observability.loop_lag import LoopLagMonitor
from kafkalite.observability.loop_stall import (
    StallReporter,
    classify,
    describe_stack,
    stall_reporter,
    start_stall_reporter,
)
from kafkalite.testing import wait_for

REPORT_AFTER_S = 0.03
DEADLINE_S = 30.0


async def _reporter() -> StallReporter:
    monitor = LoopLagMonitor()
    monitor.start(asyncio.get_running_loop())
    reporter = StallReporter(
        asyncio.get_running_loop(), monitor, threading.get_ident(), REPORT_AFTER_S
    ).start()
    await _healthy_checks(reporter, 3)
    return reporter


async def _eventually(condition, what: str) -> None:
    """Lets the loop run (its lag probes with it) until ``condition()`` holds: the condition
    (the reporter's thread moves it) is awaited by ``wait_for`` in a worker thread."""
    await asyncio.to_thread(wait_for, condition, what, DEADLINE_S, 0.005)


async def _healthy_checks(reporter: StallReporter, count: int) -> None:
    """Lets the loop run until the reporter has woken ``count`` more times."""
    target = reporter.checks + count
    await _eventually(lambda: reporter.checks >= target, "the reporter's checks")


def _classified(report: dict) -> str:
    return classify(
        report["window_s"],
        report["loop_cpu_s"],
        report["process_cpu_s"],
        report["gc_s"],
        report["gc_on_loop_s"],
    )


def _stalled(reporter: StallReporter) -> bool:
    return reporter._stall is not None and len(reporter._stall["samples"]) > 0


def _spin_until_seen(reporter: StallReporter) -> None:
    """Holds the loop (this runs on it) with Python code until the reporter sampled it."""
    deadline = time.monotonic() + DEADLINE_S
    while not _stalled(reporter):
        assert time.monotonic() < deadline
        sum(range(2000))


async def _report_after(reporter: StallReporter, reported: int) -> dict:
    # the probe runs meanwhile; the reporter then ends the stall and reports it
    await _eventually(lambda: len(reporter.reported) > reported, "the stall's report")
    return reporter.reported[-1]


async def test_a_callback_holding_the_loop_is_reported_once_as_held_with_its_frame():
    reporter = await _reporter()
    try:
        _spin_until_seen(reporter)
        report = await _report_after(reporter, 0)
        assert report["stalled_s"] >= REPORT_AFTER_S
        assert report["loop_cpu_s"] > 0 and report["samples"] > 0
        # "held" unless the machine gave the process less CPU than the spin used; the
        # split is classify()'s of the reported clocks either way
        assert report["cause"] == _classified(report) in ("held", "starved")
        assert any("_spin_until_seen" in entry for entry, _ in report["frames"])
        await _healthy_checks(reporter, 5)
        assert len(reporter.reported) == 1 and reporter.counts[report["cause"]] == 1
    finally:
        reporter.stop()


async def test_a_healthy_loop_reports_nothing():
    reporter = await _reporter()
    try:
        await _healthy_checks(reporter, 20)
        # nothing of the loop's own, nor the collector: a loaded machine may leave the whole
        # process unscheduled for longer than the 30 ms threshold, which is reported as what
        # it is ("starved"), never as this loop's doing
        causes = [report["cause"] for report in reporter.reported]
        assert set(causes) <= {"starved"}, reporter.reported
        assert sum(reporter.counts.values()) == len(causes)
    finally:
        reporter.stop()


async def test_a_garbage_collection_holding_the_loop_is_reported_as_gc():
    reporter = await _reporter()
    heap = []
    try:
        for _ in range(300_000):  # cycles, so that a full collection has work
            node: list = []
            node.append(node)
            heap.append(node)
        gc.disable()
        del heap
        # collections until the stall is seen, each taking the interpreter for all of it
        deadline = time.monotonic() + DEADLINE_S
        while reporter._stall is None:
            assert time.monotonic() < deadline
            gc.collect()
        gc.collect()  # the stall's time is then mostly the collector's
        report = await _report_after(reporter, 0)
        assert report["gc_s"] > 0 and report["gc_generation"] == 2
    finally:
        gc.enable()
        reporter.stop()
    assert report["cause"] == _classified(report)


async def test_another_thread_holding_the_interpreter_is_not_the_loops_own_code():
    reporter = await _reporter()
    stop = threading.Event()

    def hog() -> None:
        while not stop.is_set():
            sum(range(2000))

    other = threading.Thread(target=hog)
    try:
        other.start()
        # the loop thread waits on a lock the other thread gives back only when the reporter
        # has seen the stall: it uses no CPU meanwhile, the hog does
        release = threading.Event()

        def releaser() -> None:
            wait_for(lambda: _stalled(reporter), "stall seen", timeout=DEADLINE_S, interval=0.002)
            release.set()

        threading.Thread(target=releaser).start()
        release.wait(DEADLINE_S)
        report = await _report_after(reporter, 0)
    finally:
        stop.set()
        other.join()
        reporter.stop()
    # the loop thread only waited: the other thread used the process's CPU
    assert report["process_cpu_s"] - report["loop_cpu_s"] > report["loop_cpu_s"]
    assert report["cause"] == _classified(report) in ("gil", "starved")
    assert any("wait" in entry for entry, _ in report["frames"])  # threading's, on the lock


def test_the_cause_is_the_largest_share_of_the_stall():
    assert classify(0.2, 0.15, 0.16, 0.12, 0.12) == "gc"  # collected on the loop's thread
    assert classify(0.2, 0.01, 0.14, 0.12, 0.0) == "gc"  # collected on another thread
    assert classify(0.2, 0.02, 0.18, 0.04, 0.0) == "gil"  # another thread, mostly not the gc
    assert classify(0.2, 0.15, 0.16, 0.0) == "held"
    assert classify(0.2, 0.11, 0.12, 0.0) == "held"  # on a loaded machine, still the most
    assert classify(0.2, 0.01, 0.18, 0.0) == "gil"
    assert classify(0.2, 0.01, 0.02, 0.0) == "starved"


def _fake_frame(filename: str, line: int, name: str, back=None) -> SimpleNamespace:
    return SimpleNamespace(
        f_code=SimpleNamespace(co_filename=filename, co_name=name), f_lineno=line, f_back=back
    )


def test_a_frame_outside_kafkalite_names_the_kafkalite_frame_below_it():
    ours = _fake_frame("/src/kafkalite/admin/metrics.py", 42, "collect")
    json = _fake_frame("/usr/lib/python3.11/json/encoder.py", 7, "iterencode", ours)
    uvloop = _fake_frame("/venv/uvloop/__init__.py", 3, "run", None)
    assert describe_stack(ours) == "kafkalite/admin/metrics.py:42 collect"
    assert describe_stack(json) == (
        "json/encoder.py:7 iterencode <- kafkalite/admin/metrics.py:42 collect"
    )
    assert describe_stack(uvloop) == "uvloop/__init__.py:3 run"


async def test_one_reporter_per_loop_and_none_when_disabled():
    monitor = LoopLagMonitor()
    monitor.start(asyncio.get_running_loop())
    assert start_stall_reporter(monitor, 0) is None
    assert stall_reporter() is None
    first = start_stall_reporter(monitor, 100)
    try:
        assert first is not None and start_stall_reporter(monitor, 100) is first
        assert stall_reporter() is first
    finally:
        first.stop()


def test_the_key_is_validated_and_defaults_to_100_ms():
    assert BrokerConfig.load(environ={}).loop_stall_report_ms == 100
    config = BrokerConfig.load(environ={}, overrides=["loop.stall.report.ms=0"])
    assert config.loop_stall_report_ms == 0
    with pytest.raises(ConfigError, match="loop.stall.report.ms"):
        BrokerConfig.load(environ={}, overrides=["loop.stall.report.ms=-1"])
