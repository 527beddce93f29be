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

import time
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP

from kafkalite.testing import Cluster, ZooKeeperServer
from kafkalite.txn.records import partition_for
from tests.system.support import ZkReader, create_topic, logs, start_all, system_cluster, wait_for

TXN_PARTITIONS = 50  # Kafka's default transaction.state.log.num.partitions
RECORDS_PER_TXN = 8
PARTITIONS = 3


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    base = tmp_path_factory.mktemp("txn-cluster")
    config = {
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
    }
    with (
        ZooKeeperServer(base / "zk", max_session_timeout_ms=60000) as zk,
        system_cluster(zk, base, config) as (cluster, reader),
    ):
        yield cluster, reader


@pytest.fixture(scope="module")
def txn_cluster(running):
    return running[0]


@pytest.fixture(scope="module")
def zk(running):
    """The cluster's znodes, read straight from ZooKeeper."""
    return running[1]


def coordinator_of(zk: ZkReader, txn_id: str) -> int:
    partition = partition_for(txn_id, TXN_PARTITIONS)
    state = wait_for(
        lambda: zk.partition_state("__transaction_state", partition),
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
            "bootstrap.servers": cluster.bootstrap_servers,
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
    zk: ZkReader,
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
    coordinator = coordinator_of(zk, txn_id)
    stopped = None
    if fault == "mid":
        cluster.kill(coordinator)
    elif fault == "prepared":
        # the leader of a partition of the transaction stops answering: the coordinator writes
        # PrepareCommit (its ISR shrinks without the stopped broker) and answers EndTxn, but
        # cannot write that partition's marker, so it is killed between PrepareCommit and
        # CompleteCommit for sure
        leaders = {zk.partition_state(topic, p).leader for p in range(PARTITIONS)}
        stopped = sorted(leaders - {coordinator})[0]
        cluster.pause(stopped, 600)  # SIGSTOP
    try:
        try:
            if commit:
                producer.commit_transaction(120)
            else:
                producer.abort_transaction(120)
        finally:
            if stopped is not None:
                # SIGKILL, then SIGCONT at once (the stopped broker keeps its session)
                cluster.kill(coordinator, wait=False)
                cluster.resume(stopped)
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
            "bootstrap.servers": cluster.bootstrap_servers,
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


def test_coordinator_kill_mid_transaction_and_between_prepare_and_complete(txn_cluster, zk):
    cluster = txn_cluster
    start_all(cluster, zk)
    try:
        topic = f"txn-{uuid.uuid4().hex[:6]}"
        create_topic(cluster, zk, topic, PARTITIONS)
        txn_id = f"tx-{uuid.uuid4().hex[:8]}"
        ledger = Ledger()
        producer = new_producer(cluster, txn_id)
        plan = [True, False, True, True, True, False, True]  # commit or abort
        # the transactions during which a coordinator is killed
        faults = {2: "mid", 4: "prepared"}
        for n, commit in enumerate(plan):
            fault = faults.get(n)
            producer = run_transaction(
                cluster, zk, producer, txn_id, topic, ledger, n, commit, fault
            )
            if fault == "mid":
                # back to three brokers before the next kill (min ISR 2); after the second
                # kill the last transactions run on two
                start_all(cluster, zk)
        producer.flush(60)
        check(cluster, topic, ledger)
        # the second kill did hit the window: a new coordinator found PrepareCommit and
        # finished it
        completed = [
            line
            for b in cluster.processes.values()
            for line in b.log_path.read_text().splitlines()
            if "completing a prepared transaction" in line and txn_id in line
        ]
        assert completed and "PrepareCommit" in completed[0], logs(cluster)
        assert sum(map(len, ledger.committed.values())) >= RECORDS_PER_TXN * 3
    except BaseException:
        print(logs(cluster))
        raise
