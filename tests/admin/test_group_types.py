"""The admin API and the console show all three kinds of group, made by real clients: a classic
group (confluent-kafka's default protocol, committing), a consumer group (KIP-848,
``group.protocol: consumer``, committing) and a share group (confluent-kafka's ShareConsumer).

One subprocess broker with its admin API for the module; the three groups keep their members
(the clients stay open, heartbeating in librdkafka's threads) while the tests read them.
"""

# ruff: noqa: F811 - the fixtures imported below are the tests' arguments

from __future__ import annotations

import pytest

from tests.admin.conftest import AdminClient
from tests.admin.group_kinds import (  # noqa: F401 - fixtures, found by name
    RECORDS,
    TOPIC,
    admin,
    admin_broker,
    groups,
)


def test_the_group_list_has_each_groups_type_and_filters_by_it(admin: AdminClient, groups):
    def listed():
        body = admin.get("/groups").body
        found = {g["group_id"]: g for g in body}
        return found if set(groups.values()) <= set(found) else None

    found = admin.wait_for(listed, "the three groups to be listed")
    for kind, group_id in groups.items():
        assert found[group_id]["group_type"] == kind
    assert found["kinds-classic"]["total_lag"] == 10
    assert found["kinds-consumer"]["total_lag"] == 10
    assert found["kinds-consumer"]["members"] == 1
    assert found["kinds-consumer"]["topics"] == [TOPIC]
    assert found["kinds-consumer"]["state"] == "Stable"
    assert found["kinds-share"]["total_lag"] is None
    for kind, group_id in groups.items():
        only = admin.get(f"/groups?type={kind}").body
        assert {g["group_type"] for g in only} == {kind}
        assert group_id in {g["group_id"] for g in only}
    assert admin.get("/groups?type=bogus").status == 400


def test_a_consumer_groups_page_has_epochs_members_and_lag(admin: AdminClient, groups):
    g = admin.get("/groups/kinds-consumer").body
    assert g["group_type"] == "consumer"
    assert g["state"] == "Stable"
    assert g["group_epoch"] >= 1
    assert g["assignor"] in ("uniform", "range")
    (member,) = g["members"]
    assert member["member_epoch"] == g["group_epoch"]
    assert member["subscribed_topics"] == [TOPIC]
    assert member["assignment"] == [{"topic": TOPIC, "partitions": [0, 1]}]
    assert member["target_assignment"] == member["assignment"]
    assert member["client_id"]
    assert [(o["partition"], o["committed_offset"], o["lag"]) for o in g["offsets"]] == [
        (0, RECORDS - 5, 5),
        (1, RECORDS - 5, 5),
    ]
    assert all(o["member_id"] == member["member_id"] for o in g["offsets"])
    assert g["total_lag"] == 10
    assert g["share_offsets"] is None


def test_a_classic_groups_page_is_unchanged(admin: AdminClient, groups):
    g = admin.get("/groups/kinds-classic").body
    assert g["group_type"] == "classic"
    assert g["protocol_type"] == "consumer"
    assert g["state"] == "Stable"
    assert g["total_lag"] == 10
    assert g["members"][0]["member_epoch"] is None


def test_a_share_groups_page_has_members_and_start_offsets(admin: AdminClient, groups):
    def described():
        g = admin.get("/groups/kinds-share").body
        starts = g.get("share_offsets") or []
        done = [s for s in starts if s["start_offset"] is not None]
        return g if len(done) == 2 and g["members"] else None

    g = admin.wait_for(described, "the share group's start offsets")
    assert g["group_type"] == "share"
    assert g["state"] == "Stable"
    (member,) = g["members"]
    assert member["subscribed_topics"] == [TOPIC]
    assert member["assignment"] == [{"topic": TOPIC, "partitions": [0, 1]}]
    assert member["member_epoch"] >= 1
    assert [(s["topic"], s["partition"]) for s in g["share_offsets"]] == [(TOPIC, 0), (TOPIC, 1)]
    assert all(0 <= s["start_offset"] <= RECORDS and s["error"] is None for s in g["share_offsets"])
    assert g["offsets"] == []


def test_an_unknown_group_is_404(admin: AdminClient, groups):
    assert admin.get("/groups/no-such-group").status == 404


@pytest.mark.browser
def test_the_console_shows_all_three_types(browser, admin: AdminClient, groups):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from tests.admin.browser import (
        SCREENSHOTS,
        console_errors,
        open_page,
        rows_of,
        text_of,
        wait_until,
    )

    open_page(browser, admin.url, "/groups", "groups")

    def types_shown() -> dict[str, str]:
        rows = browser.execute_script(
            "return [...document.querySelectorAll('#groups tr[data-group]')]"
            ".map((e) => [e.getAttribute('data-group'), e.getAttribute('data-type')])"
        )
        found = dict(rows)
        return found if set(groups.values()) <= set(found) else {}

    shown = wait_until(types_shown, "the three groups in the list")
    assert {shown[g]: g for g in groups.values()} == {k: g for k, g in groups.items()}
    browser.save_screenshot(str(SCREENSHOTS / "groups-types.png"))
    Select(browser.find_element(By.ID, "group-type-filter")).select_by_value("share")
    wait_until(
        lambda: rows_of(browser, "#groups tr[data-group]", "data-group") == ["kinds-share"],
        "only the share group",
    )

    open_page(browser, admin.url, "/group/kinds-consumer", "group")
    wait_until(lambda: text_of(browser, "#group-type") == "consumer", "the consumer group's type")
    assert "group epoch" in text_of(browser, "#main")
    assert rows_of(browser, "#lag-table tr[data-partition]", "data-partition") == [
        f"{TOPIC}-0",
        f"{TOPIC}-1",
    ]
    assert "target assignment" in text_of(browser, "#members").lower()
    browser.save_screenshot(str(SCREENSHOTS / "group-consumer.png"))

    open_page(browser, admin.url, "/group/kinds-share", "group")
    wait_until(lambda: text_of(browser, "#group-type") == "share", "the share group's type")
    wait_until(
        lambda: (
            rows_of(browser, "#share-offsets tr[data-partition]", "data-partition")
            == [f"{TOPIC}-0", f"{TOPIC}-1"]
        ),
        "the share-partitions' start offsets",
    )
    assert browser.find_elements(By.ID, "reset-apply")[0].is_displayed() is False
    browser.save_screenshot(str(SCREENSHOTS / "group-share.png"))
    assert console_errors(browser) == []


def test_a_topics_consuming_groups_include_the_consumer_group(admin: AdminClient, groups):
    found = {g["group_id"]: g for g in admin.get(f"/topics/{TOPIC}/groups").body}
    assert found["kinds-consumer"]["state"] == "Stable"
    assert found["kinds-consumer"]["lag"] == 10
    assert found["kinds-consumer"]["members"] == 1
    assert found["kinds-classic"]["lag"] == 10
    assert "kinds-share" not in found


def test_offsets_of_a_live_consumer_group_or_a_share_group_are_not_reset(
    admin: AdminClient, groups
):
    refused = admin.post("/groups/kinds-consumer/offsets", {"to": "earliest", "dry_run": True})
    assert (refused.status, refused.body["error"]) == (409, "NON_EMPTY_GROUP")
    # as AlterShareGroupOffsets answers a share group with members
    refused = admin.post("/groups/kinds-share/offsets", {"to": "earliest", "dry_run": True})
    assert (refused.status, refused.body["error"]) == (409, "NON_EMPTY_GROUP")
    g = admin.get("/groups/kinds-consumer").body
    assert [o["committed_offset"] for o in g["offsets"]] == [RECORDS - 5, RECORDS - 5]
