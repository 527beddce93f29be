"""Transactions with real clients (confluent-kafka / librdkafka and aiokafka) on one broker.

- a transactional producer commits and aborts; a read_committed consumer sees exactly the
  committed records, in order, never an aborted or open one; read_uncommitted sees all of them;
- consume-transform-produce with ``send_offsets_to_transaction``: every input record is
  transformed exactly once end to end, and the group's committed offset moves only with the
  commits (an aborted round is redone);
- zombie fencing: a second producer with the same transactional.id fences the first, whose
  next transactional call fails with PRODUCER_FENCED;
- a producer killed (SIGKILL) mid-transaction holds the LSO until the coordinator aborts the
  transaction after its timeout; then the LSO moves on and the records stay invisible;
- a broker killed (SIGKILL) and restarted with an open and an aborted transaction in its log
  rebuilds the LSO and the aborted-transaction index from disk.

The broker runs with ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` = 500 so
that a 3 s transaction timeout is acted on quickly; the other transaction settings are Kafka's
defaults (``__transaction_state`` with 50 partitions, on one broker).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import Broker
from tests.integration.common import wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]

DEADLINE_S = 60.0
OVERRIDES = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("txn-broker")
    with Broker(OVERRIDES, subprocess=True, data_dir=data_dir) as broker:
        yield broker


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)
    futures[topic].result(timeout=DEADLINE_S)


def txn_producer(bootstrap: str, txn_id: str, **extra) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "linger.ms": 5,
            **extra,
        }
    )


def consume_all(
    bootstrap: str, topic: str, partitions: int, isolation: str, expected: int
) -> dict[int, list[bytes]]:
    """Every record of the topic up to the end the consumer sees (EOF on every partition,
    reached after at least ``expected`` records), per partition in offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": _name("reader"),
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    at_eof: set[int] = set()
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_eof.add(msg.partition())
                    if len(at_eof) == partitions and sum(map(len, got.values())) >= expected:
                        return got
                    continue
                raise AssertionError(f"consumer error: {msg.error()}")
            at_eof.discard(msg.partition())
            got[msg.partition()].append(msg.value())
        raise AssertionError(f"timed out; consumed {got}")
    finally:
        consumer.close()


def committed_end(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The end offset a read_committed consumer sees: the LSO (ListOffsets read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": _name("lso"),
            "isolation.level": "read_committed",
        }
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        consumer.close()


# ---------------------------------------------------------------------- confluent-kafka


def test_commit_and_abort_read_committed_and_uncommitted(txn_broker):
    topic = _name("txn")
    create_topic(txn_broker.bootstrap_servers, topic, 2)
    producer = txn_producer(txn_broker.bootstrap_servers, _name("tx"))
    producer.init_transactions(DEADLINE_S)
    committed: dict[int, list[bytes]] = {0: [], 1: []}
    everything: dict[int, list[bytes]] = {0: [], 1: []}
    for round_ in range(6):
        commit = round_ % 3 != 1  # rounds 1 and 4 abort
        producer.begin_transaction()
        for i in range(20):
            value = f"r{round_}-{i}".encode()
            producer.produce(topic, value, partition=i % 2)
            everything[i % 2].append(value)
            if commit:
                committed[i % 2].append(value)
        if commit:
            producer.commit_transaction(DEADLINE_S)
        else:
            producer.flush(DEADLINE_S)  # the aborted records do reach the log
            producer.abort_transaction(DEADLINE_S)
    expected = sum(map(len, committed.values()))
    assert (
        consume_all(txn_broker.bootstrap_servers, topic, 2, "read_committed", expected) == committed
    )
    total = sum(map(len, everything.values()))
    assert (
        consume_all(txn_broker.bootstrap_servers, topic, 2, "read_uncommitted", total) == everything
    )


def test_open_transaction_is_invisible_until_committed(txn_broker):
    topic = _name("open")
    create_topic(txn_broker.bootstrap_servers, topic)
    producer = txn_producer(txn_broker.bootstrap_servers, _name("tx"))
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    producer.produce(topic, b"before", partition=0)
    producer.commit_transaction(DEADLINE_S)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"open-{i}".encode(), partition=0)
    producer.flush(DEADLINE_S)
    # the open transaction starts at offset 2 (offset 1 is the first commit marker)
    assert committed_end(txn_broker.bootstrap_servers, topic) == 2
    assert consume_all(txn_broker.bootstrap_servers, topic, 1, "read_committed", 1) == {
        0: [b"before"]
    }
    assert consume_all(txn_broker.bootstrap_servers, topic, 1, "read_uncommitted", 6)[0] == [
        b"before",
        *(f"open-{i}".encode() for i in range(5)),
    ]
    producer.commit_transaction(DEADLINE_S)
    wait_for(
        lambda: committed_end(txn_broker.bootstrap_servers, topic) == 8,
        "the LSO to pass the commit",
    )
    assert consume_all(txn_broker.bootstrap_servers, topic, 1, "read_committed", 6)[0] == [
        b"before",
        *(f"open-{i}".encode() for i in range(5)),
    ]


def test_consume_transform_produce_exactly_once(txn_broker):
    source, sink, group = _name("src"), _name("sink"), _name("ctp")
    create_topic(txn_broker.bootstrap_servers, source, 2)
    create_topic(txn_broker.bootstrap_servers, sink, 1)
    plain = Producer({"bootstrap.servers": txn_broker.bootstrap_servers})
    inputs = [f"in-{i}".encode() for i in range(60)]
    for i, value in enumerate(inputs):
        plain.produce(source, value, partition=i % 2)
    plain.flush(DEADLINE_S)

    def run(rounds_to_abort: set[int], limit: int | None) -> int:
        """Consume-transform-produce until the source is drained (or ``limit`` rounds);
        returns the rounds made."""
        consumer = Consumer(
            {
                "bootstrap.servers": txn_broker.bootstrap_servers,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        consumer.subscribe([source])
        producer = txn_producer(txn_broker.bootstrap_servers, f"{group}-tx")
        producer.init_transactions(DEADLINE_S)
        rounds = 0
        idle_since = time.monotonic()
        try:
            while limit is None or rounds < limit:
                batch = consumer.consume(10, 0.5)
                batch = [m for m in batch if not m.error()]
                if not batch:
                    if time.monotonic() - idle_since > 3 and consumer.assignment():
                        positions = consumer.position(consumer.assignment())
                        if sum(max(p.offset, 0) for p in positions) == len(inputs):
                            break
                    continue
                idle_since = time.monotonic()
                producer.begin_transaction()
                for m in batch:
                    producer.produce(sink, m.value().replace(b"in-", b"out-"), partition=0)
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()),
                    consumer.consumer_group_metadata(),
                    DEADLINE_S,
                )
                if rounds in rounds_to_abort:
                    producer.abort_transaction(DEADLINE_S)
                    # rewind to the committed offsets: the aborted round is redone
                    committed = consumer.committed(consumer.assignment(), timeout=DEADLINE_S)
                    for tp in committed:
                        consumer.seek(
                            TopicPartition(tp.topic, tp.partition, max(tp.offset, 0))
                            if tp.offset >= 0
                            else TopicPartition(tp.topic, tp.partition, 0)
                        )
                else:
                    producer.commit_transaction(DEADLINE_S)
                rounds += 1
            return rounds
        finally:
            consumer.close()

    run({0, 2}, None)
    out = consume_all(txn_broker.bootstrap_servers, sink, 1, "read_committed", len(inputs))[0]
    assert sorted(out) == sorted(v.replace(b"in-", b"out-") for v in inputs)
    assert len(out) == len(set(out)) == len(inputs)
    # the group's committed offsets are those of the committed transactions: at the end
    checker = Consumer({"bootstrap.servers": txn_broker.bootstrap_servers, "group.id": group})
    try:
        offsets = checker.committed(
            [TopicPartition(source, 0), TopicPartition(source, 1)], timeout=DEADLINE_S
        )
    finally:
        checker.close()
    assert sum(tp.offset for tp in offsets) == len(inputs)


def test_second_producer_fences_the_first(txn_broker):
    topic = _name("fence")
    create_topic(txn_broker.bootstrap_servers, topic)
    txn_id = _name("tx")
    zombie = txn_producer(txn_broker.bootstrap_servers, txn_id)
    zombie.init_transactions(DEADLINE_S)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    zombie.flush(DEADLINE_S)
    successor = txn_producer(txn_broker.bootstrap_servers, txn_id)
    successor.init_transactions(DEADLINE_S)  # fences the zombie and aborts its transaction
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(DEADLINE_S)
    with pytest.raises(KafkaException) as failure:
        zombie.produce(topic, b"late", partition=0)
        zombie.commit_transaction(DEADLINE_S)
    error = failure.value.args[0]
    assert error.code() == KafkaError._FENCED or error.fatal(), error
    assert consume_all(txn_broker.bootstrap_servers, topic, 1, "read_committed", 1) == {
        0: [b"successor"]
    }


# ---------------------------------------------------------------------- hanging transaction

HANGING_PRODUCER = """
import sys, time
from confluent_kafka import Producer
bootstrap, topic, txn_id, timeout = sys.argv[1:5]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
              "transaction.timeout.ms": int(timeout), "linger.ms": 0})
p.init_transactions(60)
p.begin_transaction()
for i in range(5):
    p.produce(topic, f"hanging-{i}".encode(), partition=0)
p.flush(60)
print("produced", flush=True)
time.sleep(600)  # holds the transaction open until the test kills this process
"""


def test_killed_producer_transaction_is_aborted_after_its_timeout(txn_broker):
    topic = _name("hang")
    create_topic(txn_broker.bootstrap_servers, topic)
    before = txn_producer(txn_broker.bootstrap_servers, _name("tx"))
    before.init_transactions(DEADLINE_S)
    before.begin_transaction()
    before.produce(topic, b"committed-0", partition=0)
    before.commit_transaction(DEADLINE_S)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HANGING_PRODUCER,
            txn_broker.bootstrap_servers,
            topic,
            _name("tx"),
            "3000",
        ],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"produced"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=DEADLINE_S)
        # while the transaction is open the LSO stays at its first record (offset 2)
        assert committed_end(txn_broker.bootstrap_servers, topic) == 2
        # after transaction.timeout.ms the coordinator fences and aborts it: the LSO moves
        # past its abort marker
        wait_for(
            lambda: committed_end(txn_broker.bootstrap_servers, topic) == 8, "the timeout abort"
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    before.begin_transaction()
    before.produce(topic, b"committed-1", partition=0)
    before.commit_transaction(DEADLINE_S)
    assert consume_all(txn_broker.bootstrap_servers, topic, 1, "read_committed", 2) == {
        0: [b"committed-0", b"committed-1"]
    }


def start_hanging_producer(bootstrap: str, topic: str, txn_id: str, timeout_ms: int) -> None:
    """A producer process that opens a transaction (5 records in partition 0), is SIGKILLed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HANGING_PRODUCER, bootstrap, topic, txn_id, str(timeout_ms)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"produced"
    finally:
        proc.kill()
        proc.wait(timeout=DEADLINE_S)


def test_admin_api_cli_and_kip664_apis(txn_broker):
    """DescribeTransactions, ListTransactions, DescribeProducers; GET /transactions(/{id});
    `kafkalite transactions list|describe|abort` (by id, and a hanging transaction by topic,
    partition and start offset, as kafka-transactions.sh)."""
    import json

    from click.testing import CliRunner

    from kafkalite.cli import app
    from kafkalite.client.client import KafkaClient
    from kafkalite.protocol.api import ApiKey

    runner = CliRunner()
    admin_url = txn_broker.admin_url

    def cli(*args: str) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    topic = _name("admin")
    create_topic(txn_broker.bootstrap_servers, topic)
    txn_id = _name("tx-open")
    # a hanging transaction the coordinator will not time out soon (15 minutes)
    start_hanging_producer(txn_broker.bootstrap_servers, topic, txn_id, 900_000)
    listed = json.loads(cli("transactions", "list", "--admin-url", admin_url, "--json"))
    assert [t["state"] for t in listed if t["transactional_id"] == txn_id] == ["Ongoing"]
    described = json.loads(
        cli("transactions", "describe", txn_id, "--admin-url", admin_url, "--json")
    )
    assert described["state"] == "Ongoing"
    assert described["partitions"] == [{"topic": topic, "partition": 0}]
    assert described["timeout_ms"] == 900_000
    assert txn_id in cli("transactions", "describe", txn_id, "--admin-url", admin_url)

    async def protocol() -> None:
        client = KafkaClient(txn_broker.bootstrap_servers)
        await client.start()
        try:
            d = await client.send(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [txn_id]})
            state = d.transaction_states[0]
            assert (state.error_code, state.transaction_state) == (0, "Ongoing")
            assert [(t.topic, list(t.partitions)) for t in state.topics] == [(topic, [0])]
            listing = await client.send(
                ApiKey.LIST_TRANSACTIONS, {"state_filters": ["Ongoing"], "producer_id_filters": []}
            )
            assert txn_id in [t.transactional_id for t in listing.transaction_states]
            p = await client.send(
                ApiKey.DESCRIBE_PRODUCERS,
                {"topics": [{"name": topic, "partition_indexes": [0]}]},
            )
            producers = p.topics[0].partitions[0].active_producers
            assert [x.current_txn_start_offset for x in producers] == [0]
            assert producers[0].producer_id == described["producer_id"]
        finally:
            await client.close()

    asyncio.run(protocol())
    # the hanging transaction is aborted by the partition (KIP-664), without the coordinator
    cli(
        "transactions",
        "abort",
        "--topic",
        topic,
        "--partition",
        "0",
        "--start-offset",
        "0",
        "-b",
        txn_broker.bootstrap_servers,
    )
    wait_for(
        lambda: committed_end(txn_broker.bootstrap_servers, topic) == 6, "the LSO past the abort"
    )
    # an open transaction the coordinator knows: aborted through the admin API
    other = _name("tx-admin")
    start_hanging_producer(txn_broker.bootstrap_servers, topic, other, 900_000)
    assert committed_end(txn_broker.bootstrap_servers, topic) == 6
    assert "aborted" in cli("transactions", "abort", other, "--admin-url", admin_url)
    wait_for(lambda: committed_end(txn_broker.bootstrap_servers, topic) == 12, "the admin abort")
    assert (
        json.loads(cli("transactions", "describe", other, "--admin-url", admin_url, "--json"))[
            "state"
        ]
        == "CompleteAbort"
    )
    assert consume_all(txn_broker.bootstrap_servers, topic, 1, "read_committed", 0) == {0: []}


# ---------------------------------------------------------------------- restart


def test_restart_rebuilds_lso_and_aborted_index(tmp_path):
    with Broker(OVERRIDES, subprocess=True, data_dir=tmp_path / "restart") as broker:
        topic = _name("restart")
        create_topic(broker.bootstrap_servers, topic)
        producer = txn_producer(broker.bootstrap_servers, _name("tx"))
        producer.init_transactions(DEADLINE_S)
        producer.begin_transaction()
        producer.produce(topic, b"aborted", partition=0)  # offset 0
        producer.flush(DEADLINE_S)
        producer.abort_transaction(DEADLINE_S)  # marker at 1
        producer.begin_transaction()
        producer.produce(topic, b"committed", partition=0)  # offset 2
        producer.commit_transaction(DEADLINE_S)  # marker at 3
        wait_for(lambda: committed_end(broker.bootstrap_servers, topic) == 4, "the commit marker")
        hanging = txn_producer(
            broker.bootstrap_servers, _name("tx"), **{"transaction.timeout.ms": 3000}
        )
        hanging.init_transactions(DEADLINE_S)
        hanging.begin_transaction()
        hanging.produce(topic, b"open", partition=0)  # offset 4, never ended by this producer
        hanging.flush(DEADLINE_S)
        assert committed_end(broker.bootstrap_servers, topic) == 4

        broker.kill()
        broker.start()
        # the open transaction holds the LSO again, from the producer state on disk
        assert committed_end(broker.bootstrap_servers, topic) in (4, 6)
        # the coordinator reloads it from __transaction_state and aborts it after its timeout
        wait_for(lambda: committed_end(broker.bootstrap_servers, topic) == 6, "the reloaded abort")
        assert consume_all(broker.bootstrap_servers, topic, 1, "read_committed", 1) == {
            0: [b"committed"]
        }
        assert consume_all(broker.bootstrap_servers, topic, 1, "read_uncommitted", 3) == {
            0: [b"aborted", b"committed", b"open"]
        }
        txn_files = sorted(p.name for p in (broker.log_dir / f"{topic}-0").glob("*.txnindex"))
        assert txn_files == ["00000000000000000000.txnindex"]
        assert (broker.log_dir / f"{topic}-0" / txn_files[0]).stat().st_size == 2 * 34


# ---------------------------------------------------------------------- aiokafka


def test_aiokafka_transactions(txn_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import ProducerFenced
    from aiokafka.structs import TopicPartition as ATP

    topic, source, group = _name("aio"), _name("aio-src"), _name("aio-g")
    create_topic(txn_broker.bootstrap_servers, topic)
    create_topic(txn_broker.bootstrap_servers, source)
    txn_id = _name("aio-tx")

    async def scenario() -> None:
        seed = AIOKafkaProducer(bootstrap_servers=txn_broker.bootstrap_servers)
        await seed.start()
        try:
            for i in range(10):
                await seed.send_and_wait(source, f"in-{i}".encode(), partition=0)
        finally:
            await seed.stop()
        producer = AIOKafkaProducer(
            bootstrap_servers=txn_broker.bootstrap_servers, transactional_id=txn_id
        )
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(3):
                    await producer.send_and_wait(topic, f"c{i}".encode(), partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"aborted", partition=0)
            await producer.abort_transaction()
            # consume-transform-produce: offsets committed inside the transaction
            consumer = AIOKafkaConsumer(
                bootstrap_servers=txn_broker.bootstrap_servers,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                isolation_level="read_committed",
            )
            await consumer.start()
            try:
                consumer.assign([ATP(source, 0)])
                records = []
                deadline = time.monotonic() + DEADLINE_S
                while len(records) < 10 and time.monotonic() < deadline:
                    batch = await consumer.getmany(ATP(source, 0), timeout_ms=500)
                    records.extend(batch.get(ATP(source, 0), []))
                assert len(records) == 10
                async with producer.transaction():
                    for r in records:
                        await producer.send(topic, r.value.replace(b"in-", b"out-"), partition=0)
                    await producer.send_offsets_to_transaction({ATP(source, 0): 10}, group)
                # visible once the commit marker reached the group's offsets partition
                deadline = time.monotonic() + DEADLINE_S
                while await consumer.committed(ATP(source, 0)) != 10:
                    assert time.monotonic() < deadline, "the transactional offset commit"
                    await asyncio.sleep(0.05)  # polling interval of the condition above
            finally:
                await consumer.stop()
            # a second producer with the same id fences this one
            successor = AIOKafkaProducer(
                bootstrap_servers=txn_broker.bootstrap_servers, transactional_id=txn_id
            )
            await successor.start()
            try:
                with pytest.raises(ProducerFenced):
                    async with producer.transaction():
                        await producer.send_and_wait(topic, b"zombie", partition=0)
            finally:
                await successor.stop()
        finally:
            await producer.stop()

        for isolation, expected in (
            ("read_committed", [b"c0", b"c1", b"c2", *(f"out-{i}".encode() for i in range(10))]),
            (
                "read_uncommitted",
                [b"c0", b"c1", b"c2", b"aborted", *(f"out-{i}".encode() for i in range(10))],
            ),
        ):
            reader = AIOKafkaConsumer(
                bootstrap_servers=txn_broker.bootstrap_servers,
                isolation_level=isolation,
                auto_offset_reset="earliest",
            )
            await reader.start()
            try:
                reader.assign([ATP(topic, 0)])
                got: list[bytes] = []
                deadline = time.monotonic() + DEADLINE_S
                while len(got) < len(expected) and time.monotonic() < deadline:
                    batch = await reader.getmany(ATP(topic, 0), timeout_ms=500)
                    got.extend(r.value for r in batch.get(ATP(topic, 0), []))
                assert got == expected, isolation
            finally:
                await reader.stop()

    asyncio.run(scenario())


# ---------------------------------------------------------------------- kafka-python


def test_kafka_python_transactions(txn_broker):
    from kafka import KafkaProducer

    topic = _name("kp")
    create_topic(txn_broker.bootstrap_servers, topic)
    producer = KafkaProducer(
        bootstrap_servers=txn_broker.bootstrap_servers, transactional_id=_name("kp")
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, f"kp-{i}".encode(), partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"kp-aborted", partition=0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    assert consume_all(txn_broker.bootstrap_servers, topic, 1, "read_committed", 3) == {
        0: [b"kp-0", b"kp-1", b"kp-2"]
    }
    assert (
        consume_all(txn_broker.bootstrap_servers, topic, 1, "read_uncommitted", 4)[0][-1]
        == b"kp-aborted"
    )
