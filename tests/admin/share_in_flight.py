"""A share group holding records, made by a real confluent-kafka ShareConsumer (explicit
acknowledgement), shared by tests/admin/test_share_in_flight.py, tests/admin/test_admin_security.py
and tests/cli/test_groups_share_in_flight.py.

The consumer reads offsets 0..5 of one partition in one or more polls, rejects offset 1,
releases offset 2 and sends those two acknowledgements (commit_sync); the other four stay
acquired, unacknowledged, for as long as the consumer stays open and the lock lasts (the
brokers' lock duration is long: the tests read the state while it holds). So the window is:

    0 ACQUIRED, 1 ARCHIVED, 2 AVAILABLE, 3-5 ACQUIRED    (each delivered once)

as the partition's leader holds it (`LIVE`), and as the share coordinator persisted it
(`PERSISTED`: an acquisition lock does not outlive its broker, so ACQUIRED reads AVAILABLE).
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import AcknowledgeType, ShareConsumer

RECORDS = 6
LOCK_MS = 600_000
"""The brokers' group.share.record.lock.duration.ms: no lock expires while a test reads."""
DEADLINE_S = 60.0

LIVE = {0: "ACQUIRED", 1: "ARCHIVED", 2: "AVAILABLE", 3: "ACQUIRED", 4: "ACQUIRED", 5: "ACQUIRED"}
PERSISTED = {o: ("ARCHIVED" if o == 1 else "AVAILABLE") for o in range(RECORDS)}


def hold_records(bootstrap: str, topic: str, group: str, **extra: Any) -> ShareConsumer:
    """The open consumer of `group`, holding the records as the module docstring says (the
    caller closes it). `topic` has one partition holding RECORDS records."""
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            **extra,
        }
    )
    consumer.subscribe([topic])
    seen: dict[int, Any] = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(seen) < RECORDS:
            assert time.monotonic() < deadline, f"{RECORDS} records not read in {DEADLINE_S} s"
            for m in consumer.poll(0.5):
                assert m.error() is None, m.error()
                seen[m.offset()] = m
        assert sorted(seen) == list(range(RECORDS))
        consumer.acknowledge(seen[1], AcknowledgeType.REJECT)
        consumer.acknowledge(seen[2], AcknowledgeType.RELEASE)
        consumer.commit_sync()
    except BaseException:
        consumer.close()
        raise
    return consumer


def states(row: dict[str, Any]) -> dict[int, str]:
    """A share-partition row's in-flight ranges as {offset: state}."""
    return {
        o: r["state"]
        for r in row["in_flight"]
        for o in range(r["first_offset"], r["last_offset"] + 1)
    }


def delivery_counts(row: dict[str, Any]) -> dict[int, int]:
    return {
        o: r["delivery_count"]
        for r in row["in_flight"]
        for o in range(r["first_offset"], r["last_offset"] + 1)
    }
