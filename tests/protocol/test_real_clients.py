"""Real clients (confluent-kafka/librdkafka, kafka-python, aiokafka) against the capture fake
broker: they must accept what kafkalite's encoder writes (ApiVersions, Metadata,
InitProducerId, Produce) and get their record acknowledged at offset 0."""

import asyncio

import pytest

from tests.protocol import capture_frames
from tests.protocol.capture_frames import TOPIC, FakeBroker, serve_in_thread

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def broker(tmp_path, monkeypatch):
    monkeypatch.setattr(capture_frames, "OUT", tmp_path)
    fake = FakeBroker("test")
    loop, thread = serve_in_thread(fake)
    yield fake
    asyncio.run_coroutine_threadsafe(fake.shutdown(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def test_confluent_kafka_producer(broker):
    from confluent_kafka import Producer

    delivered = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "linger.ms": 0})
    producer.produce(TOPIC, b"v", on_delivery=lambda err, msg: delivered.append((err, msg)))
    assert producer.flush(20) == 0
    ((err, msg),) = delivered
    assert err is None and msg.offset() == 0


def test_kafka_python_producer(broker):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.port}")
    try:
        metadata = producer.send(TOPIC, b"v").get(timeout=20)
    finally:
        producer.close(timeout=5)
    assert metadata.offset == 0 and metadata.partition == 0


def test_aiokafka_producer(broker):
    from aiokafka import AIOKafkaProducer

    async def go():
        producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.port}")
        await producer.start()
        try:
            return await asyncio.wait_for(producer.send_and_wait(TOPIC, b"v"), 20)
        finally:
            await producer.stop()

    metadata = asyncio.run(go())
    assert metadata.offset == 0
