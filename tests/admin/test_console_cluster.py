"""The console of a two-broker cluster (kafkalite.testing.Cluster, in this process) in a real
headless chromium: every view answers for the whole cluster from either broker's console (groups,
their lag and log dirs are read over the Kafka protocol from the broker that has them), and
each view an operator uses is exercised against what Kafka clients see. Screenshots of each are
written to tests/output/console/."""

from __future__ import annotations

import json
import urllib.request

import pytest

from kafkalite.testing import Cluster
from tests.admin.browser import (
    console_errors,
    open_page,
    rows_of,
    screenshot,
    table_text,
    wait_until,
)

try:
    from confluent_kafka import Consumer, TopicPartition
    from selenium.webdriver.common.by import By
except ImportError as e:  # pragma: no cover - the test extras are required
    raise RuntimeError("selenium and confluent-kafka are required: pip install -e '.[test]'") from e

GROUPS = [f"team-{i}" for i in range(6)]


@pytest.fixture(scope="module")
def cluster():
    with Cluster(
        brokers=2,
        config={
            "offsets.topic.num.partitions": 4,
            "offsets.topic.replication.factor": 1,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
    ) as c:
        yield c


def api(url: str, path: str):
    with urllib.request.urlopen(url + path, timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def orders(cluster) -> str:
    """Topic `orders`: a partition on each broker, 7 records in partition 0 and 11 in 1; the
    groups team-N committed N in partition 0 (lag 18 - N)."""
    cluster.create_topic("orders", partitions=2, replication_factor=1)
    cluster.produce("orders", [f"a{i}" for i in range(7)], partition=0)
    cluster.produce("orders", [f"b{i}" for i in range(11)], partition=1)
    for i, name in enumerate(GROUPS):
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": name})
        try:
            commits = [TopicPartition("orders", 0, i), TopicPartition("orders", 1, 0)]
            consumer.commit(offsets=commits, asynchronous=False)
        finally:
            consumer.close()
    return "orders"


def test_group_list_has_every_groups_lag_from_either_broker(browser, cluster, orders) -> None:
    coordinators = {
        g["group_id"]: g["coordinator"] for g in api(cluster.admin_url_of(1), "/groups")
    }
    assert {coordinators[g] for g in GROUPS} == {1, 2}  # some are coordinated by each broker
    for broker in (1, 2):
        url = cluster.admin_url_of(broker)
        browser.get_log("browser")
        open_page(browser, url, "/groups", "groups")
        wait_until(
            lambda: set(GROUPS) <= set(rows_of(browser, "#groups tbody tr", "data-group")),
            "every group listed",
        )
        # sorted by total lag, the largest first: who is behind comes first
        rows = [r for r in table_text(browser, "#groups tbody tr") if r[0] in GROUPS]
        assert [r[0] for r in rows] == GROUPS
        assert [int(r[5]) for r in rows] == [18 - i for i in range(6)]
        assert {r[4] for r in rows} == {"orders"} and {r[3] for r in rows} == {"0"}
        assert {r[2] for r in rows} == {"Empty"}
        assert {r[1] for r in rows} == {"classic"}
        screenshot(browser, f"groups-from-broker-{broker}")
        assert console_errors(browser) == []
    # a click on a header sorts by it, again the other way
    browser.find_element(By.CSS_SELECTOR, "th[data-sort=group]").click()
    wait_until(
        lambda: (
            [g for g in rows_of(browser, "#groups tbody tr", "data-group") if g in GROUPS] == GROUPS
        ),
        "the list sorted by name",
    )
    browser.find_element(By.CSS_SELECTOR, "th[data-sort=group]").click()
    wait_until(
        lambda: (
            [g for g in rows_of(browser, "#groups tbody tr", "data-group") if g in GROUPS]
            == list(reversed(GROUPS))
        ),
        "the list sorted by name, descending",
    )


def test_group_page_of_a_group_the_other_broker_coordinates(browser, cluster, orders) -> None:
    """A live consumer that committed nothing: its page, opened on the broker that does not
    coordinate it, shows every assigned partition with "no offset" and lag from the log start."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "live-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
    )
    try:
        consumer.subscribe(["orders"])

        def assigned():
            consumer.poll(0.2)
            return len(consumer.assignment()) == 2

        wait_until(assigned, "the consumer's assignment")
        coordinator = wait_until(
            lambda: {g["group_id"]: g for g in api(cluster.admin_url_of(1), "/groups")}[
                "live-reader"
            ]["coordinator"],
            "the group listed",
        )
        other = 2 if coordinator == 1 else 1
        url = cluster.admin_url_of(other)
        browser.get_log("browser")
        open_page(browser, url, "/group/live-reader", "group")

        def lag_rows():
            consumer.poll(0.1)  # stays a live member
            rows = table_text(browser, "#lag-table tbody tr")
            return len(rows) == 2 and rows

        rows = wait_until(lag_rows, "both assigned partitions in the lag table")
        screenshot(browser, "group-never-committed")
        assert [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows] == [
            ("orders", "0", "no offset", "0", "7", "7"),
            ("orders", "1", "no offset", "0", "11", "11"),
        ]
        assert browser.find_element(By.ID, "total-lag").text == "18"
        assert f"coordinator {coordinator}" in browser.find_element(By.ID, "main").text
        assert console_errors(browser) == []
    finally:
        consumer.close()


def test_brokers_page_shows_every_brokers_log_dirs(browser, cluster, orders) -> None:
    open_page(browser, cluster.admin_url_of(1), "/brokers", "brokers")
    for broker in (1, 2):
        wait_until(
            lambda broker=broker: browser.find_elements(
                By.CSS_SELECTOR, f"#log-dirs-{broker} tbody tr"
            ),
            f"broker {broker}'s log dirs",
        )
    screenshot(browser, "brokers-log-dirs")
    for broker in (1, 2):
        [row] = table_text(browser, f"#log-dirs-{broker} tbody tr")
        assert row[0].endswith(f"broker-{broker}/logs") and row[3] == "online"
    assert console_errors(browser) == []


@pytest.fixture(scope="module")
def events(cluster) -> str:
    """Topic `events`: 3 partitions on both brokers, record i in partition i % 3 at time
    T0 + i seconds, key k<i>, value "paid" or every fourth "refund", header source=web on 7."""
    cluster.create_topic("events", partitions=3, replication_factor=1)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(12):
        producer.produce(
            "events",
            key=f"k{i}".encode(),
            value=f"order {i} {'refund' if i % 4 == 0 else 'paid'}".encode(),
            partition=i % 3,
            headers=[("source", b"web" if i == 7 else b"shop")],
            timestamp=T0 + 1000 * i,
        )
    assert producer.flush(30) == 0
    return "events"


T0 = 1_700_000_000_000


def load_records(browser) -> list[tuple[str, str]]:
    browser.execute_script("document.getElementById('records-out').replaceChildren()")
    browser.find_element(By.ID, "rb-load").click()
    wait_until(lambda: browser.find_elements(By.ID, "records"), "the records")
    return [
        (p, o)
        for p, o in zip(
            rows_of(browser, "#records tbody tr", "data-partition"),
            rows_of(browser, "#records tbody tr", "data-offset"),
            strict=True,
        )
    ]


def test_record_browser_merges_seeks_filters_and_produces(browser, cluster, events) -> None:
    url = cluster.admin_url_of(1)
    browser.get_log("browser")
    open_page(browser, url, "/topic/events", "topic")
    # all partitions merged, newest first: record i is (partition i % 3, offset i // 3)
    shown = load_records(browser)
    assert shown == [(str(i % 3), str(i // 3)) for i in reversed(range(12))]
    screenshot(browser, "records-merged", at="#records-out")

    # from a time: the 4 records from T0 + 5 s on (limit 4), newest first
    browser.find_element(By.CSS_SELECTOR, "#rb-mode option[value=timestamp]").click()
    browser.execute_script(  # the local time of T0 + 5 s in the datetime-local input
        "const d = new Date(arguments[0]);"
        "const pad = (n) => String(n).padStart(2, '0');"
        "document.getElementById('rb-time').value = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-"
        "${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`",
        T0 + 5000,
    )
    limit = browser.find_element(By.ID, "rb-limit")
    limit.clear()
    limit.send_keys("4")
    assert load_records(browser) == [(str(i % 3), str(i // 3)) for i in (8, 7, 6, 5)]

    # from an offset of each partition
    browser.find_element(By.CSS_SELECTOR, "#rb-mode option[value=offset]").click()
    browser.find_element(By.ID, "rb-from").send_keys("3")
    limit.clear()
    limit.send_keys("50")
    assert load_records(browser) == [(str(i % 3), "3") for i in (11, 10, 9)]

    # a filter on the value, then on a header
    browser.find_element(By.CSS_SELECTOR, "#rb-mode option[value=last]").click()
    search = browser.find_element(By.ID, "rb-filter")
    search.send_keys("REFUND")
    assert load_records(browser) == [(str(i % 3), str(i // 3)) for i in (8, 4, 0)]
    search.clear()
    search.send_keys("web")
    assert load_records(browser) == [("1", "2")]
    screenshot(browser, "records-filtered", at="#records-out")

    # the compact view: one line a record
    search.clear()
    browser.find_element(By.ID, "rb-compact").click()
    load_records(browser)
    wait_until(
        lambda: len(browser.find_elements(By.CSS_SELECTOR, "#records tr.compact")) == 12,
        "the compact rows",
    )
    assert "k11" in browser.find_element(By.CSS_SELECTOR, "#records tbody tr").text
    screenshot(browser, "records-compact", at="#records-out")

    # a test record, produced from the page, is what a consumer reads
    browser.find_element(By.CSS_SELECTOR, "details.produce > summary").click()
    browser.find_element(By.ID, "produce-key").send_keys("from-the-page")
    browser.find_element(By.ID, "produce-value").send_keys("hello from chromium")
    browser.find_element(By.ID, "produce-headers").send_keys("trace=abc, env=test")
    browser.find_element(By.ID, "produce-partition").send_keys("2")
    browser.find_element(By.ID, "produce-send").click()
    wait_until(
        lambda: (
            "Produced to partition 2 at offset 4" in browser.find_element(By.ID, "produce-out").text
        ),
        "the produce to be acknowledged",
    )
    wait_until(
        lambda: rows_of(browser, "#records tbody tr", "data-offset")[:1] == ["4"],
        "the new record first in the list",
    )
    screenshot(browser, "records-produced", at="#records-out")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "check"})
    try:
        consumer.assign([TopicPartition("events", 2, 4)])
        msg = wait_until(
            lambda: (m := consumer.poll(0.5)) is not None and m.error() is None and m,
            "the produced record",
        )
    finally:
        consumer.close()
    assert (msg.key(), msg.value()) == (b"from-the-page", b"hello from chromium")
    assert msg.headers() == [("trace", b"abc"), ("env", b"test")]
    assert console_errors(browser) == []


def test_topic_page_effective_configs_groups_and_message_count(browser, cluster, orders) -> None:
    cluster.create_topic("configured", partitions=1, config={"retention.ms": "3600000"})
    cluster.produce("configured", [b"x"] * 3)
    browser.get_log("browser")
    open_page(browser, cluster.admin_url_of(2), "/topic/orders", "topic")
    assert browser.find_element(By.ID, "message-count").text == "18 messages"
    groups = wait_until(lambda: table_text(browser, "#topic-group-table tbody tr"), "the groups")
    assert {r[0]: int(r[4]) for r in groups if r[0] in GROUPS} == {
        g: 18 - i for i, g in enumerate(GROUPS)
    }
    screenshot(browser, "topic-groups", at="#topic-groups")

    open_page(browser, cluster.admin_url_of(1), "/topic/configured", "topic")
    rows = wait_until(
        lambda: table_text(browser, "#effective-config-table tbody tr"), "the effective configs"
    )
    by_name = {r[0]: (r[1], r[2]) for r in rows}
    assert by_name["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert by_name["cleanup.policy"][0] == "delete"
    assert by_name["cleanup.policy"][1] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")
    assert len(rows) > 20  # every config, not only the overrides
    assert browser.find_element(By.ID, "message-count").text == "3 messages"
    screenshot(browser, "topic-effective-configs", at="#effective-configs")
    assert console_errors(browser) == []


def test_partitions_view_hides_internal_topics_and_pages(browser, cluster, orders) -> None:
    cluster.create_topic("wide", partitions=110, replication_factor=1)
    url = cluster.admin_url_of(1)
    open_page(browser, url, "/partitions?state=all", "partitions")

    def count() -> str:
        return browser.find_element(By.ID, "partitions-count").text

    shown = rows_of(browser, "#partition-health tbody tr", "data-partition")
    assert len(shown) == 100 and not any(p.startswith("__") for p in shown)
    total = int(count().split(" of ")[1].replace(",", ""))
    assert count() == f"1–100 of {total}" and total >= 110 + 2 + 3
    screenshot(browser, "partitions-page-1")
    browser.execute_script("document.getElementById('partitions-next').click()")
    wait_until(lambda: count() == f"101–{total} of {total}", "the second page")
    assert len(rows_of(browser, "#partition-health tbody tr", "data-partition")) == total - 100
    browser.find_element(By.ID, "partitions-internal").click()
    wait_until(lambda: count() == f"1–100 of {total + 4}", "internal partitions counted")
    browser.find_element(By.ID, "partitions-topic").send_keys("__consumer")
    wait_until(lambda: count() == "1–4 of 4", "the offsets topic's partitions")
    assert rows_of(browser, "#partition-health tbody tr", "data-partition") == [
        f"__consumer_offsets-{p}" for p in range(4)
    ]
    screenshot(browser, "partitions-internal")


def test_charts_have_a_time_axis_hover_values_and_the_brokers_history(
    browser, cluster, orders
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    url = cluster.admin_url_of(1)
    # the broker samples its rates every few seconds and keeps minutes of them: a page opened
    # later draws what came before it
    samples = wait_until(
        lambda: len(h := api(url, "/metrics/history")["broker"]) >= 2 and h, "two samples"
    )
    open_page(browser, url, "/", "overview")
    chart = wait_until(
        lambda: browser.find_elements(By.CSS_SELECTOR, "#overview-charts svg.chart")[0],
        "the charts",
    )
    ticks = [t.text for t in chart.find_elements(By.CSS_SELECTOR, "text.x-tick")]
    assert len(ticks) == 4 and all(len(t) == 8 and t.count(":") == 2 for t in ticks), ticks
    assert ticks[0] != ticks[-1]  # the axis spans the history, from before the page opened
    assert chart.find_elements(By.CSS_SELECTOR, "text.y-tick")
    path = chart.find_element(By.CSS_SELECTOR, "path.line1").get_attribute("d")
    assert path.count("L") >= len(samples) - 2  # every sample the broker kept is drawn

    def hover_tip() -> str:
        area = browser.find_element(By.CSS_SELECTOR, "#overview-charts svg.chart .hover-area")
        ActionChains(browser).move_to_element(area).perform()
        tip = browser.find_element(By.CSS_SELECTOR, "#overview-charts svg.chart .tip")
        return tip.get_attribute("visibility") == "visible" and tip.text

    text = wait_until(hover_tip, "the hover values")
    clock, values = text.split(" · ", 1)
    assert len(clock) == 8 and values.startswith("msgs/s ")
    screenshot(browser, "chart-hover", at="#overview-charts")


def test_security_page_creates_and_deletes_acls_users_and_quotas(browser, cluster) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from selenium.webdriver.support.ui import Select

    url = cluster.admin_url_of(2)
    browser.get_log("browser")
    open_page(browser, url, "/security", "security")
    kafka = KafkaAdmin({"bootstrap.servers": cluster.bootstrap_servers})
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )

    def kafka_acls():
        return [
            (b.principal, b.name, b.operation.name)
            for b in kafka.describe_acls(everything).result(30)
        ]

    # an ACL made in the page is one Kafka's DescribeAcls answers
    Select(browser.find_element(By.ID, "acl-resource-type")).select_by_value("TOPIC")
    browser.find_element(By.ID, "acl-resource-name").send_keys("orders")
    browser.find_element(By.ID, "acl-principal").send_keys("User:dora")
    Select(browser.find_element(By.ID, "acl-operation")).select_by_value("WRITE")
    browser.find_element(By.ID, "acl-create").click()
    row = "[data-acl='TOPIC:orders:User:dora:WRITE:ALLOW']"
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, row), "the ACL listed")
    wait_until(lambda: ("User:dora", "orders", "WRITE") in kafka_acls(), "the ACL in Kafka's")

    # a user, then a quota
    browser.find_element(By.ID, "user-name").send_keys("erin")
    browser.find_element(By.ID, "user-password").send_keys("erin-secret")
    browser.find_element(By.ID, "user-create").click()
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "[data-user=erin]"), "the user")
    assert browser.find_element(By.ID, "user-password").get_attribute("value") == ""
    assert "erin-secret" not in browser.page_source
    browser.find_element(By.ID, "quota-user").send_keys("erin")
    browser.find_element(By.ID, "quota-producer").send_keys("2048")
    browser.find_element(By.ID, "quota-set").click()
    wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "[data-quota='erin/']"), "quota")
    wanted = [{"user": "erin", "client_id": None, "values": {"producer_byte_rate": 2048.0}}]
    wait_until(lambda: api(url, "/quotas") == wanted, "the quota described")
    screenshot(browser, "security")
    assert console_errors(browser) == []

    # each deleted from its row, after a confirmation
    for css in (row, "[data-user=erin]", "[data-quota='erin/']"):
        browser.find_element(By.CSS_SELECTOR, f"{css} button[data-delete]").click()
        browser.find_element(By.ID, "confirm-yes").click()
        wait_until(lambda css=css: not browser.find_elements(By.CSS_SELECTOR, css), f"{css} gone")
    wait_until(lambda: ("User:dora", "orders", "WRITE") not in kafka_acls(), "the ACL gone")
    wait_until(lambda: "erin" not in [u["name"] for u in api(url, "/users")], "the user gone")
    wait_until(lambda: api(url, "/quotas") == [], "the quota gone")
