"""Refusals are logged as Kafka's authorizer logs denied operations (before,
nothing was logged), once per principal, operation and resource type per interval; filtering a listing
logs nothing. No sockets."""

from __future__ import annotations

from types import SimpleNamespace

from structlog.testing import capture_logs

from kafkalite.apis.authorization import BrokerAuthorizer
from kafkalite.protocol.acl import AclOperation as Op
from kafkalite.protocol.acl import ResourceType as T

MALLORY = SimpleNamespace(authenticated_principal="User:mallory", client_host="10.0.0.9")


def denials(logs):
    return [e for e in logs if e["event"] == "operation denied"]


def test_a_refusal_is_logged_once_per_interval_and_a_filter_not_at_all():
    auth = BrokerAuthorizer()
    with capture_logs() as logs:
        assert not auth.allowed(MALLORY, Op.DESCRIBE, T.TOPIC, "a", log_denied=False)
        assert not auth.allowed(MALLORY, Op.WRITE, T.TRANSACTIONAL_ID, "victim-tx")
        assert not auth.allowed(MALLORY, Op.WRITE, T.TRANSACTIONAL_ID, "other-tx")
        assert not auth.allowed(MALLORY, Op.CLUSTER_ACTION, T.CLUSTER, "kafka-cluster")
    (txn, cluster) = denials(logs)
    assert txn["log_level"] == "info"
    assert {k: txn[k] for k in ("principal", "host", "operation", "resource_type")} == {
        "principal": "User:mallory",
        "host": "10.0.0.9",
        "operation": "WRITE",
        "resource_type": "TRANSACTIONAL_ID",
    }
    assert txn["resource_name"] == "victim-tx"
    assert (cluster["operation"], cluster["resource_type"]) == ("CLUSTER_ACTION", "CLUSTER")
    # the next line of the same kind says how many were held back
    auth._denied_log.clock = lambda: float("inf")
    with capture_logs() as logs:
        assert not auth.allowed(MALLORY, Op.WRITE, T.TRANSACTIONAL_ID, "third-tx")
    assert denials(logs)[0]["suppressed_since_last"] == 1
