"""Resetting and deleting a share group's offsets through a secured admin API (in-process
broker, tests/security/support.py's secured_admin_config), with Kafka's ACLs for the RPCs behind
them: AlterShareGroupOffsets needs READ on the group and on each topic, DeleteShareGroupOffsets
DELETE on the group and READ on each topic, DeleteGroups DELETE on the group. A refusal is the
same whether the group or the topic exists or not, and changes nothing.

Share group `sg` (read through the PLAINTEXT listener, whose ANONYMOUS is a super user) has
state on `public` and `secret`. alice may READ and DESCRIBE the group and READ `public`; bob may
DELETE the group and READ `public`.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

from kafkalite.testing import Broker
from tests.admin.share_offsets import receive
from tests.admin.support import ADMIN, ALICE, allow, call, wait_for
from tests.security.support import basic, secured_admin_config

pytestmark = pytest.mark.integration

BOB = basic("bob")
GROUP = "sg"
RECORDS = 2
READ_ALL = {(0, o) for o in range(RECORDS)}


@pytest.fixture(scope="module")
def broker():
    with Broker(
        secured_admin_config(
            **{
                "share.auto.offset.reset": "earliest",
                "offsets.topic.num.partitions": "1",
                "share.coordinator.state.topic.num.partitions": "1",
            }
        )
    ) as b:
        for topic in ("public", "secret"):
            b.create_topic(topic)
            b.produce(topic, [b"one", b"two"])
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        bindings = [
            allow("User:alice", ResourceType.GROUP, GROUP, AclOperation.READ),
            allow("User:alice", ResourceType.GROUP, GROUP, AclOperation.DESCRIBE),
            allow("User:alice", ResourceType.TOPIC, "public", AclOperation.READ),
            allow("User:bob", ResourceType.GROUP, GROUP, AclOperation.DELETE),
            allow("User:bob", ResourceType.TOPIC, "public", AclOperation.READ),
        ]
        for future in admin.create_acls(bindings).values():
            future.result(30)
        for topic in ("public", "secret"):
            assert receive(b.bootstrap_servers, GROUP, topic, READ_ALL) == READ_ALL
        wait_for(
            lambda: call(b, "GET", f"/groups/{GROUP}", headers=ALICE).status == 200,
            "alice's ACLs to reach the authorizer",
        )
        yield b


def starts(broker) -> dict[str, int | None]:
    answer = call(broker, "GET", f"/groups/{GROUP}", headers=ADMIN)
    assert answer.status == 200, answer.body
    return {r["topic"]: r["start_offset"] for r in answer.body["share_offsets"]}


def test_a_principal_without_read_on_the_group_learns_nothing(broker):
    body = {"to": "earliest", "topics": ["public"]}
    refused = call(broker, "POST", f"/groups/{GROUP}/offsets", body, headers=BOB)
    unknown = call(broker, "POST", "/groups/no-such-group/offsets", body, headers=BOB)
    assert refused.status == unknown.status == 403
    assert refused.body == {"error": "forbidden", "message": f"User:bob may not READ GROUP {GROUP}"}
    assert starts(broker) == {"public": RECORDS, "secret": RECORDS}


def test_a_reset_needs_read_on_each_topic_existing_or_not(broker):
    for topics in (["secret"], ["public", "secret"], ["no-such-topic"]):
        body = {"to": "earliest", "topics": topics}
        for dry_run in (True, False):
            refused = call(
                broker,
                "POST",
                f"/groups/{GROUP}/offsets",
                {**body, "dry_run": dry_run},
                headers=ALICE,
            )
            assert (refused.status, refused.body["error"]) == (403, "TOPIC_AUTHORIZATION_FAILED")
    explicit = {"to": "explicit", "offsets": [{"topic": "secret", "partition": 0, "offset": 0}]}
    refused = call(broker, "POST", f"/groups/{GROUP}/offsets", explicit, headers=ALICE)
    assert (refused.status, refused.body["error"]) == (403, "TOPIC_AUTHORIZATION_FAILED")
    assert starts(broker) == {"public": RECORDS, "secret": RECORDS}


def test_the_group_s_default_topics_are_those_the_principal_may_read(broker):
    """Without `topics`, a reset covers the group's topics the principal may READ."""
    done = call(broker, "POST", f"/groups/{GROUP}/offsets", {"to": "latest"}, headers=ALICE)
    assert done.status == 200, done.body
    assert [o["topic"] for o in done.body["offsets"]] == ["public"]


def test_deleting_offsets_needs_delete_on_the_group_and_read_on_the_topics(broker):
    refused = call(broker, "DELETE", f"/groups/{GROUP}/offsets?topic=public", headers=ALICE)
    unknown = call(broker, "DELETE", "/groups/no-such-group/offsets?topic=public", headers=ALICE)
    assert refused.status == unknown.status == 403
    assert refused.body["message"] == f"User:alice may not DELETE GROUP {GROUP}"
    for topics in ("secret", "public,secret", "no-such-topic"):
        refused = call(broker, "DELETE", f"/groups/{GROUP}/offsets?topic={topics}", headers=BOB)
        assert (refused.status, refused.body["error"]) == (403, "TOPIC_AUTHORIZATION_FAILED")
    assert starts(broker)["secret"] == RECORDS
    done = call(broker, "DELETE", f"/groups/{GROUP}/offsets?topic=public", headers=BOB)
    assert done.status == 200, done.body
    assert starts(broker) == {"public": None, "secret": RECORDS}


def test_deleting_the_group_needs_delete_on_it(broker):
    refused = call(broker, "DELETE", f"/groups/{GROUP}", headers=ALICE)
    unknown = call(broker, "DELETE", "/groups/no-such-group", headers=ALICE)
    assert refused.status == unknown.status == 403
    assert call(broker, "GET", f"/groups/{GROUP}", headers=ADMIN).status == 200
