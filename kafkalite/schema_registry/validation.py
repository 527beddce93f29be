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

The cost per record is the point (validation must cost a small fraction of produce throughput),
so the records are walked in C when the optional extension `_walk` is built (decision 0047): it
reads every record exactly as `record_prefixes` does and gives the distinct prefixes of a batch
(one bytes object per distinct prefix, none per record), or each record's prefix and the index
of the first unreadable record for the refusals (`native_prefixes`, `native_record_prefixes`).
Without it (no C compiler at install, or KAFKALITE_NO_NATIVE=1 in the environment) the check
runs in two steps:
- the fast path (`fast_prefixes`): compiled regular expressions walk every record in C and
  require every key/value to start with the first record's 5 bytes: a batch of one layout
  (the same key and value sizes, no headers) through a pattern made for that layout, any
  other batch (records of up to 8,191 bytes, any headers) through one pattern per part
  compiled once per process on a thread. A match proves every record a consumer can read
  carries that prefix, so one verdict decides the batch;
- otherwise (more than one id, a refusal to report, a shape the patterns do not take) the
  exact Python walk (`record_prefixes`) gives each record's prefix and the refused records'
  indexes.
All of them read the records as a lenient consumer (librdkafka) does: one after another by their
length varints to the end of the batch, each part where the fields put it. Intact batches
whose records cannot be read that way (a length past the end, an over-long varint) are refused
whole: a consumer could not get past the damage, and nothing after it would be checked.
Verdicts are cached per (topic, part, strategy, prefix) until the view applies another record
(its `next_offset` moves), so a deletion or a new registration is seen by the next batch.

The produce path asks `known_to_pass` first, synchronously: with the C walk, one call over the
partition's whole data (`_walk.request`, which reads the batch headers as `_records_areas`
does; compressed batches are decompressed and walked here as before) and the prefixes found
compared with the prefixes whose cached verdict is a pass (kept per (topic, part, strategy)
with the verdict cache, cleared with it). It says yes only when `validate` would return []
from its cache; everything else (a stale view, a prefix without a passing verdict, unreadable
records, no C walk) is `validate`'s to decide, unchanged.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kafkalite.config import native_module
from kafkalite.protocol.compression import decompress
from kafkalite.protocol.errors import RecordError
from kafkalite.protocol.records import (
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    parse_batch_header,
    validate_batches,
)
from kafkalite.protocol.varint import decode_varint, encode_varint
from kafkalite.schema_registry.errors import RegistryError
from kafkalite.schema_registry.formats import AVRO, JSON, PROTOBUF
from kafkalite.schema_registry.registry import Registry

MAGIC = 0


def _native_walker() -> Any:
    # None (built without a C compiler, or NO_NATIVE_ENV set): the Python walk and the patterns
    return native_module("kafkalite.schema_registry._walk")


_walk = _native_walker()
"""The C walk (`_walk.prefixes`), or None: the validator reads this at every batch."""


class SchemaValidator:
    def __init__(self, registry: Registry, config_of: Callable[[str], Any]) -> None:
        """`config_of(topic)`: the topic's LogConfig (with the confluent.* settings)."""
        self.registry = registry
        self.config_of = config_of
        self._names: dict[int, str | None] = {}
        self._verdicts: dict[tuple[str, str, str, bytes], tuple[str | None, bool]] = {}
        self._verdicts_of: tuple[int, int] = (0, -1)
        """The (view, next_offset) the cached verdicts were given under."""
        self._passing: dict[tuple[str, str, str], set[Prefix]] = {}
        """The prefixes whose cached verdict is a pass, per (topic, part, strategy), with None
        (a null part passes): what `known_to_pass` compares a request's prefixes with."""

    def applies(self, topic: str) -> bool:
        config = self.config_of(topic)
        return bool(
            config.confluent_value_schema_validation or config.confluent_key_schema_validation
        )

    def known_to_pass(self, topic: str, records: Any) -> bool:
        """Whether every record of `records` is known to pass without awaiting anything: true
        only when `validate` would return [] from its cached verdicts (the records readable,
        every prefix's verdict a pass under the current view), so the produce path may skip
        `validate`; false leaves the answer to it. The common case costs one C call (the C
        walk over the whole partition's data, `_walk.request`) and a few set operations."""
        if _walk is None:  # the patterns' fast path is left to validate
            return False
        view = self.registry.store.view
        if (id(view), view.next_offset) != self._verdicts_of:
            return False  # the cached verdicts are stale: validate renews them
        config = self.config_of(topic)
        key_check = config.confluent_key_schema_validation
        value_check = config.confluent_value_schema_validation
        found = _native_distinct(records, (1 if key_check else 0) | (2 if value_check else 0))
        if found is None:
            return False
        keys, values = found
        passing = self._passing
        if key_check and not keys <= passing.get(
            (topic, "key", config.confluent_key_subject_name_strategy), _NULL_ONLY
        ):
            return False
        return not value_check or values <= passing.get(
            (topic, "value", config.confluent_value_subject_name_strategy), _NULL_ONLY
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
        await self.registry.store.start()
        only = checks[0][0] if len(checks) == 1 else None
        native = _walk is not None
        if native:
            fast = native_prefixes(records, only)
        else:
            try:
                fast = fast_prefixes(records, only)
            except Exception:  # a batch the patterns cannot take apart: the walk says why
                fast = None
        if fast is not None and await self._all_pass(topic, checks, fast):
            return []
        walk = native_record_prefixes if native else record_prefixes
        try:
            columns = {part: walk(records, part) for part, _ in checks}
        except UnreadableRecords as e:
            try:
                validate_batches(records, origin_client=True)
            except Exception:
                return []  # a damaged batch: the append refuses it with its own error
            # intact batches whose records a consumer cannot read past some point: nothing
            # after it could be checked, so none of it is written
            return [RecordError(e.index, f"the record cannot be read: {e.reason}")]
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

    async def _all_pass(
        self, topic: str, checks: list[tuple[str, str]], fast: dict[str, set[Prefix]]
    ) -> bool:
        """Whether every prefix `uniform_prefixes` found passes (cached verdicts)."""
        view = self.registry.store.view
        stamp = (id(view), view.next_offset)
        if stamp != self._verdicts_of:
            self._verdicts.clear()
            self._passing.clear()
            self._verdicts_of = stamp
        for part, strategy in checks:
            for prefix in fast[part]:
                if prefix is None:
                    continue
                key = (topic, part, strategy, prefix)
                verdict = self._verdicts.get(key)
                if verdict is None:
                    verdict = await self._check(view, topic, part, strategy, prefix)
                    if len(self._verdicts) >= 10_000:
                        self._verdicts.clear()
                        self._passing.clear()
                    self._verdicts[key] = verdict
                if verdict[0] is not None:
                    return False
                self._passing.setdefault((topic, part, strategy), {None}).add(prefix)
        return True

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


class UnreadableRecords(Exception):
    """The walk could not read record `index` (counted across the partition's batches)."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(index, reason)
        self.index = index
        self.reason = reason


def record_prefixes(buf: Any, part: str) -> list[Prefix]:
    """The first 5 bytes of the key (`part` "key") or value ("value") of every record of the
    non-control batches in `buf`, in order; None when null (a negative length).

    Every record a consumer can find is read, as a lenient consumer (librdkafka) reads it:
    records follow one another by their length varints until the batch's (decompressed)
    records end, whatever count the header declares; a record's fields are read from its
    start, and one that runs past the record's length is read as it lies (the record after it
    still starts where the length says). A walk over lengths only (the produce path's budget
    is a fraction of a microsecond per record): no record objects, the other part and the
    headers skipped. Raises `UnreadableRecords` (with the index of the record it could not
    read) when a length varint is over-long or negative, or a record runs past the records'
    end."""
    want_key = part == "key"
    out: list[Prefix] = []
    append = out.append
    try:
        for _header, area in _records_areas(buf):
            data = bytes(area)  # prefixes are bytes (a decompressed area is not copied)
            limit = len(data)
            at = 0
            while at < limit:
                b = data[at]
                if b < 0x80:
                    length, at = (b >> 1) ^ -(b & 1), at + 1
                else:
                    length, at = decode_varint(data, at)
                end = at + length
                if length < 0 or end > limit:
                    raise ValueError(f"a record's length {length} runs past the records")
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
                    size_k, at = decode_varint(data, at)
                if want_key:
                    if size_k < 0:
                        append(None)
                    elif at + min(size_k, 5) > limit:
                        raise ValueError("a key runs past the records")
                    else:
                        append(data[at : at + (size_k if size_k < 5 else 5)])
                else:
                    if size_k > 0:
                        at += size_k
                    b = data[at]
                    if b < 0x80:
                        size_v, at = (b >> 1) ^ -(b & 1), at + 1
                    else:
                        size_v, at = decode_varint(data, at)
                    if size_v < 0:
                        append(None)
                    elif at + min(size_v, 5) > limit:
                        raise ValueError("a value runs past the records")
                    else:
                        append(data[at : at + (size_v if size_v < 5 else 5)])
                at = end
    except Exception as e:  # a bad varint, a read past the end, a codec's error
        raise UnreadableRecords(len(out), str(e) or type(e).__name__) from e
    return out


class _ShortBatch(ValueError):
    """A batch whose length is below its header's."""


def _records_areas(buf: Any) -> Iterator[tuple[Any, Any]]:
    """(header, records area) of each non-control batch in `buf`, the area decompressed
    (uncompressed: a view, not a copy); raises on a truncated header, a batch length below
    the header's, a codec's error."""
    mv = memoryview(buf)
    pos = 0
    total = len(mv)
    while total - pos >= LOG_OVERHEAD:
        header = parse_batch_header(mv, pos)
        size = header.size
        if size < RECORDS_OFFSET:
            raise _ShortBatch(f"a batch of {size} bytes")
        if not header.attributes & CONTROL_FLAG_MASK:
            area = mv[pos + RECORDS_OFFSET : pos + size]
            yield header, area if header.compression == 0 else decompress(header.compression, area)
        pos += size


_PARTS = {"key": 1, "value": 2, None: 3}
"""`_walk.prefixes`'s part bits."""


def native_record_prefixes(buf: Any, part: str) -> list[Prefix]:
    """`record_prefixes` by the C walk: the same list (bytes, None for a null part), the same
    `UnreadableRecords` index."""
    assert _walk is not None
    out: list[Prefix] = []
    try:
        for _header, area in _records_areas(buf):
            keys, values, _count, reason = _walk.prefixes(area, _PARTS[part], False)
            out += keys if values is None else values
            if reason is not None:
                raise UnreadableRecords(len(out), reason)
    except UnreadableRecords:
        raise
    except Exception as e:  # a batch header the walk cannot take, a codec's error
        raise UnreadableRecords(len(out), str(e) or type(e).__name__) from e
    return out


_NULL_ONLY: frozenset[Prefix] = frozenset({None})


def _native_distinct(buf: Any, parts: int) -> tuple[set[Prefix], set[Prefix]] | None:
    """(the distinct key prefixes, the distinct value prefixes) of the records of the
    non-control batches in `buf` by the C walk (`parts` as `_walk.prefixes` takes it; a part
    not asked for gets an empty set): the uncompressed batches in one call over the whole of
    `buf`, which reads the batch headers as `_records_areas` does, the compressed ones
    decompressed here and walked one by one. None when a batch header or some record cannot
    be read, or a codec fails."""
    assert _walk is not None
    try:
        found = _walk.request(buf, parts)
        if found is None:
            return None
        keys, values, compressed = found
        keys = set() if keys is None else keys
        values = set() if values is None else values
        if compressed is not None:
            mv = memoryview(buf)
            for codec, start, end in compressed:
                more_keys, more_values, _count, reason = _walk.prefixes(
                    decompress(codec, mv[start:end]), parts, True
                )
                if reason is not None:
                    return None
                if more_keys is not None:
                    keys |= more_keys
                if more_values is not None:
                    values |= more_values
    except Exception:  # a codec's error, data that is not a buffer
        return None
    return keys, values


def native_prefixes(buf: Any, only: str | None = None) -> dict[str, set[Prefix]] | None:
    """The distinct key and value prefixes (as `fast_prefixes` gives them) by the C walk, both
    parts in one pass unless `only` names one; None when some record cannot be read (the
    per-record walk then says which)."""
    found = _native_distinct(buf, _PARTS[only])
    if found is None:
        return None
    return {"key": found[0], "value": found[1]}


def fast_prefixes(buf: Any, only: str | None = None) -> dict[str, set[Prefix]] | None:
    """The distinct key and value prefixes (first 5 bytes, None when null) of the records of
    the non-control batches in `buf`, found by compiled regular expressions that walk the
    records in C; None when some batch is not in a shape they take (the caller then walks the
    records with `record_prefixes`, which also says which records are refused). `only`
    ("key" or "value") leaves the other part unchecked. A batch header that cannot be read
    raises (`_records_areas`); a batch shorter than its header gives None.

    Per batch, one of two patterns must match the whole records area:
    - a batch whose first two records have the same key and value sizes (and at least
      `_UNIFORM_MIN_RECORDS` records) is tried against `_uniform_pattern` (records of those
      sizes, no headers, every record's prefixes equal to the first's);
    - any batch against `mixed_pattern` (records of any sizes up to 8,191 bytes, keys up to
      1,023 in value mode, headers of any kind, every non-null prefix equal to the first
      record's).
    Either match proves what `record_prefixes` reads: the records a consumer finds by their
    lengths, each with its part's prefix where a consumer reads it. Nothing here reads
    another way than the walk, so a batch the walk cannot read never matches."""
    parts = ("key", "value") if only is None else (only,)
    found: dict[str, set[Prefix]] = {"key": set(), "value": set()}
    try:
        for header, area in _records_areas(buf):
            data = bytes(area)  # the patterns' groups are bytes only on bytes
            if len(data):
                match = None
                if header.record_count >= _UNIFORM_MIN_RECORDS:
                    layout = _layout(data)
                    if layout is not None:
                        match = _uniform_pattern(*layout, only).fullmatch(data)
                if match is not None:
                    groups = match.groupdict()  # a part without its group: null
                    for part in parts:
                        found[part].add(groups.get(part[0]))
                else:
                    for part in parts:
                        pattern = mixed_pattern(part, wait=False)
                        match = pattern.fullmatch(data) if pattern is not None else None
                        if match is None:
                            return None
                        found[part].add(match["p"])
                        if match["n"] is not None:
                            found[part].add(None)
    except _ShortBatch:
        return None
    return found


_UNIFORM_MIN_RECORDS = 16
"""Below this many records a batch skips the uniform pattern (whose compile is per layout)."""

_patterns: dict[tuple[int, int, str | None], re.Pattern[bytes]] = {}


def _layout(data: Any) -> tuple[int, int] | None:
    """(key size, value size) of the first record when the second has the same (-1: null)."""
    sizes = []
    at = 0
    for _ in range(2):
        length, at = decode_varint(data, at)
        end = at + length
        at += 1
        for _skip in range(2):  # timestamp delta, offset delta
            while data[at] & 0x80:
                at += 1
            at += 1
        size_k, at = decode_varint(data, at)
        at += max(size_k, 0)
        size_v, at = decode_varint(data, at)
        sizes.append((size_k, size_v))
        at = end
    return sizes[0] if sizes[0] == sizes[1] else None


def _uniform_pattern(key_size: int, value_size: int, only: str | None) -> re.Pattern[bytes]:
    """Records with these key and value sizes and no headers: the first captures its key's
    (group k) and value's (group v) first bytes, the others must repeat them (backreferences;
    a part `only` leaves out is not compared)."""
    cached = _patterns.get((key_size, value_size, only))
    if cached is not None:
        return cached

    def part(size: int, name: str, first: bool) -> bytes:
        if size < 0:
            return b""
        head = min(size, 5)
        if only is not None and only[0] != name:
            return b".{%d}" % size
        grab = b"(?P<%s>.{%d})" % (name.encode(), head) if first else b"(?P=%s)" % name.encode()
        return grab + b".{%d}" % (size - head)

    def record(first: bool) -> bytes:
        key_length, value_length = encode_varint(key_size), encode_varint(value_size)
        fixed = len(key_length) + max(key_size, 0) + len(value_length) + max(value_size, 0)
        fixed += 2  # the attributes byte, the headers count
        heads = []
        # the record's length varint, its attributes, its timestamp delta's and offset delta's
        # varints: one alternative per pair of widths (the offset delta takes 1 byte below 64
        # records, 2 below 8,192, 3 beyond; the timestamp delta up to 5 bytes, 2**34 ms)
        for offset_width in (1, 2, 3):
            for timestamp_width in (1, 2, 3, 4, 5):
                heads.append(
                    re.escape(encode_varint(fixed + timestamp_width + offset_width))
                    + b"."
                    + b"".join(
                        b"[\\x80-\\xff]{%d}[\\x00-\\x7f]" % (w - 1)
                        for w in (timestamp_width, offset_width)
                    )
                )
        return (
            b"(?>"
            + b"|".join(heads)
            + b")"
            + re.escape(key_length)
            + part(key_size, "k", first)
            + re.escape(value_length)
            + part(value_size, "v", first)
            + b"\\x00"  # no headers
        )

    pattern = re.compile(b"(?s)" + record(True) + b"(?:" + record(False) + b")*+")
    if len(_patterns) >= 256:
        _patterns.clear()
    _patterns[(key_size, value_size, only)] = pattern
    return pattern


_MIXED_MAX_KEY_HIGH = 15
"""Value mode skips keys of up to 64 * 15 + 63 = 1,023 bytes (a batch with a longer key is
walked): each size is an alternative of the pattern, and keys are short."""

_mixed: dict[str, re.Pattern[bytes]] = {}
_compiling: set[str] = set()
_compile_lock = threading.Lock()


def mixed_pattern(part: str, *, wait: bool = True) -> re.Pattern[bytes] | None:
    """The pattern that checks a records area of any record sizes for `part` ("key" or
    "value"), compiled once per process (about 0.2 s of `re.compile`). With `wait=False`
    (the produce path) a first call starts the compile on a thread and returns None: the
    batches meanwhile take the walk instead of a stalled event loop."""
    pattern = _mixed.get(part)
    if pattern is not None or not wait:
        if pattern is None:
            with _compile_lock:
                if part not in _compiling:
                    _compiling.add(part)
                    threading.Thread(
                        target=mixed_pattern,
                        args=(part,),
                        name=f"schema-validation-{part}-pattern",
                        daemon=True,
                    ).start()
        return pattern
    pattern = _mixed_pattern(part)
    _mixed[part] = pattern
    return pattern


def _byte(value: int) -> bytes:
    return re.escape(bytes([value]))


def _one_of(values: Any) -> bytes:
    return b"[" + b"".join(_byte(v) for v in values) + b"]"


def _skip_sized(max_high: int, *, short_first: bool) -> list[bytes]:
    """Alternatives, one per size n <= 64 * max_high + 63: n's zig-zag varint (1 or 2 bytes,
    canonical) then n bytes. The two-byte ones are grouped by their first byte (n's low 6
    bits) with the second (n >> 6) inside, so a size costs one literal test per alternative
    before it plus a few for the second byte (a branch whose first item is a literal is
    skipped by `re` without entering it); `short_first` puts sizes below 64 first (keys),
    else after (records, which are mostly longer)."""
    two = [
        _byte(0x80 | low << 1)
        + b"(?:"
        + b"|".join(_byte(high) + b".{%d}" % (high << 6 | low) for high in range(1, max_high + 1))
        + b")"
        for low in range(64)
    ]
    one = [_byte(n << 1) + (b".{%d}" % n if n else b"") for n in range(64)]
    return one + two if short_first else two + one


def _mixed_pattern(part: str) -> re.Pattern[bytes]:
    """Records of any layout, each checked where a consumer reads it (the walk's rules):

        (?=<first record's part: a length of at least 5, its first 5 bytes as group p>)
        (?: (?=<this record: its part null (group n) or at least 5 long starting with p>)
            <this record's length varint, then that many bytes> )*+

    The lookahead reads from the record's start: its length varint's shape, the attributes
    byte, the timestamp and offset deltas (varints of any width), in value mode the key (a
    negative length: none; else skipped by its size), then the part's length and prefix.
    The record's own length then decides where the next one starts, as for a consumer; a
    length of 8,192 or more, a negative one or a non-canonical encoding matches nothing (the
    batch is walked). A part's length of 5 or more is a canonical varint of 1-3 bytes whose
    last byte is not 0 (so its value is what the walk's decoder reads); shorter ones and
    other encodings match nothing either."""
    varint = rb"[\x80-\xff]*+[\x00-\x7f]"
    negative = _one_of(range(1, 128, 2))  # the one-byte zig-zag encodings of -1..-64
    at_least_5 = (
        b"(?:"
        + _one_of(range(10, 127, 2))
        + b"|"
        + _one_of(range(0x80, 0x100, 2))
        + rb"(?:[\x01-\x7f]|[\x80-\xff][\x01-\x7f]))"
    )
    head = rb"[\x80-\xff]?+[\x00-\x7f]." + varint + varint
    if part == "value":
        head += (
            b"(?>"
            + negative
            + b"|"
            + b"|".join(_skip_sized(_MIXED_MAX_KEY_HIGH, short_first=True))
            + b")"
        )
    first = b"(?=" + head + at_least_5 + b"(?P<p>.{5}))"
    each = b"(?=" + head + b"(?:" + at_least_5 + b"(?P=p)|" + negative + b"(?P<n>)))"
    record = b"(?>" + b"|".join(_skip_sized(127, short_first=False)) + b")"
    return re.compile(b"(?s)" + first + b"(?:" + each + record + b")*+")
