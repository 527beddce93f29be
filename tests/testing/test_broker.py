"""kafkalite.testing.Broker: in-process and subprocess, sync and async, with real clients."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.testing import Broker


def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def produce_and_consume_with_confluent(bootstrap: str, topic: str, values: list[bytes]) -> list:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        for _ in range(300):
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append(message.value())
            if len(got) == len(values):
                break
    finally:
        consumer.close()
    return got


def test_in_process_broker_serves_a_real_client_with_config_overrides():
    with Broker(config={"num.partitions": 3}) as broker:
        assert broker.server is not None  # in this process
        topic = topic_name()
        values = [f"v{i}".encode() for i in range(5)]
        got = produce_and_consume_with_confluent(broker.bootstrap_servers, topic, values)
        assert got == values
        # auto-created with the overridden num.partitions
        assert sorted(broker.partitions(topic)) == [0, 1, 2]
        with urllib.request.urlopen(f"{broker.admin_url}/topics/{topic}", timeout=10) as answer:
            described = json.load(answer)
        assert len(described["partitions"]) == 3


def test_helpers_create_produce_and_consume_all():
    with Broker() as broker:
        topic = broker.create_topic(topic_name(), partitions=2)
        assert broker.produce(topic, [b"a", ("k", "v", {"h": "x"})]) == 0
        assert broker.produce(topic, ["b"], partition=1) == 0
        messages = broker.consume_all(topic)
        assert [(m.partition, m.offset, m.key, m.value) for m in messages] == [
            (0, 0, None, b"a"),
            (0, 1, b"k", b"v"),
            (1, 0, None, b"b"),
        ]
        assert messages[1].headers == (("h", b"x"),)
        leaders = broker.wait_for_leaders(topic)
        assert {state.leader for state in leaders.values()} == {0}


def test_a_stopped_broker_restarts_on_its_port_with_its_data():
    with Broker() as broker:
        topic = broker.create_topic(topic_name())
        broker.produce(topic, [b"kept"])
        bootstrap = broker.bootstrap_servers
        broker.stop()
        assert not broker.running
        broker.start()
        assert broker.bootstrap_servers == bootstrap
        assert [m.value for m in broker.consume_all(topic)] == [b"kept"]


async def test_async_context_manager_with_aiokafka():
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async with Broker() as broker:
        topic = await broker.acreate_topic(topic_name())
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"from aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            message = await consumer.getone()
        finally:
            await consumer.stop()
        assert message.value == b"from aiokafka"
        assert [m.value for m in await broker.aconsume_all(topic)] == [b"from aiokafka"]


def test_subprocess_broker_with_kafka_python_and_kill(monkeypatch):
    from kafka import KafkaConsumer, KafkaProducer

    # the subprocess's settings are its own, as in-process: none from the environment, but
    # what the caller passes as env
    monkeypatch.setenv("KAFKALITE_NOPE", "1")
    with Broker(subprocess=True, env={"KAFKALITE_NUM_PARTITIONS": "2"}) as broker:
        assert broker.server is None and broker.process is not None
        topic = broker.create_topic(topic_name())
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        producer.send(topic, b"from kafka-python").get(timeout=30)
        producer.close()
        consumer = KafkaConsumer(
            topic, bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest"
        )
        got: list[bytes] = []
        try:
            for _ in range(100):
                for records in consumer.poll(timeout_ms=100).values():
                    got.extend(r.value for r in records)
                if got:
                    break
        finally:
            consumer.close()
        assert got == [b"from kafka-python"]
        assert broker.admin_url is not None

        broker.pause()  # SIGSTOP: a frozen broker, its sockets still open
        state = Path(f"/proc/{broker.process.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state == "T"
        broker.resume()
        assert broker.produce(topic, [b"after the pause"]) == 1

        port = broker.port
        broker.restart(hard=True)  # SIGKILL, then a start on the same port and data
        assert broker.port == port
        assert [m.value for m in broker.consume_all(topic)] == [
            b"from kafka-python",
            b"after the pause",
        ]
        auto_created = topic_name()
        assert broker.produce(auto_created, [b"x"]) == 0
        assert sorted(broker.partitions(auto_created)) == [0, 1]  # the env's num.partitions
        assert broker.log_text().count("--- start ---") == 2

        broker.kill()
        assert broker.process.returncode == -9
        broker.start()
        assert broker.stop() == 0
        assert "shut down" in broker.log_tail(5)


def test_a_subprocess_broker_is_ready_when_start_returns():
    """start() returns once Metadata lists the broker and a controller and the admin API
    accepts: a test's first request needs no retry."""
    import asyncio
    import socket

    from kafkalite.client import KafkaClient

    async def metadata(bootstrap: str) -> tuple[set[int], int]:
        client = KafkaClient(bootstrap, client_id="t", request_timeout=5.0, connect_timeout=2.0)
        try:
            await client.start()
            await client.refresh_metadata([])
            return set(client.brokers), client.controller_id
        finally:
            await client.close()

    with Broker(subprocess=True, broker_id=7) as broker:
        for _ in range(2):
            brokers, controller = asyncio.run(metadata(broker.bootstrap_servers))
            assert brokers == {7} and controller == 7
            assert broker.admin_port is not None
            socket.create_connection((broker.host, broker.admin_port), timeout=1.0).close()
            broker.restart(hard=True)


def test_a_quiet_subprocess_broker_on_a_given_port_is_spawned_then_waited_for():
    """log.level WARNING hides the start-up lines that say the ports: a given port (the one
    clients use, whatever the listeners) and an admin port chosen before the start are used
    instead; spawn() returns at once and wait_ready() returns once it serves."""
    import urllib.request

    from kafkalite.testing import api_versions_ok, free_port

    port = free_port()
    broker = Broker({"log.level": "WARNING"}, subprocess=True, port=port)
    try:
        process = broker.spawn()
        assert broker.proc is process and broker.starts == 1
        broker.wait_ready()
        assert broker.bootstrap == broker.bootstrap_servers == f"127.0.0.1:{port}"
        assert api_versions_ok(broker.host, port)
        assert broker.produce(broker.create_topic("quiet"), [b"x"]) == 0
        assert broker.admin_url is not None
        with urllib.request.urlopen(f"{broker.admin_url}/health", timeout=10) as answer:
            assert answer.status == 200
        assert '"event": "started"' not in broker.log_text()
        broker.restart(hard=True, timeout=60)
        assert broker.port == port and broker.starts == 2
        assert [m.value for m in broker.consume_all("quiet")] == [b"x"]
    finally:
        broker.close()


def test_data_dir_is_removed_unless_kept(tmp_path):
    with Broker() as broker:
        data_dir = broker.data_dir
        assert data_dir.exists()
    assert not data_dir.exists()
    with Broker(keep_data=True) as broker:
        kept = broker.data_dir
    assert (kept / "logs").is_dir()


def test_a_bad_config_value_stops_start_up_naming_the_key():
    from kafkalite.config import ConfigError

    with pytest.raises(ConfigError, match="num.partitions"):
        Broker(config={"num.partitions": 0}).start()
