"""Schema validation on produce (Confluent Server's `confluent.key.schema.validation` and
`confluent.value.schema.validation` topic configs), the produce handler's RecordValidator
(apis/produce.py), injected by the composition root.

A record's key (or value) on a validated topic must be framed as Confluent's serializers frame
it: magic byte 0, then a 4-byte big-endian schema id, and that id must be registered (not
deleted) under the subject the topic's `confluent.{key,value}.subject.name.strategy` names:
TopicNameStrategy `<topic>-key|value` (the default), RecordNameStrategy the record's full name
(an Avro record's, a Protobuf file's first message's, a JSON Schema's `title`),
TopicRecordNameStrategy `<topic>-<name>`. A null key or value (a tombstone) passes.

Refusals are per record (KIP-467 record_errors, indexed across the partition's batches) and
refuse the whole partition's data, as Kafka refuses a batch. Only topics with validation on pay
anything: `applies` is one dict lookup; their batches are decoded (decompressed) once here.
An unknown id makes the view sync once (a schema registered on another broker a moment ago).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkalite.protocol.compression import decompress
from kafkalite.protocol.errors import CorruptRecordError, RecordError
from kafkalite.protocol.records import (
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    parse_batch_header,
)
from kafkalite.schema_registry.errors import RegistryError
from kafkalite.schema_registry.formats import AVRO, JSON, PROTOBUF
from kafkalite.schema_registry.registry import Registry

MAGIC = 0


class SchemaValidator:
    def __init__(self, registry: Registry, config_of: Callable[[str], Any]) -> None:
        """`config_of(topic)`: the topic's LogConfig (with the confluent.* settings)."""
        self.registry = registry
        self.config_of = config_of
        self._names: dict[int, str | None] = {}

    def applies(self, topic: str) -> bool:
        config = self.config_of(topic)
        return bool(
            config.confluent_value_schema_validation or config.confluent_key_schema_validation
        )

    async def validate(self, topic: str, records: Any) -> list[RecordError]:
        try:
            return await self._validate(topic, records)
        except RegistryError as e:
            # the registry cannot answer (its topic unreachable, a stored schema unreadable):
            # nothing on a validated topic is written unchecked
            return [RecordError(0, f"the schema registry cannot check the records: {e.message}")]

    async def _validate(self, topic: str, records: Any) -> list[RecordError]:
        config = self.config_of(topic)
        checks = []
        if config.confluent_key_schema_validation:
            checks.append(("key", config.confluent_key_subject_name_strategy))
        if config.confluent_value_schema_validation:
            checks.append(("value", config.confluent_value_subject_name_strategy))
        try:
            columns = {part: record_prefixes(records, part) for part, _ in checks}
        except Exception:  # a damaged batch: the append refuses it with its own error
            return []
        await self.registry.store.start()
        synced = False
        while True:
            refused: list[RecordError] = []
            unknown = False
            view = self.registry.store.view
            for part, strategy in checks:
                column = columns[part]
                # one verdict per distinct 5-byte prefix (magic byte and id): a batch holds few
                # ids, so the per-record work is the walk that found the prefixes
                verdicts = {}
                for prefix in set(column):
                    if prefix is not None:
                        verdicts[prefix] = await self._check(view, topic, part, strategy, prefix)
                if all(v[0] is None for v in verdicts.values()):
                    continue
                for index, prefix in enumerate(column):
                    if prefix is None:
                        continue
                    problem, missing = verdicts[prefix]
                    if problem is not None:
                        refused.append(RecordError(index, problem))
                        unknown = unknown or missing
            if not unknown or synced:
                refused.sort(key=lambda e: e.batch_index)
                return _first_per_record(refused)
            await self.registry.view()  # something unknown: catch up once and look again
            synced = True

    async def _check(
        self, view: Any, topic: str, part: str, strategy: str, data: bytes
    ) -> tuple[str | None, bool]:
        """(why a key or value starting with `data` (its first 5 bytes) is refused or None,
        whether the view may just be behind)."""
        if len(data) < 5 or data[0] != MAGIC:
            return (
                f"the {part} is not framed with a schema id (magic byte 0 and a 4-byte id)",
                False,
            )
        schema_id = int.from_bytes(data[1:5], "big")
        if schema_id not in view.schemas:
            return f"the {part}'s schema id {schema_id} is not a known schema", True
        short = strategy.rsplit(".", 1)[-1]
        if short == "TopicNameStrategy":
            subject = f"{topic}-{part}"
        else:
            name = await self._record_name(view, schema_id)
            if name is None:
                return f"the {part}'s schema {schema_id} has no record name for {short}", False
            subject = name if short == "RecordNameStrategy" else f"{topic}-{name}"
        if not any(
            v.id == schema_id and not v.deleted for v in view.subjects.get(subject, {}).values()
        ):
            return (
                f"the {part}'s schema id {schema_id} is not registered under subject {subject}",
                True,
            )
        return None, False

    async def _record_name(self, view: Any, schema_id: int) -> str | None:
        if schema_id in self._names:
            return self._names[schema_id]
        parsed = await self.registry.parsed(view, schema_id)
        name: str | None = None
        if parsed.schema_type == AVRO and isinstance(parsed.avro, dict):
            name = parsed.avro.get("name")
        elif parsed.schema_type == PROTOBUF and parsed.proto.message_type:
            package = parsed.proto.package
            first = parsed.proto.message_type[0].name
            name = f"{package}.{first}" if package else first
        elif parsed.schema_type == JSON and isinstance(parsed.json_schema, dict):
            title = parsed.json_schema.get("title")
            name = title if isinstance(title, str) else None
        self._names[schema_id] = name
        return name


def _first_per_record(errors: list[RecordError]) -> list[RecordError]:
    """One error per record (its key's if both its key and value are refused)."""
    out: list[RecordError] = []
    for error in errors:
        if not out or out[-1].batch_index != error.batch_index:
            out.append(error)
    return out


Prefix = bytes | None


def record_prefixes(buf: Any, part: str) -> list[Prefix]:
    """The first 5 bytes of the key (`part` "key") or value ("value") of every record of the
    non-control batches in `buf`, in order; None when null. A walk over the records' lengths
    only (the produce path's budget is a fraction of a microsecond per record): no record
    objects, the other part and the headers skipped. Raises on damage (the append then refuses
    the data with its own error)."""
    want_key = part == "key"
    mv = memoryview(buf)
    out: list[Prefix] = []
    append = out.append
    pos = 0
    total = len(mv)
    while total - pos >= LOG_OVERHEAD:
        header = parse_batch_header(mv, pos)
        size = header.size
        if not header.attributes & CONTROL_FLAG_MASK and header.record_count > 0:
            data = decompress(header.compression, mv[pos + RECORDS_OFFSET : pos + size])
            limit = len(data)
            at = 0
            for _ in range(header.record_count):
                b = data[at]
                if b < 0x80:
                    length, at = (b >> 1) ^ -(b & 1), at + 1
                else:
                    length, at = _varint(data, at)
                end = at + length
                at += 1  # attributes
                while data[at] & 0x80:  # timestamp delta
                    at += 1
                at += 1
                while data[at] & 0x80:  # offset delta
                    at += 1
                at += 1
                b = data[at]
                if b < 0x80:
                    size_k, at = (b >> 1) ^ -(b & 1), at + 1
                else:
                    size_k, at = _varint(data, at)
                if want_key:
                    append(None if size_k < 0 else data[at : at + (size_k if size_k < 5 else 5)])
                    if size_k > 0:
                        at += size_k
                else:
                    if size_k > 0:
                        at += size_k
                    b = data[at]
                    if b < 0x80:
                        size_v, at = (b >> 1) ^ -(b & 1), at + 1
                    else:
                        size_v, at = _varint(data, at)
                    append(None if size_v < 0 else data[at : at + (size_v if size_v < 5 else 5)])
                    if size_v > 0:
                        at += size_v
                if at > end or end > limit:
                    raise CorruptRecordError("a record runs past its length")
                at = end
        pos += size
    return out


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint at `at`: (value, the position after it)."""
    shift = result = 0
    while True:
        b = data[at]
        at += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7
        if shift > 63:
            raise CorruptRecordError("a varint runs over 10 bytes")
