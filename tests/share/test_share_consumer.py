"""confluent-kafka's ShareConsumer (KIP-932) against one broker: records shared by consumers of
one partition, RELEASE, REJECT, the acquisition lock timeout, the delivery-count limit.

One in-process broker for the module, with a short lock (Kafka's minimum, 1 s is allowed;
3 s leaves room for a loaded machine between two polls of one consumer) and a delivery-count
limit of 3. Every test uses its own topic and group. The restart test is in
test_share_restart.py (a subprocess broker).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer

from kafkalite.testing import Broker
from kafkalite.testing.waiting import wait_for

pytestmark = pytest.mark.integration

LOCK_MS = 3000
LIMIT = 3


@pytest.fixture(scope="module")
def broker():
    with Broker(
        {
            "group.share.record.lock.duration.ms": LOCK_MS,
            "group.share.delivery.count.limit": LIMIT,
            "share.auto.offset.reset": "earliest",
            "offsets.topic.num.partitions": 1,
            "share.coordinator.state.topic.num.partitions": 1,
        }
    ) as b:
        yield b


def consumer(broker, group: str, topic: str, **extra) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, **extra})
    c.subscribe([topic])
    return c


def poll_until(consumers, done, timeout=60.0, on_message=None):
    """Poll each consumer in turn until ``done()`` or the deadline; ``on_message(i, m)``."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        for i, c in enumerate(consumers):
            for m in c.poll(0.3):
                assert m.error() is None, m.error()
                if on_message is not None:
                    on_message(i, m)


def test_three_consumers_on_one_partition_get_disjoint_records(broker):
    broker.create_topic("disjoint")
    for start in range(0, 300, 10):
        broker.produce("disjoint", [f"r{i}".encode() for i in range(start, start + 10)])
    consumers = [
        consumer(broker, "g-disjoint", "disjoint", **{"max.poll.records": 10}) for _ in range(3)
    ]
    got: list[list[int]] = [[], [], []]
    try:
        poll_until(
            consumers,
            lambda: sum(map(len, got)) >= 300,
            on_message=lambda i, m: got[i].append(m.offset()),
        )
    finally:
        for c in consumers:
            c.close()
    every = [o for g in got for o in g]
    assert sorted(every) == list(range(300)), "each record exactly once"
    assert sum(1 for g in got if g) >= 2, "the partition was shared"


def test_a_released_record_comes_back(broker):
    broker.create_topic("release")
    broker.produce("release", [b"a", b"b", b"c"])
    a = consumer(broker, "g-release", "release", **{"share.acknowledgement.mode": "explicit"})
    b = consumer(broker, "g-release", "release", **{"share.acknowledgement.mode": "explicit"})
    seen: list[tuple[int, int, int]] = []  # (consumer, offset, delivery count)
    try:

        def handle(i, m):
            seen.append((i, m.offset(), m.delivery_count()))
            if i == 0 and m.offset() == 1 and m.delivery_count() == 1:
                (a if i == 0 else b).acknowledge(m, AcknowledgeType.RELEASE)
            else:
                (a if i == 0 else b).acknowledge(m, AcknowledgeType.ACCEPT)

        # a alone first, so it is the one that gets offset 1 and releases it
        poll_until([a], lambda: any(o == 1 for _, o, _ in seen), on_message=handle)
        a.commit_sync()
        poll_until(
            [b, a],
            lambda: sum(1 for _, o, _ in seen if o == 1) >= 2,
            on_message=lambda i, m: handle(1 - i, m),
        )
    finally:
        a.close()
        b.close()
    deliveries = [(o, n) for _, o, n in seen if o == 1]
    assert deliveries[0][1] == 1 and deliveries[1][1] == 2
    assert sorted(o for _, o, _ in seen).count(0) == 1  # accepted records are not redelivered


def test_a_rejected_record_never_comes_back(broker):
    broker.create_topic("reject")
    broker.produce("reject", [b"poison", b"ok1", b"ok2"])
    c = consumer(broker, "g-reject", "reject", **{"share.acknowledgement.mode": "explicit"})
    seen: list[int] = []
    try:

        def handle(_, m):
            seen.append(m.offset())
            c.acknowledge(m, AcknowledgeType.REJECT if m.offset() == 0 else AcknowledgeType.ACCEPT)

        poll_until([c], lambda: {0, 1, 2} <= set(seen), on_message=handle)
        c.commit_sync()
        broker.produce("reject", [b"later"])
        poll_until([c], lambda: 3 in seen, on_message=handle)
        # past a whole lock duration nothing of it returns (a released or timed-out record
        # would have by then)
        end = time.monotonic() + LOCK_MS / 1000 + 1
        while time.monotonic() < end:
            for m in c.poll(0.3):
                handle(0, m)
    finally:
        c.close()
    assert seen.count(0) == 1
    assert sorted(seen) == [0, 1, 2, 3]


DYING_CONSUMER = textwrap.dedent(
    """
    import os, sys
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    offsets = []
    while not offsets:
        offsets = [m.offset() for m in c.poll(1.0) if m.error() is None]
    print(" ".join(map(str, offsets)), flush=True)
    os._exit(0)  # dies holding them: no acknowledgement, no leave, no close
    """
)


def test_records_of_a_dead_consumer_are_redelivered_after_the_lock_timeout(broker):
    broker.create_topic("dying")
    broker.produce("dying", [b"x", b"y", b"z"])
    out = subprocess.run(
        [sys.executable, "-c", DYING_CONSUMER, broker.bootstrap_servers, "g-dying", "dying"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    held = {int(o) for o in out.stdout.split()}
    assert held == {0, 1, 2}, out.stderr
    c = consumer(broker, "g-dying", "dying")
    redelivered: dict[int, int] = {}
    try:
        poll_until(
            [c],
            lambda: set(redelivered) == held,
            on_message=lambda _, m: redelivered.setdefault(m.offset(), m.delivery_count()),
        )
    finally:
        c.close()
    assert set(redelivered.values()) == {2}, "second delivery, after the first lock expired"


def test_the_delivery_count_limit_archives_a_poison_record(broker):
    broker.create_topic("poison")
    broker.produce("poison", [b"poison"])
    c = consumer(broker, "g-poison", "poison", **{"share.acknowledgement.mode": "explicit"})
    deliveries: list[int] = []
    later: list[int] = []
    try:

        def handle(_, m):
            if m.offset() == 0:
                deliveries.append(m.delivery_count())
                c.acknowledge(m, AcknowledgeType.RELEASE)  # the application keeps failing
            else:
                later.append(m.offset())
                c.acknowledge(m, AcknowledgeType.ACCEPT)

        poll_until([c], lambda: len(deliveries) >= LIMIT, on_message=handle)
        c.commit_sync()
        broker.produce("poison", [b"next"])
        poll_until([c], lambda: 1 in later, on_message=handle)
        c.commit_sync()
    finally:
        c.close()
    assert deliveries == list(range(1, LIMIT + 1)), "delivered up to the limit, then archived"


def test_a_topic_deleted_and_created_again_starts_clean(broker):
    """The share-partition state of a deleted topic goes with it (Kafka deletes a deleted
    topic's share-group state): the new topic's offset 0 is a first delivery, not the old
    topic's released record coming back with its count."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    broker.create_topic("recreated")
    broker.produce("recreated", [b"old"])
    first = consumer(
        broker, "g-recreated", "recreated", **{"share.acknowledgement.mode": "explicit"}
    )
    try:
        got = []
        poll_until([first], lambda: got, on_message=lambda i, m: got.append(m))
        assert (got[0].offset(), got[0].delivery_count()) == (0, 1)
        first.acknowledge(got[0], AcknowledgeType.RELEASE)
        first.commit_sync()
    finally:
        first.close()
    admin.delete_topics(["recreated"])["recreated"].result(timeout=30)

    def created_again() -> bool:  # the deletion completes asynchronously
        try:
            broker.create_topic("recreated")
        except Exception:
            return False
        return True

    wait_for(created_again, "the topic created again after its deletion", timeout=30, interval=0.2)
    broker.produce("recreated", [b"new"])
    second = consumer(broker, "g-recreated", "recreated")
    try:
        again = []
        poll_until([second], lambda: again, on_message=lambda i, m: again.append(m))
        assert (again[0].offset(), again[0].value(), again[0].delivery_count()) == (0, b"new", 1)
    finally:
        second.close()
