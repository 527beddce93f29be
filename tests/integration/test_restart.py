"""Restart mid-stream: every acknowledged message is there afterwards, offsets continue.

A confluent-kafka producer (acks=all, idempotent) keeps producing from a background thread while
the broker is stopped with SIGTERM (clean) or SIGKILL (crash, recovery on start) and restarted on
the same data dir and port. Afterwards each partition must hold offsets 0..n-1 without gaps,
every acknowledged (partition, offset) must hold the acknowledged value, no value may appear
twice (idempotence survives the restart), and offsets acknowledged after the restart must be
above those acknowledged before it.
"""

import threading
from collections import defaultdict

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.testing import Broker
from tests.integration.common import wait_for

PARTITIONS = 2


@pytest.fixture
def broker(tmp_path):
    """A started subprocess broker on a fresh data dir."""
    with Broker(subprocess=True, data_dir=tmp_path / "broker") as broker:
        yield broker


class BackgroundProducer:
    def __init__(self, bootstrap, topic):
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 60000,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "retry.backoff.ms": 50,
            }
        )
        self.topic = topic
        self.acked: dict[tuple[int, int], bytes] = {}
        self.errors = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def on_delivery(self, err, msg):
        with self.lock:
            if err is not None:
                self.errors.append(err)
            else:
                self.acked[(msg.partition(), msg.offset())] = msg.value()

    def run(self):
        i = 0
        while not self.stopping.is_set():
            try:
                self.producer.produce(
                    self.topic,
                    f"v-{i}".encode(),
                    partition=i % PARTITIONS,
                    on_delivery=self.on_delivery,
                )
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.001 if i % 100 == 0 else 0)
        assert self.producer.flush(60) == 0

    def count(self):
        with self.lock:
            return len(self.acked)


def consume_everything(bootstrap, topic):
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        for p in range(PARTITIONS)
    }
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)

    def poll():
        for msg in consumer.consume(1000, 0.5):
            assert msg.error() is None, msg.error()
            got[msg.partition()].append((msg.offset(), msg.value()))
        return all(len(got[p]) >= ends[p] for p in range(PARTITIONS))

    try:
        wait_for(poll, "the whole topic")
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_acknowledged_messages_survive_a_restart(broker, hard):
    topic = "restart"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # keep the handle alive
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = BackgroundProducer(broker.bootstrap_servers, topic)
    producer.thread.start()
    try:
        wait_for(lambda: producer.count() >= 3000, "acks before the restart")
        with producer.lock:
            before = dict(producer.acked)
        broker.restart(hard=hard)
        wait_for(lambda: producer.count() >= len(before) + 3000, "acks after the restart")
    finally:
        producer.stopping.set()
        producer.thread.join(90)
    assert producer.errors == []

    got = consume_everything(broker.bootstrap_servers, topic)
    values = []
    for p in range(PARTITIONS):
        offsets = [o for o, _ in got[p]]
        assert offsets == list(range(len(offsets))), f"gap or duplicate offset in {p}"
        values += [v for _, v in got[p]]
    assert len(values) == len(set(values)), "a value was written twice"
    stored = {(p, o): v for p in got for o, v in got[p]}
    for key, value in producer.acked.items():
        assert stored.get(key) == value, key
    after = {k for k in producer.acked if k not in before}
    assert after, "nothing was acknowledged after the restart"
    for p in range(PARTITIONS):
        before_p = [o for (q, o) in before if q == p]
        after_p = [o for (q, o) in after if q == p]
        if before_p and after_p:
            assert min(after_p) > max(before_p), f"offsets of {p} did not continue"
