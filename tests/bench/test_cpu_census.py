"""bench/cpu_census.py: the CPU each thread took while a broker's loop was starved, from samples
made here, and the sampler on real processes (this one and a child busy in Python)."""

from __future__ import annotations

import os
import subprocess
import sys

import cpu_census
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.testing import wait_for


def test_only_starved_stalls_have_windows():
    stalls = [
        {"started_at": 1.0, "ended_at": 1.2, "cause": "starved"},
        {"started_at": 2.0, "ended_at": 2.1, "cause": "gil"},
        {"started_at": 3.0, "ended_at": 3.3, "cause": "starved"},
    ]
    assert cpu_census.starved_windows(stalls) == [(1.0, 1.2), (3.0, 3.3)]


def test_cpu_is_counted_in_each_stalls_window_and_phase():
    samples = [
        (10.00, "broker-2/main", 5_000_000),  # before the stall: not counted
        (10.05, "broker-2/main", 20_000_000),
        (10.09, "zookeeper/SyncThread:0", 10_000_000),
        (
            10.115,
            "bench/Thread-3 (_produce)",
            30_000_000,
        ),  # within one interval after its end: counted
        (10.20, "broker-2/main", 7_000_000),  # later: not counted
        (20.05, "broker-3/other", 40_000_000),
    ]
    windows = {1: [(10.01, 10.1)], 2: [(20.0, 20.06)], 3: [(30.0, 30.1)]}
    phases = [("kill", 9.0, 15.0), ("restart", 15.0, 25.0), ("drain", 25.0, 40.0)]
    out = cpu_census.attribute(samples, windows, phases, interval_s=0.02)
    assert out["kill"] == {
        "stalls": 1,
        "starved_s": 0.09,
        "cpu_s": {
            "bench/Thread-3 (_produce)": 0.03,
            "broker-2/main": 0.02,
            "zookeeper/SyncThread:0": 0.01,
        },
    }
    assert out["restart"] == {"stalls": 1, "starved_s": 0.06, "cpu_s": {"broker-3/other": 0.04}}
    assert out["drain"] == {"stalls": 1, "starved_s": 0.1, "cpu_s": {}}


@given(
    st.lists(st.tuples(st.floats(0, 100), st.sampled_from("abc"), st.integers(1, 10**9))),
    st.lists(st.tuples(st.floats(0, 99), st.floats(0, 1))),
)
def test_a_window_counts_each_sample_it_covers_once(samples, spans):
    windows = {1: [(start, start + length) for start, length in spans]}
    out = cpu_census.attribute(samples, windows, [("all", 0.0, 100.0)], interval_s=0.02)
    expected: dict[str, float] = {}
    for start, end in windows[1]:
        for t, label, ns in samples:
            if start <= t < end + 0.02:
                expected[label] = expected.get(label, 0.0) + ns / 1e9
    if not spans:
        assert out == {}
        return
    assert out["all"]["stalls"] == len(spans)
    got = out["all"]["cpu_s"]
    assert set(got) == {k for k, v in expected.items() if v > 0}
    for label, seconds in got.items():
        assert abs(seconds - expected[label]) < 0.001


def test_the_sampler_sees_a_busy_child_and_this_process_main_thread():
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        census = cpu_census.CpuCensus(
            lambda: {"bench": os.getpid(), "broker-1": child.pid}, interval_s=0.01
        )

        def busy_child_counted() -> bool:
            census.sample()
            child_ns = sum(ns for _, label, ns in census.samples if label == "broker-1/main")
            return child_ns > 5e7 and any(s[1] == "bench/MainThread" for s in census.samples)

        wait_for(busy_child_counted, "the child's and this main thread seen on CPU", timeout=30)
        labels = {label for _, label, _ in census.samples}
        # the child has one thread; this process's threads are named as Python names them
        assert {label for label in labels if label.startswith("broker-1/")} == {"broker-1/main"}
        assert "bench/MainThread" in labels
    finally:
        child.kill()
        child.wait()
    census.sample()  # a process gone is left out, not an error
