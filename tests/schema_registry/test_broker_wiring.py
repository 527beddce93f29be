"""The registry as the broker wires it: its listener setting validated at start-up, the admin
API's authentication applied, and the view rebuilt from `_schemas` after a restart."""

from __future__ import annotations

import json
import urllib.request

import pytest

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.testing import Broker
from tests.schema_registry.support import call

SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
EVOLVED = json.dumps(
    {
        "type": "record",
        "name": "R",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}],
    }
)


@pytest.mark.parametrize("value", ["ftp://h:1", "http://h", "http://a:1,https://b:2", "h:1"])
def test_a_bad_listener_stops_start_up_naming_the_key(value):
    with pytest.raises(ConfigError) as refused:
        BrokerConfig.load(overrides={"schema.registry.listeners": value})
    assert "schema.registry.listeners" in str(refused.value)


def test_empty_disables_and_the_default_is_8081():
    assert (
        BrokerConfig.load(overrides={"schema.registry.listeners": ""}).schema_registry_listeners
        is None
    )
    assert BrokerConfig.load().schema_registry_listeners == "http://127.0.0.1:8081"
    with pytest.raises(ConfigError):
        BrokerConfig.load(overrides={"schema.registry.max.schema.bytes": "0"})


@pytest.mark.integration
def test_the_admin_apis_authentication_applies():
    with Broker({"admin.authentication": "bearer", "admin.bearer.token": "sesame"}) as broker:
        url = broker.schema_registry_url
        refused = call(url, "GET", "/subjects")
        assert (refused.status, refused.body["error_code"]) == (401, 40101)
        request = urllib.request.Request(
            url + "/subjects", headers={"Authorization": "Bearer sesame"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200 and json.loads(answer.read()) == []


@pytest.mark.integration
def test_a_disabled_registry_serves_nothing():
    with Broker({"schema.registry.listeners": ""}) as broker:
        assert broker.schema_registry_url is None


@pytest.mark.integration
def test_a_restart_rebuilds_the_view_from_the_topic(tmp_path):
    with Broker(data_dir=tmp_path) as broker:
        first = call(broker.schema_registry_url, "POST", "/subjects/s/versions", {"schema": SCHEMA})
        assert first.status == 200
        call(broker.schema_registry_url, "PUT", "/config/s", {"compatibility": "FULL"})
        broker.restart()
        url = broker.schema_registry_url
        assert call(url, "GET", "/subjects/s/versions/1").body["id"] == first.body["id"]
        assert call(url, "GET", "/config/s").body == {"compatibilityLevel": "FULL"}
        again = call(url, "POST", "/subjects/s/versions", {"schema": SCHEMA})
        assert again.body["id"] == first.body["id"]  # idempotent across the restart
        evolved = call(url, "POST", "/subjects/s/versions", {"schema": EVOLVED})
        assert evolved.status == 200 and evolved.body["id"] > first.body["id"]
