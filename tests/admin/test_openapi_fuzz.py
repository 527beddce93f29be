"""Fuzz the live admin API from its own OpenAPI document (schemathesis): no 5xx, the status code,
content type and body of every answer match the document.

The document is fetched from the broker; only resource bounds are tightened for the fuzzer (at
most 4 partitions per generated topic) so that a run stays small. Examples are bounded per
operation; the whole module runs in well under a minute.
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings

from kafkalite.admin.openapi import openapi_document

try:
    import schemathesis
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_schema_conformance,
        status_code_conformance,
    )
except ImportError as e:  # pragma: no cover - the test extras are required
    raise RuntimeError("schemathesis is required: pip install -e '.[test]'") from e

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
MAX_EXAMPLES = 25


def bounded(document: dict) -> dict:
    doc = copy.deepcopy(document)
    schemas = doc["components"]["schemas"]
    schemas["NewTopic"]["properties"]["partitions"]["maximum"] = 4
    schemas["PartitionCount"]["properties"]["partitions"]["maximum"] = 4
    return doc


def operations() -> list:
    """The operations of the document the broker serves (the same function builds both)."""
    schema = schemathesis.openapi.from_dict(bounded(openapi_document()))
    return [result.ok() for result in schema.get_all_operations()]


OPERATIONS = operations()


def test_served_document_is_the_documented_one(admin) -> None:
    answer = admin.get("/openapi.json")
    assert answer.status == 200
    assert answer.body == json.loads(json.dumps(openapi_document()))


# schemathesis' own pytest integration does not run on pytest 9 (it reads a removed node
# attribute), so each operation's hypothesis strategy is driven here.
@pytest.mark.parametrize("operation", OPERATIONS, ids=[op.label for op in OPERATIONS])
def test_operation_conforms_to_the_document(operation, admin) -> None:
    seen: list[int] = []

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    @given(case=operation.as_strategy())
    def check(case) -> None:
        response = case.call_and_validate(base_url=admin.url, checks=CHECKS, timeout=30)
        seen.append(response.status_code)

    check()
    assert seen and max(seen) < 500


def test_broker_survives_the_fuzzing(admin, admin_broker) -> None:
    assert admin_broker.running
    assert admin.get("/health").status == 200
    assert admin.get("/ready").status == 200
