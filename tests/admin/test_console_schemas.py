"""The console's Schemas view, its schema-aware record browser and the broker page's dynamic
configs, in a real headless chromium (tests/admin/browser.py) against an in-process broker with
its Schema Registry: schemas registered with confluent-kafka's SchemaRegistryClient are listed
with their versions and a diff, a record produced with AvroSerializer is shown decoded, and a
broker config set in the page is what confluent-kafka's AdminClient.describe_configs reads.
Screenshots go to tests/output/console/."""

from __future__ import annotations

import json

import pytest

from kafkalite.testing import Broker
from tests.admin.browser import console_errors, open_page, screenshot, wait_until
from tests.admin.support import ORDER_V1, ORDER_V2, unique
from tests.admin.support import produce_records as produce

try:
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from confluent_kafka.admin import ConfigResource, ResourceType
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
except ImportError as e:  # pragma: no cover - the test extras are required
    raise RuntimeError("selenium and confluent-kafka are required: pip install -e '.[test]'") from e


@pytest.fixture(scope="module")
def broker():
    with Broker() as b:
        yield b


@pytest.fixture(scope="module")
def registry(broker) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.schema_registry_url})


def texts(browser, css: str) -> list[str]:
    return browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((e) => e.textContent)", css
    )


def test_schemas_view_lists_versions_and_shows_a_diff(browser, broker, registry) -> None:
    subject = unique("orders") + "-value"
    first = registry.register_schema(subject, Schema(json.dumps(ORDER_V1), "AVRO"))
    registry.register_schema(subject, Schema(json.dumps(ORDER_V2), "AVRO"))
    browser.get_log("browser")
    open_page(browser, broker.admin_url, "/schemas", "schemas")
    row = f"#subjects tr[data-subject='{subject}']"
    cells = wait_until(lambda: texts(browser, f"{row} td"), "the subject in the list")
    assert cells[:6] == [subject, "2", cells[2], "AVRO", "2", "BACKWARD"]
    assert browser.find_element(By.ID, "global-compatibility").text == "BACKWARD"
    screenshot(browser, "schemas")

    browser.find_element(By.CSS_SELECTOR, f"{row} a").click()
    wait_until(
        lambda: texts(browser, "#version-table tr[data-version] td:first-child") == ["1", "2"],
        "both versions",
    )
    # the latest version's schema, pretty-printed; version 1 on request
    wait_until(lambda: '"note"' in browser.find_element(By.ID, "schema-text").text, "v2's text")
    browser.find_element(By.CSS_SELECTOR, "button[data-show='1']").click()
    wait_until(
        lambda: browser.find_element(By.ID, "schema-text").get_attribute("data-version") == "1",
        "v1's text",
    )
    assert f"schema id {first}" in browser.find_element(By.ID, "schema-view").text
    assert '"note"' not in browser.find_element(By.ID, "schema-text").text

    assert Select(browser.find_element(By.ID, "diff-from")).first_selected_option.text == "v1"
    assert Select(browser.find_element(By.ID, "diff-to")).first_selected_option.text == "v2"
    browser.find_element(By.ID, "diff-show").click()
    added = wait_until(lambda: texts(browser, "#diff-lines .diff-added"), "the diff")
    assert any('"note"' in line for line in added), added
    assert not texts(browser, "#diff-lines .diff-removed") or all(
        '"note"' not in line for line in texts(browser, "#diff-lines .diff-removed")
    )
    screenshot(browser, "schema-diff", at="#schema-diff")

    # the subject's own level, set in the page, is the registry's
    Select(browser.find_element(By.ID, "subject-level")).select_by_value("FULL")
    browser.find_element(By.ID, "subject-level-save").click()
    wait_until(lambda: registry.get_compatibility(subject) == "FULL", "the level set")
    wait_until(
        lambda: browser.find_element(By.ID, "subject-compatibility").text == "FULL",
        "the level shown",
    )
    assert console_errors(browser) == []


def test_record_browser_shows_a_decoded_avro_record(browser, broker, registry) -> None:
    topic = unique("avro-orders")
    broker.create_topic(topic)
    serialize = AvroSerializer(registry, json.dumps(ORDER_V1))
    value = serialize(
        {"id": 42, "item": "green tea"}, SerializationContext(topic, MessageField.VALUE)
    )
    produce(broker, topic, [(b"order-42", value)])
    browser.get_log("browser")
    open_page(browser, broker.admin_url, f"/topic/{topic}", "topic")
    browser.find_element(By.ID, "rb-load").click()
    shown = wait_until(
        lambda: browser.find_element(By.CSS_SELECTOR, "#records .decoded[data-encoding=avro]"),
        "the decoded record",
    )
    assert json.loads(shown.find_element(By.CSS_SELECTOR, "pre").text) == {
        "id": 42,
        "item": "green tea",
    }
    schema_id = int.from_bytes(value[1:5], "big")
    assert f"schema {schema_id} · {topic}-value" in shown.text
    assert "order-42" in browser.find_element(By.ID, "records").text  # the key, unframed
    screenshot(browser, "record-browser-avro", at="#records")
    assert console_errors(browser) == []


def broker_config(broker, config: str):
    admin = KafkaAdmin({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, str(broker.broker_id))
    return admin.describe_configs([resource])[resource].result(30)[config]


def test_broker_page_edits_a_dynamic_config(browser, broker) -> None:
    me = broker.broker_id
    browser.get_log("browser")
    open_page(browser, broker.admin_url, "/brokers", "brokers")
    row = f"#broker-config-table-{me} tr[data-config='log.cleaner.backoff.ms']"
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, row), "the broker's configs")
    assert browser.find_element(By.CSS_SELECTOR, row).get_attribute("data-source") == (
        "DEFAULT_CONFIG"
    )
    browser.find_element(By.ID, f"broker-config-name-{me}").send_keys("log.cleaner.backoff.ms")
    browser.find_element(By.ID, f"broker-config-value-{me}").send_keys("23000")
    browser.find_element(By.ID, f"broker-config-set-{me}").click()
    out = browser.find_element(By.ID, f"broker-config-out-{me}")
    wait_until(lambda: "done" in out.text, "the config to be set")
    seen = wait_until(
        lambda: (c := broker_config(broker, "log.cleaner.backoff.ms")).value == "23000" and c,
        "the value in a Kafka client's DescribeConfigs",
    )
    assert seen.source == 2  # DYNAMIC_BROKER_CONFIG
    # the page shows its source; then removes it again
    wait_until(
        lambda: (
            browser.find_element(By.CSS_SELECTOR, row).get_attribute("data-source")
            == "DYNAMIC_BROKER_CONFIG"
        ),
        "the new source shown",
    )
    browser.find_element(By.CSS_SELECTOR, f"#broker-config-details-{me} > summary").click()
    screenshot(browser, "broker-configs", at=f"#broker-{me}")
    browser.find_element(By.CSS_SELECTOR, f"{row} button[data-remove]").click()
    wait_until(
        lambda: broker_config(broker, "log.cleaner.backoff.ms").source == 5,
        "the default again",
    )

    # the cluster-wide default
    browser.find_element(By.ID, "broker-config-name-default").send_keys("log.cleaner.backoff.ms")
    browser.find_element(By.ID, "broker-config-value-default").send_keys("24000")
    browser.find_element(By.ID, "broker-config-set-default").click()
    wait_until(
        lambda: broker_config(broker, "log.cleaner.backoff.ms").value == "24000",
        "the cluster default applied",
    )
    assert broker_config(broker, "log.cleaner.backoff.ms").source == 3
    wait_until(
        lambda: browser.find_elements(
            By.CSS_SELECTOR, "#broker-config-table-default tr[data-config='log.cleaner.backoff.ms']"
        ),
        "the default listed",
    )
    browser.find_element(By.ID, "broker-config-remove-default").click()
    wait_until(lambda: broker_config(broker, "log.cleaner.backoff.ms").source == 5, "removed")
    assert console_errors(browser) == []


def test_metrics_view_and_a_disabled_registry(browser, broker) -> None:
    open_page(browser, broker.admin_url, "/", "overview")
    link = browser.find_element(By.ID, "metrics-link")
    assert link.get_attribute("href").endswith("#/metrics")
    link.click()
    wait_until(
        lambda: "kafkalite_" in browser.find_element(By.ID, "metrics-text").text, "the metrics"
    )
    with Broker({"schema.registry.listeners": ""}) as bare:
        open_page(browser, bare.admin_url, "/schemas", "schemas")
        wait_until(
            lambda: "disabled" in browser.find_element(By.ID, "schemas-disabled").text,
            "the disabled registry said",
        )
        screenshot(browser, "schemas-disabled")
