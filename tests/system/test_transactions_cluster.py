"""Transaction coordinator failover: three brokers on a real ZooKeeper, kill -9 of the coordinator.

The transaction state topic and the data topic are replicated 3 ways (min ISR 2). A
transactional producer (confluent-kafka) runs a series of transactions over a 3-partition
topic, each of 8 records with unique values, committing or aborting by a fixed plan. Faults:

- mid-transaction: after a transaction's records are written, the broker coordinating the
  transactional id (the leader of its ``__transaction_state`` partition, read from ZooKeeper)
  is SIGKILLed; the producer then commits (or aborts) through the new coordinator, which
  loaded the transaction from the replicated log;
- between PrepareCommit and CompleteCommit: the leader of one of the transaction's
  partitions is stopped (SIGSTOP) before the commit, so the coordinator writes PrepareCommit
  and answers EndTxn but cannot write that marker; it is then SIGKILLed and the stopped broker
  continued (SIGCONT): the new coordinator loads PrepareCommit and writes the markers.

A transaction the client could not end (an abortable or fatal error) is aborted, or fenced
by a new producer instance. The first killed broker is restarted before the second kill; the
last transactions run on two brokers. The ledger check at the end: a read_committed consumer
sees every value of every committed transaction exactly once, in per-partition order of
production, and no value of an aborted or failed transaction; read_uncommitted sees all
committed values too.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP

from kafkalite.txn.records import partition_for
from kafkalite.testing import ZooKeeperServer
from tests.system.support import BROKER_IDS, Cluster, wait_for

TXN_PARTITIONS = 50  # Kafka's default transaction.state.log.num.partitions
RECORDS_PER_TXN = 8
PARTITIONS = 3


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("txn-cluster")
    with ZooKeeperServer(base / "zk", max_session_timeout_ms=60000) as zk:
        cluster = Cluster(zk, base)
        for broker in cluster.brokers.values():
            broker.overrides.update(
                {
                    "transaction.state.log.replication.factor": "3",
                    "transaction.state.log.min.isr": "2",
                    "default.replication.factor": "3",
                    "min.insync.replicas": "2",
                }
            )
        try:
            for broker_id in BROKER_IDS:
                cluster.brokers[broker_id].spawn()
            for broker in cluster.brokers.values():
                broker.wait_ready(60)
            yield cluster
        finally:
            cluster.stop_all()
            cluster.zk_reader.close()


def coordinator_of(cluster: Cluster, txn_id: str) -> int:
    partition = partition_for(txn_id, TXN_PARTITIONS)
    state = wait_for(
        lambda: cluster.state("__transaction_state", partition),
        "the transaction state partition",
    )
    return state.leader


class Ledger:
    def __init__(self) -> None:
        self.committed: dict[int, list[bytes]] = defaultdict(list)
        self.aborted: set[bytes] = set()


def new_producer(cluster: Cluster, txn_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60_000,
            "linger.ms": 5,
            "request.timeout.ms": 10_000,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    producer.init_transactions(120)
    return producer


def run_transaction(
    cluster: Cluster,
    producer: Producer,
    txn_id: str,
    topic: str,
    ledger: Ledger,
    n: int,
    commit: bool,
    fault: str | None,
) -> Producer:
    """One transaction; returns the producer to use next (a new one after a fatal error)."""
    values = [f"{txn_id}-{n}-{i}".encode() for i in range(RECORDS_PER_TXN)]
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % PARTITIONS)
    producer.flush(120)
    coordinator = coordinator_of(cluster, txn_id)
    stopped = None
    if fault == "mid":
        cluster.kill(coordinator)
    elif fault == "prepared":
        # the leader of a partition of the transaction stops answering: the coordinator writes
        # PrepareCommit (its ISR shrinks without the stopped broker) and answers EndTxn, but
        # cannot write that partition's marker, so it is killed between PrepareCommit and
        # CompleteCommit for sure
        leaders = {cluster.state(topic, p).leader for p in range(PARTITIONS)} - {coordinator}
        stopped = cluster.brokers[sorted(leaders)[0]]
        os.kill(stopped.proc.pid, signal.SIGSTOP)
    try:
        try:
            if commit:
                producer.commit_transaction(120)
            else:
                producer.abort_transaction(120)
        finally:
            if stopped is not None:
                cluster.kill(coordinator)
                os.kill(stopped.proc.pid, signal.SIGCONT)
    except KafkaException as e:
        error = e.args[0]
        ledger.aborted.update(values)
        if error.txn_requires_abort():
            producer.abort_transaction(120)
        else:  # fatal: a new instance fences the old one and aborts its transaction
            producer = new_producer(cluster, txn_id)
        return producer
    if commit:
        for i, value in enumerate(values):
            ledger.committed[i % PARTITIONS].append(value)
    else:
        ledger.aborted.update(values)
    return producer


def read_all(cluster: Cluster, topic: str, isolation: str, expected: int) -> dict[int, list[bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    consumer.assign([CTP(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = defaultdict(list)
    eof: set[int] = set()
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                    if len(eof) == PARTITIONS and sum(map(len, got.values())) >= expected:
                        return got
                continue  # leader changes: the client retries
            eof.discard(msg.partition())
            got[msg.partition()].append(msg.value())
        raise AssertionError(f"timed out reading {topic} ({isolation}): {dict(got)}")
    finally:
        consumer.close()


def check(cluster: Cluster, topic: str, ledger: Ledger) -> None:
    expected = sum(map(len, ledger.committed.values()))
    committed = read_all(cluster, topic, "read_committed", expected)
    for p in range(PARTITIONS):
        assert committed[p] == ledger.committed[p], f"partition {p}"
    assert not ledger.aborted & {v for vs in committed.values() for v in vs}
    everything = read_all(cluster, topic, "read_uncommitted", expected)
    for p in range(PARTITIONS):
        seen = [v for v in everything[p] if v not in ledger.aborted]
        # read_uncommitted may also hold records of a failed transaction's retries: those
        # are in ledger.aborted; the committed ones are all there, once, in order
        assert seen == ledger.committed[p], f"partition {p} (read_uncommitted)"


def test_coordinator_kill_mid_transaction_and_between_prepare_and_complete(txn_cluster):
    cluster = txn_cluster
    cluster.start_all()
    try:
        topic = f"txn-{uuid.uuid4().hex[:6]}"
        cluster.create_topic(topic, PARTITIONS)
        txn_id = f"tx-{uuid.uuid4().hex[:8]}"
        ledger = Ledger()
        producer = new_producer(cluster, txn_id)
        plan = [True, False, True, True, True, False, True]  # commit or abort
        # the transactions during which a coordinator is killed
        faults = {2: "mid", 4: "prepared"}
        for n, commit in enumerate(plan):
            fault = faults.get(n)
            producer = run_transaction(cluster, producer, txn_id, topic, ledger, n, commit, fault)
            if fault == "mid":
                # back to three brokers before the next kill (min ISR 2); after the second
                # kill the last transactions run on two
                cluster.start_all()
        producer.flush(60)
        check(cluster, topic, ledger)
        # the second kill did hit the window: a new coordinator found PrepareCommit and
        # finished it
        completed = [
            line
            for b in cluster.brokers.values()
            for line in b.log_path.read_text().splitlines()
            if "completing a prepared transaction" in line and txn_id in line
        ]
        assert completed and "PrepareCommit" in completed[0], cluster.logs()
        assert sum(map(len, ledger.committed.values())) >= RECORDS_PER_TXN * 3
    except BaseException:
        print(cluster.logs())
        raise
