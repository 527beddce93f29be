"""Share groups: records/s through 1, 4 and 16 ShareConsumers on one partition.

    .venv/bin/python bench/share_groups.py [--records 20000] [--consumers 1,4,16]

One `kafkalite serve` subprocess (``share.auto.offset.reset=earliest``) on a free port and a temp
data dir, one topic of one partition holding ``--records`` records of 100 bytes, confluent-kafka
2.16's ShareConsumer (librdkafka), implicit acknowledgement (every record accepted on the next
poll), one thread per consumer. Each row is a new share group reading the whole partition: the
time from the first poll until every record was delivered, and how many were delivered more
than once (a lock that expired under a slow consumer; 0 expected at the default 30 s lock).

Baseline, same broker, same run, same log: one classic consumer group member (Consumer,
read_uncommitted, auto commit) reading the partition from the beginning.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, ShareConsumer  # noqa: E402

from kafkalite.testing import Broker  # noqa: E402

VALUE = b"v" * 100
TOPIC = "share-bench"


def produce(bootstrap: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(n):
        while True:
            try:
                p.produce(TOPIC, VALUE, key=str(i).encode())
                break
            except BufferError:
                p.poll(0.1)
    p.flush(60)


def classic(bootstrap: str, n: int) -> float:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "classic-baseline",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([TOPIC])
    got = 0
    start = None
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in c.consume(500, 0.5):
            if m.error() is None:
                if start is None:
                    start = time.monotonic()
                got += 1
    elapsed = time.monotonic() - (start or time.monotonic())
    c.close()
    return got / elapsed if elapsed > 0 else float("nan")


def shared(bootstrap: str, n: int, consumers: int) -> tuple[float, int]:
    """(records/s, records delivered more than once)."""
    seen: dict[int, int] = {}
    lock = threading.Lock()
    done = threading.Event()
    started: list[float] = []

    def run() -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": f"share-{consumers}"})
        c.subscribe([TOPIC])
        try:
            while not done.is_set():
                batch = c.poll(0.5)
                offsets = [m.offset() for m in batch if m.error() is None]
                if not offsets:
                    continue
                with lock:
                    if done.is_set():
                        # after the last record: a consumer that closed first released what it
                        # had not acknowledged yet, and another may get it again meanwhile
                        break
                    if not started:
                        started.append(time.monotonic())
                    for o in offsets:
                        seen[o] = seen.get(o, 0) + 1
                    if len(seen) >= n:
                        done.set()
        finally:
            c.close()

    threads = [threading.Thread(target=run) for _ in range(consumers)]
    for t in threads:
        t.start()
    done.wait(600)
    end = time.monotonic()
    done.set()
    for t in threads:
        t.join(60)
    elapsed = end - started[0] if started else float("nan")
    return len(seen) / elapsed, sum(1 for v in seen.values() if v > 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--consumers", default="1,4,16")
    args = parser.parse_args()
    counts = [int(c) for c in args.consumers.split(",")]
    with Broker(
        {"share.auto.offset.reset": "earliest", "offsets.topic.num.partitions": 1},
        subprocess=True,
    ) as broker:
        broker.create_topic(TOPIC)
        produce(broker.bootstrap_servers, args.records)
        print(f"{args.records} records of 100 bytes on one partition")
        baseline = classic(broker.bootstrap_servers, args.records)
        print(f"{'baseline: classic consumer, 1 member':<40} {baseline:>10,.0f} records/s")
        for k in counts:
            rate, again = shared(broker.bootstrap_servers, args.records, k)
            print(
                f"{f'share group, {k} consumer(s)':<40} {rate:>10,.0f} records/s"
                f"   ({rate / baseline:.0%} of baseline, {again} redelivered)"
            )


if __name__ == "__main__":
    main()
