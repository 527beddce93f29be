"""The brokers' ``loop stalled`` lines (kafkalite/observability/loop_stall.py) per benchmark
phase: how many stalls each broker had in each phase, by cause, and the worst with its frames.
Used by bench/scale_cluster.py; pure functions of log text and phase times (tested in
tests/bench/test_loop_stalls.py)."""

from __future__ import annotations

import json
from typing import Any

EVENT = "loop stalled"
TOP_FRAMES = 3


def parse_stalls(text: str) -> list[dict[str, Any]]:
    """Every ``loop stalled`` line of one broker's log (JSON lines), in order."""
    out = []
    for line in text.splitlines():
        if not line.startswith("{") or f'"{EVENT}"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == EVENT and isinstance(entry.get("started_at"), (int, float)):
            out.append(entry)
    return out


def stalls_by_phase(
    logs: dict[int, str], phases: list[tuple[str, float, float]], reporter: bool = True
) -> dict[str, Any]:
    """phase -> broker -> {count, by_cause, worst: {stalled_s, cause, frames}} for the stalls
    that began in [start, end) of each phase (a broker without stalls in a phase is left out).
    ``reporter`` False (the brokers' tree has no reporter) gives no figures at all: absent,
    which is not the same as healthy."""
    if not reporter:
        return {"reporter": "absent in the brokers' tree", "by_phase": None}
    parsed = {broker: parse_stalls(text) for broker, text in logs.items()}
    out: dict[str, Any] = {}
    for name, start, end in phases:
        per_broker: dict[int, Any] = {}
        for broker, stalls in parsed.items():
            inside = [s for s in stalls if start <= s["started_at"] < end]
            if not inside:
                continue
            by_cause: dict[str, int] = {}
            for stall in inside:
                by_cause[stall.get("cause", "?")] = by_cause.get(stall.get("cause", "?"), 0) + 1
            worst = max(inside, key=lambda s: s.get("stalled_s", 0.0))
            per_broker[broker] = {
                "count": len(inside),
                "by_cause": by_cause,
                "worst": {
                    "stalled_s": worst.get("stalled_s"),
                    "cause": worst.get("cause"),
                    "loop_cpu_s": worst.get("loop_cpu_s"),
                    "gc_s": worst.get("gc_s"),
                    "frames": [f[0] for f in worst.get("frames", [])[:TOP_FRAMES]],
                },
            }
        out[name] = per_broker
    return {"reporter": "present", "by_phase": out}
