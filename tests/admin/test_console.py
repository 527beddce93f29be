"""The console in a real headless browser (Debian's chromium and chromedriver through selenium;
nothing is downloaded): every page loads without console errors, the overview's counts are the
API's, and actions taken in the page are seen by Kafka clients. Screenshots of every page are
written to tests/output/console/ for review."""

from __future__ import annotations

from tests.admin.browser import (
    SCREENSHOTS,
    console_errors,
    text_of,
    wait_until,
)
from tests.admin.browser import open_page as open_console
from tests.admin.conftest import AdminClient, produce

try:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
except ImportError as e:  # pragma: no cover - the test extras are required
    raise RuntimeError("selenium and confluent-kafka are required: pip install -e '.[test]'") from e


def open_page(driver, admin: AdminClient, route: str, page: str, shot: str | None = None) -> None:
    open_console(driver, admin.url, route, page, shot)


def test_every_page_loads_without_console_errors(browser, admin: AdminClient, admin_broker) -> None:
    assert admin.post("/topics", {"name": "shown", "partitions": 2}).status == 201
    produce(admin_broker.bootstrap, "shown", 5)
    consumer = Consumer({"bootstrap.servers": admin_broker.bootstrap, "group.id": "shown-group"})
    consumer.commit(offsets=[TopicPartition("shown", 0, 3)], asynchronous=False)
    consumer.close()
    browser.get_log("browser")  # start from a clean log
    for route, page, shot in (
        ("/", "overview", "overview"),
        ("/topics", "topics", "topics"),
        ("/topic/shown", "topic", "topic"),
        ("/groups", "groups", "groups"),
        ("/group/shown-group", "group", "group"),
        ("/brokers", "brokers", "brokers"),
        ("/partitions?state=under_replicated", "partitions", "partitions"),
        ("/actions", "actions", "actions"),
        ("/schemas", "schemas", None),
        ("/metrics", "metrics", None),
    ):
        open_page(browser, admin, route, page, shot)
        assert console_errors(browser) == [], route
    browser.get(f"{admin.url}/docs")
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "details.op"), "the API reference")
    browser.save_screenshot(str(SCREENSHOTS / "docs.png"))
    assert console_errors(browser) == []
    assert len(browser.find_elements(By.CSS_SELECTOR, "details.op")) == sum(
        len(item) for item in admin.get("/openapi.json").body["paths"].values()
    )


def test_overview_counts_are_the_apis(browser, admin: AdminClient) -> None:
    assert admin.post("/topics", {"name": "counted", "partitions": 3}).status == 201
    open_page(browser, admin, "/", "overview")
    expected = admin.get("/overview").body
    # read in one script: the cards are redrawn every few seconds
    shown = browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('[data-count]')]"
        ".map((card) => [card.dataset.count, card.querySelector('.value').textContent]))"
    )
    for key in ("brokers", "topics", "partitions", "under_replicated", "offline", "under_min_isr"):
        assert int(shown[key].replace(",", "")) == expected[key], key
    assert expected["topics"] >= 1 and expected["partitions"] >= 3


def test_topic_created_in_the_page_is_in_a_clients_metadata(
    browser, admin: AdminClient, admin_broker
) -> None:
    open_page(browser, admin, "/actions", "actions")
    form = browser.find_element(By.ID, "create-topic")
    form.find_element(By.NAME, "name").send_keys("made-in-browser")
    form.find_element(By.NAME, "partitions").send_keys("3")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(lambda: "done" in form.text, "the create to finish")
    browser.save_screenshot(str(SCREENSHOTS / "created-topic.png"))

    kafka = KafkaAdmin({"bootstrap.servers": admin_broker.bootstrap})
    metadata = kafka.list_topics("made-in-browser", timeout=10)
    assert len(metadata.topics["made-in-browser"].partitions) == 3
    assert metadata.topics["made-in-browser"].error is None


def test_record_browser_shows_what_a_client_produced(
    browser, admin: AdminClient, admin_broker
) -> None:
    assert admin.post("/topics", {"name": "browsed-ui", "partitions": 1}).status == 201
    produce(admin_broker.bootstrap, "browsed-ui", 12)
    open_page(browser, admin, "/topic/browsed-ui", "topic")
    Select(browser.find_element(By.ID, "rb-mode")).select_by_value("offset")
    browser.find_element(By.ID, "rb-from").send_keys("4")
    browser.find_element(By.ID, "rb-limit").clear()
    browser.find_element(By.ID, "rb-limit").send_keys("5")
    browser.find_element(By.ID, "rb-load").click()
    rows = wait_until(
        lambda: browser.find_elements(By.CSS_SELECTOR, "#records tbody tr"), "the records"
    )
    browser.save_screenshot(str(SCREENSHOTS / "records.png"))
    # newest first
    assert [r.get_attribute("data-offset") for r in rows] == ["8", "7", "6", "5", "4"]
    assert "v8" in rows[0].text and "v4" in rows[-1].text


def test_resetting_offsets_in_the_page_moves_a_real_consumer(
    browser, admin: AdminClient, admin_broker
) -> None:
    bootstrap = admin_broker.bootstrap
    assert admin.post("/topics", {"name": "rewound", "partitions": 1}).status == 201
    produce(bootstrap, "rewound", 10)
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": "rewound-group",
        "auto.offset.reset": "latest",
        "enable.auto.commit": False,
    }
    consumer = Consumer(config)
    consumer.commit(offsets=[TopicPartition("rewound", 0, 10)], asynchronous=False)
    consumer.close()

    open_page(browser, admin, "/group/rewound-group", "group")
    Select(browser.find_element(By.ID, "reset-to")).select_by_value("earliest")
    browser.find_element(By.ID, "reset-preview-button").click()
    wait_until(
        lambda: browser.find_elements(By.CSS_SELECTOR, "#reset-preview-table tbody tr"),
        "the preview",
    )
    preview = text_of(browser, "#reset-preview-table tbody tr")
    assert preview.split() == ["rewound", "0", "0"]
    # a preview commits nothing
    assert admin.get("/groups/rewound-group").body["offsets"][0]["committed_offset"] == 10
    browser.find_element(By.ID, "reset-apply").click()
    browser.find_element(By.ID, "confirm-yes").click()
    wait_until(lambda: "done" in text_of(browser, "#reset-out"), "the reset to be applied")
    browser.save_screenshot(str(SCREENSHOTS / "reset-offsets.png"))

    consumer = Consumer(config)
    try:
        consumer.subscribe(["rewound"])
        first = wait_until(
            lambda: (m := consumer.poll(0.5)) is not None and m.error() is None and m,
            "the consumer's first record",
        )
    finally:
        consumer.close()
    assert first.offset() == 0 and first.value() == b"v0"


def test_topic_list_is_paged_and_filtered_by_the_server(
    browser, admin: AdminClient, admin_broker
) -> None:
    from confluent_kafka.admin import NewTopic

    kafka = KafkaAdmin({"bootstrap.servers": admin_broker.bootstrap})
    names = [f"paged-{i:03d}" for i in range(120)]
    for future in kafka.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(60)
    assert len(admin.get("/topics?internal=false&limit=7").body) == 7
    open_page(browser, admin, "/topics", "topics", "topics-paged")

    def count() -> str:  # the pager is redrawn: find it again each time
        return text_of(browser, "#topic-count")

    wait_until(lambda: count().startswith("1–50 of "), "the first page")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#topics tbody tr")) == 50
    browser.execute_script("document.getElementById('next-page').click()")  # redrawn often
    wait_until(lambda: count().startswith("51–100 of "), "the second page")
    search = browser.find_element(By.ID, "topic-search")
    search.send_keys("paged-11")
    wait_until(lambda: count() == "1–10 of 10", "the filtered list")
    shown = browser.execute_script(  # in one script: the list is redrawn every few seconds
        "return [...document.querySelectorAll('#topics tbody tr')].map((r) => r.dataset.topic)"
    )
    assert shown == [f"paged-11{i}" for i in range(10)]
    assert not any(r.startswith("__") for r in shown)
