"""Three brokers on a real ZooKeeper replicating over a SASL_SSL inter-broker listener, with
the ACL authorizer on.

As an operator does it with Kafka: the brokers' own SCRAM-SHA-512 credential is written to
ZooKeeper (`/config/users/broker`) before they start, and each broker's inter-broker listener is
SASL_SSL with `sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512` and its username/password
in that listener's JAAS entry. The controller channel (LeaderAndIsr, UpdateMetadata),
the replica fetchers and controlled shutdown all go over it: brokers become ready only once
the controller's UpdateMetadata reached them, and a partition at RF 3 gets all three replicas
in its ISR only if the followers fetch. A client produces with acks=all over SASL_SSL too.
The broker user is the super user (the brokers' own requests need CLUSTER_ACTION).

ACLs: a user without any sees no topic in Metadata and is refused Produce, Fetch, JoinGroup and
OffsetCommit with Kafka's codes; ACLs created through one broker are in every broker's cache
(DescribeAcls answered by each) and let the user produce and consume; deleted through another
broker, they are gone everywhere.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kafkalite.coord import open_store
from kafkalite.protocol.acl import SUPPORTED_OPERATIONS, ResourceType, from_32bit_field
from kafkalite.protocol.errors import KafkaError as KafkaLiteError
from kafkalite.security.scram import make_credential
from kafkalite.testing import Broker, ZooKeeperServer, free_port
from kafkalite.zk.security import alter_entity_config
from tests.security.support import make_pki, scram_jaas

CHROOT = "/kafkalite"
BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
ADMIN_TOKEN = "t0ken-for-automation"
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
        admin_port = free_port()
        for broker_id in (1, 2, 3):
            port, sasl_port = free_port(), free_port()
            sasl_ports[broker_id] = sasl_port
            admin = (
                {
                    "admin.listener": f"https://127.0.0.1:{admin_port}",
                    "admin.bearer.token": ADMIN_TOKEN,
                    "admin.bearer.principal": f"User:{BROKER_USER}",
                }
                if broker_id == 1
                else {}
            )
            brokers.append(
                Broker(
                    data_dir=base / f"broker-{broker_id}",
                    broker_id=broker_id,
                    port=port,
                    config={
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
                        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                        "super.users": f"User:{BROKER_USER}",
                        **admin,
                    },
                    subprocess=True,
                    admin=broker_id == 1,
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


ALICE, ALICE_PASSWORD = "alice", "alice-secret"


def security_for(pki, user: str, password: str):
    import ssl

    from kafkalite.security.listeners import ClientSecurity

    return ClientSecurity(
        "SASL_SSL",
        ssl.create_default_context(cafile=str(pki.ca_file)),
        "SCRAM-SHA-512",
        user,
        password,
    )


async def call(port: int, security, api_key, request, version=None):
    from kafkalite.client.connection import KafkaConnection

    async with KafkaConnection("127.0.0.1", port, security=security) as conn:
        return await conn.send(api_key, request, version)


def acl_bindings(sasl_ports, pki, port):
    from kafkalite.protocol.api import ApiKey

    response = asyncio.run(
        call(
            port,
            security_for(pki, BROKER_USER, BROKER_PASSWORD),
            ApiKey.DESCRIBE_ACLS,
            {
                "resource_type_filter": 1,
                "resource_name_filter": None,
                "pattern_type_filter": 1,
                "principal_filter": "User:alice",
                "host_filter": None,
                "operation": 1,
                "permission_type": 1,
            },
        )
    )
    assert response.error_code == 0
    return {
        (r.resource_type, r.resource_name, r.pattern_type, a.operation)
        for r in response.resources
        for a in r.acls
    }


def authenticates(port: int, pki, password: str) -> bool:
    from kafkalite.protocol.api import ApiKey

    request = {
        "topics": [],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    try:
        asyncio.run(call(port, security_for(pki, ALICE, password), ApiKey.METADATA, request, 10))
    except (KafkaLiteError, ConnectionError):
        return False
    return True


def wait_until(condition, what: str):
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)  # polling interval of the condition


def test_acls_refuse_then_allow_and_reach_every_broker(sasl_cluster):
    from kafkalite.protocol.api import ApiKey
    from tests.security.support import add_scram_user

    brokers, sasl_ports, pki = sasl_cluster
    admin_security = security_for(pki, BROKER_USER, BROKER_PASSWORD)
    first, second, third = sasl_ports[1], sasl_ports[2], sasl_ports[3]
    asyncio.run(add_scram_user(f"127.0.0.1:{first}", ALICE, ALICE_PASSWORD, admin_security))
    conf = sasl_conf(sasl_ports, pki)
    admin = AdminClient(conf)
    for future in admin.create_topics(
        [NewTopic("alice-data", 1, 3), NewTopic("secret", 1, 3)]
    ).values():
        future.result(DEADLINE_S)
    alice = {**conf, "sasl.username": ALICE, "sasl.password": ALICE_PASSWORD}
    alice_security = security_for(pki, ALICE, ALICE_PASSWORD)

    # no ACL: Metadata hides every topic, and nothing is served
    assert AdminClient(alice).list_topics(timeout=10).topics == {}
    errors = []
    producer = Producer({**alice, "message.timeout.ms": 5000, "retries": 0})
    producer.produce("secret", b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(DEADLINE_S)
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    fetch = asyncio.run(
        call(
            first,
            alice_security,
            ApiKey.FETCH,
            {
                "replica_id": -1,
                "max_wait": timedelta(0),
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": "secret",
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
            11,
        )
    )
    assert fetch.responses[0].partitions[0].error_code == 29  # TOPIC_AUTHORIZATION_FAILED
    join = asyncio.run(
        call(
            first,
            alice_security,
            ApiKey.JOIN_GROUP,
            {
                "group_id": "alice-g",
                "session_timeout": timedelta(seconds=10),
                "rebalance_timeout": timedelta(seconds=10),
                "member_id": "",
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
                "reason": None,
            },
            5,
        )
    )
    assert join.error_code == 30  # GROUP_AUTHORIZATION_FAILED
    commit = asyncio.run(
        call(
            first,
            alice_security,
            ApiKey.OFFSET_COMMIT,
            {
                "group_id": "alice-g",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "retention_time": timedelta(milliseconds=-1),
                "topics": [
                    {
                        "name": "secret",
                        "partitions": [
                            {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                        ],
                    }
                ],
            },
            2,
        )
    )
    assert commit.topics[0].partitions[0].error_code == 30

    # ACLs created through broker 1 reach brokers 2 and 3
    created = asyncio.run(
        call(
            first,
            admin_security,
            ApiKey.CREATE_ACLS,
            {
                "creations": [
                    {
                        "resource_type": 2,  # TOPIC
                        "resource_name": "alice-",
                        "resource_pattern_type": 4,  # PREFIXED
                        "principal": "User:alice",
                        "host": "*",
                        "operation": 2,  # ALL
                        "permission_type": 3,  # ALLOW
                    },
                    {
                        "resource_type": 3,  # GROUP
                        "resource_name": "alice-g",
                        "resource_pattern_type": 3,  # LITERAL
                        "principal": "User:alice",
                        "host": "*",
                        "operation": 3,  # READ
                        "permission_type": 3,
                    },
                ]
            },
        )
    )
    assert [r.error_code for r in created.results] == [0, 0]
    expected = {(2, "alice-", 4, 2), (3, "alice-g", 3, 3)}
    for port in (second, third):
        wait_until(
            lambda port=port: acl_bindings(sasl_ports, pki, port) == expected,
            f"the ACLs on the broker at {port}",
        )
    assert set(AdminClient(alice).list_topics(timeout=10).topics) == {"alice-data"}
    metadata = asyncio.run(
        call(
            first,
            alice_security,
            ApiKey.METADATA,
            {
                "topics": [{"name": "alice-data"}, {"name": "secret"}],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": True,
                "include_topic_authorized_operations": True,
            },
            10,
        )
    )
    by_name = {t.name: t for t in metadata.topics}
    assert by_name["secret"].error_code == 29  # named but not describable
    assert from_32bit_field(by_name["alice-data"].topic_authorized_operations) == set(
        SUPPORTED_OPERATIONS[ResourceType.TOPIC]
    )  # ALL on the prefix
    assert metadata.cluster_authorized_operations == 0  # nothing on the cluster
    # a request naming an allowed and a refused topic is answered topic by topic, as Kafka does
    leader = sasl_ports[by_name["alice-data"].partitions[0].leader_id]
    offsets = asyncio.run(
        call(
            leader,
            alice_security,
            ApiKey.LIST_OFFSETS,
            {
                "replica_id": -1,
                "topics": [
                    {"name": name, "partitions": [{"partition_index": 0, "timestamp": -1}]}
                    for name in ("alice-data", "secret")
                ],
            },
            1,
        )
    )
    codes = {t.name: t.partitions[0].error_code for t in offsets.topics}
    assert codes == {"alice-data": 0, "secret": 29}
    producer = Producer(alice)
    for i in range(5):
        producer.produce("alice-data", str(i).encode())
    assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer({**alice, "group.id": "alice-g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["alice-data"])
    got = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(int(message.value()))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == list(range(5))
    # one DescribeConfigs naming both topics: answered topic by topic
    alice_admin = AdminClient(alice)  # kept: the futures need the client alive
    futures = alice_admin.describe_configs(
        [ConfigResource("topic", "alice-data"), ConfigResource("topic", "secret")]
    )
    results = {resource.name: future for resource, future in futures.items()}
    assert "retention.ms" in results["alice-data"].result(DEADLINE_S)
    with pytest.raises(KafkaException) as refused:
        results["secret"].result(DEADLINE_S)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # deleted through broker 3: gone from broker 1 too
    deleted = asyncio.run(
        call(
            third,
            admin_security,
            ApiKey.DELETE_ACLS,
            {
                "filters": [
                    {
                        "resource_type_filter": 1,
                        "resource_name_filter": None,
                        "pattern_type_filter": 1,
                        "principal_filter": "User:alice",
                        "host_filter": None,
                        "operation": 1,
                        "permission_type": 1,
                    }
                ]
            },
        )
    )
    assert len(deleted.filter_results[0].matching_acls) == 2
    for port in (first, second, third):  # alice's client may ask any of them
        wait_until(
            lambda port=port: acl_bindings(sasl_ports, pki, port) == set(),
            f"the ACLs deleted on the broker at {port}",
        )
    assert AdminClient(alice).list_topics(timeout=10).topics == {}

    # a password changed through broker 1 reaches every broker's credential cache
    for port in (first, second, third):
        assert authenticates(port, pki, ALICE_PASSWORD)  # now cached there
    asyncio.run(add_scram_user(f"127.0.0.1:{first}", ALICE, "alice-changed", admin_security))
    for port in (first, second, third):
        wait_until(
            lambda port=port: authenticates(port, pki, "alice-changed"),
            f"the new password on the broker at {port}",
        )
        assert not authenticates(port, pki, ALICE_PASSWORD)


def http(url: str, pki, method: str = "GET", auth: str | None = None) -> tuple[int, dict]:
    import ssl
    import urllib.error
    import urllib.request

    context = ssl.create_default_context(cafile=str(pki.ca_file))
    request = urllib.request.Request(url, method=method)
    if auth is not None:
        request.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(request, context=context, timeout=DEADLINE_S) as response:
            return response.status, dict(response.headers) | {"body": response.read()}
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers) | {"body": e.read()}


def basic(user: str, password: str) -> str:
    import base64

    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_admin_api_over_https_asks_for_credentials_and_applies_the_acls(sasl_cluster):
    from kafkalite.protocol.api import ApiKey
    from tests.security.support import add_scram_user

    brokers, sasl_ports, pki = sasl_cluster
    url = brokers[0].admin_url
    admin_security = security_for(pki, BROKER_USER, BROKER_PASSWORD)
    asyncio.run(
        add_scram_user(f"127.0.0.1:{sasl_ports[1]}", "carol", "carol-secret", admin_security)
    )
    wait_until(lambda: http(f"{url}/ready", pki)[0] == 200, "the admin API to be ready")
    assert http(f"{url}/health", pki)[0] == 200  # open, no credentials
    status, headers = http(f"{url}/cluster", pki)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert http(f"{url}/cluster", pki, auth=basic(BROKER_USER, "wrong"))[0] == 401
    assert http(f"{url}/cluster", pki, auth=basic(BROKER_USER, BROKER_PASSWORD))[0] == 200
    assert http(f"{url}/cluster", pki, auth=f"Bearer {ADMIN_TOKEN}")[0] == 200
    assert http(f"{url}/cluster", pki, auth="Bearer nope")[0] == 401
    carol = basic("carol", "carol-secret")
    assert http(f"{url}/cluster", pki, auth=carol)[0] == 403  # authenticated, no ACL
    assert http(f"{url}/topics/carol-topic", pki, auth=carol)[0] == 403
    assert http(f"{url}/topics/carol-topic", pki, "DELETE", auth=carol)[0] == 403
    created = asyncio.run(
        call(
            sasl_ports[1],
            admin_security,
            ApiKey.CREATE_ACLS,
            {
                "creations": [
                    {
                        "resource_type": 2,
                        "resource_name": "carol-topic",
                        "resource_pattern_type": 3,
                        "principal": "User:carol",
                        "host": "*",
                        "operation": 8,  # DESCRIBE
                        "permission_type": 3,
                    }
                ]
            },
        )
    )
    assert created.results[0].error_code == 0
    # allowed now: the route runs (the topic does not exist, so 404, not 403)
    assert http(f"{url}/topics/carol-topic", pki, auth=carol)[0] == 404
    assert http(f"{url}/topics/carol-topic", pki, "DELETE", auth=carol)[0] == 403


def test_cli_acls_add_list_remove(sasl_cluster, tmp_path):
    from click.testing import CliRunner

    from kafkalite.cli import app

    brokers, sasl_ports, pki = sasl_cluster
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"ssl.truststore.location={pki.ca_file}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{BROKER_USER}" password="{BROKER_PASSWORD}";\n'
    )
    common = ["--bootstrap-server", f"127.0.0.1:{sasl_ports[2]}", "--command-config", str(config)]
    runner = CliRunner()

    def cli(*args: str) -> str:
        result = runner.invoke(app, [*args, *common])
        assert result.exit_code == 0, result.output
        return result.output

    cli(
        "acls",
        "add",
        "--principal",
        "User:erin",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        "erin-",
        "--prefixed",
    )
    listed = cli("acls", "list", "--principal", "User:erin")
    assert "Topic:erin-" in listed and "PREFIXED" in listed and "Read" in listed
    assert "Removed 2 ACL(s)." in cli("acls", "remove", "--principal", "User:erin")
    assert "erin" not in cli("acls", "list", "--principal", "User:erin")
    refused = runner.invoke(
        app, ["acls", "add", "--principal", "erin", "--operation", "Read", "--topic", "t", *common]
    )
    assert refused.exit_code == 1 and "INVALID_REQUEST" in refused.output
