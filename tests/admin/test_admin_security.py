"""The admin API against a secured broker: CSRF, secrets and authorisation (in-process, kafkalite.testing, with
tests/security/support.py's secured_admin_config):

- item 3, CSRF: a body must be application/json (415); a state-changing request from another
  origin (Origin, else Referer) is refused 403 before anything happens; every answer carries
  Content-Security-Policy, X-Frame-Options: DENY and X-Content-Type-Options: nosniff;
- item 5: a group's offsets are reset (dry run or not) only on topics the principal may READ,
  refused alike whether the topic exists or not, and the group view leaves out the topics it
  may not DESCRIBE;
- item 12: the lists (topics, partitions, overview, transactions, metrics and their history)
  leave out what the principal may not DESCRIBE; a malformed HTTP request is answered 400 with
  no traceback logged, and a flood of them logs one line.

alice holds the monitoring grant (DESCRIBE on the cluster), READ on group `g` and READ on topic
`public`; nothing on topic `secret` or on transactional ids. admin is a super user.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
from typing import Any

import pytest
import structlog
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    ResourceType,
)

from kafkalite.testing import Broker
from tests.admin.support import ADMIN, ALICE, EVIL, allow, call, wait_for
from tests.security.support import secured_admin_config


@pytest.fixture(scope="module")
def broker():
    with Broker(secured_admin_config()) as b:
        # the setup goes through the PLAINTEXT listener, whose ANONYMOUS is a super user
        for topic in ("public", "secret"):
            b.create_topic(topic, config={"retention.ms": "3600000"})
            b.produce(topic, [b"one", b"two"])
        consumer = Consumer(
            {"bootstrap.servers": b.bootstrap_servers, "group.id": "g", "enable.auto.commit": False}
        )
        try:
            consumer.commit(
                offsets=[KafkaPartition("public", 0, 1), KafkaPartition("secret", 0, 2)],
                asynchronous=False,
            )
        finally:
            consumer.close()
        producer = Producer(
            {"bootstrap.servers": b.bootstrap_servers, "transactional.id": "tx-secret"}
        )
        producer.init_transactions(30)
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        bindings = [
            allow("User:alice", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
            allow("User:alice", ResourceType.GROUP, "g", AclOperation.READ),
            allow("User:alice", ResourceType.TOPIC, "public", AclOperation.READ),
        ]
        for future in admin.create_acls(bindings).values():
            future.result(30)
        wait_for(
            lambda: call(b, "GET", "/groups/g", headers=ALICE).status == 200,
            "alice's ACLs to reach the authorizer",
        )
        yield b


def topics_named(body: Any) -> set[str]:
    return {t["name"] for t in body}


# -------------------------------------------------------------------------- item 3: CSRF


def test_a_text_plain_cross_origin_post_creates_nothing(broker) -> None:
    """The attack of the issue: POST /topics, text/plain, Origin https://evil.example, with
    the credentials a browser attaches."""
    body = {"name": "forged", "partitions": 1}
    answer = call(
        broker,
        "POST",
        "/topics",
        body,
        headers={**ADMIN, "Origin": EVIL},
        content_type="text/plain",
    )
    assert answer.status == 403 and answer.body["error"] == "CROSS_ORIGIN_REQUEST"
    answer = call(broker, "POST", "/topics", body, headers={**ADMIN, "Origin": EVIL})
    assert answer.status == 403
    answer = call(
        broker, "POST", "/topics", body, headers={**ADMIN, "Referer": f"{EVIL}/page.html"}
    )
    assert answer.status == 403
    answer = call(broker, "POST", "/topics", body, headers={**ADMIN, "Origin": "null"})
    assert answer.status == 403
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        answer = call(broker, "POST", "/topics", body, headers=ADMIN, content_type=content_type)
        assert answer.status == 415, content_type
        assert answer.body["error"] == "UNSUPPORTED_MEDIA_TYPE"
    for method, path in (("DELETE", "/topics/public"), ("DELETE", "/groups/g")):
        assert call(broker, method, path, headers={**ADMIN, "Origin": EVIL}).status == 403
    assert "forged" not in topics_named(call(broker, "GET", "/topics", headers=ADMIN).body)
    assert "public" in topics_named(call(broker, "GET", "/topics", headers=ADMIN).body)


def test_same_origin_and_non_browser_requests_still_work(broker) -> None:
    own = broker.admin_url
    answer = call(
        broker,
        "POST",
        "/topics",
        {"name": "same-origin", "partitions": 1},
        headers={**ADMIN, "Origin": own, "Referer": f"{own}/#/actions"},
    )
    assert answer.status == 201, answer.body
    answer = call(
        broker,
        "POST",
        "/topics",
        {"name": "no-origin", "partitions": 1},
        headers=ADMIN,
        content_type="application/json; charset=utf-8",
    )
    assert answer.status == 201, answer.body
    # reading is not state-changing: a cross-origin GET is answered (the browser keeps the
    # answer from the other site's page, no CORS header is sent)
    answer = call(broker, "GET", "/topics", headers={**ADMIN, "Origin": EVIL})
    assert answer.status == 200 and "Access-Control-Allow-Origin" not in answer.headers


def test_every_answer_carries_the_console_security_headers(broker) -> None:
    for path, headers in (
        ("/", ADMIN),
        ("/console/app.js", ADMIN),
        ("/docs", ADMIN),
        ("/topics", ADMIN),
        ("/health", {}),
        ("/topics", {}),  # 401
        ("/no-such-route", ADMIN),  # 404
    ):
        answer = call(broker, "GET", path, headers=headers)
        csp = answer.headers.get("Content-Security-Policy", "")
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, path
        assert answer.headers.get("X-Frame-Options") == "DENY", path
        assert answer.headers.get("X-Content-Type-Options") == "nosniff", path


# ----------------------------------------------------------- item 5: offsets and topic ACLs


def test_the_group_view_leaves_out_topics_the_principal_may_not_describe(broker) -> None:
    alice = call(broker, "GET", "/groups/g", headers=ALICE)
    assert alice.status == 200
    assert [(o["topic"], o["committed_offset"]) for o in alice.body["offsets"]] == [("public", 1)]
    assert "secret" not in json.dumps(alice.body)
    assert alice.body["total_lag"] == 1
    admin = call(broker, "GET", "/groups/g", headers=ADMIN)
    assert {o["topic"] for o in admin.body["offsets"]} == {"public", "secret"}


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_reset_is_refused_alike_on_a_forbidden_and_an_unknown_topic(broker, dry_run) -> None:
    answers = {}
    for topic in ("secret", "no-such-topic"):
        for body in (
            {"to": "earliest", "topics": [topic], "dry_run": dry_run},
            {"to": "timestamp", "timestamp": 0, "topics": [topic], "dry_run": dry_run},
            {
                "to": "explicit",
                "offsets": [{"topic": topic, "partition": 0, "offset": 0}],
                "dry_run": dry_run,
            },
        ):
            answer = call(broker, "POST", "/groups/g/offsets", body, headers=ALICE)
            answers[(topic, body["to"])] = (
                answer.status,
                answer.body["error"],
                answer.body["message"].replace(topic, "<topic>"),
            )
    assert set(answers.values()) == {
        (403, "TOPIC_AUTHORIZATION_FAILED", "not authorized to access topics: ['<topic>']")
    }
    committed = call(broker, "GET", "/groups/g", headers=ADMIN).body["offsets"]
    assert {o["topic"]: o["committed_offset"] for o in committed} == {"public": 1, "secret": 2}


def test_a_reset_of_every_committed_topic_covers_only_the_readable_ones(broker) -> None:
    answer = call(
        broker, "POST", "/groups/g/offsets", {"to": "latest", "dry_run": True}, headers=ALICE
    )
    assert answer.status == 200, answer.body
    assert [(o["topic"], o["offset"]) for o in answer.body["offsets"]] == [("public", 2)]
    answer = call(
        broker,
        "POST",
        "/groups/g/offsets",
        {"to": "explicit", "offsets": [{"topic": "public", "partition": 0, "offset": 1}]},
        headers=ALICE,
    )
    assert answer.status == 200, answer.body


# ------------------------------------------------------------------ item 12: filtered lists


def test_configs_are_shown_only_with_describe_configs(broker) -> None:
    """As DescribeConfigs: the monitoring grant (DESCRIBE on the cluster, READ on a topic)
    sees log dirs and partitions, not settings."""
    alice = call(broker, "GET", "/brokers/0/storage", headers=ALICE)
    assert alice.status == 200 and alice.body["log_dirs"] and alice.body["configs"] == {}
    admin = call(broker, "GET", "/brokers/0/storage", headers=ADMIN)
    assert admin.body["configs"]["broker.id"] == "0"
    alice = call(broker, "GET", "/topics/public", headers=ALICE)
    assert alice.status == 200 and alice.body["partitions"] and alice.body["configs"] == {}
    admin = call(broker, "GET", "/topics/public", headers=ADMIN)
    assert admin.body["configs"] == {"retention.ms": "3600000"}


def test_groups_are_listed_as_list_groups_answers() -> None:
    """DESCRIBE on the cluster shows every group; without it, those it may DESCRIBE."""
    from types import SimpleNamespace

    from kafkalite.admin.access import Access
    from kafkalite.protocol.acl import AclOperation, ResourceType

    class Acls:
        def __init__(self, grants):
            self.grants = grants

        def allowed(self, caller, op, rtype, name):
            return (op, rtype, name) in self.grants

    request: dict[str, Any] = {}
    request = SimpleNamespace(get=request.get, remote="127.0.0.1")
    cluster = (AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster")
    own = (AclOperation.DESCRIBE, ResourceType.GROUP, "mine")
    for grants, seen in (({cluster}, {"mine", "other"}), ({own}, {"mine"}), (set(), set())):
        access = Access(SimpleNamespace(authorizer=Acls(grants)), request)
        assert {g for g in ("mine", "other") if access.group(g)} == seen


def test_lists_leave_out_what_the_principal_may_not_describe(broker) -> None:
    alice_topics = call(broker, "GET", "/topics?internal=true", headers=ALICE)
    assert topics_named(alice_topics.body) == {"public"}
    assert alice_topics.headers["X-Total-Count"] == "1"
    assert {"public", "secret"} <= topics_named(call(broker, "GET", "/topics", headers=ADMIN).body)
    partitions = call(broker, "GET", "/partitions?internal=true", headers=ALICE).body
    assert {p["topic"] for p in partitions} == {"public"}
    overview = call(broker, "GET", "/overview", headers=ALICE).body
    assert (overview["topics"], overview["internal_topics"], overview["partitions"]) == (1, 0, 1)
    assert call(broker, "GET", "/transactions", headers=ALICE).body == []
    listed = call(broker, "GET", "/transactions", headers=ADMIN).body
    assert [t["transactional_id"] for t in listed] == ["tx-secret"]


def test_metrics_leave_out_series_of_topics_the_principal_may_not_describe(broker) -> None:
    admin = call(broker, "GET", "/metrics", headers=ADMIN).body
    assert 'topic="secret"' in admin and 'topic="public"' in admin
    alice = call(broker, "GET", "/metrics", headers=ALICE).body
    assert 'topic="public"' in alice
    assert "secret" not in alice
    history = call(broker, "GET", "/metrics/history", headers=ALICE).body
    assert "secret" not in history["topics"]
    asked = call(broker, "GET", "/metrics/history?topic=secret", headers=ALICE).body
    unknown = call(broker, "GET", "/metrics/history?topic=no-such-topic", headers=ALICE).body
    rates = [{k: v for k, v in r.items() if k != "time"} for r in asked["topics"]["secret"]]
    assert rates == [
        {k: v for k, v in r.items() if k != "time"} for r in unknown["topics"]["no-such-topic"]
    ]


def test_malformed_requests_are_answered_400_without_a_traceback(broker, caplog) -> None:
    """20 requests aiohttp cannot parse: each answered 400; no ERROR, no traceback, and one
    warning line for the lot."""
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    with structlog.testing.capture_logs() as lines:
        for i in range(20):
            with socket.create_connection(("127.0.0.1", broker.admin_port), timeout=10) as s:
                s.sendall(f"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: {i}x\r\n\r\n".encode())
                answer = s.recv(100)
            assert answer.startswith(b"HTTP/1.0 400") or answer.startswith(b"HTTP/1.1 400")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    malformed = [line for line in lines if "malformed" in line["event"]]
    assert len(malformed) == 1 and malformed[0]["log_level"] == "warning"
    assert "exc_info" not in malformed[0]


def test_producing_through_the_api_needs_write_on_the_topic(broker) -> None:
    """As Produce: alice, who may READ `public`, may not write to it; nothing is appended."""
    before = call(broker, "GET", "/topics/public/records?partition=0", headers=ADMIN).body
    refused = call(broker, "POST", "/topics/public/records", {"value": "x"}, headers=ALICE)
    assert refused.status == 403, refused.body
    allowed = call(broker, "POST", "/topics/public/records", {"value": "y"}, headers=ADMIN)
    assert allowed.status == 201, allowed.body
    after = call(broker, "GET", "/topics/public/records?partition=0", headers=ADMIN).body
    assert [r["value"]["text"] for r in after["records"]][len(before["records"]) :] == ["y"]


def test_acls_users_and_quotas_through_the_api_need_the_cluster_acls(broker) -> None:
    """ACLs and users need DESCRIBE / ALTER on the cluster, quotas DESCRIBE_CONFIGS /
    ALTER_CONFIGS, as their Kafka requests: alice (DESCRIBE on the cluster) may list ACLs and
    users but change nothing; the admin may, and what it does is what Kafka's APIs see."""
    acl = {
        "resource_type": "TOPIC",
        "resource_name": "public",
        "principal": "User:bob",
        "operation": "WRITE",
    }
    assert call(broker, "POST", "/acls", acl, headers=ALICE).status == 403
    created = call(broker, "POST", "/acls", acl, headers=ADMIN)
    assert created.status == 201, created.body
    listed = call(broker, "GET", "/acls", headers=ALICE)
    assert listed.status == 200
    bob = [a for a in listed.body if a["principal"] == "User:bob"]
    assert bob == [
        {**acl, "pattern_type": "LITERAL", "host": "*", "permission": "ALLOW"},
    ]
    query = "resource_type=TOPIC&resource_name=public&principal=User:bob&operation=WRITE"
    assert call(broker, "DELETE", f"/acls?{query}", headers=ALICE).status == 403
    assert call(broker, "DELETE", f"/acls?{query}", headers=ADMIN).status == 200
    assert call(broker, "DELETE", f"/acls?{query}", headers=ADMIN).status == 404
    assert not [
        a for a in call(broker, "GET", "/acls", headers=ADMIN).body if "bob" in a["principal"]
    ]

    user = {"name": "carol", "password": "carol-secret", "mechanism": "SCRAM-SHA-512"}
    assert call(broker, "POST", "/users", user, headers=ALICE).status == 403
    assert call(broker, "POST", "/users", user, headers=ADMIN).status == 201
    users = {u["name"]: u for u in call(broker, "GET", "/users", headers=ALICE).body}
    assert users["carol"]["credentials"] == [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]
    assert "carol-secret" not in json.dumps(users)
    # the new credential authenticates on the admin API (HTTP basic against SCRAM users)
    carol = {"Authorization": "Basic " + base64.b64encode(b"carol:carol-secret").decode()}
    wait_for(lambda: call(broker, "GET", "/health", headers=carol).status == 200, "health")
    assert call(broker, "GET", "/cluster", headers=carol).status in (200, 403)  # not 401
    assert call(broker, "DELETE", "/users/carol", headers=ALICE).status == 403
    assert call(broker, "DELETE", "/users/carol", headers=ADMIN).status == 200
    assert call(broker, "DELETE", "/users/carol", headers=ADMIN).status == 404

    quota = {"user": "bob", "values": {"producer_byte_rate": 1024.0}}
    assert call(broker, "GET", "/quotas", headers=ALICE).status == 403
    assert call(broker, "POST", "/quotas", quota, headers=ALICE).status == 403
    set_ = call(broker, "POST", "/quotas", quota, headers=ADMIN)
    assert set_.status == 200, set_.body
    assert set_.body == {"user": "bob", "client_id": None, "values": {"producer_byte_rate": 1024.0}}
    wait_for(
        lambda: call(broker, "GET", "/quotas", headers=ADMIN).body == [set_.body],
        "the quota described",
    )
    assert call(broker, "DELETE", "/quotas?user=bob", headers=ALICE).status == 403
    assert call(broker, "DELETE", "/quotas?user=bob", headers=ADMIN).status == 200
    wait_for(lambda: call(broker, "GET", "/quotas", headers=ADMIN).body == [], "no quotas")
