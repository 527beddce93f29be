"""kafka-python 3.x with its default settings (idempotent producer) against kafkalite."""

import pytest

from kafkalite.testing import Broker
from tests.integration.common import (
    BASE_TS,
    CODECS,
    MESSAGES,
    PARTITIONS,
    Received,
    check_consumed,
    expected_offset_for_time,
    messages,
    wait_for,
)

try:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import (
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        NewTopic,
    )
    from kafka.errors import TopicAlreadyExistsError
except ImportError as e:  # pragma: no cover - a missing client fails loudly
    raise ImportError("kafka-python is missing: pip install -e '.[test]'") from e


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python internals


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One subprocess broker for the module (tests use distinct topics)."""
    with Broker(subprocess=True, data_dir=tmp_path_factory.mktemp("broker")) as broker:
        yield broker


def admin(broker):
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, client_id="kp-admin")


def test_produce_and_consume_every_codec(shared_broker):
    topic = "kp-data"
    client = admin(shared_broker)
    client.create_topics([NewTopic(topic, PARTITIONS, 1)])
    client.close()
    sent = []
    per_codec = MESSAGES // len(CODECS)
    for n, codec in enumerate(CODECS):
        batch = messages(codec, per_codec, start=n * per_codec)
        producer = KafkaProducer(
            bootstrap_servers=shared_broker.bootstrap_servers, compression_type=codec
        )  # defaults: idempotent, acks=all
        futures = [
            producer.send(
                topic,
                value=s.value,
                key=s.key,
                partition=s.partition,
                headers=list(s.headers),
                timestamp_ms=s.timestamp,
            )
            for s in batch
        ]
        producer.flush(60)
        for f in futures:
            f.get(timeout=60)
        producer.close()
        sent += batch

    consumer = KafkaConsumer(
        bootstrap_servers=shared_broker.bootstrap_servers, group_id=None, enable_auto_commit=False
    )
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    received = []

    def poll():
        for records in consumer.poll(timeout_ms=500, max_records=5000).values():
            for r in records:
                received.append(
                    Received(
                        r.partition,
                        r.offset,
                        r.key,
                        r.value,
                        tuple((k, v) for k, v in r.headers),
                        r.timestamp,
                    )
                )
        return len(received) >= len(sent)

    wait_for(poll, "every message")
    check_consumed(sent, received)

    answers = consumer.offsets_for_times({tp: BASE_TS + 5001 for tp in partitions})
    for tp, answer in answers.items():
        assert answer.offset == expected_offset_for_time(sent, tp.partition, BASE_TS + 5001)
    assert consumer.end_offsets(partitions) == {tp: MESSAGES // PARTITIONS for tp in partitions}
    assert consumer.beginning_offsets(partitions) == {tp: 0 for tp in partitions}
    consumer.close()


def test_admin_create_describe_alter_delete(shared_broker):
    client = admin(shared_broker)
    try:
        client.create_topics(
            [NewTopic("kp-admin", 2, 1, topic_configs={"retention.ms": "3600000"})]
        )
        try:
            client.create_topics([NewTopic("kp-admin", 2, 1)])
            raise AssertionError("second create succeeded")
        except TopicAlreadyExistsError:
            pass
        described = client.describe_topics(["kp-admin"])
        assert len(described[0]["partitions"]) == 2
        configs = client.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp-admin")], config_filter="all"
        )
        assert "3600000" in repr(configs)
        client.alter_configs(  # the legacy AlterConfigs: replaces the whole override set
            [
                ConfigResource(
                    ConfigResourceType.TOPIC, "kp-admin", configs={"retention.ms": "7200000"}
                )
            ]
        )
        configs = client.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp-admin")], config_filter="all"
        )
        assert "7200000" in repr(configs) and "3600000" not in repr(configs)
        client.create_partitions({"kp-admin": NewPartitions(3)})
        wait_for(
            lambda: len(client.describe_topics(["kp-admin"])[0]["partitions"]) == 3, "3 partitions"
        )
        client.delete_topics(["kp-admin"])
        wait_for(lambda: "kp-admin" not in client.list_topics(), "deletion")
    finally:
        client.close()
