"""bench/group_protocols.py, small: both protocols (the consumer protocol with the broker's
assignment interval and with a group assigning at once) measured in one run with real clients,
every figure reported."""

from __future__ import annotations

import group_protocols


def test_a_small_run_measures_both_protocols():
    lines: list[str] = []
    summary = group_protocols.run(members=3, partitions=6, heartbeat_ms=500, report=lines.append)
    assert set(summary) == {"classic", "consumer", "consumer-now"}
    for figures in summary.values():
        assert set(figures) == {"form_s", "join_one_s", "paused_s"}
        assert all(v >= 0 for v in figures.values())
    assert any(line.startswith("consumer ") for line in lines)
    assert any(line.startswith("consumer-now") for line in lines)
