"""Decoding values with a Schema Registry (``valueFormat`` = ``avro``, ``json`` or ``protobuf``,
with ``schema.registry.url``): a framed value's fields become columns.

Values are framed as Confluent's serializers frame them: magic byte 0, a 4-byte big-endian
schema id, (Protobuf: the message indexes,) then the encoded record. The columns come from the
subject's latest version when the query is planned (the subject is ``valueSubject``, default
``<topic>-value`` of the one subscribed topic), as Spark types:

- Avro: boolean, int, long, float, double, string, bytes/fixed (binary), enum (string), records
  (structs), arrays, maps, a union of null and one type (that type, nullable); logical types
  date, timestamp-millis/-micros (timestamp), local-timestamp-* (timestamp_ntz), decimal,
  uuid (string); any other union is a string holding its value as JSON. A value written with
  another version's id is decoded with its own writer schema and resolved to the planned one
  (Avro's schema resolution: added fields take their defaults, removed ones are dropped);
- JSON Schema: an object's properties in order; string, integer (bigint), number (double),
  boolean, arrays, objects with properties (structs), objects without (map of string to the
  JSON text); anything else (``$ref``, ``oneOf``...) a string holding the JSON. Fields are taken
  by name from whatever id a value carries;
- Protobuf: the first message of the schema (or the one the message indexes name), fields as
  their protobuf types (int32/sint32/... int, 64-bit bigint, float, double, bool, string,
  bytes, enums as their names, messages structs, repeated arrays, maps).

Kafka's own columns (key, topic, partition, offset, timestamp, timestampType, headers) follow the
value's fields; one whose name a field takes is renamed ``kafka_<name>``. A null value gives
null fields; a value that is not framed, or names an id the registry does not have, fails the
task with the offset named. Registry answers are cached per process (schemas by id never
change).
"""

from __future__ import annotations

import base64
import io
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import options as opt
from .options import OptionError

FORMATS = ("avro", "json", "protobuf")
KAFKA_COLUMNS = ("key", "topic", "partition", "offset", "timestamp", "timestampType", "headers")
TIMEOUT_S = 30.0


class DecodeError(RuntimeError):
    """A value that cannot be decoded (unframed, an unknown id, bytes its schema does not
    read); the message names the record."""


@dataclass(frozen=True)
class RegistrySettings:
    """What the options say about decoding values (None: raw bytes, Spark's schema)."""

    value_format: str
    url: str
    subject: str
    user_info: str | None = None

    def headers(self) -> dict[str, str]:
        out = {"Accept": "application/vnd.schemaregistry.v1+json"}
        if self.user_info:
            token = base64.b64encode(self.user_info.encode()).decode("ascii")
            out["Authorization"] = f"Basic {token}"
        return out


def settings_of(options: Mapping[str, str]) -> RegistrySettings | None:
    """``valueFormat`` and the registry options, checked (OptionError names the bad one)."""
    value_format = opt.get(options, "valueFormat")
    if value_format is None or value_format.strip().lower() in ("", "raw", "binary"):
        return None
    value_format = value_format.strip().lower()
    if value_format not in FORMATS:
        raise OptionError(
            f"option valueFormat must be one of {', '.join(FORMATS)} (or raw), got {value_format!r}"
        )
    url = opt.get(options, "schema.registry.url")
    if not url:
        raise OptionError(f"valueFormat={value_format} needs option schema.registry.url")
    subject = opt.get(options, "valueSubject")
    if not subject:
        topics = opt.get(options, "subscribe")
        names = [t.strip() for t in (topics or "").split(",") if t.strip()]
        if len(names) != 1:
            raise OptionError(
                f"valueFormat={value_format} reads the columns of one subject: set option "
                "valueSubject, or subscribe to one topic (its <topic>-value subject)"
            )
        subject = f"{names[0]}-value"
    user_info = opt.get(options, "schema.registry.basic.auth.user.info")
    if user_info is not None and ":" not in user_info:
        raise OptionError("option schema.registry.basic.auth.user.info must be user:password")
    return RegistrySettings(value_format, url.split(",")[0].rstrip("/"), subject, user_info)


# ------------------------------------------------------------------------------ the registry

_cache: dict[tuple[str, str], Any] = {}
_cache_lock = threading.Lock()


def _get(settings: RegistrySettings, path: str, *, cached: bool) -> Any:
    key = (settings.url, path)
    if cached:
        with _cache_lock:
            if key in _cache:
                return _cache[key]
    request = urllib.request.Request(settings.url + path, headers=settings.headers())
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as e:
        try:
            body = json.loads(e.read())
            message = body.get("message", "") if isinstance(body, dict) else str(body)
        except ValueError:
            message = ""
        raise DecodeError(
            f"the schema registry at {settings.url} answered {e.code} for {path}: {message}"
        ) from None
    except OSError as e:
        raise DecodeError(f"the schema registry at {settings.url} cannot be reached: {e}") from None
    if cached:
        with _cache_lock:
            _cache[key] = answer
    return answer


@dataclass(frozen=True)
class WriterSchema:
    schema_id: int
    schema_type: str  # AVRO, JSON, PROTOBUF
    text: str
    references: tuple[tuple[str, str, int], ...]  # (name, subject, version)


def _schema_of(answer: Mapping[str, Any], schema_id: int) -> WriterSchema:
    refs = tuple(
        (str(r["name"]), str(r["subject"]), int(r["version"]))
        for r in answer.get("references") or ()
    )
    return WriterSchema(
        schema_id, str(answer.get("schemaType") or "AVRO"), str(answer["schema"]), refs
    )


def latest_schema(settings: RegistrySettings) -> WriterSchema:
    """The subject's latest version (not cached: planning sees the registry as it is now)."""
    subject = urllib.parse.quote(settings.subject, safe="")
    try:
        answer = _get(settings, f"/subjects/{subject}/versions/latest", cached=False)
    except DecodeError as e:
        raise OptionError(f"valueFormat: {e}") from None
    return _schema_of(answer, int(answer["id"]))


def schema_by_id(settings: RegistrySettings, schema_id: int) -> WriterSchema:
    return _schema_of(_get(settings, f"/schemas/ids/{schema_id}", cached=True), schema_id)


def _reference(settings: RegistrySettings, subject: str, version: int, fmt: str = "") -> Any:
    path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}{fmt}"
    return _get(settings, path, cached=True)


# ------------------------------------------------------------------------------ Spark types


def value_fields(settings: RegistrySettings, schema: WriterSchema) -> list[Any]:
    """The StructFields of the planned schema's record."""
    from pyspark.sql.types import StructType

    if settings.value_format == "avro":
        kind, spark_type = "AVRO", _avro_type(_avro_parsed(settings, schema), set())
    elif settings.value_format == "json":
        kind, spark_type = "JSON", _json_type(json.loads(schema.text))
    else:
        kind, spark_type = "PROTOBUF", _proto_struct(_proto_message(settings, schema, None))
    if schema.schema_type != kind:
        raise OptionError(
            f"valueFormat={settings.value_format} but subject {settings.subject}'s latest schema "
            f"is {schema.schema_type}"
        )
    if not isinstance(spark_type, StructType):
        raise OptionError(
            f"valueFormat={settings.value_format}: subject {settings.subject}'s schema is not a "
            "record (an Avro record, a JSON object with properties, a Protobuf message)"
        )
    return list(spark_type.fields)


def decoded_schema(base: Any, fields: list[Any]) -> Any:
    """Spark's Kafka schema ``base`` with ``value`` replaced by the value's fields (first)."""
    from pyspark.sql.types import StructField, StructType

    taken = {f.name.lower() for f in fields}
    kafka = [
        StructField(f"kafka_{f.name}" if f.name.lower() in taken else f.name, f.dataType)
        for f in base.fields
        if f.name != "value"
    ]
    return StructType([*fields, *kafka])


def _avro_parsed(settings: RegistrySettings, schema: WriterSchema) -> Any:
    """The writer schema parsed by fastavro, its references' named types known."""
    import fastavro

    named: dict[str, Any] = {}
    for _name, subject, version in schema.references:
        ref = _reference(settings, subject, version)
        fastavro.parse_schema(json.loads(ref["schema"]), named_schemas=named)
    return fastavro.parse_schema(json.loads(schema.text), named_schemas=named)


def _avro_type(schema: Any, seen: set[str]) -> Any:
    from pyspark.sql import types as T

    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(branches) == 1:
            return _avro_type(branches[0], seen)
        return T.StringType()  # any other union: its value as JSON text
    if isinstance(schema, str):
        primitive = {
            "null": T.StringType(),
            "boolean": T.BooleanType(),
            "int": T.IntegerType(),
            "long": T.LongType(),
            "float": T.FloatType(),
            "double": T.DoubleType(),
            "bytes": T.BinaryType(),
            "string": T.StringType(),
        }
        if schema in primitive:
            return primitive[schema]
        raise OptionError(f"valueFormat=avro: the named type {schema} is not known")
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return T.DecimalType(int(schema["precision"]), int(schema.get("scale", 0)))
    if logical == "date" and kind == "int":
        return T.DateType()
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return T.TimestampType()
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return T.TimestampNTZType()
    if kind == "record" or kind == "error":
        name = schema.get("name", "")
        if name in seen:
            raise OptionError(f"valueFormat=avro: the recursive record {name} has no Spark type")
        inner = seen | {name}
        return T.StructType(
            [T.StructField(f["name"], _avro_type(f["type"], inner)) for f in schema["fields"]]
        )
    if kind == "enum":
        return T.StringType()
    if kind == "fixed":
        return T.BinaryType()
    if kind == "array":
        return T.ArrayType(_avro_type(schema["items"], seen))
    if kind == "map":
        return T.MapType(T.StringType(), _avro_type(schema["values"], seen))
    return _avro_type(kind, seen)


def _json_type(schema: Any) -> Any:
    from pyspark.sql import types as T

    if not isinstance(schema, dict):
        return T.StringType()
    kind = schema.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        kind = others[0] if len(others) == 1 else None
    if kind == "object":
        properties = schema.get("properties")
        if isinstance(properties, dict) and properties:
            return T.StructType(
                [T.StructField(name, _json_type(sub)) for name, sub in properties.items()]
            )
        return T.MapType(T.StringType(), T.StringType())
    if kind == "array":
        return T.ArrayType(_json_type(schema.get("items", {})))
    simple = {
        "string": T.StringType(),
        "integer": T.LongType(),
        "number": T.DoubleType(),
        "boolean": T.BooleanType(),
    }
    return simple.get(kind, T.StringType()) if isinstance(kind, str) else T.StringType()


def _proto_message(settings: RegistrySettings, schema: WriterSchema, indexes: Any) -> Any:
    """The message descriptor (the first message, or the one `indexes` names) of a Protobuf
    schema, built from the registry's serialized descriptors (no protoc needed)."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(answer: Mapping[str, Any], name: str | None) -> Any:
        for ref in answer.get("references") or ():
            if ref["name"] in added or ref["name"].startswith("google/protobuf/"):
                continue
            sub = _reference(settings, ref["subject"], ref["version"], "?format=serialized")
            add(sub, ref["name"])
        proto = descriptor_pb2.FileDescriptorProto()
        proto.ParseFromString(base64.b64decode(answer["schema"]))
        if name:
            proto.name = name
        for dep in proto.dependency:
            if dep.startswith("google/protobuf/"):
                _add_well_known(pool, dep, added)
        if proto.name not in added:
            pool.Add(proto)
            added.add(proto.name)
        return proto

    answer = _get(settings, f"/schemas/ids/{schema.schema_id}?format=serialized", cached=True)
    main = add(answer, None)
    file = pool.FindFileByName(main.name)
    path = list(indexes) if indexes else [0]
    message = file.message_types_by_name[main.message_type[path[0]].name]
    for index in path[1:]:
        message = message.nested_types[index]
    return message


def _add_well_known(pool: Any, name: str, added: set[str]) -> None:
    import importlib

    from google.protobuf import descriptor_pb2

    if name in added:
        return
    module = importlib.import_module(
        "google.protobuf." + name.removeprefix("google/protobuf/").removesuffix(".proto") + "_pb2"
    )
    proto = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(proto)
    for dep in proto.dependency:
        _add_well_known(pool, dep, added)
    pool.Add(proto)
    added.add(name)


def _proto_struct(message: Any) -> Any:
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, _proto_field_type(f)) for f in message.fields])


def _proto_field_type(field: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as F
    from pyspark.sql import types as T

    if field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
        key, value = (
            field.message_type.fields_by_name["key"],
            field.message_type.fields_by_name["value"],
        )
        return T.MapType(_proto_scalar(key), _proto_scalar(value))
    inner = _proto_scalar(field)
    is_repeated = getattr(field, "is_repeated", None)
    repeated = is_repeated if is_repeated is not None else field.label == F.LABEL_REPEATED
    return T.ArrayType(inner) if repeated else inner


def _proto_scalar(field: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as F
    from pyspark.sql import types as T

    if field.type == F.TYPE_MESSAGE:
        return _proto_struct(field.message_type)
    if field.type == F.TYPE_ENUM:
        return T.StringType()
    return {
        F.CPPTYPE_INT32: T.IntegerType(),
        F.CPPTYPE_UINT32: T.LongType(),
        F.CPPTYPE_INT64: T.LongType(),
        F.CPPTYPE_UINT64: T.DecimalType(20, 0),
        F.CPPTYPE_FLOAT: T.FloatType(),
        F.CPPTYPE_DOUBLE: T.DoubleType(),
        F.CPPTYPE_BOOL: T.BooleanType(),
        F.CPPTYPE_STRING: T.BinaryType() if field.type == F.TYPE_BYTES else T.StringType(),
    }[field.cpp_type]


# ------------------------------------------------------------------------------ decoding


class ValueDecoder:
    """Decodes one task's values into the planned fields (made on the executor)."""

    def __init__(self, settings: RegistrySettings, planned: WriterSchema, fields: list[Any]):
        self.settings = settings
        self.planned = planned
        self.fields = fields
        self.names = [f.name for f in fields]
        self._readers: dict[Any, Callable[[memoryview], Any]] = {}
        self._convert = [_converter(f.dataType) for f in fields]

    def columns(self, values: Any, where: Callable[[int], str]) -> list[list[Any]]:
        """One list per field for the binary arrow array `values`; `where(i)` names record i
        in an error."""
        out: list[list[Any]] = [[] for _ in self.fields]
        for i, value in enumerate(values.to_pylist()):
            if value is None:
                for column in out:
                    column.append(None)
                continue
            try:
                record = self._decode(value)
            except DecodeError as e:
                raise DecodeError(f"{where(i)}: {e}") from None
            except Exception as e:  # the library's own errors: bytes the schema does not read
                raise DecodeError(
                    f"{where(i)}: the value cannot be read as {self.settings.value_format}: "
                    f"{type(e).__name__}: {e}"
                ) from None
            if not isinstance(record, dict):
                record = {}
            for column, name, convert in zip(out, self.names, self._convert, strict=True):
                column.append(convert(record.get(name)))
        return out

    def _decode(self, value: bytes) -> Any:
        if len(value) < 5 or value[0] != 0:
            raise DecodeError("the value is not framed with a schema id (magic byte 0 and an id)")
        schema_id = int.from_bytes(value[1:5], "big")
        body = memoryview(value)[5:]
        if self.settings.value_format == "avro":
            return self._reader(schema_id)(body)
        if self.settings.value_format == "json":
            return json.loads(bytes(body))
        indexes, at = _message_indexes(body)
        return self._reader((schema_id, tuple(indexes)))(body[at:])

    def _reader(self, key: Any) -> Callable[[memoryview], Any]:
        reader = self._readers.get(key)
        if reader is None:
            reader = self._readers[key] = self._new_reader(key)
        return reader

    def _new_reader(self, key: Any) -> Callable[[memoryview], Any]:
        if self.settings.value_format == "avro":
            import fastavro

            writer = _avro_parsed(self.settings, schema_by_id(self.settings, key))
            reader = _avro_parsed(self.settings, self.planned)

            def read_avro(body: memoryview) -> Any:
                return fastavro.schemaless_reader(io.BytesIO(body), writer, reader)

            return read_avro
        from google.protobuf import json_format, message_factory

        schema_id, indexes = key
        descriptor = _proto_message(self.settings, schema_by_id(self.settings, schema_id), indexes)
        cls = message_factory.GetMessageClass(descriptor)

        def read_protobuf(body: memoryview) -> Any:
            message = cls()
            message.ParseFromString(bytes(body))
            return json_format.MessageToDict(
                message,
                preserving_proto_field_name=True,
                always_print_fields_with_no_presence=True,
            )

        return read_protobuf


def _message_indexes(body: memoryview) -> tuple[list[int], int]:
    """Confluent's Protobuf framing after the id: a zigzag varint count, then that many zigzag
    varint indexes (a single 0: the first message)."""
    at = 0

    def varint() -> int:
        nonlocal at
        shift = result = 0
        while True:
            b = body[at]
            at += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    count = varint()
    return [varint() for _ in range(count)], at


def _converter(spark_type: Any) -> Callable[[Any], Any]:
    """Python value (as fastavro, json or MessageToDict gives it) -> the column's value."""
    import datetime
    import decimal
    import uuid

    from pyspark.sql import types as T

    if isinstance(spark_type, T.StructType):
        subs = [(f.name, _converter(f.dataType)) for f in spark_type.fields]
        return lambda v: (
            {name: convert(v.get(name)) for name, convert in subs} if isinstance(v, dict) else None
        )
    if isinstance(spark_type, T.ArrayType):
        item = _converter(spark_type.elementType)
        return lambda v: [item(x) for x in v] if isinstance(v, list) else None
    if isinstance(spark_type, T.MapType):
        inner = _converter(spark_type.valueType)
        key = _converter(spark_type.keyType)
        return lambda v: {key(k): inner(x) for k, x in v.items()} if isinstance(v, dict) else None
    if isinstance(spark_type, T.StringType):

        def text(v: Any) -> Any:
            if v is None or isinstance(v, str):
                return v
            if isinstance(v, uuid.UUID):
                return str(v)
            return json.dumps(v, default=str, separators=(",", ":"))

        return text
    if isinstance(spark_type, T.BinaryType):
        return lambda v: base64.b64decode(v) if isinstance(v, str) else v  # protobuf's JSON
    if isinstance(spark_type, (T.IntegerType, T.LongType)):
        return lambda v: int(v) if v is not None else None  # protobuf's JSON: 64-bit as text
    if isinstance(spark_type, (T.FloatType, T.DoubleType)):
        return lambda v: float(v) if v is not None else None
    if isinstance(spark_type, T.DecimalType):
        return lambda v: decimal.Decimal(v) if v is not None else None
    if isinstance(spark_type, T.TimestampType):
        return lambda v: v.astimezone(datetime.UTC) if isinstance(v, datetime.datetime) else None
    return lambda v: v
