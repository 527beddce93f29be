"""``valueFormat`` (avro, json, protobuf) with ``schema.registry.url``: the value's fields as
columns, read by a real Spark job from records produced by confluent-kafka's AvroSerializer,
JSONSerializer and ProtobufSerializer against the broker's own Schema Registry. Avro records
written with an older version are resolved to the latest; Kafka's columns a field's name takes
are renamed kafka_<name>; an unframed value fails the job naming its offset."""

from __future__ import annotations

import datetime
import decimal
import importlib
import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkalite.spark import values
from kafkalite.spark.options import OptionError

READING_V1 = {
    "type": "record",
    "name": "Reading",
    "namespace": "lab",
    "fields": [
        {"name": "sensor", "type": "string"},
        {"name": "value", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "timestamp", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2},
        },
    ],
}
READING_V2 = {
    **READING_V1,
    "fields": [
        *READING_V1["fields"],
        {"name": "unit", "type": {"type": "enum", "name": "Unit", "symbols": ["C", "F"]},
         "default": "C"},
        {"name": "extra", "type": {"type": "map", "values": "long"}, "default": {}},
    ],
}  # fmt: skip

T0 = datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.UTC)


@pytest.fixture(scope="module")
def registry(kafka_broker) -> SchemaRegistryClient:
    url = kafka_broker.schema_registry_url
    assert url is not None
    return SchemaRegistryClient({"url": url})


def produce(kafka, topic: str, values_: list[bytes | None]) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5})
    for i, value in enumerate(values_):
        producer.produce(topic, key=f"k{i}".encode(), value=value)
    assert producer.flush(30) == 0


def read(kspark, kafka, registry_url: str, topic: str, fmt: str):
    return (
        kspark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", fmt)
        .option("schema.registry.url", registry_url)
        .load()
    )


def avro_record(i: int) -> dict:
    return {
        "sensor": f"s{i}",
        "value": i / 2,
        "tags": [f"t{i}"] * i,
        "timestamp": T0 + datetime.timedelta(seconds=i),
        "note": None if i % 2 else f"n{i}",
        "price": decimal.Decimal(f"{i}.25"),
    }


def test_avro_values_become_columns_resolved_to_the_latest_version(
    kspark, kafka, kafka_broker, registry
):
    topic = kafka.create("avro-readings", 1)
    context = SerializationContext(topic, MessageField.VALUE)
    v1 = AvroSerializer(registry, json.dumps(READING_V1))
    old = [v1(avro_record(i), context) for i in range(3)]
    v2 = AvroSerializer(registry, json.dumps(READING_V2))
    new = [v2({**avro_record(i), "unit": "F", "extra": {"a": i}}, context) for i in range(3, 5)]
    assert old[0][1:5] != new[0][1:5]  # two ids
    produce(kafka, topic, [*old, *new, None])  # and a tombstone

    df = read(kspark, kafka, kafka_broker.schema_registry_url, topic, "avro")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("sensor", "string"), ("value", "double"), ("tags", "array<string>"),
        ("timestamp", "timestamp"), ("note", "string"), ("price", "decimal(6,2)"),
        ("unit", "string"), ("extra", "map<string,bigint>"),
        ("key", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("kafka_timestamp", "timestamp"), ("timestampType", "int"),
    ]  # fmt: skip
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert len(rows) == 6
    for i, row in enumerate(rows[:5]):
        assert (row.sensor, row.value, row.tags) == (f"s{i}", i / 2, [f"t{i}"] * i)
        assert row.note == (None if i % 2 else f"n{i}")
        assert row.price == decimal.Decimal(f"{i}.25")
        # written with v1: the defaults of the fields v2 added
        assert (row.unit, row.extra) == (("C", {}) if i < 3 else ("F", {"a": i}))
        # the session's time zone: local, as Spark gives timestamps
        assert row.timestamp == datetime.datetime.fromtimestamp(T0.timestamp() + i)
        assert bytes(row.key) == f"k{i}".encode() and row.offset == i
        assert row.kafka_timestamp is not None
    tombstone = rows[5]
    assert tombstone.sensor is None and tombstone.tags is None and bytes(tombstone.key) == b"k5"


def test_json_schema_values_become_columns(kspark, kafka, kafka_broker, registry):
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "item": {"type": "string"},
            "amount": {"type": "number"},
            "paid": {"type": "boolean"},
            "lines": {"type": "array", "items": {"type": "object",
                      "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}},
            "meta": {"type": "object"},
            "comment": {"type": ["string", "null"]},
        },
        "required": ["id"],
    }  # fmt: skip
    topic = kafka.create("json-orders", 1)
    serializer = JSONSerializer(json.dumps(schema), registry)
    context = SerializationContext(topic, MessageField.VALUE)
    orders = [
        {"id": 1, "item": "tea", "amount": 2.5, "paid": True,
         "lines": [{"sku": "a", "qty": 2}], "meta": {"via": "web", "n": 3}},
        {"id": 2, "item": "cake", "amount": 4, "paid": False, "lines": [], "comment": "late"},
    ]  # fmt: skip
    produce(kafka, topic, [serializer(o, context) for o in orders])

    df = read(kspark, kafka, kafka_broker.schema_registry_url, topic, "json")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields][:7] == [
        ("id", "bigint"), ("item", "string"), ("amount", "double"), ("paid", "boolean"),
        ("lines", "array<struct<sku:string,qty:bigint>>"), ("meta", "map<string,string>"),
        ("comment", "string"),
    ]  # fmt: skip
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [(r.id, r.item, r.amount, r.paid, r.comment) for r in rows] == [
        (1, "tea", 2.5, True, None),
        (2, "cake", 4.0, False, "late"),
    ]
    assert [(line.sku, line.qty) for line in rows[0].lines] == [("a", 2)]
    assert rows[0].meta == {"via": "web", "n": "3"} and rows[1].meta is None
    assert rows[1].lines == []


PROTO = """
syntax = "proto3";
package shop;
message Parcel {
  int64 id = 1;
  string to = 2;
  repeated int32 weights = 3;
  enum Speed { SLOW = 0; FAST = 1; }
  Speed speed = 4;
  message Address { string city = 1; }
  Address address = 5;
  map<string, int64> counts = 6;
}
"""


@pytest.fixture(scope="module")
def parcel_module(tmp_path_factory):
    where = tmp_path_factory.mktemp("proto")
    (where / "parcel.proto").write_text(PROTO)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{where}", f"--python_out={where}",
         "parcel.proto"],
        check=True,
        cwd=where,
    )  # fmt: skip
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module("parcel_pb2")
    finally:
        sys.path.remove(str(where))


def test_protobuf_values_become_columns(kspark, kafka, kafka_broker, registry, parcel_module):
    topic = kafka.create("proto-parcels", 1)
    serializer = ProtobufSerializer(
        parcel_module.Parcel, registry, {"use.deprecated.format": False}
    )
    context = SerializationContext(topic, MessageField.VALUE)
    first = parcel_module.Parcel(id=2**40, to="ada", weights=[1, 2], speed=1)
    first.address.city = "Paris"
    first.counts["x"] = 5
    second = parcel_module.Parcel(id=2, to="bob")
    produce(kafka, topic, [serializer(first, context), serializer(second, context)])

    df = read(kspark, kafka, kafka_broker.schema_registry_url, topic, "protobuf")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields][:6] == [
        ("id", "bigint"), ("to", "string"), ("weights", "array<int>"), ("speed", "string"),
        ("address", "struct<city:string>"), ("counts", "map<string,bigint>"),
    ]  # fmt: skip
    rows = sorted(df.collect(), key=lambda r: r.offset)
    one, two = rows
    assert (one.id, one.to, one.weights, one.speed) == (2**40, "ada", [1, 2], "FAST")
    assert one.address.city == "Paris" and one.counts == {"x": 5}
    assert (two.id, two.to, two.weights, two.speed, two.counts) == (2, "bob", [], "SLOW", {})


def test_an_unframed_value_fails_the_job_naming_its_offset(kspark, kafka, kafka_broker, registry):
    topic = kafka.create("avro-broken", 1)
    context = SerializationContext(topic, MessageField.VALUE)
    good = AvroSerializer(registry, json.dumps(READING_V1))(avro_record(1), context)
    produce(kafka, topic, [good, b"plain text"])
    df = read(kspark, kafka, kafka_broker.schema_registry_url, topic, "avro")
    with pytest.raises(Exception) as failed:
        df.collect()
    assert f"{topic}-0 offset 1" in str(failed.value)
    assert "not framed with a schema id" in str(failed.value)


def test_the_options_are_checked(kafka_broker):
    url = kafka_broker.schema_registry_url
    assert values.settings_of({"subscribe": "t"}) is None
    assert values.settings_of({"valueFormat": "raw", "subscribe": "t"}) is None
    settings = values.settings_of(
        {"valueformat": "AVRO", "subscribe": "t", "schema.registry.url": url + "/"}
    )
    assert settings == values.RegistrySettings("avro", url, "t-value")
    for options, fragment in [
        ({"valueFormat": "xml", "subscribe": "t"}, "valueFormat must be one of"),
        ({"valueFormat": "avro", "subscribe": "t"}, "schema.registry.url"),
        ({"valueFormat": "avro", "subscribe": "a,b", "schema.registry.url": url}, "valueSubject"),
        (
            {"valueFormat": "avro", "subscribePattern": "a.*", "schema.registry.url": url},
            "valueSubject",
        ),
        (
            {"valueFormat": "json", "subscribe": "t", "schema.registry.url": url,
             "schema.registry.basic.auth.user.info": "nocolon"},
            "user:password",
        ),
    ]:  # fmt: skip
        with pytest.raises(OptionError, match=fragment):
            values.settings_of(options)
    missing = values.settings_of(
        {"valueFormat": "avro", "valueSubject": "nothing-here", "schema.registry.url": url}
    )
    with pytest.raises(OptionError, match="40401|not found"):
        values.latest_schema(missing)


def test_a_registry_asking_for_basic_auth(kspark, tmp_path):
    """The registry behind HTTP basic (the admin API's authentication, a PLAIN user):
    schema.registry.basic.auth.user.info carries the user; without it planning fails with the
    registry's 401."""
    from kafkalite.testing import Broker
    from tests.spark.conftest import Kafka

    users = {"admin": "admin-secret", "alice": "alice-secret"}
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        + " ".join(f'user_{u}="{p}"' for u, p in users.items())
        + ";"
    )
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "admin.authentication": "basic",
    }
    with Broker(config, data_dir=tmp_path / "b") as broker:
        url = broker.schema_registry_url
        client = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:alice-secret"})
        kafka = Kafka(broker.bootstrap_servers)
        topic = kafka.create("secured-readings", 1)
        context = SerializationContext(topic, MessageField.VALUE)
        produce(
            kafka, topic, [AvroSerializer(client, json.dumps(READING_V1))(avro_record(2), context)]
        )

        def reader(**extra):
            r = (
                kspark.read.format("kafkalite")
                .option("kafka.bootstrap.servers", kafka.bootstrap)
                .option("subscribe", topic)
                .option("valueFormat", "avro")
                .option("schema.registry.url", url)
            )
            for key, value in extra.items():
                r = r.option(key, value)
            return r

        rows = reader(**{"schema.registry.basic.auth.user.info": "alice:alice-secret"}).load()
        assert [(r.sensor, r.tags) for r in rows.collect()] == [("s2", ["t2", "t2"])]
        with pytest.raises(Exception, match="401"):
            reader().load()
