"""Dynamic broker configs on a 2-broker cluster on a real ZooKeeper: Kafka's znodes
(``/config/brokers/<id>``, ``/config/brokers/<default>``, ``/config/changes/config_change_*``
naming ``brokers/...``), a change reaching the other broker through the notification, a
per-broker change reaching only its broker, a password znode that holds no plain text (nor
does ZooKeeper's data directory), and the dynamic level read again at start-up."""

from __future__ import annotations

import asyncio
import json

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kafkalite.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.coord import open_store
from kafkalite.protocol.api import ApiKey
from kafkalite.testing import Broker, ZooKeeperServer
from kafkalite.zk.broker_configs import set_broker_config
from tests.integration.common import wait_for

SECRET = "zk-encoder-secret"
PLAIN = "zk-plain-password-5678"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="admin" password="{PLAIN}" user_admin="{PLAIN}";'
)
PW_KEY = "listener.name.plaintext.plain.sasl.jaas.config"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("dynzk")
    with ZooKeeperServer(base / "zk") as zk:
        connect = zk.connect_string("/dyn")
        brokers = [
            Broker(
                {
                    "zookeeper.connect": connect,
                    "password.encoder.secret": SECRET,
                    "offsets.topic.replication.factor": "1",
                    "transaction.state.log.replication.factor": "1",
                    # the last to close may first ask a controller that has just stopped:
                    # its retry need not wait Kafka's 5 s
                    "controlled.shutdown.retry.backoff.ms": "200",
                },
                broker_id=i,
                data_dir=base / f"b{i}",
            )
            for i in (1, 2)
        ]
        try:
            for b in brokers:
                b.start()
            yield zk, connect, brokers
        finally:
            for b in brokers:
                b.close()


def zk_call(connect: str, work):
    async def go():
        store = open_store(connect, None, 10000)
        session = await store.open_session()
        try:
            return await work(session)
        finally:
            await session.close()
            await store.close()

    return asyncio.run(go())


def send(bootstrap: str, node_id: int, api_key: int, **fields):
    async def go():
        async with KafkaClient(bootstrap) as client:
            return await client.send(api_key, request_builder(api_key, **fields), node_id=node_id)

    return asyncio.run(go())


def alter(bootstrap: str, node_id: int, name: str, configs: dict[str, str]):
    response = send(
        bootstrap,
        node_id,
        ApiKey.ALTER_CONFIGS,
        resources=[
            {
                "resource_type": 4,
                "resource_name": name,
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        validate_only=False,
    )
    return response.responses[0]


def test_default_level_set_through_one_broker_reaches_the_other(cluster) -> None:
    _, connect, (b1, b2) = cluster
    assert alter(b1.bootstrap_servers, 1, "", {"log.retention.ms": "4321000"}).error_code == 0
    wait_for(
        lambda: b2.server.dynamic_config.current.log_retention_time_ms == 4321000,
        "broker 2 to apply the cluster default from the notification",
    )

    async def read(session):
        data, _ = await session.get_data("/config/brokers/<default>")
        changes = await session.get_children("/config/changes")
        notes = [json.loads((await session.get_data(f"/config/changes/{c}"))[0]) for c in changes]
        return json.loads(data), changes, notes

    node, changes, notes = zk_call(connect, read)
    assert node == {"version": 1, "config": {"log.retention.ms": "4321000"}}
    assert all(
        c.startswith("config_change_") and len(c) == len("config_change_") + 10 for c in changes
    )
    assert {"version": 2, "entity_path": "brokers/<default>"} in notes
    assert alter(b1.bootstrap_servers, 1, "", {}).error_code == 0
    wait_for(
        lambda: b2.server.dynamic_config.current.log_retention_ms is None, "the default removed"
    )


def test_a_per_broker_change_reaches_only_its_broker(cluster) -> None:
    _, connect, (b1, b2) = cluster
    admin = AdminClient({"bootstrap.servers": b1.bootstrap_servers})  # routes "2" to broker 2
    resource = ConfigResource(
        "broker",
        "2",
        incremental_configs=[
            ConfigEntry("max.connections", "777", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    wait_for(lambda: b2.server.socket_server.quotas.max_connections == 777, "broker 2 applies")
    assert b1.server.socket_server.quotas.max_connections != 777
    # broker 1 refuses to alter broker 2's level, as Kafka's ZkAdminManager does
    answer = alter(b1.bootstrap_servers, 1, "2", {"max.connections": "1"})
    assert answer.error_code == 42
    assert "Unexpected broker id, expected 1, but received 2" in answer.error_message
    # a write of /config/brokers/2 straight into ZooKeeper (kafka-configs.sh --zookeeper)
    # reaches broker 2 through its notification
    zk_call(connect, lambda session: set_broker_config(session, 2, {"max.connections": "778"}))
    wait_for(lambda: b2.server.socket_server.quotas.max_connections == 778, "the notification")
    zk_call(connect, lambda session: set_broker_config(session, 2, {}))
    wait_for(lambda: b2.server.socket_server.quotas.max_connections == 2**31 - 1, "cleared")


def test_password_znode_holds_no_plain_text_and_survives_a_restart(cluster) -> None:
    zk, connect, (b1, b2) = cluster
    admin = AdminClient({"bootstrap.servers": b2.bootstrap_servers})
    resource = ConfigResource(
        "broker",
        "2",
        incremental_configs=[
            ConfigEntry(PW_KEY, JAAS, incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "log.cleaner.backoff.ms", "1234", incremental_operation=AlterConfigOpType.SET
            ),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    wait_for(lambda: b2.server.dynamic_config.per_broker.get(PW_KEY) == JAAS, "applied")

    async def raw(session):
        return (await session.get_data("/config/brokers/2"))[0]

    data = zk_call(connect, raw)
    assert PLAIN.encode() not in data
    assert b"encryptedPassword:" in data
    on_disk = b"".join(p.read_bytes() for p in zk.data_dir.rglob("*") if p.is_file())
    assert b"encryptedPassword:" in on_disk and PLAIN.encode() not in on_disk
    entry = admin.describe_configs([ConfigResource("broker", "2")])[ConfigResource("broker", "2")]
    described = entry.result(30)[PW_KEY]
    assert described.value is None and described.is_sensitive

    b2.restart()
    wait_for(lambda: b2.server is not None, "broker 2 back")
    assert b2.server.dynamic_config.per_broker.get(PW_KEY) == JAAS
    assert b2.server.log_manager.cleaner.config.backoff_ms == 1234
    zk_call(connect, lambda session: set_broker_config(session, 2, {}))
