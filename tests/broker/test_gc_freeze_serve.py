"""``kafkalite serve`` installs the garbage collector's freezer (kafkalite/observability/
gc_freeze.py): it freezes what start-up made and says so in its log, at its install (the
modules) and at the end of the broker's start-up (what the start made with the collector
paused, when it is at least ``gc.freeze.min.objects``); with
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
        lines = wait_for(lambda: freeze_lines(broker), "the start-up freeze logged")
        assert lines[0]["at"] == "start-up" and lines[0]["objects"] > 10_000
        assert "gc.freeze.min.objects" not in broker.settings()  # the default: 10000


def test_what_the_broker_start_made_is_frozen_once_started():
    # a low bound, so that an empty broker's start makes enough to freeze
    with Broker({"gc.freeze.min.objects": 1000}, subprocess=True) as broker:
        lines = wait_for(
            lambda: [x for x in freeze_lines(broker) if x.get("at") == "started"],
            "the freeze at the end of start-up logged",
        )
        assert lines[0]["objects"] >= 1000
        assert lines[0]["frozen_total"] > lines[0]["objects"]  # the install's freeze before it


def test_no_freeze_with_the_key_at_zero():
    with Broker({"gc.freeze.min.objects": 0}, subprocess=True) as broker:
        assert broker.settings()["gc.freeze.min.objects"] == "0"
        wait_for(lambda: "started" in broker.log_path.read_text(), "the broker's start logged")
        assert freeze_lines(broker) == []
