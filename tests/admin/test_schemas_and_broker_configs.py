"""The admin API's Schema Registry routes (/schemas...), the record browser decoding records
framed for the registry, and dynamic broker configs (/brokers/{id}/configs,
/cluster/broker-configs), against in-process brokers (kafkalite.testing) with real clients:
confluent-kafka's SchemaRegistryClient and serializers register and produce, its AdminClient
reads back what the API changed. The secured broker (tests/security/support.py) checks the
routes' authentication, ACLs and cross-site refusals."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest
from confluent_kafka.admin import AclOperation, ConfigResource, ResourceType
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import ResourceType as AclResource
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkalite.testing import Broker
from tests.admin.support import (
    ADMIN,
    ALICE,
    EVIL,
    ORDER_V1,
    ORDER_V2,
    allow,
    call,
    unique,
    wait_for,
)
from tests.admin.support import produce_records as produce
from tests.security.support import SECRETS, secured_admin_config

PROTO = """syntax = "proto3";
package shop;
message Ping { int32 n = 1; }
message Line { string sku = 1; int32 quantity = 2; }
"""
JSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
}


@pytest.fixture(scope="module")
def broker():
    with Broker() as b:
        yield b


@pytest.fixture(scope="module")
def registry(broker) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.schema_registry_url})


def api(broker, method: str, path: str, body=None, **kw):
    return call(broker, method, path, body, **kw)


# ------------------------------------------------------------------------ the Schemas view


def test_subjects_versions_schema_text_and_diff(broker, registry) -> None:
    subject = unique("orders") + "-value"
    first = registry.register_schema(subject, Schema(json.dumps(ORDER_V1), "AVRO"))
    second = registry.register_schema(subject, Schema(json.dumps(ORDER_V2), "AVRO"))
    listed = api(broker, "GET", "/schemas")
    assert listed.status == 200 and listed.body["enabled"] is True
    assert listed.body["url"] == broker.schema_registry_url
    assert listed.body["compatibility"] == "BACKWARD"
    [entry] = [s for s in listed.body["subjects"] if s["subject"] == subject]
    assert entry == {
        "subject": subject,
        "latest_version": 2,
        "latest_id": second,
        "schema_type": "AVRO",
        "versions": 2,
        "compatibility": "BACKWARD",
        "compatibility_is_subjects": False,
        "deleted": False,
    }
    detail = api(broker, "GET", f"/schemas/subjects/{subject}").body
    assert detail["versions"] == [
        {"version": 1, "id": first, "deleted": False},
        {"version": 2, "id": second, "deleted": False},
    ]
    assert detail["subject_compatibility"] is None and detail["global_compatibility"] == "BACKWARD"
    v1 = api(broker, "GET", f"/schemas/subjects/{subject}/versions/1").body
    assert v1["id"] == first and v1["schema_type"] == "AVRO" and v1["references"] == []
    assert json.loads(v1["schema_text"]) == ORDER_V1
    assert "\n  " in v1["schema_text"]  # pretty-printed
    diff = api(broker, "GET", f"/schemas/subjects/{subject}/diff?from=1&to=2").body
    added = [line["text"] for line in diff["lines"] if line["op"] == "added"]
    assert any('"note"' in text for text in added), diff
    assert not any('"note"' in line["text"] for line in diff["lines"] if line["op"] != "added")
    assert any(line["op"] == "same" and '"id"' in line["text"] for line in diff["lines"])
    # a version or a subject that does not exist: 404 with Confluent's meaning
    missing = api(broker, "GET", f"/schemas/subjects/{subject}/versions/3")
    assert (missing.status, missing.body["error"]) == (404, "VERSION_NOT_FOUND")
    nobody = api(broker, "GET", "/schemas/subjects/nobody-value")
    assert (nobody.status, nobody.body["error"]) == (404, "SUBJECT_NOT_FOUND")
    bad = api(broker, "GET", f"/schemas/subjects/{subject}/diff?from=1&to=x")
    assert bad.status == 400


def test_compatibility_levels_are_edited_through_the_registry(broker, registry) -> None:
    subject = unique("levels") + "-value"
    registry.register_schema(subject, Schema(json.dumps(ORDER_V1), "AVRO"))
    answer = api(broker, "PUT", f"/schemas/subjects/{subject}/config", {"compatibility": "FULL"})
    assert answer.status == 200, answer.body
    assert answer.body == {"subject": subject, "compatibility": "FULL"}
    assert registry.get_compatibility(subject) == "FULL"
    detail = api(broker, "GET", f"/schemas/subjects/{subject}").body
    assert (detail["compatibility"], detail["subject_compatibility"]) == ("FULL", "FULL")
    # removed: the global level applies again
    answer = api(broker, "PUT", f"/schemas/subjects/{subject}/config", {"compatibility": None})
    assert answer.body == {"subject": subject, "compatibility": "BACKWARD"}
    assert api(broker, "GET", f"/schemas/subjects/{subject}").body["subject_compatibility"] is None
    # the global level
    try:
        answer = api(broker, "PUT", "/schemas/config", {"compatibility": "FORWARD"})
        assert answer.body == {"subject": None, "compatibility": "FORWARD"}
        assert registry.get_compatibility() == "FORWARD"
        assert api(broker, "GET", "/schemas").body["compatibility"] == "FORWARD"
    finally:
        api(broker, "PUT", "/schemas/config", {"compatibility": "BACKWARD"})
    refused = api(broker, "PUT", "/schemas/config", {"compatibility": "SOMETIMES"})
    assert (refused.status, refused.body["field"]) == (400, "compatibility")
    refused = api(broker, "PUT", "/schemas/config", {"compatibility": None})
    assert refused.status == 400


def test_soft_deleted_subjects_and_versions_are_shown_on_request(broker, registry) -> None:
    subject = unique("gone") + "-value"
    registry.register_schema(subject, Schema(json.dumps(ORDER_V1), "AVRO"))
    registry.register_schema(subject, Schema(json.dumps(ORDER_V2), "AVRO"))
    registry.delete_version(subject, 1)
    detail = api(broker, "GET", f"/schemas/subjects/{subject}").body
    assert [v["version"] for v in detail["versions"]] == [2]
    detail = api(broker, "GET", f"/schemas/subjects/{subject}?deleted=true").body
    assert [(v["version"], v["deleted"]) for v in detail["versions"]] == [(1, True), (2, False)]
    # a soft-deleted version can still be read and compared
    assert api(broker, "GET", f"/schemas/subjects/{subject}/versions/1").body["deleted"] is True
    assert api(broker, "GET", f"/schemas/subjects/{subject}/diff?from=1&to=2").status == 200
    registry.delete_subject(subject)
    names = [s["subject"] for s in api(broker, "GET", "/schemas").body["subjects"]]
    assert subject not in names
    shown = api(broker, "GET", "/schemas?deleted=true").body["subjects"]
    [entry] = [s for s in shown if s["subject"] == subject]
    assert entry["deleted"] is True and entry["versions"] == 2


def test_without_a_registry_the_view_says_so() -> None:
    with Broker({"schema.registry.listeners": ""}) as b:
        answer = call(b, "GET", "/schemas")
        assert answer.status == 200
        assert answer.body == {
            "enabled": False,
            "url": None,
            "compatibility": None,
            "mode": None,
            "subjects": [],
        }
        for method, path, body in (
            ("GET", "/schemas/subjects/a-value", None),
            ("PUT", "/schemas/config", {"compatibility": "NONE"}),
        ):
            refused = call(b, method, path, body)
            assert (refused.status, refused.body["error"]) == (404, "SCHEMA_REGISTRY_DISABLED")


# ------------------------------------------------------------------------ decoded records


@pytest.fixture(scope="module")
def proto_module(tmp_path_factory):
    """PROTO compiled by protoc into a Python module."""
    where = tmp_path_factory.mktemp("admin-proto")
    (where / "shop_lines.proto").write_text(PROTO)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{where}", f"--python_out={where}"]
        + ["shop_lines.proto"],
        check=True,
        cwd=where,
    )
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module("shop_lines_pb2")
    finally:
        sys.path.remove(str(where))


def browse(broker, topic: str) -> list[dict]:
    answer = call(broker, "GET", f"/topics/{topic}/records?limit=20")
    assert answer.status == 200, answer.body
    return sorted(answer.body["records"], key=lambda r: r["offset"])


def test_framed_records_are_decoded_with_their_schema(broker, registry, proto_module) -> None:
    topic = unique("framed")
    broker.create_topic(topic)
    avro_value = AvroSerializer(registry, json.dumps(ORDER_V1))
    avro_key = AvroSerializer(registry, '"string"')
    as_json = JSONSerializer(json.dumps(JSON_SCHEMA), registry)
    as_proto = ProtobufSerializer(proto_module.Line, registry, {"use.deprecated.format": False})
    value_ctx = SerializationContext(topic, MessageField.VALUE)
    key_ctx = SerializationContext(topic, MessageField.KEY)

    def other(kind: str) -> SerializationContext:
        return SerializationContext(f"{topic}-{kind}", MessageField.VALUE)

    avro = avro_value({"id": 7, "item": "tea"}, value_ctx)
    produce(
        broker,
        topic,
        [
            (avro_key("order-7", key_ctx), avro),
            # registered under other subjects (one subject holds one schema type)
            (None, as_json({"name": "ada", "age": 36}, other("json"))),
            (None, as_proto(proto_module.Line(sku="x-1", quantity=3), other("proto"))),
            (b"plain", b"not framed"),
            (None, b"\x00\x00\x0f\x42\x3f" + b"unknown id"),
            (None, avro[:5] + b"\xff"),  # a known id, bytes its schema cannot read
        ],
    )
    records = browse(broker, topic)
    assert len(records) == 6
    order, person, line, plain, unknown, broken = records
    avro_id = int.from_bytes(avro[1:5], "big")
    assert order["value"]["encoding"] == "avro"
    assert json.loads(order["value"]["text"]) == {"id": 7, "item": "tea"}
    assert (order["value"]["schema_id"], order["value"]["subject"]) == (avro_id, f"{topic}-value")
    assert order["value"]["size"] == len(avro)
    assert order["key"]["encoding"] == "avro" and json.loads(order["key"]["text"]) == "order-7"
    assert order["key"]["subject"] == f"{topic}-key"
    assert person["value"]["encoding"] == "json-schema"
    assert json.loads(person["value"]["text"]) == {"name": "ada", "age": 36}
    assert line["value"]["encoding"] == "protobuf"
    assert json.loads(line["value"]["text"]) == {"sku": "x-1", "quantity": 3}
    assert line["value"]["subject"] == f"{topic}-proto-value"  # the one it is under
    assert (plain["key"]["encoding"], plain["key"]["text"]) == ("utf8", "plain")
    assert plain["value"]["schema_id"] is None
    assert unknown["value"]["encoding"] == "hex" and unknown["value"]["schema_id"] is None
    assert broken["value"]["encoding"] == "hex"
    # the filter matches the decoded text
    found = call(broker, "GET", f"/topics/{topic}/records?filter=x-1").body["records"]
    assert [r["offset"] for r in found] == [line["offset"]]


# ------------------------------------------------------------------------ broker configs


def kafka_config(broker, name: str, config: str):
    admin = KafkaAdmin({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.BROKER, name)
    return admin.describe_configs([resource])[resource].result(30)[config]


def test_broker_configs_with_their_sources(broker) -> None:
    answer = api(broker, "GET", f"/brokers/{broker.broker_id}/configs")
    assert answer.status == 200
    assert answer.body["broker_id"] == broker.broker_id
    by_name = {c["name"]: c for c in answer.body["configs"]}
    assert by_name["log.cleaner.backoff.ms"]["source"] == "DEFAULT_CONFIG"
    assert by_name["log.cleaner.backoff.ms"]["read_only"] is False
    assert by_name["broker.id"]["read_only"] is True
    assert api(broker, "GET", "/brokers/4242/configs").status == 404
    assert api(broker, "GET", "/cluster/broker-configs").body == {"broker_id": None, "configs": []}


def test_broker_and_default_levels_are_set_and_removed(broker) -> None:
    me = broker.broker_id
    path = f"/brokers/{me}/configs"
    answer = api(
        broker, "PATCH", "/cluster/broker-configs", {"configs": {"log.cleaner.backoff.ms": "21000"}}
    )
    assert answer.status == 200, answer.body
    assert answer.body == {"broker_id": None, "set": ["log.cleaner.backoff.ms"], "removed": []}
    entry = wait_for(
        lambda: (
            (c := kafka_config(broker, str(me), "log.cleaner.backoff.ms")).value == "21000" and c
        ),
        "the default to apply",
    )
    assert entry.source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
    defaults = api(broker, "GET", "/cluster/broker-configs").body["configs"]
    assert [(c["name"], c["value"]) for c in defaults] == [("log.cleaner.backoff.ms", "21000")]
    answer = api(broker, "PATCH", path, {"configs": {"log.cleaner.backoff.ms": "22000"}})
    assert answer.status == 200, answer.body
    wait_for(
        lambda: kafka_config(broker, str(me), "log.cleaner.backoff.ms").value == "22000",
        "the broker's own level to win",
    )
    shown = {c["name"]: c for c in api(broker, "GET", path).body["configs"]}
    backoff = shown["log.cleaner.backoff.ms"]
    assert (backoff["value"], backoff["source"]) == ("22000", "DYNAMIC_BROKER_CONFIG")
    assert [s["source"] for s in backoff["synonyms"]][:2] == [
        "DYNAMIC_BROKER_CONFIG",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
    ]
    # removed at both levels: the default again
    assert api(broker, "PATCH", path, {"configs": {"log.cleaner.backoff.ms": None}}).status == 200
    assert (
        api(
            broker,
            "PATCH",
            "/cluster/broker-configs",
            {"configs": {"log.cleaner.backoff.ms": None}},
        )
    ).status == 200
    wait_for(
        lambda: kafka_config(broker, str(me), "log.cleaner.backoff.ms").source == 5,
        "the Kafka default to apply again",
    )


def test_refused_broker_configs_are_409_with_kafkas_error(broker) -> None:
    path = f"/brokers/{broker.broker_id}/configs"
    for configs, error in (
        ({"log.cleaner.backoff.ms": "soon"}, "INVALID_CONFIG"),
        ({"broker.id": "7"}, None),  # static
        ({"no.such.setting": "1"}, None),
    ):
        refused = api(broker, "PATCH", path, {"configs": configs})
        assert refused.status == 409, (configs, refused.body)
        assert refused.body["error"] in ("INVALID_CONFIG", "INVALID_REQUEST")
        if error:
            assert refused.body["error"] == error
    assert api(broker, "PATCH", path, {"configs": {}}).status == 400
    assert api(broker, "PATCH", "/brokers/4242/configs", {"configs": {"a.b": "1"}}).status == 404


# ------------------------------------------------------------------------ secured


@pytest.fixture(scope="module")
def secured():
    with Broker(secured_admin_config()) as b:
        # alice may DESCRIBE the cluster (the monitoring grant), nothing more
        admin = KafkaAdmin({"bootstrap.servers": b.bootstrap_servers})
        grant = allow("User:alice", AclResource.BROKER, "kafka-cluster", AclOperation.DESCRIBE)
        for future in admin.create_acls([grant]).values():
            future.result(30)
        wait_for(lambda: call(b, "GET", "/schemas", headers=ALICE).status == 200, "alice's grant")
        yield b


ROUTES = (
    ("GET", "/schemas", None),
    ("GET", "/schemas/subjects/s-value", None),
    ("GET", "/schemas/subjects/s-value/versions/1", None),
    ("GET", "/schemas/subjects/s-value/diff?from=1&to=1", None),
    ("PUT", "/schemas/config", {"compatibility": "NONE"}),
    ("PUT", "/schemas/subjects/s-value/config", {"compatibility": "NONE"}),
    ("GET", "/brokers/1/configs", None),
    ("PATCH", "/brokers/1/configs", {"configs": {"log.cleaner.backoff.ms": "20000"}}),
    ("GET", "/cluster/broker-configs", None),
    ("PATCH", "/cluster/broker-configs", {"configs": {"log.cleaner.backoff.ms": "20000"}}),
)


def test_every_new_route_needs_credentials(secured) -> None:
    for method, path, body in ROUTES:
        answer = call(secured, method, path, body)
        assert answer.status == 401, (method, path)


def test_acls_of_the_new_routes(secured) -> None:
    me = secured.broker_id
    # alice may DESCRIBE the cluster: she reads the registry, and changes nothing
    assert call(secured, "GET", "/schemas", headers=ALICE).status == 200
    for method, path, body in (
        ("PUT", "/schemas/config", {"compatibility": "NONE"}),
        ("PUT", "/schemas/subjects/s-value/config", {"compatibility": "NONE"}),
        # broker configs need DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster
        ("GET", f"/brokers/{me}/configs", None),
        ("GET", "/cluster/broker-configs", None),
        ("PATCH", f"/brokers/{me}/configs", {"configs": {"log.cleaner.backoff.ms": "20000"}}),
        ("PATCH", "/cluster/broker-configs", {"configs": {"log.cleaner.backoff.ms": "20000"}}),
    ):
        refused = call(secured, method, path, body, headers=ALICE)
        assert refused.status == 403, (method, path, refused.body)
    assert call(secured, "GET", "/schemas", headers=ADMIN).body["compatibility"] == "BACKWARD"


def test_secrets_of_broker_configs_are_never_answered(secured) -> None:
    answer = call(secured, "GET", f"/brokers/{secured.broker_id}/configs", headers=ADMIN)
    assert answer.status == 200
    by_name = {c["name"]: c for c in answer.body["configs"]}
    jaas = by_name["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert jaas["sensitive"] is True and jaas["value"] is None
    assert all(s["value"] is None for s in jaas["synonyms"])
    assert jaas["source"] == "STATIC_BROKER_CONFIG"
    assert by_name["admin.bearer.token"]["value"] is None
    text = json.dumps(answer.body)
    for secret in SECRETS:
        assert secret not in text


def test_cross_site_changes_are_refused(secured) -> None:
    for method, path, body in ROUTES:
        if method == "GET":
            continue
        forged = call(secured, method, path, body, headers={**ADMIN, "Origin": EVIL})
        assert (forged.status, forged.body["error"]) == (403, "CROSS_ORIGIN_REQUEST"), path
        plain = call(
            secured,
            method,
            path,
            raw=json.dumps(body).encode(),
            headers=ADMIN,
            content_type="text/plain",
        )
        assert plain.status == 415, path
    # nothing of it happened
    level = call(secured, "GET", "/schemas", headers=ADMIN).body["compatibility"]
    assert level == "BACKWARD"


def test_a_record_the_topic_refuses_is_a_conflict(broker) -> None:
    # a keyless record on a compacted topic: Kafka's INVALID_RECORD, the topic's rule (409), not
    # a malformed request (400)
    topic = unique("compacted")
    broker.create_topic(topic, config={"cleanup.policy": "compact"})
    refused = api(broker, "POST", f"/topics/{topic}/records", {"value": "v"})
    assert (refused.status, refused.body["error"]) == (409, "INVALID_RECORD")
    assert api(broker, "POST", f"/topics/{topic}/records", {"key": "k", "value": "v"}).status == 201
