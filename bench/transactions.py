"""Transactions: transactions/s, records/s inside transactions, read_committed consume rate.

    .venv/bin/python bench/transactions.py [--seconds 5] [--big-records 10000] [--big-txns 20]

One run, one `kafkalite serve` subprocess on a free port and a temp data dir, confluent-kafka
(librdkafka) clients, 100-byte values, everything on this machine:

1. transactions/s with 1 and with 10 partitions per transaction, 100 records each (each
   transaction: begin, produce 100 records spread over the partitions, commit, which returns
   once PrepareCommit is written; the markers follow);
2. records/s inside transactions of ``--big-records`` records against plain idempotent produce
   of the same number of records in the same run (target: >= 70% of it at 10,000 records per
   transaction);
3. consume rate of the whole log written above (committed transactions with an aborted one
   every tenth) with isolation.level=read_committed against read_uncommitted on the same log.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkalite.testing import Broker  # noqa: E402

VALUE = b"v" * 100


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)


def txn_producer(bootstrap: str, txn_id: str) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    p.init_transactions(60)
    return p


def produce(p: Producer, topic: str, count: int, partitions: int) -> None:
    for i in range(count):
        while True:
            try:
                p.produce(topic, VALUE, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.001)


def transactions_per_second(bootstrap: str, partitions: int, seconds: float) -> float:
    topic = f"tps-{partitions}"
    create(bootstrap, topic, partitions)
    p = txn_producer(bootstrap, f"bench-tps-{partitions}")
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        p.begin_transaction()
        produce(p, topic, 100, partitions)
        p.commit_transaction(60)
        done += 1
    return done / (time.perf_counter() - start)


def records_per_second(bootstrap: str, records: int, txns: int) -> tuple[float, float]:
    """(inside transactions, plain idempotent) records/s, same record count."""
    create(bootstrap, "big-txn", 1)
    create(bootstrap, "big-plain", 1)
    total = records * txns
    p = txn_producer(bootstrap, "bench-big")
    p.begin_transaction()  # warm up as the plain producer does: not timed
    produce(p, "big-txn", 1, 1)
    p.commit_transaction(60)
    start = time.perf_counter()
    for n in range(txns):
        p.begin_transaction()
        produce(p, "big-txn", records, 1)
        if n % 10 == 9:
            p.flush(60)
            p.abort_transaction(60)  # an aborted one every tenth: for the consume phase
        else:
            p.commit_transaction(60)
    txn_rate = total / (time.perf_counter() - start)
    plain = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    produce(plain, "big-plain", 1, 1)  # connected, producer id and metadata: not timed
    plain.flush(60)
    start = time.perf_counter()
    produce(plain, "big-plain", total, 1)
    plain.flush(120)
    plain_rate = total / (time.perf_counter() - start)
    return txn_rate, plain_rate


def consume_rate(bootstrap: str, topic: str, isolation: str) -> tuple[float, int]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{isolation}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20,
        }
    )
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    count = 0
    start = time.perf_counter()
    try:
        while True:
            msgs = c.consume(10_000, 1.0)
            for m in msgs:
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        return count / (time.perf_counter() - start), count
                    continue
                count += 1
    finally:
        c.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--big-records", type=int, default=10_000)
    parser.add_argument("--big-txns", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker(
            data_dir=Path(tmp) / "broker",
            config={"log.level": "WARNING"},
            subprocess=True,
            admin=False,
        )
        broker.start()
        try:
            bootstrap = broker.bootstrap
            for partitions in (1, 10):
                rate = transactions_per_second(bootstrap, partitions, args.seconds)
                print(f"transactions/s, {partitions} partition(s) x 100 records: {rate:,.0f}")
            txn_rate, plain_rate = records_per_second(bootstrap, args.big_records, args.big_txns)
            print(
                f"records/s in transactions of {args.big_records:,}: {txn_rate:,.0f}; "
                f"plain idempotent produce: {plain_rate:,.0f} ({txn_rate / plain_rate:.0%})"
            )
            committed, n_committed = consume_rate(bootstrap, "big-txn", "read_committed")
            uncommitted, n_all = consume_rate(bootstrap, "big-txn", "read_uncommitted")
            print(
                f"consume, same log: read_committed {committed:,.0f} records/s "
                f"({n_committed:,} records); read_uncommitted {uncommitted:,.0f} records/s "
                f"({n_all:,} records) ({committed / uncommitted:.0%})"
            )
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
