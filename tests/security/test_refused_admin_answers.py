"""A refused request is answered with one result per item it named.

librdkafka aborts the process (``rdkafka_admin.c: Assertion 'rko_result' failed``) when a
CreateAcls or DeleteAcls refused with CLUSTER_AUTHORIZATION_FAILED comes back with an empty
result list. Kafka's ``getErrorResponse`` answers every creation, filter, entity, marker,
partition, transactional id and user with the error; so must ours, whatever API it is:

- the audit: every response of every API version the broker advertises carries a request-wide
  error somewhere (a top-level ``error_code`` or one result per request item);
- each API whose response mirrors a request list answers each item with the error;
- a user without ACLs gets CLUSTER_AUTHORIZATION_FAILED from confluent-kafka's AdminClient
  ``create_acls`` / ``delete_acls`` (run in a child process: a crash would kill pytest) and
  for each entity of a raw AlterClientQuotas.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import textwrap

import pytest

from kafkalite.apis import load_handlers
from kafkalite.apis.base import build
from kafkalite.apis.dispatcher import advertised_versions
from kafkalite.protocol.api import ApiKey, request_class, response_class
from kafkalite.protocol.error_response import SOURCES, error_response
from kafkalite.protocol.errors import ErrorCode
from tests.security.support import USERS, Secured

DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED

NO_ITEMS_AS_KAFKA = {(ApiKey.DESCRIBE_LOG_DIRS, 1), (ApiKey.DESCRIBE_LOG_DIRS, 2)}
"""Responses Kafka answers with neither a top-level error nor a result (the versions before
DescribeLogDirs v3 had no error code; Kafka's getErrorResponse returns no result either)."""


def test_every_advertised_error_response_can_carry_the_error():
    load_handlers()
    carry_nothing = []
    for key, (low, high) in sorted(advertised_versions().items()):
        for version in range(low, high + 1):
            fields = {f.name for f in dataclasses.fields(response_class(key, version))}
            if "error_code" in fields or key in SOURCES:
                continue
            if (key, version) not in NO_ITEMS_AS_KAFKA:
                carry_nothing.append(f"{ApiKey(key).name} v{version}")
    assert carry_nothing == []


MARKER = {
    "producer_id": 7,
    "producer_epoch": 1,
    "transaction_result": True,
    "topics": [{"name": "t", "partition_indexes": [0, 1]}],
    "coordinator_epoch": 0,
}
CREATION = {
    "resource_type": 2,
    "resource_name": "t",
    "resource_pattern_type": 3,
    "principal": "User:bob",
    "host": "*",
    "operation": 2,
    "permission_type": 3,
}
FILTER = {
    "resource_type_filter": 1,
    "resource_name_filter": None,
    "pattern_type_filter": 1,
    "principal_filter": None,
    "host_filter": None,
    "operation": 1,
    "permission_type": 1,
}
TXN_OFFSETS = {
    "transactional_id": "tx",
    "group_id": "g",
    "producer_id": 7,
    "producer_epoch": 1,
    "generation_id": -1,
    "member_id": "",
    "group_instance_id": None,
    "topics": [
        {
            "name": "t",
            "partitions": [
                {
                    "partition_index": p,
                    "committed_offset": 1,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
                for p in (0, 1)
            ],
        }
    ],
}
SCRAM = {
    "deletions": [{"name": "ann", "mechanism": 1}],
    "upsertions": [
        {"name": "ben", "mechanism": 1, "iterations": 4096, "salt": b"s", "salted_password": b"p"}
    ],
}

ITEMS = [
    # api, version, request, how many items the answer must carry the error on
    (ApiKey.CREATE_ACLS, 3, {"creations": [CREATION, CREATION]}, 2),
    (ApiKey.DELETE_ACLS, 3, {"filters": [FILTER]}, 1),
    (
        ApiKey.ALTER_CLIENT_QUOTAS,
        1,
        {
            "entries": [
                {"entity": [{"entity_type": "user", "entity_name": u}], "ops": []}
                for u in ("ann", None)
            ],
            "validate_only": False,
        },
        2,
    ),
    (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, SCRAM, 2),
    (ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [MARKER, {**MARKER, "producer_id": 8}]}, 4),
    (ApiKey.TXN_OFFSET_COMMIT, 3, TXN_OFFSETS, 2),
    (
        ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        {
            "v3_and_below_transactional_id": "tx",
            "v3_and_below_producer_id": 7,
            "v3_and_below_producer_epoch": 1,
            "v3_and_below_topics": [{"name": "t", "partitions": [0, 1, 2]}],
        },
        3,
    ),
    (ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "t", "partition_indexes": [0, 1]}]}, 2),
    (ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["a", "b", "c"]}, 3),
]


def errors(value) -> list[int]:
    """Every error code of a response, ``partition_error_code`` included."""
    out = []
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            if f.name in ("error_code", "partition_error_code"):
                out.append(int(getattr(value, f.name)))
            else:
                out += errors(getattr(value, f.name))
    elif isinstance(value, tuple):
        for item in value:
            out += errors(item)
    return out


@pytest.mark.parametrize(("api_key", "version", "values", "count"), ITEMS)
def test_each_item_carries_the_error(api_key, version, values, count):
    request = build(request_class(api_key, version), values)
    response = error_response(api_key, request, response_class(api_key, version), DENIED)
    assert errors(response) == [DENIED] * count
    if api_key == ApiKey.WRITE_TXN_MARKERS:  # which producer each result is about
        assert [m.producer_id for m in response.markers] == [7, 8]
    if api_key == ApiKey.ALTER_CLIENT_QUOTAS:
        assert [e.entity[0].entity_name for e in response.entries] == ["ann", None]
    if api_key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        assert [r.user for r in response.results] == ["ann", "ben"]


# ---------------------------------------------------------------------- real clients


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with Secured.started(tmp_path_factory.mktemp("refused-admin")) as secured:
        yield secured


ADMIN_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
        ResourcePatternType, ResourceType,
    )
    admin = AdminClient(json.loads(sys.argv[1]))
    binding = AclBinding(
        ResourceType.TOPIC, "bobs", ResourcePatternType.LITERAL, "User:bob", "*",
        AclOperation.ALL, AclPermissionType.ALLOW,
    )
    match_all = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )
    out = {}
    for name, futures in (
        ("create_acls", admin.create_acls([binding], request_timeout=20)),
        ("delete_acls", admin.delete_acls([match_all], request_timeout=20)),
    ):
        for future in futures.values():
            try:
                future.result()
                out[name] = "NONE"
            except Exception as e:
                out[name] = e.args[0].name()
    print(json.dumps(out))
    """
)


def test_confluent_admin_create_and_delete_acls_refused_without_crashing(secured):
    conf = {
        "bootstrap.servers": f"127.0.0.1:{secured.sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "bob",
        "sasl.password": USERS["bob"],
    }
    child = subprocess.run(
        [sys.executable, "-c", ADMIN_SCRIPT, json.dumps(conf)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    result = json.loads(child.stdout.strip().splitlines()[-1])
    assert result == {
        "create_acls": "CLUSTER_AUTHORIZATION_FAILED",
        "delete_acls": "CLUSTER_AUTHORIZATION_FAILED",
    }


def test_alter_client_quotas_refused_entity_by_entity(secured):
    request = {
        "entries": [
            {
                "entity": [{"entity_type": "user", "entity_name": name}],
                "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
            }
            for name in ("bob", None)
        ],
        "validate_only": False,
    }
    response = asyncio.run(secured.send("bob", ApiKey.ALTER_CLIENT_QUOTAS, request))
    assert [(e.entity[0].entity_name, int(e.error_code)) for e in response.entries] == [
        ("bob", DENIED),
        (None, DENIED),
    ]
