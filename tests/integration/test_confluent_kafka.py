"""confluent-kafka (librdkafka 2.x) against a kafkalite broker subprocess."""

import pytest

from kafkalite.testing import Broker
from tests.integration.common import (
    BASE_TS,
    CODECS,
    DEADLINE_S,
    MESSAGES,
    PARTITIONS,
    Received,
    check_consumed,
    expected_offset_for_time,
    messages,
    wait_for,
)

try:
    import confluent_kafka
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewPartitions,
        NewTopic,
    )
except ImportError as e:  # pragma: no cover - a missing client fails loudly
    raise ImportError("confluent-kafka is missing: pip install -e '.[test]'") from e


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One subprocess broker for the module (tests use distinct topics)."""
    with Broker(subprocess=True, data_dir=tmp_path_factory.mktemp("broker")) as broker:
        yield broker


def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create_topic(broker, name, partitions=PARTITIONS, config=None):
    client = admin(broker)  # keep a reference: the futures fail when the handle is destroyed
    futures = client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=30,
    )
    futures[name].result(timeout=30)


def produce_all(broker, topic, sent, codec):
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "compression.type": codec,
            "linger.ms": 5,
            "acks": "all",
            "enable.idempotence": True,
        }
    )
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    for s in sent:
        while True:
            try:
                producer.produce(
                    topic,
                    s.value,
                    s.key,
                    partition=s.partition,
                    headers=list(s.headers),
                    timestamp=s.timestamp,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(DEADLINE_S) == 0
    assert errors == []


def consume_all(broker, topic, count, partitions=PARTITIONS):
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "unused-manual-assignment",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
    )
    consumer.assign(
        [TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)]
    )
    received = []

    def poll():
        for msg in consumer.consume(1000, 0.5):
            assert msg.error() is None, msg.error()
            received.append(
                Received(
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    tuple(msg.headers() or ()),
                    msg.timestamp()[1],
                )
            )
        return len(received) >= count

    try:
        wait_for(poll, f"{count} messages from {topic}")
    finally:
        consumer.close()
    return received


def test_produce_and_consume_every_codec(shared_broker):
    topic = "ck-data"
    create_topic(shared_broker, topic)
    sent = []
    per_codec = MESSAGES // len(CODECS)
    for n, codec in enumerate(CODECS):
        batch = messages(codec, per_codec, start=n * per_codec)
        produce_all(shared_broker, topic, batch, codec)
        sent += batch
    received = consume_all(shared_broker, topic, len(sent))
    check_consumed(sent, received)

    consumer = Consumer(
        {"bootstrap.servers": shared_broker.bootstrap_servers, "group.id": "unused"}
    )
    try:
        wanted = [TopicPartition(topic, p, BASE_TS + 5001) for p in range(PARTITIONS)]
        answers = consumer.offsets_for_times(wanted, timeout=30)
        for tp in answers:
            assert tp.error is None
            assert tp.offset == expected_offset_for_time(sent, tp.partition, BASE_TS + 5001)
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=30)
        assert (low, high) == (0, MESSAGES // PARTITIONS)
    finally:
        consumer.close()


def test_admin_create_describe_alter_delete(shared_broker):
    client = admin(shared_broker)
    create_topic(shared_broker, "ck-admin", 2, {"retention.ms": "3600000"})
    with pytest.raises(confluent_kafka.KafkaException) as info:
        create_topic(shared_broker, "ck-admin", 2)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS

    metadata = client.list_topics(timeout=30)
    assert len(metadata.topics["ck-admin"].partitions) == 2
    assert metadata.topics["ck-admin"].partitions[0].leader == 0

    resource = ConfigResource(ConfigResource.Type.TOPIC, "ck-admin")
    configs = client.describe_configs([resource])[resource].result(timeout=30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"

    client.create_partitions([NewPartitions("ck-admin", 3)])["ck-admin"].result(timeout=30)
    wait_for(
        lambda: len(client.list_topics("ck-admin", timeout=30).topics["ck-admin"].partitions) == 3,
        "3 partitions",
    )

    client.delete_topics(["ck-admin"], operation_timeout=30)["ck-admin"].result(timeout=30)
    wait_for(lambda: "ck-admin" not in client.list_topics(timeout=30).topics, "deletion")

    cluster = client.describe_cluster().result(timeout=30)  # DescribeCluster
    assert [n.id for n in cluster.nodes] == [0]
    assert cluster.controller.id == 0


def test_alter_configs_and_delete_records(shared_broker):
    client = admin(shared_broker)
    create_topic(shared_broker, "ck-records", 1)
    batch = messages("gzip", 10, partitions=1)
    produce_all(shared_broker, "ck-records", batch, "gzip")

    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "ck-records",
        incremental_configs=[
            ConfigEntry("retention.bytes", "1048576", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    client.incremental_alter_configs([resource])[resource].result(timeout=30)
    described = ConfigResource(ConfigResource.Type.TOPIC, "ck-records")
    configs = client.describe_configs([described])[described].result(timeout=30)
    assert configs["retention.bytes"].value == "1048576"
    assert configs["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    deleted = client.delete_records([TopicPartition("ck-records", 0, 4)])
    low = deleted[TopicPartition("ck-records", 0, 4)].result(timeout=30)
    assert low.low_watermark == 4
    consumer = Consumer(
        {"bootstrap.servers": shared_broker.bootstrap_servers, "group.id": "unused"}
    )
    try:
        lo, hi = consumer.get_watermark_offsets(TopicPartition("ck-records", 0), timeout=30)
        assert (lo, hi) == (4, 10)
    finally:
        consumer.close()


def test_describe_configs_names_the_source_of_a_default(tmp_path):
    """A topic default set in the broker's configuration is STATIC_BROKER_CONFIG, with the
    property that set it as synonym; an untouched one is DEFAULT_CONFIG (all were reported
    DEFAULT_CONFIG, so ConfigEntry.is_default was wrong)."""
    from confluent_kafka.admin import ConfigResource, ConfigSource

    config = {"log.retention.hours": "2"}
    with Broker(config, subprocess=True, data_dir=tmp_path / "broker") as broker:
        create_topic(broker, "sources", 1)
        resource = ConfigResource(ConfigResource.Type.TOPIC, "sources")
        client = admin(broker)  # keep a reference: the futures fail when the handle is destroyed
        configs = client.describe_configs([resource])[resource].result(timeout=30)
        retention = configs["retention.ms"]
        assert retention.value == "7200000"
        assert retention.source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert not retention.is_default
        assert [s.name for s in retention.synonyms.values()] == ["log.retention.hours"]
        assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_authorized_operations_without_authorizer(shared_broker):
    """KIP-430 through librdkafka: with no authorizer every operation the resource supports."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation

    client = admin(shared_broker)
    create_topic(shared_broker, "ck-acl-ops", 1)
    described = client.describe_topics(
        TopicCollection(["ck-acl-ops"]), include_authorized_operations=True
    )["ck-acl-ops"].result(timeout=30)
    assert set(described.authorized_operations) == {
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }
    cluster = client.describe_cluster(include_authorized_operations=True).result(timeout=30)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    }
    # not asked: librdkafka reports None
    assert client.describe_cluster().result(timeout=30).authorized_operations is None

    consumer = Consumer(
        {"bootstrap.servers": shared_broker.bootstrap_servers, "group.id": "ck-acl-group"}
    )
    try:
        consumer.subscribe(["ck-acl-ops"])
        wait_for(lambda: consumer.poll(0.2) is None and consumer.assignment(), "an assignment")
        group = client.describe_consumer_groups(
            ["ck-acl-group"], include_authorized_operations=True
        )["ck-acl-group"].result(timeout=30)
        assert set(group.authorized_operations) == {
            AclOperation.READ,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
        }
    finally:
        consumer.close()


def test_deprecated_topic_configs_are_accepted_as_kafka_39_does(shared_broker):
    """message.format.version and message.downconversion.enable (deprecated, no-ops since the
    3.0 inter-broker protocol) are accepted by CreateTopics / AlterConfigs /
    IncrementalAlterConfigs, stored and described; a bad version is INVALID_CONFIG."""
    client = admin(shared_broker)
    create_topic(shared_broker, "ck-deprecated", 1, {"message.format.version": "2.8"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "ck-deprecated")

    def described():
        return client.describe_configs([resource])[resource].result(timeout=30)

    configs = described()
    assert configs["message.format.version"].value == "2.8"
    assert configs["message.format.version"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["message.downconversion.enable"].value == "true"
    assert configs["message.downconversion.enable"].source == ConfigSource.DEFAULT_CONFIG.value

    incremental = ConfigResource(
        ConfigResource.Type.TOPIC,
        "ck-deprecated",
        incremental_configs=[
            ConfigEntry(
                "message.downconversion.enable",
                "false",
                incremental_operation=AlterConfigOpType.SET,
            ),
            ConfigEntry(
                "message.format.version", None, incremental_operation=AlterConfigOpType.DELETE
            ),
        ],
    )
    client.incremental_alter_configs([incremental])[incremental].result(timeout=30)
    configs = described()
    assert configs["message.downconversion.enable"].value == "false"
    assert configs["message.format.version"].value == "3.0-IV1"  # Kafka 3.x's default
    assert configs["message.format.version"].source == ConfigSource.DEFAULT_CONFIG.value

    bad = ConfigResource(
        ConfigResource.Type.TOPIC,
        "ck-deprecated",
        incremental_configs=[
            ConfigEntry(
                "message.format.version", "9.9", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    with pytest.raises(confluent_kafka.KafkaException) as info:
        client.incremental_alter_configs([bad])[bad].result(timeout=30)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert "message.format.version" in info.value.args[0].str()
    assert described()["message.downconversion.enable"].value == "false"  # nothing lost

    # AlterConfigs replaces the whole override set
    whole = ConfigResource(
        ConfigResource.Type.TOPIC, "ck-deprecated", set_config={"message.format.version": "0.10.2"}
    )
    client.alter_configs([whole])[whole].result(timeout=30)
    configs = described()
    assert configs["message.format.version"].value == "0.10.2"
    assert configs["message.downconversion.enable"].value == "true"
