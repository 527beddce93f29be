"""bench/scale_single.py: the restart's milestones read from the broker's JSON log lines."""

from __future__ import annotations

import json

from scale_single import phases


def _line(event: str, at: str, **fields: object) -> str:
    return json.dumps({"event": event, "timestamp": f"2026-11-29T06:00:{at}Z", **fields})


def test_phases_are_seconds_from_starting_with_the_controller_requests_answered():
    log = "\n".join(
        [
            _line("starting", "00.000000"),
            "not json: a traceback line",
            _line("listening", "00.250000"),
            _line("controller request answered", "01.000000", api="UPDATE_METADATA"),
            _line("controller request answered", "01.500000", api="LEADER_AND_ISR"),
            _line("controller request answered", "01.750000", api="UPDATE_METADATA"),
            _line("controller request answered", "01.800000"),
            _line("controller metadata arrived", "01.900000"),
            _line("started", "02.000000", phases={"logs_loaded_s": 1.2}),
            _line("started", "09.000000", phases={"logs_loaded_s": 9.9}),
        ]
    )
    assert phases(log) == {
        "starting": 0.0,
        "listening": 0.25,
        "UPDATE_METADATA answered": 1.0,
        "LEADER_AND_ISR answered": 1.5,
        "controller metadata arrived": 1.9,
        "started": 2.0,
        "step logs_loaded_s": 1.2,
    }


def test_no_starting_line_gives_nothing():
    assert phases(_line("listening", "00.250000")) == {}
