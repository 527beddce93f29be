"""A user's asyncio tests with aiokafka (pytest-asyncio) and the kafkalite fixtures."""

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def test_produce_then_consume(kafkalite_broker_session):
    broker = kafkalite_broker_session  # one broker for the session, a namespace per test
    topic = broker.topic("orders")  # unique to this test
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    await producer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(topic, f"order-{i}".encode())
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap_servers,
        group_id=broker.group("billing"),
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        values = [(await consumer.getone()).value for _ in range(5)]
    finally:
        await consumer.stop()
    assert values == [f"order-{i}".encode() for i in range(5)]


async def test_same_topic_name_is_fresh_in_another_test(kafkalite_broker_session):
    broker = kafkalite_broker_session
    await broker.aproduce("orders", [b"only this one"])
    assert [m.value for m in await broker.aconsume_all("orders")] == [b"only this one"]


async def test_leader_failover(kafkalite_cluster):
    cluster = kafkalite_cluster
    await cluster.acreate_topic("payments", replication_factor=3)
    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait("payments", b"before")
        old_leader = (await cluster.apartitions("payments"))[0].leader
        await cluster.akill(old_leader)  # the event loop keeps running meanwhile
        await producer.send_and_wait("payments", b"after")
    finally:
        await producer.stop()
    assert [m.value for m in await cluster.aconsume_all("payments")] == [b"before", b"after"]
