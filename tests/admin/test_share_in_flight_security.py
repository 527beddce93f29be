"""A share group's in-flight records through a secured admin API (in-process broker,
tests/security/support.py's secured_admin_config): they are part of the group's description,
so a principal without DESCRIBE on the group gets the same refusal whether the group exists or
not and learns nothing of them, and one with it sees the share-partitions of the topics it may
DESCRIBE only.

A real confluent-kafka ShareConsumer of group `sg` (through the PLAINTEXT listener, whose
ANONYMOUS is a super user) holds records of `public` and `secret`. alice may DESCRIBE group
`sg` and topic `public`; bob holds nothing.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

from kafkalite.testing import Broker
from tests.admin.support import ADMIN, ALICE, allow, call, wait_for
from tests.security.support import basic, secured_admin_config

pytestmark = pytest.mark.integration

BOB = basic("bob")
GROUP = "sg"


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
            allow("User:alice", ResourceType.GROUP, GROUP, AclOperation.DESCRIBE),
            allow("User:alice", ResourceType.TOPIC, "public", AclOperation.DESCRIBE),
        ]
        for future in admin.create_acls(bindings).values():
            future.result(30)
        # explicit acknowledgement, none sent: what a poll returned stays acquired (a
        # consumer may not poll again before acknowledging it: one consumer per topic)
        consumers = []
        for topic in ("public", "secret"):
            consumer = ShareConsumer(
                {
                    "bootstrap.servers": b.bootstrap_servers,
                    "group.id": GROUP,
                    "share.acknowledgement.mode": "explicit",
                }
            )
            consumers.append(consumer)
            consumer.subscribe([topic])
            deadline = time.monotonic() + 60
            while not [m for m in consumer.poll(0.5) if m.error() is None]:
                assert time.monotonic() < deadline, f"the share consumer read {topic}"
        wait_for(
            lambda: call(b, "GET", f"/groups/{GROUP}", headers=ALICE).status == 200,
            "alice's ACLs to reach the authorizer",
        )
        yield b
        for consumer in consumers:
            consumer.close()


def in_flight_topics(answer) -> set[str]:
    return {r["topic"] for r in answer.body["share_offsets"] if r["in_flight"]}


def test_the_super_user_sees_both_topics_in_flight_records(broker):
    answer = wait_for(
        lambda: (
            a
            if (a := call(broker, "GET", f"/groups/{GROUP}", headers=ADMIN)).status == 200
            and in_flight_topics(a) == {"public", "secret"}
            else None
        ),
        "both share-partitions with records in flight",
    )
    assert {r["view"] for r in answer.body["share_offsets"]} == {"live"}


def test_alice_sees_the_share_partitions_of_the_topics_she_may_describe_only(broker):
    answer = call(broker, "GET", f"/groups/{GROUP}", headers=ALICE)
    assert answer.status == 200
    assert [r["topic"] for r in answer.body["share_offsets"]] == ["public"]
    assert "secret" not in str(answer.body)


def test_bob_learns_nothing_of_the_group(broker):
    refused = call(broker, "GET", f"/groups/{GROUP}", headers=BOB)
    unknown = call(broker, "GET", "/groups/no-such-share-group", headers=BOB)
    assert refused.status == unknown.status == 403
    assert refused.body == {
        "error": "forbidden",
        "message": f"User:bob may not DESCRIBE GROUP {GROUP}",
    }
    assert unknown.body["error"] == "forbidden"
