"""A share group's in-flight records through the admin API and the console, on a 3-broker
in-process cluster (kafkalite.testing.Cluster) with a real confluent-kafka ShareConsumer holding
records (tests/admin/share_in_flight.py: 0 and 3-5 acquired, 1 rejected, 2 released).

The partition's leader answers with its live state (who holds what, until when); any other
broker with the share coordinator's persisted state, saying so; the console shows either.
"""

from __future__ import annotations

import pytest

from kafkalite.testing import Cluster
from tests.admin.conftest import AdminClient
from tests.admin.share_in_flight import (
    LIVE,
    LOCK_MS,
    PERSISTED,
    RECORDS,
    delivery_counts,
    hold_records,
    states,
)

pytestmark = pytest.mark.integration

TOPIC = "in-flight"
GROUP = "in-flight-share"


@pytest.fixture(scope="module")
def cluster():
    with Cluster(
        3,
        {
            "group.share.record.lock.duration.ms": LOCK_MS,
            "group.share.max.record.lock.duration.ms": LOCK_MS,
            "share.auto.offset.reset": "earliest",
            "offsets.topic.num.partitions": 1,
            "share.coordinator.state.topic.num.partitions": 1,
        },
    ) as c:
        yield c


@pytest.fixture(scope="module")
def held(cluster):
    """The consumer holding the records, and the partition's leader."""
    cluster.create_topic(TOPIC, 1, 3)
    cluster.produce(TOPIC, [f"r{i}".encode() for i in range(RECORDS)])
    consumer = hold_records(cluster.bootstrap_servers, TOPIC, GROUP)
    yield consumer, cluster.partitions(TOPIC)[0].leader
    consumer.close()


def admin_of(cluster, broker_id: int) -> AdminClient:
    return AdminClient(cluster.admin_url_of(broker_id))


def share_partition(admin: AdminClient, view: str) -> tuple[dict, dict]:
    """The group and its share-partition once its `view` shows the acknowledgements."""

    def described():
        g = admin.get(f"/groups/{GROUP}")
        if g.status != 200 or not g.body["members"]:
            return None
        (row,) = g.body["share_offsets"]
        if row["view"] != view or states(row).get(1) != "ARCHIVED":
            return None
        return g.body, row

    return admin.wait_for(described, f"the {view} view of the share-partition", 30)


def test_the_partitions_leader_shows_who_holds_what_until_when(cluster, held):
    _, leader = held
    group, row = share_partition(admin_of(cluster, leader), "live")
    (member,) = group["members"]
    assert row["leader"] == leader and row["error"] is None
    assert (row["topic"], row["partition"], row["start_offset"]) == (TOPIC, 0, 0)
    assert row["end_offset"] == RECORDS
    assert states(row) == LIVE
    assert set(delivery_counts(row).values()) == {1}
    for r in row["in_flight"]:
        if r["state"] == "ACQUIRED":
            assert r["member_id"] == member["member_id"]
            assert r["lock_expires_ms"] is not None
        else:
            assert r["member_id"] is None and r["lock_expires_ms"] is None
    # the ranges are runs by offset that cover the window once
    offsets = [o for r in row["in_flight"] for o in range(r["first_offset"], r["last_offset"] + 1)]
    assert offsets == list(range(RECORDS))


def test_another_broker_shows_the_persisted_state_and_says_so(cluster, held):
    _, leader = held
    other = next(b for b in cluster.broker_ids if b != leader)
    _, row = share_partition(admin_of(cluster, other), "persisted")
    assert row["leader"] == leader and row["error"] is None
    assert (row["start_offset"], row["end_offset"]) == (0, RECORDS)
    assert states(row) == PERSISTED
    assert set(delivery_counts(row).values()) == {1}
    assert all(r["member_id"] is None and r["lock_expires_ms"] is None for r in row["in_flight"])


def test_every_broker_answers_alike_for_the_window(cluster, held):
    """Whichever broker is asked (the group's coordinator or not), the same window."""
    for broker_id in cluster.broker_ids:
        _, row = share_partition(
            admin_of(cluster, broker_id), "live" if broker_id == held[1] else "persisted"
        )
        assert {o: s.replace("ACQUIRED", "AVAILABLE") for o, s in states(row).items()} == PERSISTED


def test_the_openapi_document_describes_the_in_flight_ranges(cluster, held):
    doc = admin_of(cluster, held[1]).get("/openapi.json").body
    schemas = doc["components"]["schemas"]
    assert {"state", "delivery_count", "member_id", "lock_expires_ms"} <= set(
        schemas["InFlightRange"]["properties"]
    )
    assert {"view", "end_offset", "in_flight", "leader"} <= set(
        schemas["ShareGroupOffset"]["properties"]
    )


@pytest.mark.browser
def test_the_console_shows_the_in_flight_ranges(browser, cluster, held):
    from tests.admin.browser import (
        SCREENSHOTS,
        console_errors,
        open_page,
        rows_of,
        text_of,
        wait_until,
    )

    _, leader = held
    url = cluster.admin_url_of(leader)
    open_page(browser, url, f"/group/{GROUP}", "group")

    def ranges() -> dict[str, str]:
        found = browser.execute_script(
            "return [...document.querySelectorAll('#share-offsets tr[data-range]')]"
            ".map((e) => [e.getAttribute('data-range'), e.getAttribute('data-state')])"
        )
        shown = dict(found)
        return shown if "ARCHIVED" in shown.values() else {}

    shown = wait_until(ranges, "the in-flight ranges")
    by_offset = {}
    for key, state in shown.items():
        first, last = (int(x) for x in key.rsplit(":", 1)[1].split("-"))
        by_offset.update({o: state for o in range(first, last + 1)})
    assert by_offset == LIVE
    table = text_of(browser, "#share-offsets")
    assert "live" in table and "lock expires" in table.lower()
    (member,) = admin_of(cluster, leader).get(f"/groups/{GROUP}").body["members"]
    assert member["member_id"] in table
    browser.save_screenshot(str(SCREENSHOTS / "group-share-in-flight.png"))

    other = next(b for b in cluster.broker_ids if b != leader)
    open_page(browser, cluster.admin_url_of(other), f"/group/{GROUP}", "group")
    wait_until(lambda: "persisted" in text_of(browser, "#share-offsets"), "the persisted view")
    assert "ACQUIRED" not in text_of(browser, "#share-offsets")
    assert rows_of(browser, "#share-offsets tr[data-state=ARCHIVED]", "data-range") == [
        f"{TOPIC}-0:1-1"
    ]
    assert console_errors(browser) == []
