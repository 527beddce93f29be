"""kafkalite.testing's subprocess brokers expose their Schema Registry like in-process ones:
`Broker(subprocess=True).schema_registry_url` (a port the OS chose, read from the broker's log,
or chosen before a quiet start), kept across a restart; `Cluster.schema_registry_url_of` for a
subprocess cluster on ZooKeeper; the pytest plugin's `kafkalite_schema_registry_url` fixture."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from kafkalite.testing import Broker, Cluster, ZooKeeperServer
from tests.schema_registry.support import call

pytestmark = pytest.mark.integration

SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
PLUGIN_ARGS = ("-p", "no:kafkalite", "-p", "kafkalite.testing.pytest_plugin", "-p", "no:randomly")
pytest_plugins = ["pytester"]


@pytest.mark.parametrize("level", ["INFO", "WARNING"])
def test_a_subprocess_broker_serves_its_registry_url(tmp_path, level):
    with Broker({"log.level": level}, subprocess=True, data_dir=tmp_path / "b") as broker:
        url = broker.schema_registry_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        assert not url.endswith(":0")
        schema_id = SchemaRegistryClient({"url": url}).register_schema("s", Schema(SCHEMA, "AVRO"))
        broker.restart()
        # the same port after a restart, the schema read back from the topic
        assert broker.schema_registry_url == url
        assert call(url, "GET", f"/schemas/ids/{schema_id}").body["schema"] == SCHEMA
    assert broker.schema_registry_url is None


def test_a_subprocess_broker_with_the_registry_disabled_has_no_url(tmp_path):
    with Broker({"schema.registry.listeners": ""}, subprocess=True, data_dir=tmp_path) as b:
        assert b.schema_registry_url is None


def test_a_subprocess_cluster_serves_a_registry_on_every_broker(tmp_path):
    with ZooKeeperServer(tmp_path / "zk") as zookeeper:
        with Cluster(
            brokers=2,
            zookeeper_connect=zookeeper.connect_string("/registry"),
            subprocess=True,
            data_dir=tmp_path / "c",
            admin=False,
        ) as cluster:
            urls = [cluster.schema_registry_url_of(b) for b in (1, 2)]
            assert all(urls) and urls[0] != urls[1]
            client = SchemaRegistryClient({"url": urls[0]})
            schema_id = client.register_schema("shared", Schema(SCHEMA, "AVRO"))
            # registered on one broker, read at once from the other
            answer = call(urls[1], "GET", f"/schemas/ids/{schema_id}")
            assert answer.status == 200 and answer.body["schema"] == SCHEMA


def test_the_pytest_fixture_in_subprocess_mode(pytester):
    pytester.makepyfile(
        test_registry="""
        import json
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

        def test_registry(kafkalite_broker, kafkalite_schema_registry_url):
            assert kafkalite_broker.process is not None
            client = SchemaRegistryClient({"url": kafkalite_schema_registry_url})
            text = json.dumps({"type": "record", "name": "R", "fields": []})
            schema_id = client.register_schema("s", Schema(text, "AVRO"))
            assert client.get_schema(schema_id).schema_str == text
        """
    )
    result = pytester.runpytest_inprocess(*PLUGIN_ARGS, "--kafkalite-mode=subprocess")
    result.assert_outcomes(passed=1)
