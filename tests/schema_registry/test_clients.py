"""The registry through confluent-kafka's SchemaRegistryClient and its Avro, Protobuf and JSON
serializers, against one in-process broker (kafkalite.testing) with nothing else running; the
REST API's error answers for bad input; validation on produce. (Protobuf schemas are compiled
by protoc, a child process: the integration tier.)"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkalite.testing import Broker
from tests.schema_registry.support import MEDIA_TYPE, call

pytestmark = pytest.mark.integration

USER_V1 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
USER_V2 = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int", "default": 0},
    ],
}


@pytest.fixture(scope="module")
def broker():
    with Broker() as b:
        yield b


@pytest.fixture(scope="module")
def url(broker):
    return broker.schema_registry_url


@pytest.fixture()
def client(url):
    return SchemaRegistryClient({"url": url})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def roundtrip(broker, topic, serializer, deserializer, value):
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    data = serializer(value, SerializationContext(topic, MessageField.VALUE))
    producer.produce(topic, value=data)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": unique("g"),
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                return data, deserializer(
                    message.value(), SerializationContext(topic, MessageField.VALUE)
                )
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


def test_avro_serializer_roundtrip_and_evolution(broker, client):
    topic = unique("avro")
    serializer = AvroSerializer(client, json.dumps(USER_V1))
    deserializer = AvroDeserializer(client)
    data, value = roundtrip(broker, topic, serializer, deserializer, {"name": "ada"})
    assert value == {"name": "ada"}
    first_id = int.from_bytes(data[1:5], "big")
    assert client.get_latest_version(f"{topic}-value").schema_id == first_id
    # compatible evolution: a new version with a new id
    second = client.register_schema(f"{topic}-value", Schema(json.dumps(USER_V2), "AVRO"))
    assert second != first_id
    assert client.get_versions(f"{topic}-value") == [1, 2]
    # the same schema again: the same id (idempotent)
    assert client.register_schema(f"{topic}-value", Schema(json.dumps(USER_V2), "AVRO")) == second
    # incompatible: a field without a default the old data lacks
    bad = dict(USER_V2, fields=[*USER_V2["fields"], {"name": "email", "type": "string"}])
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(f"{topic}-value", Schema(json.dumps(bad), "AVRO"))
    assert refused.value.http_status_code == 409
    assert "email" in refused.value.error_message


def test_json_serializer_roundtrip(broker, client):
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Point",
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x"],
    }
    topic = unique("json")
    serializer = JSONSerializer(json.dumps(schema), client)
    deserializer = JSONDeserializer(json.dumps(schema), schema_registry_client=client)
    _, value = roundtrip(broker, topic, serializer, deserializer, {"x": 1, "y": 2})
    assert value == {"x": 1, "y": 2}
    # closing the open content model: refused under BACKWARD (old data may hold anything)
    closed = dict(schema, additionalProperties=False)
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(f"{topic}-value", Schema(json.dumps(closed), "JSON"))
    assert refused.value.http_status_code == 409
    assert "ADDITIONAL_PROPERTIES_REMOVED" in refused.value.error_message
    # dropping a property from the open model: compatible, a new id
    first = client.get_latest_version(f"{topic}-value").schema_id
    narrower = dict(schema, properties={"x": {"type": "integer"}})
    assert client.register_schema(f"{topic}-value", Schema(json.dumps(narrower), "JSON")) != first


PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string item = 2;
  google.protobuf.Timestamp at = 3;
}
"""


@pytest.fixture(scope="module")
def order_module(tmp_path_factory):
    """The Order message compiled by protoc into a Python module."""
    where = tmp_path_factory.mktemp("proto")
    (where / "order.proto").write_text(PROTO)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{where}",
            f"--python_out={where}",
            "order.proto",
        ],
        check=True,
        cwd=where,
    )
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module("order_pb2")
    finally:
        sys.path.remove(str(where))


def test_protobuf_serializer_roundtrip(broker, client, order_module):
    topic = unique("proto")
    serializer = ProtobufSerializer(order_module.Order, client, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(order_module.Order, {"use.deprecated.format": False})
    order = order_module.Order(id=7, item="tea")
    order.at.seconds = 1_700_000_000
    _, value = roundtrip(broker, topic, serializer, deserializer, order)
    assert value == order
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    # a field changing its wire type: refused
    changed = PROTO.replace("string item = 2;", "int32 item = 2;")
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(f"{topic}-value", Schema(changed, "PROTOBUF"))
    assert refused.value.http_status_code == 409
    # a new field: compatible, a new id
    added = PROTO.replace("}\n", "  string note = 4;\n}\n")
    assert (
        client.register_schema(f"{topic}-value", Schema(added, "PROTOBUF")) != registered.schema_id
    )


# ------------------------------------------------------------------------ the REST API


def test_answers_use_confluents_media_type_and_routes(url):
    subject = unique("rest")
    answer = call(url, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(USER_V1)})
    assert answer.status == 200 and answer.content_type == MEDIA_TYPE
    schema_id = answer.body["id"]
    assert call(url, "GET", "/schemas/types").body == ["AVRO", "JSON", "PROTOBUF"] or set(
        call(url, "GET", "/schemas/types").body
    ) == {"AVRO", "JSON", "PROTOBUF"}
    by_id = call(url, "GET", f"/schemas/ids/{schema_id}").body
    assert json.loads(by_id["schema"]) == USER_V1
    assert {"subject": subject, "version": 1} in call(
        url, "GET", f"/schemas/ids/{schema_id}/versions"
    ).body
    assert subject in call(url, "GET", f"/schemas/ids/{schema_id}/subjects").body
    latest = call(url, "GET", f"/subjects/{subject}/versions/latest").body
    assert (latest["subject"], latest["version"], latest["id"]) == (subject, 1, schema_id)
    assert call(url, "GET", f"/subjects/{subject}/versions/1/schema").body == USER_V1
    found = call(url, "POST", f"/subjects/{subject}", {"schema": json.dumps(USER_V1)})
    assert (found.status, found.body["id"], found.body["version"]) == (200, schema_id, 1)
    verdict = call(
        url,
        "POST",
        f"/compatibility/subjects/{subject}/versions/latest?verbose=true",
        {"schema": json.dumps(dict(USER_V1, fields=[{"name": "n", "type": "int"}]))},
    ).body
    assert verdict["is_compatible"] is False and verdict["messages"]


def test_config_and_mode(url):
    subject = unique("cfg")
    assert call(url, "GET", "/config").body == {"compatibilityLevel": "BACKWARD"}
    missing = call(url, "GET", f"/config/{subject}")
    assert (missing.status, missing.body["error_code"]) == (404, 40408)
    assert call(url, "PUT", f"/config/{subject}", {"compatibility": "NONE"}).body == {
        "compatibility": "NONE"
    }
    assert call(url, "GET", f"/config/{subject}").body == {"compatibilityLevel": "NONE"}
    bad = call(url, "PUT", f"/config/{subject}", {"compatibility": "SOMETIMES"})
    assert bad.status == 422
    call(url, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(USER_V1)})
    # NONE: anything goes
    other = {"type": "record", "name": "Other", "fields": [{"name": "z", "type": "long"}]}
    assert (
        call(url, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(other)}).status
        == 200
    )
    assert call(url, "PUT", f"/mode/{subject}", {"mode": "READONLY"}).status == 200
    refused = call(url, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(USER_V2)})
    assert (refused.status, refused.body["error_code"]) == (422, 42205)
    assert call(url, "DELETE", f"/mode/{subject}").body == {"mode": "READONLY"}
    assert call(url, "GET", "/mode").body == {"mode": "READWRITE"}


def test_soft_and_hard_delete(url):
    subject = unique("del")
    call(url, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(USER_V1)})
    call(url, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(USER_V2)})
    early = call(url, "DELETE", f"/subjects/{subject}/versions/1?permanent=true")
    assert (early.status, early.body["error_code"]) == (404, 40407)
    assert call(url, "DELETE", f"/subjects/{subject}/versions/1").body == 1
    assert call(url, "GET", f"/subjects/{subject}/versions").body == [2]
    assert call(url, "GET", f"/subjects/{subject}/versions?deleted=true").body == [1, 2]
    assert call(url, "GET", f"/subjects/{subject}/versions/1").status == 404
    assert call(url, "GET", f"/subjects/{subject}/versions/1?deleted=true").status == 200
    assert call(url, "DELETE", f"/subjects/{subject}").body == [2]
    assert subject not in call(url, "GET", "/subjects").body
    assert subject in call(url, "GET", "/subjects?deleted=true").body
    assert call(url, "DELETE", f"/subjects/{subject}?permanent=true").body == [1, 2]
    gone = call(url, "GET", "/subjects?deleted=true").body
    assert subject not in gone
    assert call(url, "GET", f"/subjects/{subject}/versions").body["error_code"] == 40401


def test_references_across_subjects(url):
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "shop",
        "fields": [{"name": "street", "type": "string"}],
    }
    base = unique("address")
    call(url, "POST", f"/subjects/{base}/versions", {"schema": json.dumps(address)})
    person = {
        "type": "record",
        "name": "Person",
        "namespace": "shop",
        "fields": [{"name": "home", "type": "shop.Address"}],
    }
    subject = unique("person")
    answer = call(
        url,
        "POST",
        f"/subjects/{subject}/versions",
        {
            "schema": json.dumps(person),
            "references": [{"name": "shop.Address", "subject": base, "version": 1}],
        },
    )
    assert answer.status == 200, answer.body
    assert call(url, "GET", f"/subjects/{base}/versions/1/referencedby").body == [answer.body["id"]]
    refused = call(url, "DELETE", f"/subjects/{base}/versions/1")
    assert (refused.status, refused.body["error_code"]) == (422, 42206)
    got = call(url, "GET", f"/subjects/{subject}/versions/latest").body
    assert got["references"] == [{"name": "shop.Address", "subject": base, "version": 1}]


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({"schema": "{not json"}, "not JSON"),
        ({"schema": json.dumps({"type": "record", "name": "X"})}, ""),
        ({"schema": json.dumps({"type": "nosuchtype"})}, "nosuchtype"),
        (
            {"schema": 'syntax = "proto3"; message M { Missing m = 1; }', "schemaType": "PROTOBUF"},
            "Missing",
        ),
        ({"schema": json.dumps({"type": 12}), "schemaType": "JSON"}, "JSON Schema"),
        ({"schema": json.dumps({"$ref": "elsewhere.json"}), "schemaType": "JSON"}, "elsewhere"),
        ({"schema": "{}", "schemaType": "XML"}, "schemaType"),
        (
            {
                "schema": json.dumps(
                    {"type": "record", "name": "A", "fields": [{"name": "b", "type": "B"}]}
                ),
                "references": [{"name": "B", "subject": "no-such-subject", "version": 1}],
            },
            "not found",
        ),
    ],
)
def test_bad_schemas_are_422_with_a_message(url, body, fragment):
    answer = call(url, "POST", f"/subjects/{unique('bad')}/versions", body)
    assert answer.status == 422, answer.body
    assert answer.body["error_code"] in (42201, 422)
    assert fragment in answer.body["message"]


def test_a_reference_to_itself_is_422(url):
    subject = unique("self")
    schema = {"type": "record", "name": "Loop", "fields": [{"name": "next", "type": "Loop2"}]}
    answer = call(
        url,
        "POST",
        f"/subjects/{subject}/versions",
        {
            "schema": json.dumps(schema),
            "references": [{"name": "Loop2", "subject": subject, "version": 1}],
        },
    )
    assert (answer.status, answer.body["error_code"]) == (422, 42201)


def test_a_huge_schema_is_422_naming_the_limit(url):
    fields = [{"name": f"f{i}", "type": "string", "doc": "x" * 200} for i in range(6000)]
    text = json.dumps({"type": "record", "name": "Huge", "fields": fields})
    assert len(text) > 1024 * 1024
    answer = call(url, "POST", f"/subjects/{unique('huge')}/versions", {"schema": text})
    assert answer.status == 422
    assert "schema.registry.max.schema.bytes" in answer.body["message"]


def test_malformed_bodies_and_versions(url):
    subject = unique("x")
    assert call(url, "POST", f"/subjects/{subject}/versions", raw=b"{oops").status == 400
    answer = call(url, "GET", f"/subjects/{subject}/versions/zero")
    assert (answer.status, answer.body["error_code"]) == (422, 42202)
    assert call(url, "GET", "/schemas/ids/99999").body["error_code"] == 40403


# ------------------------------------------------------------------ validation on produce


def produce_raw(broker, topic, values):
    """Produce one batch; the delivery errors."""
    errors = []
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 50, "retries": 0}
    )
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(30) == 0
    return errors


def test_validation_refuses_unframed_unknown_and_wrong_subject(broker, client, walker):
    topic = unique("validated")
    broker.create_topic(topic, config={"confluent.value.schema.validation": "true"})
    good = client.register_schema(f"{topic}-value", Schema(json.dumps(USER_V1), "AVRO"))
    other = client.register_schema(
        unique("elsewhere") + "-value",
        Schema(
            json.dumps(
                {"type": "record", "name": "Other", "fields": [{"name": "q", "type": "int"}]}
            ),
            "AVRO",
        ),
    )
    framed = b"\x00" + good.to_bytes(4, "big") + b"\x06ada"
    assert produce_raw(broker, topic, [framed]) == [None]
    for bad in (
        b"plain bytes",
        b"\x00" + (10**6).to_bytes(4, "big") + b"x",
        b"\x00" + other.to_bytes(4, "big") + b"\x02",
    ):
        errors = produce_raw(broker, topic, [framed, bad])
        assert errors and all(e is not None for e in errors), errors
        assert errors[0].code() == KafkaException(errors[0]).args[0].code()
        assert errors[0].name() == "INVALID_RECORD"
    # nothing of the refused batches is readable: one record only
    assert [m.value for m in broker.consume_all(topic, timeout=30)] == [framed]


def test_validation_of_large_uniform_batches_and_a_deleted_version(broker, client, url, walker):
    """Batches of one layout (the validator's fast path) are refused as the walk would refuse
    them, and a verdict given before a version's deletion is not kept after it."""
    topic = unique("uniform")
    broker.create_topic(topic, config={"confluent.value.schema.validation": "true"})
    good = client.register_schema(f"{topic}-value", Schema(json.dumps(USER_V1), "AVRO"))
    other = client.register_schema(unique("else") + "-value", Schema(json.dumps(USER_V2), "AVRO"))
    framed = b"\x00" + good.to_bytes(4, "big") + b"\x06ada"
    wrong = b"\x00" + other.to_bytes(4, "big") + b"\x06bob"
    assert produce_raw(broker, topic, [framed] * 200) == [None] * 200
    for batch in ([wrong] * 200, [framed] * 100 + [wrong] + [framed] * 99, [b"\x01" * 9] * 50):
        errors = produce_raw(broker, topic, batch)
        assert errors and all(e is not None and e.name() == "INVALID_RECORD" for e in errors)
    assert call(url, "DELETE", f"/subjects/{topic}-value/versions/1").status == 200
    errors = produce_raw(broker, topic, [framed] * 200)
    assert errors and all(e is not None and e.name() == "INVALID_RECORD" for e in errors)
    assert [m.value for m in broker.consume_all(topic, timeout=30)] == [framed] * 200


def test_json_and_protobuf_references(url):
    common = unique("common")
    money = {"type": "object", "properties": {"amount": {"type": "number"}}}
    call(
        url,
        "POST",
        f"/subjects/{common}/versions",
        {"schema": json.dumps(money), "schemaType": "JSON"},
    )
    order = {"type": "object", "properties": {"price": {"$ref": "money.json"}}}
    answer = call(
        url,
        "POST",
        f"/subjects/{unique('order')}/versions",
        {
            "schema": json.dumps(order),
            "schemaType": "JSON",
            "references": [{"name": "money.json", "subject": common, "version": 1}],
        },
    )
    assert answer.status == 200, answer.body

    proto_common = unique("proto-common")
    call(
        url,
        "POST",
        f"/subjects/{proto_common}/versions",
        {
            "schema": 'syntax = "proto3"; package shop; message Money { int64 cents = 1; }',
            "schemaType": "PROTOBUF",
        },
    )
    importing = (
        'syntax = "proto3"; package shop; import "money.proto"; message Item { Money price = 1; }'
    )
    subject = unique("proto-item")
    answer = call(
        url,
        "POST",
        f"/subjects/{subject}/versions",
        {
            "schema": importing,
            "schemaType": "PROTOBUF",
            "references": [{"name": "money.proto", "subject": proto_common, "version": 1}],
        },
    )
    assert answer.status == 200, answer.body
    # without the reference, the import does not resolve: 422
    missing = call(
        url,
        "POST",
        f"/subjects/{unique('p')}/versions",
        {"schema": importing, "schemaType": "PROTOBUF"},
    )
    assert missing.status == 422 and "money.proto" in missing.body["message"]
    # the serialized format: a base64 FileDescriptorProto that names its import
    serialized = call(url, "GET", f"/subjects/{subject}/versions/1?format=serialized").body
    import base64

    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized["schema"]))
    assert list(proto.dependency) == ["money.proto"]


def test_validation_with_the_record_name_strategies(broker, client, walker):
    by_name = unique("byname")
    broker.create_topic(
        by_name,
        config={
            "confluent.value.schema.validation": "true",
            "confluent.value.subject.name.strategy": "RecordNameStrategy",
            "confluent.key.schema.validation": "true",
            "confluent.key.subject.name.strategy": "io.confluent.kafka.serializers.subject."
            "TopicRecordNameStrategy",
        },
    )
    user = client.register_schema("User", Schema(json.dumps(USER_V1), "AVRO"))
    key_schema = {"type": "record", "name": "UserKey", "fields": [{"name": "k", "type": "int"}]}
    key_id = client.register_schema(f"{by_name}-UserKey", Schema(json.dumps(key_schema), "AVRO"))
    value = b"\x00" + user.to_bytes(4, "big") + b"\x06ada"
    key = b"\x00" + key_id.to_bytes(4, "big") + b"\x02"
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "retries": 0})
    outcomes = []
    producer.produce(by_name, key=key, value=value, on_delivery=lambda e, m: outcomes.append(e))
    producer.flush(30)
    # the key framed with the value's id: UserKey's subject does not hold it
    producer.produce(by_name, key=value, value=value, on_delivery=lambda e, m: outcomes.append(e))
    producer.flush(30)
    assert outcomes[0] is None
    assert outcomes[1] is not None and outcomes[1].name() == "INVALID_RECORD"
