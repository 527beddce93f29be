"""``kafkalite serve`` installs the garbage collector's freezer (kafkalite/observability/
gc_freeze.py): it freezes what start-up made and says so in its log; with
``gc.freeze.min.objects=0`` nothing is frozen. A broker process each (the freezer is
process-wide, so in-process brokers never have it)."""

from __future__ import annotations

import json

from kafkalite.testing import Broker, wait_for


def freeze_lines(broker: Broker) -> list[dict]:
    lines = []
    for line in broker.log_path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == "gc_freeze":
            lines.append(entry)
    return lines


def test_a_broker_process_freezes_what_start_up_made():
    with Broker(subprocess=True) as broker:
        (line,) = wait_for(lambda: freeze_lines(broker), "the start-up freeze logged")
        assert line["at"] == "start-up" and line["objects"] > 10_000
        assert "gc.freeze.min.objects" not in broker.settings()  # the default: 50000


def test_no_freeze_with_the_key_at_zero():
    with Broker({"gc.freeze.min.objects": 0}, subprocess=True) as broker:
        assert broker.settings()["gc.freeze.min.objects"] == "0"
        wait_for(lambda: "started" in broker.log_path.read_text(), "the broker's start logged")
        assert freeze_lines(broker) == []
