"""`kafkalite serve` on a real ZooKeeper (zookeeper.connect) with a chroot, used by a client.

The broker registers under the chroot, wins the controller election there, and serves a
topic created through the admin API; a restart on the same ZooKeeper keeps the topic.
"""

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import ZooKeeperServer
from tests.integration.common import wait_for


def test_broker_on_zookeeper(start_broker, tmp_path):
    with ZooKeeperServer(tmp_path / "zk") as zk:
        broker = start_broker({"zookeeper.connect": zk.connect_string("/kafkalite")})
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("zk-topic", 2, 1)])["zk-topic"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
        for i in range(100):
            producer.produce("zk-topic", f"v{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0

        broker.restart()
        assert "zk-topic" in admin.list_topics(timeout=30).topics
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "unused",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition("zk-topic", p, OFFSET_BEGINNING) for p in (0, 1)])
        values = []

        def poll():
            values.extend(m.value() for m in consumer.consume(100, 0.5) if m.error() is None)
            return len(values) >= 100

        try:
            wait_for(poll, "100 records after the restart")
        finally:
            consumer.close()
        assert sorted(values) == sorted(f"v{i}".encode() for i in range(100))
        broker.stop()


def test_broker_registers_again_after_zookeeper_was_gone_longer_than_its_session(
    start_broker, tmp_path
):
    """ZooKeeper down for longer than zookeeper.session.timeout.ms: the broker's session is
    expired, so it opens a new one when ZooKeeper is back, registers under /brokers/ids again,
    is elected controller again and serves its topic (it used to stay unregistered for good)."""
    import asyncio

    from kafkalite.coord import open_store
    from kafkalite.zk.data import BROKER_IDS

    with ZooKeeperServer(tmp_path / "zk") as zk:
        broker = start_broker(
            {
                "zookeeper.connect": zk.connect_string("/kafkalite"),
                "zookeeper.session.timeout.ms": "4000",
            }
        )
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("survivor", 1, 1)])["survivor"].result(30)
        zk.stop()
        wait_for(
            lambda: "coordination session expired" in broker.log_text(),
            "the broker to declare its session expired",
        )
        zk.start()
        wait_for(
            lambda: "coordination session renewed" in broker.log_text(),
            "a new session, registration and election",
        )

        async def registered() -> list[str]:
            store = open_store(zk.connect_string("/kafkalite"), None, 4000)
            session = await store.open_session()
            try:
                return await session.get_children(BROKER_IDS)
            finally:
                await session.close()
                await store.close()

        assert asyncio.run(registered()) == [str(broker.broker_id)]
        assert admin.list_topics(timeout=30).controller_id == broker.broker_id
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
        producer.produce("survivor", b"after")
        assert producer.flush(30) == 0
        broker.stop()
