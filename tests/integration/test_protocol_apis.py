"""APIs the client libraries use only in corner cases, exercised with the project's client."""

import asyncio
import datetime

import pytest

from kafkalite.client.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.records import Record, build_batch
from kafkalite.protocol.types import TopicPartition
from kafkalite.testing import Broker


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One subprocess broker for the module (tests use distinct topics)."""
    with Broker(subprocess=True, data_dir=tmp_path_factory.mktemp("broker")) as broker:
        yield broker


async def scenario(bootstrap):
    async with KafkaClient(bootstrap) as client:
        response = await client.create_topics(
            [{"name": "proto", "num_partitions": 1, "replication_factor": 1}]
        )
        assert int(response.topics[0].error_code) == 0
        tp = TopicPartition("proto", 0)
        await client.refresh_metadata(["proto"])
        for i in range(3):
            batch = build_batch(
                [Record(0, 0, b"k", b"v"), Record(1, 1, b"k", b"w")], base_timestamp=1000 * (i + 1)
            )
            response = await client.produce(tp, batch, acks=-1)
            part = response.responses[0].partition_responses[0]
            assert (int(part.error_code), part.base_offset) == (0, 2 * i)

        async def list_offset(ts):
            part = (await client.list_offsets(tp, ts)).topics[0].partitions[0]
            assert int(part.error_code) == 0
            return part.offset, part.timestamp

        assert (await list_offset(-2))[0] == 0  # earliest
        assert (await list_offset(-1))[0] == 6  # latest
        assert await list_offset(2000) == (2, 2000)  # first offset with timestamp >= 2000
        assert await list_offset(-3) == (5, 3001)  # the record with the max timestamp
        assert (await list_offset(10_000))[0] == -1  # none that late

        epochs = await client.send(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            request_builder(
                ApiKey.OFFSET_FOR_LEADER_EPOCH,
                replica_id=-1,
                topics=[
                    {
                        "topic": "proto",
                        "partitions": [
                            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}
                        ],
                    }
                ],
            ),
        )
        part = epochs.topics[0].partitions[0]
        assert (int(part.error_code), part.leader_epoch, part.end_offset) == (0, 0, 6)

        pid = await client.send(
            ApiKey.INIT_PRODUCER_ID,
            request_builder(
                ApiKey.INIT_PRODUCER_ID,
                transactional_id=None,
                transaction_timeout=datetime.timedelta(seconds=60),
                producer_id=-1,
                producer_epoch=-1,
            ),
        )
        assert int(pid.error_code) == 0 and pid.producer_id >= 0 and pid.producer_epoch == 0
        txn = await client.send(
            ApiKey.INIT_PRODUCER_ID,
            request_builder(
                ApiKey.INIT_PRODUCER_ID,
                transactional_id="t1",
                transaction_timeout=datetime.timedelta(seconds=60),
                producer_id=-1,
                producer_epoch=-1,
            ),
        )
        # sent without FindCoordinator: no broker coordinates t1 yet (no __transaction_state)
        assert int(txn.error_code) == 16  # NOT_COORDINATOR, as Kafka answers

        configs = await client.send(
            ApiKey.DESCRIBE_CONFIGS,
            request_builder(
                ApiKey.DESCRIBE_CONFIGS,
                resources=[
                    {
                        "resource_type": 4,
                        "resource_name": "0",
                        "configuration_keys": ["log.dirs", "broker.id"],
                    }
                ],
                include_synonyms=False,
                include_documentation=False,
            ),
        )
        result = configs.results[0]
        assert int(result.error_code) == 0
        assert {c.name: c.value for c in result.configs}["broker.id"] == "0"

        # auto-creation when the client allows it (Metadata v4+ allow_auto_topic_creation)
        metadata = await client.send(
            ApiKey.METADATA,
            request_builder(
                ApiKey.METADATA, topics=[{"name": "auto-made"}], allow_auto_topic_creation=True
            ),
        )
        assert int(metadata.topics[0].error_code) in (0, 5)  # NONE or LEADER_NOT_AVAILABLE
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            metadata = await client.metadata(["auto-made"])
            (topic,) = metadata.topics
            if (
                int(topic.error_code) == 0
                and topic.partitions
                and topic.partitions[0].leader_id == 0
            ):
                break
            assert asyncio.get_running_loop().time() < deadline, "auto-created topic has no leader"
            await asyncio.sleep(0.05)  # polling interval


def test_offsets_epochs_producer_ids_configs_and_auto_creation(shared_broker):
    asyncio.run(scenario(shared_broker.bootstrap_servers))


async def keyless_records_scenario(bootstrap):
    async with KafkaClient(bootstrap) as client:
        response = await client.create_topics(
            [
                {
                    "name": "proto-compacted",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "configs": [{"name": "cleanup.policy", "value": "compact"}],
                }
            ]
        )
        assert int(response.topics[0].error_code) == 0
        await client.refresh_metadata(["proto-compacted"])
        batch = build_batch(
            [
                Record(0, 0, b"k0", b"v"),
                Record(1, 0, None, b"no key"),
                Record(2, 0, b"k2", b"v"),
                Record(3, 0, None, b"no key either"),
            ],
            compression=1,
        )
        produce = await client.send(
            ApiKey.PRODUCE,
            request_builder(
                ApiKey.PRODUCE,
                transactional_id=None,
                acks=-1,
                timeout=datetime.timedelta(seconds=30),
                topic_data=[
                    {"name": "proto-compacted", "partition_data": [{"index": 0, "records": batch}]}
                ],
            ),
        )
        part = produce.responses[0].partition_responses[0]
        reason = "Compacted topic cannot accept message without key in topic partition proto-compacted-0."
        assert int(part.error_code) == 87  # INVALID_RECORD
        assert [(e.batch_index, e.batch_index_error_message) for e in part.record_errors] == [
            (1, reason),
            (3, reason),
        ]
        assert "One or more records have been rejected due to 2 record errors" in part.error_message
        assert part.base_offset == -1
        # nothing of the refused batch was appended
        latest = (await client.list_offsets(TopicPartition("proto-compacted", 0), -1)).topics[0]
        assert latest.partitions[0].offset == 0


def test_keyless_records_on_a_compacted_topic_are_named_in_record_errors(shared_broker):
    """KIP-467: the refused records of a batch are named by batch_index with Kafka's message."""
    asyncio.run(keyless_records_scenario(shared_broker.bootstrap_servers))
