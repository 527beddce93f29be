"""The console's view of the Schema Registry: the registry of the broker serving the admin API,
read in process (its materialised view of `_schemas`, the one its own REST API answers from),
and records framed for it decoded with their schemas.

Confluent's wire format: magic byte 0, the schema id (4 bytes, big-endian), then for Protobuf
the message index list (zigzag varints: a count then the indexes, a lone 0 meaning [0]), then
the payload: Avro's binary encoding (decoded with fastavro), a JSON document (JSON Schema), or
a Protobuf message (decoded with the protobuf package's descriptors, built from the registered
.proto and its references).

Invariants: decoding never raises to the record browser. Anything not framed, an id the
registry does not hold, a payload its schema cannot read: the bytes are shown as before
(browse.decoded). Schemas are parsed by the registry (in a worker thread, cached by id);
the readers built from them are cached here by id, so a page of records of one schema costs
one lookup.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import io
import json
import struct
import uuid
from collections.abc import Iterable
from typing import Any

import structlog

log = structlog.get_logger("kafkalite.admin")

MAGIC = 0
MAX_CACHED = 1000
"""Decoders kept by id (ids never change their schema); more and the cache starts afresh."""
MAX_INDEXES = 100
"""Longer message index lists are not a real schema's: the bytes are shown unread."""
ENCODING = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json-schema"}


def registry_of(server: Any) -> Any:
    """The running Registry of this broker (schema_registry/registry.py), or None when its
    listener is disabled or did not start."""
    found = getattr(server, "schema_registry", None)
    return getattr(found, "registry", None) if found is not None else None


def framed_id(data: bytes | None) -> int | None:
    """The schema id of a record framed for the registry, else None."""
    if data is None or len(data) < 5 or data[0] != MAGIC:
        return None
    return int(struct.unpack(">I", data[1:5])[0])


def pretty(schema_type: str, text: str) -> str:
    """A schema's text for reading: JSON (Avro, JSON Schema) indented; .proto as stored."""
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), indent=2)
        except (ValueError, RecursionError):
            return text
    return text


def jsonable(value: Any) -> Any:
    """Decoded Avro values as JSON: bytes as Avro's JSON encoding does (one code point per
    byte), decimals, times and UUIDs as strings."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("latin-1")
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    return value


def _varint(buf: io.BytesIO) -> int:
    value = shift = 0
    while True:
        byte = buf.read(1)
        if not byte:
            raise ValueError("the message index list ends early")
        value |= (byte[0] & 0x7F) << shift
        shift += 7
        if not byte[0] & 0x80:
            return (value >> 1) ^ -(value & 1)  # zigzag
        if shift > 63:
            raise ValueError("a message index is too long")


def message_indexes(buf: io.BytesIO) -> list[int]:
    count = _varint(buf)
    if count == 0:
        return [0]
    if not 0 < count <= MAX_INDEXES:
        raise ValueError(f"a message index list of {count}")
    return [_varint(buf) for _ in range(count)]


class Decoder:
    """Reads one schema's framed payloads (built from the registry's parsed schema)."""

    def __init__(self, schema_id: int, parsed: Any, subjects: list[str]) -> None:
        self.schema_id = schema_id
        self.schema_type = parsed.schema_type
        self.subjects = subjects
        self._reader: Any = None
        self._classes: dict[tuple[int, ...], Any] = {}
        if parsed.schema_type == "AVRO":
            import copy

            import fastavro

            self._reader = fastavro.parse_schema(
                json.loads(parsed.text), named_schemas=copy.deepcopy(parsed.named)
            )
        elif parsed.schema_type == "PROTOBUF":
            from google.protobuf import descriptor_pool

            pool = descriptor_pool.DescriptorPool()
            added: set[str] = set()

            def add(name: str, proto: Any) -> None:
                if name in added:
                    return
                added.add(name)
                for dep in proto.dependency:
                    if dep in parsed.files:
                        add(dep, parsed.files[dep])
                    elif dep.startswith("google/protobuf/") and dep not in added:
                        added.add(dep)
                        pool.AddSerializedFile(well_known_file(dep))
                pool.Add(proto)

            add(parsed.proto.name, parsed.proto)
            self._file = pool.FindFileByName(parsed.proto.name)

    def subject_for(self, topic: str, is_key: bool) -> str | None:
        """The topic's own subject (TopicNameStrategy) when the schema is registered under it,
        else the first subject it is registered under."""
        own = f"{topic}-{'key' if is_key else 'value'}"
        if own in self.subjects:
            return own
        return self.subjects[0] if self.subjects else None

    def decode(self, payload: bytes) -> Any:
        """The value of `payload` (after the 5-byte frame) as JSON data."""
        if self.schema_type == "AVRO":
            import fastavro

            buf = io.BytesIO(payload)
            value = fastavro.schemaless_reader(buf, self._reader, None)
            if buf.tell() != len(payload):
                raise ValueError("bytes left after the Avro value")
            return jsonable(value)
        if self.schema_type == "JSON":
            return json.loads(payload)
        from google.protobuf import json_format, message_factory

        buf = io.BytesIO(payload)
        indexes = tuple(message_indexes(buf))
        cls = self._classes.get(indexes)
        if cls is None:
            descriptor = self._message(indexes)
            cls = message_factory.GetMessageClass(descriptor)
            self._classes[indexes] = cls
        message = cls()
        message.ParseFromString(buf.read())
        return json_format.MessageToDict(message, preserving_proto_field_name=True)

    def _message(self, indexes: tuple[int, ...]) -> Any:
        types = list(self._file.message_types_by_name.values())
        descriptor = None
        for index in indexes:
            if not 0 <= index < len(types):
                raise ValueError(f"no message at index {index}")
            descriptor = types[index]
            types = list(descriptor.nested_types)
        return descriptor


class SchemaDecoders:
    """Decoders by schema id for one request, from the registry's view (ids not held: None)."""

    def __init__(self, registry: Any, cache: dict[int, Decoder | None]) -> None:
        self.registry = registry
        self.cache = cache

    async def prepare(self, ids: Iterable[int]) -> None:
        wanted = sorted({i for i in ids if i not in self.cache})
        if not wanted:
            return
        if len(self.cache) + len(wanted) > MAX_CACHED:
            self.cache.clear()
        try:
            view = await self.registry.view()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the registry cannot read `_schemas` now: bytes shown
            log.info("schema registry view not available for decoding", error=repr(e))
            return
        for schema_id in wanted:
            if schema_id not in view.schemas:
                continue  # not cached: it may be registered later
            try:
                parsed = await self.registry.parsed(view, schema_id)
                subjects = sorted({s for s, _ in view.usages(schema_id, deleted=True)})
                self.cache[schema_id] = Decoder(schema_id, parsed, subjects)
            except Exception as e:  # a stored schema this build cannot read: bytes shown
                log.info("schema not usable for decoding", schema_id=schema_id, error=repr(e))
                self.cache[schema_id] = None

    def shown(self, data: bytes | None, topic: str, is_key: bool) -> dict[str, Any] | None:
        """`data` decoded with its schema as browse.decoded shows it, else None."""
        from kafkalite.admin.browse import MAX_SHOWN_BYTES

        schema_id = framed_id(data)
        decoder = self.cache.get(schema_id) if schema_id is not None else None
        if decoder is None or data is None:
            return None
        try:
            value = decoder.decode(data[5:])
            text = json.dumps(value, ensure_ascii=False)
        except Exception:  # not this schema's bytes after all: shown as bytes
            return None
        truncated = len(text) > MAX_SHOWN_BYTES
        return {
            "encoding": ENCODING[decoder.schema_type],
            "text": text[:MAX_SHOWN_BYTES],
            "size": len(data),
            "truncated": truncated,
            "schema_id": schema_id,
            "subject": decoder.subject_for(topic, is_key),
        }


def well_known_file(name: str) -> bytes:
    """The serialized descriptor of google/protobuf/`x`.proto, from the protobuf package."""
    import importlib

    stem = name.removeprefix("google/protobuf/").removesuffix(".proto").replace("/", ".")
    return importlib.import_module(f"google.protobuf.{stem}_pb2").DESCRIPTOR.serialized_pb
