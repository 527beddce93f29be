"""Rebalance time of KIP-848's consumer group protocol against the classic protocol, in the same
run, on one broker subprocess (prints figures; not a test).

Real clients: confluent-kafka (librdkafka) consumers in this process, ``group.protocol``
``consumer`` (the broker assigns with its ``uniform`` assignor) or ``classic`` (librdkafka's
default eager ``range,roundrobin``; ``group.initial.rebalance.delay.ms`` 0 so Kafka's 3 s delay
is not the whole figure). Per protocol, on a topic of ``--partitions`` partitions:

- **form**: ``--members`` consumers subscribe at once; from the first subscribe until every
  member holds a share (the assignments disjoint, covering the topic, each member's count within
  one of the others');
- **join one**: one more consumer joins that settled group; until the same holds again.
- **paused**: during *join one*, the longest time any of the settled members held no partition
  at all (the classic protocol's stop-the-world; KIP-848 revokes only what moves).

The consumer protocol's figures depend on the heartbeat interval (a member hears of a new
target on its next heartbeat): ``--heartbeat-ms`` sets ``group.consumer.heartbeat.interval.ms``
(Kafka's default 5000). They also depend on Kafka 4.3's assignment batching and offload: the
``consumer`` rows run with the broker's ``group.consumer.assignment.interval.ms`` /
``group.consumer.assignor.offload.enable`` (Kafka's 1000 / true unless ``--assignment-interval-ms``
/ ``--no-offload`` say otherwise); the ``consumer-now`` rows, in the same run, are a group that
sets ``consumer.assignment.interval.ms=0`` and ``consumer.assignor.offload.enable=false`` for
itself (GROUP configs): every change answered with its target, as before Kafka 4.3.

    PYTHONPATH=. .venv/bin/python bench/group_protocols.py [--members 50] [--partitions 100]
        [--heartbeat-ms 5000] [--rounds 1] [--assignment-interval-ms 1000] [--no-offload]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkalite.testing import Broker  # noqa: E402

DEADLINE_S = 300.0


def _consumer(bootstrap: str, group: str, protocol: str):
    from confluent_kafka import Consumer

    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "group.protocol": "consumer" if protocol.startswith("consumer") else protocol,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if protocol == "classic":
        config.update({"session.timeout.ms": 30000, "heartbeat.interval.ms": 1000})
    return Consumer(config)


def _settled(consumers, partitions: int) -> bool:
    owned = [{tp.partition for tp in c.assignment()} for c in consumers]
    counts = [len(o) for o in owned]
    if sum(counts) != partitions or len(set().union(*owned)) != partitions:
        return False
    return max(counts) - min(counts) <= 1


def _poll_all(consumers) -> None:
    for c in consumers:
        c.poll(0)


def _wait_settled(consumers, partitions: int, watch=None) -> float:
    start = time.monotonic()
    deadline = start + DEADLINE_S
    while not _settled(consumers, partitions):
        _poll_all(consumers)
        if watch is not None:
            watch()
        if time.monotonic() > deadline:
            raise RuntimeError("the group did not settle")
        time.sleep(0.005)
    return time.monotonic() - start


def _assign_at_once(bootstrap: str, group: str) -> None:
    """The group's own settings: no assignment interval, no offload (GROUP configs)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in (
            ("consumer.assignment.interval.ms", "0"),
            ("consumer.assignor.offload.enable", "false"),
        )
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def measure(bootstrap: str, protocol: str, topic: str, members: int, partitions: int, rnd: int):
    group = f"bench-{protocol}-{rnd}"
    if protocol == "consumer-now":
        _assign_at_once(bootstrap, group)
    consumers = [_consumer(bootstrap, group, protocol) for _ in range(members)]
    try:
        start = time.monotonic()
        for c in consumers:
            c.subscribe([topic])
        _wait_settled(consumers, partitions)
        form_s = time.monotonic() - start
        # one more member joins the settled group
        empty_since: dict[int, float] = {}
        paused = [0.0]

        def watch() -> None:
            now = time.monotonic()
            for i, c in enumerate(consumers[:members]):
                if not c.assignment():
                    empty_since.setdefault(i, now)
                elif i in empty_since:
                    paused[0] = max(paused[0], now - empty_since.pop(i))

        extra = _consumer(bootstrap, group, protocol)
        consumers.append(extra)
        start = time.monotonic()
        extra.subscribe([topic])
        _wait_settled(consumers, partitions, watch)
        join_s = time.monotonic() - start
        now = time.monotonic()
        for t0 in empty_since.values():
            paused[0] = max(paused[0], now - t0)
        return form_s, join_s, paused[0]
    finally:
        for c in consumers:
            c.close()


def run(
    members: int = 50,
    partitions: int = 100,
    heartbeat_ms: int = 5000,
    rounds: int = 1,
    report=print,
    assignment_interval_ms: int | None = None,
    offload: bool = True,
) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    config = {
        "group.consumer.heartbeat.interval.ms": heartbeat_ms,
        "group.consumer.session.timeout.ms": max(45000, heartbeat_ms * 3),
        "group.initial.rebalance.delay.ms": 0,
        "log.level": "WARNING",
        "group.consumer.assignor.offload.enable": "true" if offload else "false",
    }
    if assignment_interval_ms is not None:
        config["group.consumer.assignment.interval.ms"] = assignment_interval_ms
    protocols = ("classic", "consumer", "consumer-now")
    results: dict[str, list[tuple[float, float, float]]] = {p: [] for p in protocols}
    broker = Broker(config=config, subprocess=True)
    broker.start(timeout=120)  # a loaded machine may take its time
    try:
        bootstrap = broker.bootstrap_servers
        topic = "bench-group-protocols"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
        for rnd in range(rounds):
            for protocol in protocols:  # same run, alternating
                results[protocol].append(
                    measure(bootstrap, protocol, topic, members, partitions, rnd)
                )
    finally:
        broker.close()
    summary = {}
    report(
        f"{members} members, {partitions} partitions, consumer protocol heartbeat "
        f"{heartbeat_ms} ms, assignment interval "
        f"{'default' if assignment_interval_ms is None else assignment_interval_ms} ms, "
        f"offload {offload}, {rounds} round(s); median seconds"
    )
    report(f"{'protocol':<12} {'form':>8} {'join one':>9} {'paused':>8}")
    for protocol, rows in results.items():
        form = statistics.median(r[0] for r in rows)
        join = statistics.median(r[1] for r in rows)
        paused = statistics.median(r[2] for r in rows)
        summary[protocol] = {"form_s": form, "join_one_s": join, "paused_s": paused}
        report(f"{protocol:<12} {form:>8.2f} {join:>9.2f} {paused:>8.2f}")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--heartbeat-ms", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--assignment-interval-ms", type=int, default=None)
    parser.add_argument("--no-offload", action="store_true")
    args = parser.parse_args()
    run(
        args.members,
        args.partitions,
        args.heartbeat_ms,
        args.rounds,
        assignment_interval_ms=args.assignment_interval_ms,
        offload=not args.no_offload,
    )


if __name__ == "__main__":
    main()
