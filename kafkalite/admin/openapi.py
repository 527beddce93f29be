"""The OpenAPI 3.0 document of the admin API (served at /openapi.json).

Written out by hand from the handlers in app.py: every route, its request body and its success
answer; every operation also documents `default` as the JSON error object, since any operation
can answer 400/404/409/503 (and 500 only on a bug). tests/admin fuzz the live API from this
document (schemathesis) and check every answer against it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kafkalite import __version__ as _version

INT32 = {"type": "integer", "format": "int32"}
INT64 = {"type": "integer", "format": "int64"}
NULLABLE_INT64 = {"type": "integer", "format": "int64", "nullable": True}
BROKER_ID = {"type": "integer", "format": "int32"}
# JSON Schema patterns are searched, not matched, and '$' also matches before a final newline:
# END is an end anchor with no such exception (a topic named "t\n" is illegal).
END = r"(?![\s\S])"
TOPIC_NAME_PATTERN = rf"^(?!\.\.?{END})[a-zA-Z0-9._-]{{1,249}}{END}"
TOPIC_NAME = {
    "type": "string",
    "minLength": 1,
    "maxLength": 249,
    "pattern": TOPIC_NAME_PATTERN,
    "description": "Kafka's legal topic names: 1 to 249 of [a-zA-Z0-9._-], not '.' or '..'",
}
CONFIGS = {"type": "object", "additionalProperties": {"type": "string"}}
"""Topic configs as answered (whatever Kafka's own validation let through)."""


def integer_pattern(low: int, high: int) -> str:
    """A regular expression matching exactly the decimal integers from ``low`` to ``high``
    (``low`` >= -1), without sign or leading zeros, anchored at both ends."""

    def same_length(a: str, b: str) -> list[str]:
        # the numbers from a to b, both with len(a) digits
        if not a:
            return [""]
        rest = len(a) - 1
        if a[1:] == "0" * rest and b[1:] == "9" * rest:
            first = a[0] if a[0] == b[0] else f"[{a[0]}-{b[0]}]"
            return [first + ("[0-9]" * rest if rest < 3 else f"[0-9]{{{rest}}}")]
        if a[0] == b[0]:
            return [a[0] + tail for tail in same_length(a[1:], b[1:])]
        out = [a[0] + tail for tail in same_length(a[1:], "9" * rest)]
        if int(a[0]) + 1 <= int(b[0]) - 1:
            out += same_length(str(int(a[0]) + 1) + "0" * rest, str(int(b[0]) - 1) + "9" * rest)
        out += [b[0] + tail for tail in same_length("0" * rest, b[1:])]
        return out

    alternatives = ["-1"] if low < 0 else []
    low = max(low, 0)
    for digits in range(len(str(low)), len(str(high)) + 1):
        a = max(low, 10 ** (digits - 1) if digits > 1 else 0)
        b = min(high, 10**digits - 1)
        if a <= b:
            alternatives += same_length(str(a), str(b))
    return f"^({'|'.join(alternatives)}){END}"


def _config_value_schemas() -> dict[str, dict[str, Any]]:
    """Topic config name -> the schema of the values the admin API accepts for it: Kafka's
    validation (storage/config.py: types, minimums, INT or LONG range) in a form a schema can
    state; the API checks values against these very patterns before Kafka's validation."""
    from kafkalite.storage.config import (  # the validation's own tables, not a copy
        _INT_FIELDS,
        _MINIMUMS,
        INT_MAX,
        LONG_MAX,
        TOPIC_CONFIG_FIELDS,
    )

    special: dict[str, dict[str, Any]] = {
        "unclean_leader_election_enable": {"enum": ["true", "false"]},
        "preallocate": {"enum": ["true", "false"]},
        "min_cleanable_dirty_ratio": {
            "pattern": rf"^(0(\.[0-9]*)?|1(\.0*)?|\.[0-9]+){END}",
            "description": "a decimal number from 0 to 1",
        },
        "message_timestamp_type": {"enum": ["CreateTime", "LogAppendTime"]},
        "cleanup_policy": {"enum": ["delete", "compact", "compact,delete", "delete,compact"]},
        "compression_type": {"enum": ["uncompressed", "gzip", "snappy", "lz4", "zstd", "producer"]},
    }
    out = {}
    for name, field in TOPIC_CONFIG_FIELDS.items():
        if field in special:
            out[name] = {"type": "string", **special[field]}
            continue
        low = _MINIMUMS.get(field, 0)
        high = INT_MAX if field in _INT_FIELDS else LONG_MAX
        out[name] = {
            "type": "string",
            "pattern": integer_pattern(low, high),
            "description": f"a decimal integer from {low} to {high}",
        }
    return out


CONFIG_VALUES = _config_value_schemas()
"""Topic config name -> schema of its value in a request."""


def config_changes_schema(*, removable: bool) -> dict[str, Any]:
    """The configs object of a request: known names only, each value in its form (null removes
    an override where ``removable``)."""
    properties = {}
    for name, schema in CONFIG_VALUES.items():
        if removable:  # OpenAPI 3.0.3: a nullable enum lists null among its values
            schema = {**schema, "nullable": True}
            if "enum" in schema:
                schema["enum"] = [*schema["enum"], None]
        properties[name] = schema
    return {"type": "object", "properties": properties, "additionalProperties": False}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    schema["required"] = list(properties) if required is None else required
    schema.update(extra)
    return schema


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


SCHEMAS: dict[str, Any] = {
    "Error": _obj(
        {
            "error": {"type": "string", "description": "Kafka error name or HTTP-level code"},
            "message": {"type": "string"},
            "field": {"type": "string", "description": "the request field at fault"},
        },
        ["error", "message"],
    ),
    "Health": _obj({"status": {"type": "string", "enum": ["ok"]}, "broker_id": BROKER_ID}),
    "Ready": _obj(
        {
            "ready": {"type": "boolean"},
            "checks": {"type": "object", "additionalProperties": {"type": "boolean"}},
        }
    ),
    "Endpoint": _obj(
        {
            "listener": {"type": "string"},
            "host": {"type": "string"},
            "port": INT32,
            "security_protocol": {"type": "string"},
        }
    ),
    "Broker": _obj(
        {
            "id": BROKER_ID,
            "host": {"type": "string", "nullable": True},
            "port": {"type": "integer", "nullable": True},
            "rack": {"type": "string", "nullable": True},
            "endpoints": _array(_ref("Endpoint")),
            "broker_epoch": INT64,
            "is_controller": {"type": "boolean"},
            "offline_log_dirs": {
                "type": "array",
                "items": {"type": "string"},
                "nullable": True,
                "description": "Log directories offline after a failure; null for a broker "
                "other than the one answering (each broker knows only its own)",
            },
            "offline_partitions": {
                **INT32,
                "nullable": True,
                "description": "Hosted partitions offline because of storage; null as above",
            },
        }
    ),
    "Cluster": _obj(
        {
            "cluster_id": {"type": "string"},
            "controller": _obj({"broker_id": BROKER_ID, "epoch": INT32}),
            "brokers": _array(_ref("Broker")),
            "this_broker": BROKER_ID,
        }
    ),
    "TopicSummary": _obj(
        {
            "name": {"type": "string"},
            "topic_id": {"type": "string", "nullable": True},
            "partitions": INT32,
            "replication_factor": INT32,
            "internal": {"type": "boolean"},
            "marked_for_deletion": {"type": "boolean"},
        }
    ),
    "NewTopic": _obj(
        {
            "name": TOPIC_NAME,
            "partitions": {**INT32, "minimum": 1, "maximum": 100000},
            "replication_factor": {
                **INT32,
                "minimum": 1,
                "maximum": 32767,
                "description": "at most the number of registered brokers",
            },
            "configs": config_changes_schema(removable=False),
        },
        ["name"],
        example={
            "name": "orders",
            "partitions": 3,
            "replication_factor": 1,
            "configs": {"retention.ms": "86400000"},
        },
    ),
    "CreatedTopic": _obj(
        {
            "name": {"type": "string"},
            "topic_id": {"type": "string"},
            "partitions": INT32,
            "replication_factor": INT32,
            "configs": CONFIGS,
        }
    ),
    "Partition": _obj(
        {
            "partition": INT32,
            "leader": BROKER_ID,
            "replicas": _array(BROKER_ID),
            "isr": _array(BROKER_ID),
            "leader_epoch": INT32,
            "log_start_offset": NULLABLE_INT64,
            "high_watermark": NULLABLE_INT64,
            "log_end_offset": NULLABLE_INT64,
            "size_bytes": NULLABLE_INT64,
            "adding_replicas": _array(BROKER_ID),
            "removing_replicas": _array(BROKER_ID),
        },
        description="Offsets and size are null when the partition has no replica on this broker.",
    ),
    "Topic": _obj(
        {
            "name": {"type": "string"},
            "topic_id": {"type": "string", "nullable": True},
            "internal": {"type": "boolean"},
            "marked_for_deletion": {"type": "boolean"},
            "configs": CONFIGS,
            "partitions": _array(_ref("Partition")),
        }
    ),
    "ConfigChange": _obj(
        {
            "configs": {
                **config_changes_schema(removable=True),
                "description": "config name -> new value; null removes the override",
            }
        },
        example={"configs": {"retention.ms": "3600000", "cleanup.policy": None}},
    ),
    "TopicConfigs": _obj({"name": {"type": "string"}, "configs": CONFIGS}),
    "PartitionCount": _obj(
        {"partitions": {**INT32, "minimum": 1, "maximum": 100000}},
        description="the new total number of partitions: partitions may only be added, so it "
        "must be larger than the topic's current count (409 INVALID_PARTITIONS otherwise)",
    ),
    "AddedPartitions": _obj(
        {
            "name": {"type": "string"},
            "partitions": INT32,
            "new_partitions": _array(_obj({"partition": INT32, "replicas": _array(BROKER_ID)})),
        }
    ),
    "DeletedTopic": _obj(
        {
            "name": {"type": "string"},
            "deleted": {"type": "boolean"},
            "marked_for_deletion": {"type": "boolean"},
        },
        description="200: the topic is gone; 202: marked for deletion, not gone within the wait "
        "(a replica is offline, or deletion is slow)",
    ),
    "TransactionSummary": _obj(
        {
            "transactional_id": {"type": "string"},
            "producer_id": {"type": "integer", "format": "int64"},
            "state": {"type": "string"},
        }
    ),
    "Transaction": _obj(
        {
            "transactional_id": {"type": "string"},
            "coordinator": BROKER_ID,
            "state": {"type": "string"},
            "producer_id": {"type": "integer", "format": "int64"},
            "producer_epoch": {"type": "integer"},
            "timeout_ms": {"type": "integer"},
            "start_time_ms": {"type": "integer", "format": "int64"},
            "last_update_time_ms": {"type": "integer", "format": "int64"},
            "partitions": _array(
                _obj({"topic": {"type": "string"}, "partition": {"type": "integer"}})
            ),
        }
    ),
    "TransactionAborted": _obj(
        {"transactional_id": {"type": "string"}, "aborted": {"type": "boolean"}}
    ),
    "GroupSummary": _obj(
        {
            "group_id": {"type": "string"},
            "protocol_type": {"type": "string"},
            "state": {"type": "string"},
        }
    ),
    "GroupMember": _obj(
        {
            "member_id": {"type": "string"},
            "group_instance_id": {"type": "string", "nullable": True},
            "client_id": {"type": "string"},
            "client_host": {"type": "string"},
            "assignment": _array(_obj({"topic": {"type": "string"}, "partitions": _array(INT32)})),
        }
    ),
    "GroupOffset": _obj(
        {
            "topic": {"type": "string"},
            "partition": INT32,
            "committed_offset": INT64,
            "high_watermark": NULLABLE_INT64,
            "lag": NULLABLE_INT64,
        }
    ),
    "Group": _obj(
        {
            "group_id": {"type": "string"},
            "state": {"type": "string"},
            "protocol_type": {"type": "string"},
            "protocol": {"type": "string"},
            "coordinator": BROKER_ID,
            "members": _array(_ref("GroupMember")),
            "offsets": _array(_ref("GroupOffset")),
            "total_lag": INT64,
        }
    ),
    "DeletedGroup": _obj({"group_id": {"type": "string"}, "deleted": {"type": "boolean"}}),
    "OffsetReset": {
        "oneOf": [
            _obj(
                {
                    "to": {"type": "string", "enum": ["earliest", "latest"]},
                    "topics": {**_array(TOPIC_NAME), "minItems": 1},
                    "dry_run": {"type": "boolean"},
                },
                ["to"],
            ),
            _obj(
                {
                    "to": {"type": "string", "enum": ["timestamp"]},
                    "timestamp": {**INT64, "minimum": 0},
                    "topics": {**_array(TOPIC_NAME), "minItems": 1},
                    "dry_run": {"type": "boolean"},
                },
                ["to", "timestamp"],
            ),
            _obj(
                {
                    "to": {"type": "string", "enum": ["explicit"]},
                    "offsets": {
                        **_array(
                            _obj(
                                {
                                    "topic": TOPIC_NAME,
                                    "partition": {**INT32, "minimum": 0},
                                    "offset": {**INT64, "minimum": 0},
                                }
                            )
                        ),
                        "minItems": 1,
                    },
                    "dry_run": {"type": "boolean"},
                },
                ["to", "offsets"],
            ),
        ],
        "description": "earliest/latest/timestamp apply to `topics` (default: the topics the "
        "group committed; 404 when it committed none); explicit takes `offsets`. Refused (409) "
        "while the group has members.",
    },
    "OffsetResetResult": _obj(
        {
            "group_id": {"type": "string"},
            "dry_run": {"type": "boolean"},
            "offsets": _array(
                _obj({"topic": {"type": "string"}, "partition": INT32, "offset": INT64})
            ),
        }
    ),
    "TopicPartition": _obj({"topic": TOPIC_NAME, "partition": {**INT32, "minimum": 0}}),
    "Reassignment": _obj(
        {
            "partitions": {
                **_array(
                    _obj(
                        {
                            "topic": TOPIC_NAME,
                            "partition": {**INT32, "minimum": 0},
                            "replicas": {
                                **_array(BROKER_ID),
                                "minItems": 1,
                                "uniqueItems": True,
                                "description": "registered brokers (404 otherwise)",
                            },
                        }
                    )
                ),
                "minItems": 1,
            }
        }
    ),
    "ReassignmentAccepted": _obj(
        {
            "partitions": _array(
                _obj(
                    {"topic": {"type": "string"}, "partition": INT32, "replicas": _array(BROKER_ID)}
                )
            ),
            "path": {"type": "string"},
        }
    ),
    "Reassignments": _obj(
        {
            "pending": _array(
                _obj(
                    {"topic": {"type": "string"}, "partition": INT32, "replicas": _array(BROKER_ID)}
                )
            ),
            "ongoing": _array(
                _obj(
                    {
                        "topic": {"type": "string"},
                        "partition": INT32,
                        "replicas": _array(BROKER_ID),
                        "adding_replicas": _array(BROKER_ID),
                        "removing_replicas": _array(BROKER_ID),
                    }
                )
            ),
        }
    ),
    "Election": _obj(
        {
            "election_type": {"type": "string", "enum": ["preferred", "unclean"]},
            "partitions": {**_array(_ref("TopicPartition")), "nullable": True, "minItems": 1},
        },
        [],
        description="partitions omitted or null: every partition",
    ),
    "ElectionAccepted": _obj(
        {
            "election_type": {"type": "string"},
            "partitions": _array(_obj({"topic": {"type": "string"}, "partition": INT32})),
            "path": {"type": "string"},
        }
    ),
}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _op(
    summary: str,
    status: int,
    schema: dict[str, Any] | None,
    *,
    body: str | None = None,
    params: list[str] = (),  # type: ignore[assignment]
    tag: str,
    content_type: str = "application/json",
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "tags": [tag],
        "operationId": summary.lower().replace(" ", "_").replace("'", ""),
        "responses": {
            str(status): {
                "description": "success",
                "content": {content_type: {"schema": schema or {"type": "string"}}},
            },
            "default": {"description": "error", "content": _json(_ref("Error"))},
        },
    }
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(_ref(body))}
    if params:
        op["parameters"] = [PARAMS[p] for p in params]
    return op


def _also(op: dict[str, Any], status: int) -> dict[str, Any]:
    """``op`` with a second success status answering the same schema."""
    first = next(code for code in op["responses"] if code != "default")
    op["responses"][str(status)] = op["responses"][first]
    return op


PARAMS: dict[str, Any] = {
    "broker_id": {"name": "id", "in": "path", "required": True, "schema": BROKER_ID},
    "topic": {"name": "name", "in": "path", "required": True, "schema": TOPIC_NAME},
    "group": {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
    "transaction": {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
}


@cache
def openapi_document() -> dict[str, Any]:
    paths = {
        "/": {
            "get": _op("Dashboard", 200, {"type": "string"}, tag="health", content_type="text/html")
        },
        "/health": {"get": _op("Health", 200, _ref("Health"), tag="health")},
        "/ready": {"get": _op("Readiness", 200, _ref("Ready"), tag="health")},
        "/cluster": {"get": _op("Describe cluster", 200, _ref("Cluster"), tag="cluster")},
        "/brokers": {"get": _op("List brokers", 200, _array(_ref("Broker")), tag="cluster")},
        "/brokers/{id}": {
            "get": _op("Describe broker", 200, _ref("Broker"), params=["broker_id"], tag="cluster")
        },
        "/topics": {
            "get": _op("List topics", 200, _array(_ref("TopicSummary")), tag="topics"),
            "post": _op("Create topic", 201, _ref("CreatedTopic"), body="NewTopic", tag="topics"),
        },
        "/topics/{name}": {
            "get": _op("Describe topic", 200, _ref("Topic"), params=["topic"], tag="topics"),
            "delete": _also(
                _op("Delete topic", 200, _ref("DeletedTopic"), params=["topic"], tag="topics"),
                202,
            ),
        },
        "/topics/{name}/config": {
            "patch": _op(
                "Alter topic config",
                200,
                _ref("TopicConfigs"),
                body="ConfigChange",
                params=["topic"],
                tag="topics",
            )
        },
        "/topics/{name}/partitions": {
            "post": _op(
                "Add partitions",
                200,
                _ref("AddedPartitions"),
                body="PartitionCount",
                params=["topic"],
                tag="topics",
            )
        },
        "/groups": {"get": _op("List groups", 200, _array(_ref("GroupSummary")), tag="groups")},
        "/groups/{id}": {
            "get": _op("Describe group", 200, _ref("Group"), params=["group"], tag="groups"),
            "delete": _op(
                "Delete group", 200, _ref("DeletedGroup"), params=["group"], tag="groups"
            ),
        },
        "/groups/{id}/offsets": {
            "post": _op(
                "Reset group offsets",
                200,
                _ref("OffsetResetResult"),
                body="OffsetReset",
                params=["group"],
                tag="groups",
            )
        },
        "/transactions": {
            "get": _op(
                "List transactions", 200, _array(_ref("TransactionSummary")), tag="transactions"
            )
        },
        "/transactions/{id}": {
            "get": _op(
                "Describe transaction",
                200,
                _ref("Transaction"),
                params=["transaction"],
                tag="transactions",
            )
        },
        "/transactions/{id}/abort": {
            "post": _op(
                "Abort transaction",
                202,
                _ref("TransactionAborted"),
                params=["transaction"],
                tag="transactions",
            )
        },
        "/partitions/reassign": {
            "get": _op("List reassignments", 200, _ref("Reassignments"), tag="partitions"),
            "post": _op(
                "Reassign partitions",
                202,
                _ref("ReassignmentAccepted"),
                body="Reassignment",
                tag="partitions",
            ),
        },
        "/partitions/elect-leaders": {
            "post": _op(
                "Elect leaders", 202, _ref("ElectionAccepted"), body="Election", tag="partitions"
            )
        },
        "/metrics": {
            "get": _op(
                "Prometheus metrics",
                200,
                {"type": "string"},
                tag="metrics",
                content_type="text/plain",
            )
        },
    }
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "kafkalite admin API",
            "version": _version,
            "description": "Cluster, brokers, topics, consumer groups, reassignment, leader "
            "elections and metrics of a kafkalite broker. Errors are "
            '{"error": CODE, "message": ...}.',
        },
        "paths": paths,
        "components": {"schemas": SCHEMAS},
    }
