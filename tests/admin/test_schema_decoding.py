"""admin/schemas.py's reading of Confluent's wire format, without a broker: the Protobuf message
index list against confluent-kafka's own encoder (hypothesis), the frame, Avro values made
JSON, and decoders built from the registry's parsed schemas (schema_registry.formats)."""

from __future__ import annotations

import io
import json
import struct

import fastavro
import pytest
from confluent_kafka.schema_registry.common.serde import SchemaId
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.admin.schemas import Decoder, framed_id, jsonable, message_indexes, pretty
from kafkalite.schema_registry.formats import parse


@given(st.lists(st.integers(min_value=0, max_value=2**31 - 1), min_size=1, max_size=20))
def test_message_indexes_are_confluents(indexes: list[int]) -> None:
    buf = io.BytesIO()
    if indexes == [0]:
        buf.write(b"\x00")  # confluent-kafka's shortcut for the first message
    else:
        SchemaId._encode_varints(buf, indexes, zigzag=True)
    buf.write(b"payload")
    buf.seek(0)
    assert message_indexes(buf) == indexes
    assert buf.read() == b"payload"


@given(st.binary(max_size=12))
def test_message_indexes_never_read_past_garbage_quietly(data: bytes) -> None:
    try:
        found = message_indexes(io.BytesIO(data))
    except ValueError:
        return
    assert 1 <= len(found) <= 100


def test_framed_id() -> None:
    assert framed_id(b"\x00" + struct.pack(">I", 258) + b"x") == 258
    assert framed_id(b"\x00\x00\x00\x01") is None  # too short
    assert framed_id(b"\x01\x00\x00\x00\x01x") is None  # not magic byte 0
    assert framed_id(None) is None


def test_avro_values_become_json() -> None:
    import datetime
    import decimal
    import uuid

    value = {
        "b": b"\x00\xff",
        "d": decimal.Decimal("1.50"),
        "u": uuid.UUID(int=1),
        "t": datetime.date(2026, 1, 2),
        "l": [1, {"x": b"a"}],
    }
    assert json.loads(json.dumps(jsonable(value))) == {
        "b": "\x00\xff",
        "d": "1.50",
        "u": str(uuid.UUID(int=1)),
        "t": "2026-01-02",
        "l": [1, {"x": "a"}],
    }


def test_pretty_indents_json_schemas_only() -> None:
    assert pretty("AVRO", '{"type":"string"}') == '{\n  "type": "string"\n}'
    assert pretty("PROTOBUF", "message A {}") == "message A {}"
    assert pretty("JSON", "{not json") == "{not json"


def test_avro_decoder_reads_a_record_and_refuses_trailing_bytes() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "n", "type": "int"}, {"name": "s", "type": "string"}],
    }
    decoder = Decoder(1, parse("AVRO", json.dumps(schema)), ["t-value"])
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), {"n": 3, "s": "é"})
    assert decoder.decode(out.getvalue()) == {"n": 3, "s": "é"}
    with pytest.raises(ValueError):
        decoder.decode(out.getvalue() + b"\x00")
    assert decoder.subject_for("t", False) == "t-value"
    assert decoder.subject_for("other", True) == "t-value"


def test_protobuf_decoder_follows_nested_message_indexes() -> None:
    # message A { int32 a = 1; }  message B { message Inner { string name = 1; } Inner inner = 1; }
    # given as a base64 FileDescriptorProto (as confluent-kafka's serializer registers it), so
    # no protoc process runs in the unit tier
    import base64

    from google.protobuf import descriptor_pb2, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name="shapes.proto", syntax="proto3")
    field = descriptor_pb2.FieldDescriptorProto
    a = proto.message_type.add(name="A")
    a.field.add(name="a", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    b = proto.message_type.add(name="B")
    inner = b.nested_type.add(name="Inner")
    inner.field.add(name="name", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    b.field.add(
        name="inner",
        number=1,
        type=field.TYPE_MESSAGE,
        type_name=".B.Inner",
        label=field.LABEL_OPTIONAL,
    )
    text = base64.b64encode(proto.SerializeToString()).decode()
    decoder = Decoder(2, parse("PROTOBUF", text), ["p-value"])
    message = message_factory.GetMessageClass(decoder._message((1, 0)))(name="x")
    # [1, 0]: the first message nested in the second top-level one (zigzag: 2 -> 4, 1 -> 2)
    assert decoder.decode(bytes([4, 2, 0]) + message.SerializeToString()) == {"name": "x"}
    outer = message_factory.GetMessageClass(decoder._message((1,)))()
    outer.inner.name = "y"
    assert decoder.decode(bytes([2, 2]) + outer.SerializeToString()) == {"inner": {"name": "y"}}
    # a lone 0: the first message
    assert decoder.decode(b"\x00" + b"\x08\x05") == {"a": 5}
    with pytest.raises(ValueError):
        decoder.decode(bytes([2, 10]))  # no message at index 5
