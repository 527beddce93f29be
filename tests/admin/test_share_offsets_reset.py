"""Resetting and deleting a share group's offsets through the admin API, on a 3-broker
in-process cluster (kafkalite.testing.Cluster), asking a broker that does not coordinate the
group; real confluent-kafka ShareConsumers read before and after (tests/admin/share_offsets.py).

The topic has 3 partitions over 3 brokers, so some share-partitions are led by a broker other
than the group's coordinator (which alters the state at the share coordinator): their leaders'
cached state must not outlive the reset.
"""

from __future__ import annotations

import pytest

from kafkalite.testing import Cluster
from tests.admin.conftest import AdminClient
from tests.admin.share_offsets import active_member, receive

pytestmark = pytest.mark.integration

TOPIC = "jobs"
PARTITIONS = 3
PER_PARTITION = 4
ALL = {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}


@pytest.fixture(scope="module")
def cluster():
    with Cluster(
        3,
        {
            "share.auto.offset.reset": "earliest",
            "offsets.topic.num.partitions": 1,
            "share.coordinator.state.topic.num.partitions": 1,
        },
    ) as c:
        c.create_topic(TOPIC, PARTITIONS, 3)
        for p in range(PARTITIONS):
            c.produce(TOPIC, [f"r{p}-{i}".encode() for i in range(PER_PARTITION)], partition=p)
        yield c


def other_admin(cluster, group: str) -> AdminClient:
    """The admin API of a broker that is not `group`'s coordinator, once the group is empty."""
    any_admin = AdminClient(cluster.admin_url_of(cluster.broker_ids[0]))

    def empty():
        g = any_admin.get(f"/groups/{group}")
        return g.body if g.status == 200 and not g.body["members"] else None

    coordinator = any_admin.wait_for(empty, f"group {group} to be empty", 30)["coordinator"]
    other = next(b for b in cluster.broker_ids if b != coordinator)
    return AdminClient(cluster.admin_url_of(other))


def starts(admin: AdminClient, group: str) -> dict[int, int | None]:
    g = admin.get(f"/groups/{group}")
    assert g.status == 200, g.body
    return {r["partition"]: r["start_offset"] for r in g.body["share_offsets"]}


def read_everything(cluster, group: str, topic: str = TOPIC) -> AdminClient:
    assert receive(cluster.bootstrap_servers, group, topic, ALL) == ALL
    admin = other_admin(cluster, group)
    assert starts(admin, group) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)
    return admin


def test_reset_to_earliest_redelivers_everything_dry_run_changes_nothing(cluster):
    group = "reset-earliest"
    admin = read_everything(cluster, group)
    dry = admin.post(f"/groups/{group}/offsets", {"to": "earliest", "dry_run": True})
    assert dry.status == 200, dry.body
    assert dry.body["group_type"] == "share" and dry.body["dry_run"] is True
    assert {(o["partition"], o["offset"]) for o in dry.body["offsets"]} == {
        (p, 0) for p in range(PARTITIONS)
    }
    assert starts(admin, group) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)

    done = admin.post(f"/groups/{group}/offsets", {"to": "earliest", "topics": [TOPIC]})
    assert done.status == 200, done.body
    assert starts(admin, group) == dict.fromkeys(range(PARTITIONS), 0)
    assert receive(cluster.bootstrap_servers, group, TOPIC, ALL) == ALL


def test_reset_to_explicit_offsets_and_to_latest(cluster):
    group, topic = "reset-explicit", "jobs-latest"  # its own topic: it is written to
    cluster.create_topic(topic, PARTITIONS, 3)
    for p in range(PARTITIONS):
        cluster.produce(topic, [f"r{p}-{i}".encode() for i in range(PER_PARTITION)], partition=p)
    admin = read_everything(cluster, group, topic)
    body = {
        "to": "explicit",
        "offsets": [{"topic": topic, "partition": p, "offset": 2} for p in range(PARTITIONS)],
    }
    done = admin.post(f"/groups/{group}/offsets", body)
    assert done.status == 200, done.body
    later = {(p, o) for p in range(PARTITIONS) for o in range(2, PER_PARTITION)}
    assert receive(cluster.bootstrap_servers, group, topic, later) == later

    # the group's topics by default: those it was subscribed to
    admin = other_admin(cluster, group)
    to_earliest = admin.post(f"/groups/{group}/offsets", {"to": "earliest"})
    assert to_earliest.status == 200, to_earliest.body
    assert {(o["topic"], o["offset"]) for o in to_earliest.body["offsets"]} == {(topic, 0)}
    latest = admin.post(f"/groups/{group}/offsets", {"to": "latest"})
    assert latest.status == 200, latest.body
    assert starts(admin, group) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)
    first = cluster.produce(topic, [b"new"], partition=1)
    assert receive(cluster.bootstrap_servers, group, topic, {(1, first)}) == {(1, first)}


def test_deleted_offsets_start_again_at_share_auto_offset_reset(cluster):
    group = "delete-offsets"
    admin = read_everything(cluster, group)
    gone = admin.call("DELETE", f"/groups/{group}/offsets?topic={TOPIC}")
    assert gone.status == 200, gone.body
    assert gone.body == {"group_id": group, "group_type": "share", "topics": [TOPIC]}
    assert starts(admin, group) == dict.fromkeys(range(PARTITIONS))
    # share.auto.offset.reset=earliest: from each log's start
    assert receive(cluster.bootstrap_servers, group, TOPIC, ALL) == ALL


def test_deleting_the_group_deletes_its_state(cluster):
    group = "delete-group"
    admin = read_everything(cluster, group)
    assert admin.post(f"/groups/{group}/offsets", {"to": "latest"}).status == 200
    gone = admin.call("DELETE", f"/groups/{group}")
    assert gone.status == 200, gone.body
    assert admin.get(f"/groups/{group}").status == 404
    # a group of that name starts afresh: share.auto.offset.reset (earliest), not the reset
    assert receive(cluster.bootstrap_servers, group, TOPIC, ALL) == ALL


def test_a_group_with_members_is_refused_with_kafkas_error(cluster):
    group = "busy"
    read_everything(cluster, group)
    any_admin = AdminClient(cluster.admin_url_of(cluster.broker_ids[0]))

    def joined() -> bool:
        return bool(any_admin.get(f"/groups/{group}").body["members"])

    with active_member(cluster.bootstrap_servers, group, TOPIC, joined):
        coordinator = any_admin.get(f"/groups/{group}").body["coordinator"]
        other = next(b for b in cluster.broker_ids if b != coordinator)
        admin = AdminClient(cluster.admin_url_of(other))
        for method, path, body in [
            ("POST", f"/groups/{group}/offsets", {"to": "earliest", "dry_run": True}),
            ("POST", f"/groups/{group}/offsets", {"to": "earliest"}),
            ("DELETE", f"/groups/{group}/offsets?topic={TOPIC}", None),
            ("DELETE", f"/groups/{group}", None),
        ]:
            answer = admin.call(method, path, body)
            assert (answer.status, answer.body["error"]) == (409, "NON_EMPTY_GROUP"), (
                method,
                path,
                answer.body,
            )
        assert starts(admin, group) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)


def test_the_openapi_document_has_the_delete_offsets_route(cluster):
    doc = AdminClient(cluster.admin_url_of(cluster.broker_ids[0])).get("/openapi.json").body
    operation = doc["paths"]["/groups/{id}/offsets"]["delete"]
    assert "topic" in {p["name"] for p in operation["parameters"]}
    assert {"group_id", "group_type", "topics"} <= set(
        doc["components"]["schemas"]["DeletedOffsets"]["properties"]
    )
