"""Transactions: transactions/s, records/s inside transactions, read_committed consume rate.

    .venv/bin/python bench/transactions.py [--seconds 5] [--big-records 10000] [--big-txns 20]
        [--commit-txns 200] [--only-commit] [--baseline-src DIR --rounds N]

One run, one `kafkalite serve` subprocess on a free port and a temp data dir, confluent-kafka
(librdkafka) clients, 100-byte values, everything on this machine:

1. transactions/s with 1 and with 10 partitions per transaction, 100 records each (each
   transaction: begin, produce 100 records spread over the partitions, commit, which returns
   once PrepareCommit is written; the markers follow);
2. records/s inside transactions of ``--big-records`` records against plain idempotent produce
   of the same number of records in the same run (target: >= 70% of it at 10,000 records per
   transaction);
3. consume rate of the whole log written above (committed transactions with an aborted one
   every tenth) with isolation.level=read_committed against read_uncommitted on the same log;
4. commit latency (``--commit-txns`` transactions, 0 skips the phase) on three brokers on a real
   ZooKeeper (``kafkalite serve`` subprocesses, a topic of 3 partitions at replication factor 3,
   so each partition has another leader) and, in the same run, on the one broker above: each
   transaction writes one record to each partition. Printed with p50/p99: EndTxn (the
   ``commit_transaction()`` call after a flush, i.e. the EndTxn round trip) and commit-to-next-
   begin (from ``commit_transaction()`` returning until the next transaction's
   ``begin_transaction()`` and first record are acknowledged: AddPartitionsToTxn, retried by
   librdkafka every 20 ms while the coordinator answers CONCURRENT_TRANSACTIONS because the
   previous transaction's markers are still being written, then the Produce), with the number
   of those retries counted from librdkafka's ``eos`` debug log. Baseline, same cluster, same
   run: a plain idempotent producer's one-record round trip (target: commit-to-next-begin
   <= 15 ms on three brokers). ``--baseline-src DIR`` also runs the three brokers from another
   checkout (``git archive`` of the base commit), alternating with this tree ``--rounds`` times.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkalite.testing import Broker, ZooKeeperServer  # noqa: E402

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


class RetryCounter:
    """A librdkafka ``logger``: counts the AddPartitionsToTxn retries on CONCURRENT_TRANSACTIONS
    (librdkafka logs the error by its name or its message)."""

    MARKS = ("CONCURRENT_TRANSACTIONS", "concurrent operation")

    def __init__(self) -> None:
        self.count = 0

    def log(self, *args, **kwargs) -> None:
        # called as logger.log(level, fmt, *args) by confluent-kafka
        text = " ".join(str(a) for a in args)
        if any(mark in text for mark in self.MARKS):
            self.count += 1

    def __getattr__(self, name: str):  # debug/info/... if confluent-kafka asks for them
        return self.log


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"p50 {statistics.median(ms):6.1f} ms  p99 {percentile(ms, 0.99):6.1f} ms  "
        f"max {max(ms):6.1f} ms"
    )


def wait_delivered(p: Producer, delivered: list) -> None:
    deadline = time.monotonic() + 60
    while not delivered:
        p.poll(0.0005)
        if time.monotonic() > deadline:
            raise TimeoutError("no delivery report in 60 s")
    if delivered[0] is not None:
        raise RuntimeError(f"delivery failed: {delivered[0]}")


def commit_latency(bootstrap: str, topic: str, txns: int) -> tuple[list, list, int, list]:
    """(EndTxn seconds, commit-to-next-begin seconds, CONCURRENT_TRANSACTIONS retries, plain
    idempotent one-record round trips) over ``txns`` transactions after a warm-up."""
    create_replicated(bootstrap, topic, 3)
    retries = RetryCounter()
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-commit-{topic}",
            "linger.ms": 0,
            "debug": "eos",
            "logger": retries,
        }
    )
    p.init_transactions(60)
    end_txn: list[float] = []
    next_begin: list[float] = []
    committed_at = None
    counted = 0
    for n in range(txns + 5):  # the first 5: connections and metadata, not counted
        delivered: list = []
        p.begin_transaction()
        p.produce(topic, VALUE, partition=0, on_delivery=lambda e, _m, d=delivered: d.append(e))
        wait_delivered(p, delivered)
        if committed_at is not None and n >= 5:
            next_begin.append(time.perf_counter() - committed_at)
        for partition in (1, 2):
            p.produce(topic, VALUE, partition=partition)
        p.flush(60)
        if n == 4:
            counted = retries.count
        start = time.perf_counter()
        p.commit_transaction(60)
        committed_at = time.perf_counter()
        if n >= 5:
            end_txn.append(committed_at - start)
    concurrent = retries.count - counted
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    round_trips: list[float] = []
    for n in range(txns + 5):
        delivered = []
        start = time.perf_counter()
        plain.produce(
            topic, VALUE, partition=n % 3, on_delivery=lambda e, _m, d=delivered: d.append(e)
        )
        wait_delivered(plain, delivered)
        if n >= 5:
            round_trips.append(time.perf_counter() - start)
    return end_txn, next_begin, concurrent, round_trips


def create_replicated(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    brokers = len(admin.list_topics(timeout=30).brokers)
    admin.create_topics([NewTopic(topic, partitions, min(3, brokers))])[topic].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every partition led before the first transaction
        meta = admin.list_topics(topic=topic, timeout=10).topics[topic]
        if meta.error is None and all(p.leader >= 0 for p in meta.partitions.values()):
            if len(meta.partitions) == partitions:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{topic}: partitions without a leader after 60 s")


@contextlib.contextmanager
def three_brokers(base: Path, src: Path | None = None) -> Iterator[str]:
    """Three ``kafkalite serve`` processes on a real ZooKeeper, running the ``kafkalite`` of
    ``src`` (a checkout) or of this tree; yields their bootstrap list."""
    zk = ZooKeeperServer(base / "zk", max_session_timeout_ms=60000)
    zk.start()
    brokers = [
        Broker(
            subprocess=True,
            data_dir=base / f"broker-{b}",
            broker_id=b,
            admin=False,
            config={
                "log.level": "WARNING",
                "zookeeper.connect": zk.connect_string("/kafkalite"),
                "default.replication.factor": "3",
                "min.insync.replicas": "2",
                "offsets.topic.replication.factor": "3",
                # an older tree has no Schema Registry: leave out the test default it would refuse
                **({} if src is None else {"schema.registry.listeners": None}),
            },
            env=None if src is None else {"PYTHONPATH": str(src.resolve())},
        )
        for b in (1, 2, 3)
    ]
    try:
        for broker in brokers:
            broker.start()
        yield ",".join(broker.bootstrap_servers for broker in brokers)
    finally:
        for broker in brokers:
            broker.kill()
        zk.stop()


def print_commit_latency(label: str, figures: tuple[list, list, int, list]) -> None:
    end_txn, next_begin, concurrent, round_trips = figures
    print(f"commit latency, {label}, {len(end_txn)} transactions x 3 partitions:")
    print(f"  EndTxn                     {summary(end_txn)}")
    print(
        f"  commit-to-next-begin       {summary(next_begin)}  "
        f"({concurrent} CONCURRENT_TRANSACTIONS retries)"
    )
    print(f"  baseline: idempotent 1-record round trip  {summary(round_trips)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--big-records", type=int, default=10_000)
    parser.add_argument("--big-txns", type=int, default=20)
    parser.add_argument("--commit-txns", type=int, default=200)
    parser.add_argument("--only-commit", action="store_true", help="only the commit latency")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="a checkout (e.g. `git archive` of the base commit): its three brokers' commit "
        "latency is measured too, alternating with this tree's, --rounds times",
    )
    parser.add_argument("--rounds", type=int, default=1)
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
            bootstrap = broker.bootstrap_servers
            if args.commit_txns:
                one = commit_latency(bootstrap, "commit-1", args.commit_txns)
                print_commit_latency("1 broker", one)
                trees = [("this tree", None)]
                if args.baseline_src is not None:
                    trees.append((f"baseline {args.baseline_src}", args.baseline_src))
                for n in range(args.rounds):
                    for label, src in trees:
                        where = Path(tmp) / f"cluster-{n}-{len(label)}"
                        with three_brokers(where, src) as cluster:
                            three = commit_latency(cluster, "commit-3", args.commit_txns)
                        print_commit_latency(f"3 brokers (RF 3, min.insync 2), {label}", three)
            if args.only_commit:
                return
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
