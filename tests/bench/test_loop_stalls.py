"""bench/loop_stalls.py: the brokers' ``loop stalled`` lines sorted into the benchmark's
phases, from log text made here."""

from __future__ import annotations

import json

import loop_stalls


def _line(started_at: float, stalled_s: float, cause: str, frames=()) -> str:
    return json.dumps(
        {
            "started_at": started_at,
            "ended_at": started_at + stalled_s,
            "stalled_s": stalled_s,
            "loop_cpu_s": 0.1,
            "gc_s": 0.0,
            "cause": cause,
            "frames": [[f, 3] for f in frames],
            "event": "loop stalled",
            "level": "info",
        }
    )


def test_stalls_are_counted_by_phase_broker_and_cause_with_the_worst_named():
    logs = {
        1: "\n".join(
            [
                '{"event": "started", "level": "info"}',
                _line(10.5, 0.12, "held", ["a.py:1 f", "b.py:2 g", "c.py:3 h", "d.py:4 i"]),
                _line(11.0, 0.30, "gc"),
                "not json at all",
                '{"event": "loop stalled", "truncated',
                _line(25.0, 0.11, "gil"),
            ]
        ),
        2: _line(12.0, 0.15, "starved"),
        3: "",
    }
    phases = [("kill", 10.0, 20.0), ("restart", 20.0, 30.0), ("quiet", 30.0, 40.0)]
    report = loop_stalls.stalls_by_phase(logs, phases)

    assert report["reporter"] == "present"
    kill = report["by_phase"]["kill"]
    assert set(kill) == {1, 2}
    assert kill[1]["count"] == 2 and kill[1]["by_cause"] == {"held": 1, "gc": 1}
    assert kill[1]["worst"]["stalled_s"] == 0.30 and kill[1]["worst"]["cause"] == "gc"
    assert kill[2]["by_cause"] == {"starved": 1}
    assert report["by_phase"]["restart"][1]["by_cause"] == {"gil": 1}
    assert report["by_phase"]["quiet"] == {}


def test_the_worst_stalls_frames_are_its_top_three():
    logs = {1: _line(1.0, 0.2, "held", ["a.py:1 f", "b.py:2 g", "c.py:3 h", "d.py:4 i"])}
    report = loop_stalls.stalls_by_phase(logs, [("p", 0.0, 2.0)])
    assert report["by_phase"]["p"][1]["worst"]["frames"] == ["a.py:1 f", "b.py:2 g", "c.py:3 h"]


def test_a_tree_without_the_reporter_has_no_figures_rather_than_zeros():
    report = loop_stalls.stalls_by_phase({1: ""}, [("p", 0.0, 1.0)], reporter=False)
    assert report["by_phase"] is None and "absent" in report["reporter"]


def test_only_the_reporters_lines_are_parsed():
    text = "\n".join(
        [
            _line(1.0, 0.2, "held"),
            json.dumps({"event": "controller event phases", "started_at": 1.0}),
            json.dumps({"event": "loop stalled"}),  # no stamp: not a report
        ]
    )
    assert [s["cause"] for s in loop_stalls.parse_stalls(text)] == ["held"]
