"""`kafkalite serve` start-up and shutdown: data-dir lock, clean shutdown, topics persist."""

import asyncio

import pytest

from kafkalite.client.client import KafkaClient
from kafkalite.testing import Broker


@pytest.fixture
def broker(tmp_path):
    with Broker(subprocess=True, data_dir=tmp_path / "broker", admin=False) as broker:
        yield broker


async def create_and_list(bootstrap, name=None):
    async with KafkaClient(bootstrap) as client:
        if name is not None:
            response = await client.create_topics(
                [{"name": name, "num_partitions": 3, "replication_factor": 1}]
            )
            assert int(response.topics[0].error_code) == 0
        metadata = await client.metadata(None)
        return {t.name: len(t.partitions) for t in metadata.topics}


def test_second_broker_on_the_same_data_dir_is_refused(broker):
    second = Broker(subprocess=True, data_dir=broker.data_dir, broker_id=1, admin=False)
    with pytest.raises(RuntimeError, match="before it started") as refused:
        second.start()
    assert "in use" in str(refused.value)
    assert broker.running


def test_sigterm_shuts_down_cleanly_and_topics_survive(broker):
    assert asyncio.run(create_and_list(broker.bootstrap_servers, "kept"))["kept"] == 3
    assert broker.stop() == 0
    assert (broker.log_dir / ".kafka_cleanshutdown").exists()
    assert "shut down" in broker.log_text()
    broker.start()
    assert asyncio.run(create_and_list(broker.bootstrap_servers))["kept"] == 3
