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
TOPIC_NAME = {"type": "string", "minLength": 1, "maxLength": 249, "pattern": "^[a-zA-Z0-9._-]+$"}
CONFIGS = {"type": "object", "additionalProperties": {"type": "string"}}


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
            "replication_factor": {**INT32, "minimum": 1, "maximum": 32767},
            "configs": CONFIGS,
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
                "type": "object",
                "additionalProperties": {"type": "string", "nullable": True},
                "description": "config name -> new value; null removes the override",
            }
        },
        example={"configs": {"retention.ms": "3600000", "cleanup.policy": None}},
    ),
    "TopicConfigs": _obj({"name": {"type": "string"}, "configs": CONFIGS}),
    "PartitionCount": _obj(
        {"partitions": {**INT32, "minimum": 1, "maximum": 100000}},
        description="the new total number of partitions",
    ),
    "AddedPartitions": _obj(
        {
            "name": {"type": "string"},
            "partitions": INT32,
            "new_partitions": _array(_obj({"partition": INT32, "replicas": _array(BROKER_ID)})),
        }
    ),
    "DeletedTopic": _obj({"name": {"type": "string"}, "marked_for_deletion": {"type": "boolean"}}),
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
    "OffsetReset": _obj(
        {
            "to": {"type": "string", "enum": ["earliest", "latest", "timestamp", "explicit"]},
            "topics": _array({"type": "string"}),
            "timestamp": {**INT64, "minimum": 0},
            "offsets": _array(
                _obj(
                    {
                        "topic": {"type": "string"},
                        "partition": {**INT32, "minimum": 0},
                        "offset": {**INT64, "minimum": 0},
                    }
                )
            ),
            "dry_run": {"type": "boolean"},
        },
        ["to"],
        description="earliest/latest/timestamp apply to `topics` (default: the topics the "
        "group committed); explicit takes `offsets`. Refused (409) while the group has members.",
    ),
    "OffsetResetResult": _obj(
        {
            "group_id": {"type": "string"},
            "dry_run": {"type": "boolean"},
            "offsets": _array(
                _obj({"topic": {"type": "string"}, "partition": INT32, "offset": INT64})
            ),
        }
    ),
    "TopicPartition": _obj({"topic": {"type": "string"}, "partition": {**INT32, "minimum": 0}}),
    "Reassignment": _obj(
        {
            "partitions": _array(
                _obj(
                    {
                        "topic": {"type": "string"},
                        "partition": {**INT32, "minimum": 0},
                        "replicas": _array(BROKER_ID),
                    }
                )
            )
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
            "partitions": {**_array(_ref("TopicPartition")), "nullable": True},
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


PARAMS: dict[str, Any] = {
    "broker_id": {"name": "id", "in": "path", "required": True, "schema": BROKER_ID},
    "topic": {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
    "group": {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
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
            "delete": _op(
                "Delete topic", 202, _ref("DeletedTopic"), params=["topic"], tag="topics"
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
