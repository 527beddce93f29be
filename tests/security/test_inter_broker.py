"""Three brokers on a real ZooKeeper replicating over a SASL_SSL inter-broker listener.

As an operator does it with Kafka: the brokers' own SCRAM-SHA-512 credential is written to
ZooKeeper (`/config/users/broker`) before they start, and each broker's inter-broker listener is
SASL_SSL with `sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512` and its username/password
in that listener's JAAS entry. The controller channel (LeaderAndIsr, UpdateMetadata),
the replica fetchers and controlled shutdown all go over it: brokers become ready only once
the controller's UpdateMetadata reached them, and a partition at RF 3 gets all three replicas
in its ISR only if the followers fetch. A client produces with acks=all over SASL_SSL too.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.coord import open_store
from kafkalite.coord.security import alter_entity_config
from kafkalite.security.scram import make_credential
from tests.harness.broker import BrokerProcess, free_port
from tests.harness.zookeeper import ZooKeeperServer
from tests.security.support import make_pki, scram_jaas

CHROOT = "/kafkalite"
BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
DEADLINE_S = 60.0


async def write_broker_credential(connect: str) -> None:
    store = open_store(connect, None, 6000)
    session = await store.open_session()
    try:
        await alter_entity_config(
            session,
            "users",
            BROKER_USER,
            {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", BROKER_PASSWORD).to_string()},
        )
    finally:
        await session.close()
        await store.close()


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("sasl-cluster")
    pki = make_pki(base / "pki")
    with ZooKeeperServer(base / "zk", max_session_timeout_ms=60000) as zk:
        asyncio.run(write_broker_credential(zk.connect_string(CHROOT)))
        brokers = []
        sasl_ports = {}
        for broker_id in (1, 2, 3):
            port, sasl_port = free_port(), free_port()
            sasl_ports[broker_id] = sasl_port
            brokers.append(
                BrokerProcess(
                    base / f"broker-{broker_id}",
                    broker_id=broker_id,
                    port=port,
                    overrides={
                        "zookeeper.connect": zk.connect_string(CHROOT),
                        "listeners": (
                            f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_port}"
                        ),
                        "inter.broker.listener.name": "SASL_SSL",
                        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas(
                            BROKER_USER, BROKER_PASSWORD
                        ),
                        "ssl.keystore.location": str(pki.server_file),
                        "ssl.truststore.location": str(pki.ca_file),
                        "replica.fetch.wait.max.ms": "200",
                        "default.replication.factor": "3",
                        "offsets.topic.replication.factor": "3",
                        "offsets.topic.num.partitions": "3",
                    },
                )
            )
        try:
            for broker in brokers:
                broker.spawn()
            for broker in brokers:
                broker.wait_ready(DEADLINE_S)
            yield brokers, sasl_ports, pki
        finally:
            for broker in brokers:  # killed: a graceful stop of each in turn costs ~4 s apiece
                broker.kill()


def sasl_conf(sasl_ports, pki) -> dict[str, str]:
    return {
        "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in sasl_ports.values()),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": BROKER_USER,
        "sasl.password": BROKER_PASSWORD,
        "ssl.ca.location": str(pki.ca_file),
    }


def test_three_brokers_replicate_over_sasl_ssl(sasl_cluster):
    brokers, sasl_ports, pki = sasl_cluster
    conf = sasl_conf(sasl_ports, pki)
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("replicated", 2, 3)])["replicated"].result(DEADLINE_S)
    deadline = time.monotonic() + DEADLINE_S
    while True:
        topic = admin.list_topics("replicated", timeout=10).topics["replicated"]
        isrs = [sorted(p.isrs) for p in topic.partitions.values()]
        if len(isrs) == 2 and all(isr == [1, 2, 3] for isr in isrs):
            break
        assert time.monotonic() < deadline, f"ISR never full: {isrs}"
        time.sleep(0.1)  # polling interval of the condition above
    producer = Producer({**conf, "acks": "all"})
    for i in range(50):
        producer.produce("replicated", value=str(i).encode(), partition=i % 2)
    assert producer.flush(DEADLINE_S) == 0
    # the followers caught up over SASL_SSL: every replica's high watermark covers the writes
    consumer = Consumer({**conf, "group.id": "ib", "auto.offset.reset": "earliest"})
    consumer.subscribe(["replicated"])
    got = set()
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < 50 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.add(int(message.value()))
    finally:
        consumer.close()
    assert got == set(range(50))
    topic = admin.list_topics("replicated", timeout=10).topics["replicated"]
    assert all(sorted(p.isrs) == [1, 2, 3] for p in topic.partitions.values())
