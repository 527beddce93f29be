"""Reading a share group with a real confluent-kafka ShareConsumer until it has received exactly
the records a test expects (tests/admin/test_share_offsets_reset.py, tests/cli/
test_groups_share_offsets.py): where the group starts after its offsets were reset or
deleted."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from confluent_kafka import AcknowledgeType, ShareConsumer

DEADLINE_S = 60.0


def share_consumer(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    return consumer


def receive(bootstrap: str, group: str, topic: str, expected: set[tuple[int, int]]) -> set:
    """A new consumer of `group` reads `topic`, accepting every record, until it has received
    each (partition, offset) of `expected`; it then acknowledges, closes and leaves the group.
    Everything it received: a test compares it with `expected` (anything more came from
    before the new start)."""
    consumer = share_consumer(bootstrap, group, topic)
    got: set[tuple[int, int]] = set()
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not expected <= got:
            assert time.monotonic() < deadline, f"received {sorted(got)}, not {sorted(expected)}"
            for m in consumer.poll(0.5):
                assert m.error() is None, m.error()
                got.add((m.partition(), m.offset()))
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync()
    finally:
        consumer.close()
    return got


@contextmanager
def active_member(bootstrap: str, group: str, topic: str, joined: Callable[[], bool]) -> Any:
    """An open consumer of `group`, polling until `joined()` says it is a member (any record
    it receives is released at once), closed on exit."""
    consumer = share_consumer(bootstrap, group, topic)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not joined():
            assert time.monotonic() < deadline, "the consumer joined the group"
            records = [m for m in consumer.poll(0.2) if m.error() is None]
            for m in records:
                consumer.acknowledge(m, AcknowledgeType.RELEASE)
            if records:
                consumer.commit_sync()
        yield consumer
    finally:
        consumer.close()
