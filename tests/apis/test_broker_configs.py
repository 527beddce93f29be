"""The BROKER resource of IncrementalAlterConfigs, AlterConfigs and DescribeConfigs
(apis/broker_configs.py) through the dispatcher, on an embedded store and no broker: what is
written (Kafka's znode and change notification), what validate_only and refusals leave alone,
and what DescribeConfigs answers once the level is applied."""

from __future__ import annotations

import sys

import pytest

from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.server.dynamic_config import DynamicBrokerConfig
from kafkalite.zk import data as paths
from kafkalite.zk.broker_configs import get_broker_config


@pytest.fixture
async def store_session(services):
    store = EmbeddedStore(None)
    session = await store.open_session()
    services.store = session
    services.extra["dynamic_config"] = DynamicBrokerConfig(services.config)
    yield session
    await store.close()


def incremental(name: str, ops: list[tuple[str, int, str | None]], validate_only=False):
    cls = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    m = sys.modules[cls.__module__]
    return cls(
        resources=(
            m.AlterConfigsResource(
                resource_type=4,
                resource_name=name,
                configs=tuple(
                    m.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops
                ),
            ),
        ),
        validate_only=validate_only,
    )


async def changes(session) -> list[str]:
    out = []
    for child in sorted(await session.get_children(paths.CONFIG_CHANGES)):
        data, _ = await session.get_data(f"{paths.CONFIG_CHANGES}/{child}")
        out.append(paths.decode_config_change(data))
    return out


async def test_a_level_is_written_with_its_notification(call, services, store_session) -> None:
    response = await call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        incremental("0", [("log.retention.ms", 0, "1000"), ("log.cleanup.policy", 2, "compact")]),
    )
    assert response.responses[0].error_code.value == 0
    assert await get_broker_config(store_session, 0) == {
        "log.retention.ms": "1000",
        "log.cleanup.policy": "delete,compact",  # APPEND starts from Kafka's default
    }
    assert await changes(store_session) == ["brokers/0"]
    response = await call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, incremental("", [("max.connections", 0, "9")])
    )
    assert response.responses[0].error_code.value == 0
    assert await get_broker_config(store_session, None) == {"max.connections": "9"}
    assert await changes(store_session) == ["brokers/0", "brokers/<default>"]


async def test_validate_only_and_refusals_write_nothing(call, services, store_session) -> None:
    for request in (
        incremental("0", [("log.retention.ms", 0, "1000")], validate_only=True),
        incremental("0", [("broker.id", 0, "1")]),
        incremental("0", [("log.retention.ms", 2, "1")]),  # APPEND to a scalar
        incremental("3", [("log.retention.ms", 0, "1")]),
        incremental("x", [("log.retention.ms", 0, "1")]),
    ):
        response = await call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
        assert response.responses[0].error_code.value in (0, 40, 42)
    codes = []
    for request in (
        incremental("0", [("broker.id", 0, "1")]),
        incremental("3", [("log.retention.ms", 0, "1")]),
        incremental("x", [("log.retention.ms", 0, "1")]),
    ):
        response = await call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
        codes.append((response.responses[0].error_code.value, response.responses[0].error_message))
    assert codes == [
        (
            40,
            "Invalid config value for resource ConfigResource(type=BROKER, name='0'): "
            "Cannot update these configs dynamically: Set(broker.id)",
        ),
        (42, "Unexpected broker id, expected 0, but received 3"),
        (42, "Broker id must be an integer, but it is: x"),
    ]
    assert await store_session.exists(paths.CONFIG_CHANGES) is None or not await changes(
        store_session
    )
    assert await get_broker_config(store_session, 0) == {}


async def test_describe_answers_the_applied_levels(call, services, store_session) -> None:
    dynamic = services.extra["dynamic_config"]
    dynamic.update(default={"log.retention.ms": "2000"}, per_broker={"log.retention.ms": "1000"})
    cls = request_class(ApiKey.DESCRIBE_CONFIGS, 4)
    m = sys.modules[cls.__module__]
    request = cls(
        resources=(
            m.DescribeConfigsResource(
                resource_type=4, resource_name="0", configuration_keys=("log.retention.ms",)
            ),
            m.DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None),
        ),
        include_synonyms=True,
        include_documentation=False,
    )
    response = await call(ApiKey.DESCRIBE_CONFIGS, 4, request)
    own, default = response.results
    [entry] = own.configs
    assert (entry.value, entry.config_source, entry.read_only, entry.config_type) == (
        "1000",
        2,
        False,
        5,
    )
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("log.retention.ms", "1000", 2),
        ("log.retention.ms", "2000", 3),
        ("log.retention.hours", "168", 5),
    ]
    assert [(c.name, c.value, c.config_source) for c in default.configs] == [
        ("log.retention.ms", "2000", 3)
    ]
    assert [s.source for s in default.configs[0].synonyms] == [3, 5]
