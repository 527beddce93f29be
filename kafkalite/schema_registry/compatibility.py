"""Compatibility of a new schema with the versions of its subject, by Confluent's rules.

`reader_can_read(reader, writer)` answers whether data written with `writer` can be read with
`reader` and, when not, why (a list of messages, each naming the place in the schema):

- AVRO: Avro's schema resolution (the specification's rules): same primitive or a promotion
  (int -> long, float, double; long -> float, double; float -> double; string <-> bytes);
  records by name (or a reader alias), each reader field present in the writer or with a
  default; enums by name, every writer symbol known to the reader unless it has a default;
  fixed by name and size; arrays and maps by their items; unions branch by branch.
- JSON: Confluent's content-model rules: a type may widen, not narrow (integer is a number); a
  property the reader adds must be allowed by the writer's content model (a closed writer,
  `additionalProperties: false`, cannot have written it; an open one could have written anything
  there, so the reader must accept anything); a property the reader drops must be allowed by the
  reader's content model (not closed); a reader may not add a required property, close an open
  model, tighten a bound (maxLength, minLength, maximum, minimum, maxItems, minItems) or narrow
  an enum.
- PROTOBUF: the wire rules: every message of the writer still exists; a field (by number)
  keeps a wire-compatible type (int32/uint32/int64/uint64/bool; sint32/sint64;
  fixed32/sfixed32; fixed64/sfixed64; string/bytes; the same message or enum type), keeps its
  cardinality (repeated or not), does not move into a oneof that already exists, and a
  required field is neither added nor removed; the reader does not use a number or name the
  writer reserved (a retired number's old data may hold another type).

`check(level, new, versions)` applies a level (NONE, BACKWARD, FORWARD, FULL and their
_TRANSITIVE forms): BACKWARD means the new schema reads the latest version's data (transitive:
every version's), FORWARD the latest version reads the new schema's data, FULL both. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

from kafkalite.schema_registry.formats import AVRO, JSON, PROTOBUF, ParsedSchema
from kafkalite.schema_registry.models import Level

LEVELS: tuple[str, ...] = get_args(Level)
DEFAULT_LEVEL = "BACKWARD"


def check(level: str, new: ParsedSchema, versions: Sequence[ParsedSchema]) -> list[str]:
    """Why `new` may not follow `versions` (oldest first) under `level`; [] if it may."""
    if level == "NONE" or not versions:
        return []
    against = versions if level.endswith("_TRANSITIVE") else versions[-1:]
    base = level.removesuffix("_TRANSITIVE")
    messages: list[str] = []
    for old in reversed(against):
        if base in ("BACKWARD", "FULL"):
            messages += [
                f"{m} (the new schema cannot read data written with an existing version)"
                for m in reader_can_read(new, old)
            ]
        if base in ("FORWARD", "FULL"):
            messages += [
                f"{m} (an existing version cannot read data written with the new schema)"
                for m in reader_can_read(old, new)
            ]
    return messages


def reader_can_read(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    if reader.schema_type != writer.schema_type:
        return [f"the schema type changed from {writer.schema_type} to {reader.schema_type}"]
    if reader.schema_type == AVRO:
        return _avro(reader.avro, writer.avro, reader.named, writer.named, "/", set())
    if reader.schema_type == JSON:
        return _json(reader.json_schema, writer.json_schema, "#")
    if reader.schema_type == PROTOBUF:
        return _protobuf(reader, writer)
    return [f"unknown schema type {reader.schema_type}"]


# ------------------------------------------------------------------------------------- Avro

PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
PROMOTIONS = {
    ("int", "long"),
    ("int", "float"),
    ("int", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "bytes"),
    ("bytes", "string"),
}


def _resolve(schema: Any, named: Mapping[str, Any]) -> Any:
    while isinstance(schema, str) and schema not in PRIMITIVES:
        if schema not in named:
            return schema
        schema = named[schema]
    if isinstance(schema, dict) and schema.get("type") in PRIMITIVES and len(schema) >= 1:
        # {"type": "int", "logicalType": ...}: resolved as its underlying type
        return schema["type"]
    return schema


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        return str(schema.get("type"))
    return str(schema)


def _avro(
    reader: Any,
    writer: Any,
    rnamed: Mapping[str, Any],
    wnamed: Mapping[str, Any],
    path: str,
    seen: set[tuple[str, str]],
) -> list[str]:
    reader = _resolve(reader, rnamed)
    writer = _resolve(writer, wnamed)
    rk, wk = _kind(reader), _kind(writer)
    if wk == "union":
        out = []
        for i, branch in enumerate(writer):
            out += _avro(reader, branch, rnamed, wnamed, f"{path}{i}/", seen)
        return out
    if rk == "union":
        for branch in reader:
            if not _avro(branch, writer, rnamed, wnamed, path, seen):
                return []
        return [f"{path}: the reader's union has no branch for the writer's {_describe(writer)}"]
    if rk in PRIMITIVES and wk in PRIMITIVES:
        if rk == wk or (wk, rk) in PROMOTIONS:
            return []
        return [f"{path}: type mismatch: the writer's {wk} cannot be read as {rk}"]
    if rk != wk:
        return [f"{path}: type mismatch: the writer's {wk} cannot be read as {rk}"]
    if rk == "array":
        return _avro(reader["items"], writer["items"], rnamed, wnamed, f"{path}items/", seen)
    if rk == "map":
        return _avro(reader["values"], writer["values"], rnamed, wnamed, f"{path}values/", seen)
    rname, wname = reader.get("name", ""), writer.get("name", "")
    if rname != wname and wname not in reader.get("aliases", ()):
        short = lambda n: n.rsplit(".", 1)[-1]  # noqa: E731
        if short(rname) != short(wname):
            return [f"{path}: name mismatch: the writer's {wname} is read as {rname}"]
    if rk == "fixed":
        if reader.get("size") != writer.get("size"):
            return [
                f"{path}: fixed size mismatch: {writer.get('size')} read as {reader.get('size')}"
            ]
        return []
    if rk == "enum":
        missing = [s for s in writer.get("symbols", []) if s not in reader.get("symbols", [])]
        if missing and "default" not in reader:
            return [f"{path}: the reader's enum {rname} lacks the symbols {missing}"]
        return []
    if rk in ("record", "error"):
        key = (rname, wname)
        if key in seen:
            return []
        seen.add(key)
        out = []
        writer_fields = {f["name"]: f for f in writer.get("fields", [])}
        for f in reader.get("fields", []):
            found = writer_fields.get(f["name"])
            if found is None:
                for alias in f.get("aliases", ()):
                    found = writer_fields.get(alias)
                    if found is not None:
                        break
            if found is None:
                if "default" not in f:
                    out.append(
                        f"{path}fields/{f['name']}: the reader's field {f['name']!r} has no "
                        "default and the writer does not write it"
                    )
                continue
            out += _avro(
                f["type"], found["type"], rnamed, wnamed, f"{path}fields/{f['name']}/", seen
            )
        return out
    return []


def _describe(schema: Any) -> str:
    if isinstance(schema, dict):
        return f"{schema.get('type')} {schema.get('name', '')}".strip()
    return str(schema)


# ------------------------------------------------------------------------------ JSON Schema

BOUNDS_UP = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")
"""A reader raising one of these refuses data the writer allowed."""
BOUNDS_DOWN = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")


def _types(schema: Any) -> set[str] | None:
    if not isinstance(schema, dict) or "type" not in schema:
        return None
    kind = schema["type"]
    return set(kind) if isinstance(kind, list) else {kind}


def _is_open(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties", True) is not False


def _json(reader: Any, writer: Any, path: str) -> list[str]:
    if reader is True or reader == {}:
        return []
    if reader is False:
        return [] if writer is False else [f"{path}: the reader accepts nothing"]
    if writer is True or writer == {}:
        writer = {}
    if writer is False:
        return []
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        return []
    out: list[str] = []
    rtypes, wtypes = _types(reader), _types(writer)
    if rtypes is not None:
        if wtypes is None:
            out.append(f"{path}: TYPE_NARROWED: the reader requires {sorted(rtypes)}")
        else:
            widened = rtypes | ({"integer"} if "number" in rtypes else set())
            narrowed = wtypes - widened
            if narrowed:
                out.append(
                    f"{path}: TYPE_CHANGED: the writer's {sorted(narrowed)} is not "
                    f"among the reader's {sorted(rtypes)}"
                )
    for bound in BOUNDS_UP:
        if bound in reader and (bound not in writer or _num(reader[bound]) > _num(writer[bound])):
            out.append(f"{path}: {bound.upper()}_INCREASED: {bound} is {reader[bound]}")
    for bound in BOUNDS_DOWN:
        if bound in reader and (bound not in writer or _num(reader[bound]) < _num(writer[bound])):
            out.append(f"{path}: {bound.upper()}_DECREASED: {bound} is {reader[bound]}")
    if "enum" in reader:
        if "enum" not in writer:
            out.append(f"{path}: ENUM_ARRAY_NARROWED: the reader adds an enum")
        else:
            lost = [v for v in writer["enum"] if v not in reader["enum"]]
            if lost:
                out.append(f"{path}: ENUM_ARRAY_NARROWED: the reader lacks {lost}")
    if "const" in reader and writer.get("const", object()) != reader["const"]:
        out.append(f"{path}: the reader requires the constant {reader['const']!r}")
    rprops = reader.get("properties", {}) if isinstance(reader.get("properties"), dict) else {}
    wprops = writer.get("properties", {}) if isinstance(writer.get("properties"), dict) else {}
    if rprops or wprops or "additionalProperties" in reader or "required" in reader:
        for name, schema in rprops.items():
            if name in wprops:
                out += _json(schema, wprops[name], f"{path}/properties/{name}")
            elif _is_open(writer):
                extra = writer.get("additionalProperties", True)
                problems = _json(schema, extra if isinstance(extra, dict) else True, "")
                if problems:
                    out.append(
                        f"{path}/properties/{name}: PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL: the "
                        "writer's open content model may have written anything there"
                    )
        for name, schema in wprops.items():
            if name in rprops:
                continue
            extra = reader.get("additionalProperties", True)
            if extra is False:
                out.append(f"{path}/properties/{name}: PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
            elif isinstance(extra, dict) and _json(extra, schema, ""):
                out.append(
                    f"{path}/properties/{name}: PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_"
                    "CONTENT_MODEL"
                )
        if _is_open(writer) and not _is_open(reader):
            out.append(
                f"{path}: ADDITIONAL_PROPERTIES_REMOVED: the reader closes the content model"
            )
        elif isinstance(reader.get("additionalProperties"), dict):
            wextra = writer.get("additionalProperties", True)
            if wextra is not False:
                out += _json(
                    reader["additionalProperties"],
                    wextra if isinstance(wextra, dict) else True,
                    f"{path}/additionalProperties",
                )
        rreq = set(reader.get("required", ()) or ())
        wreq = set(writer.get("required", ()) or ())
        for name in sorted(rreq - wreq):
            prop = rprops.get(name)
            if not (isinstance(prop, dict) and "default" in prop):
                out.append(
                    f"{path}/required/{name}: REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
                )
    if "items" in reader and isinstance(reader["items"], (dict, bool)):
        witems = writer.get("items", True)
        out += _json(
            reader["items"], witems if isinstance(witems, (dict, bool)) else True, f"{path}/items"
        )
    return out


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


# --------------------------------------------------------------------------------- Protobuf

_WIRE_GROUPS = {
    "int32": "varint",
    "uint32": "varint",
    "int64": "varint",
    "uint64": "varint",
    "bool": "varint",
    "sint32": "zigzag",
    "sint64": "zigzag",
    "fixed32": "fixed32",
    "sfixed32": "fixed32",
    "float": "float",
    "fixed64": "fixed64",
    "sfixed64": "fixed64",
    "double": "double",
    "string": "length",
    "bytes": "length",
}


def _messages(parsed: ParsedSchema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    package = parsed.proto.package

    def walk(prefix: str, messages: Any) -> None:
        for message in messages:
            name = f"{prefix}.{message.name}" if prefix else message.name
            out[name] = message
            walk(name, message.nested_type)

    walk(package, parsed.proto.message_type)
    return out


def _field_type(field: Any) -> str:
    from google.protobuf import descriptor_pb2

    name = descriptor_pb2.FieldDescriptorProto.Type.Name(field.type)
    kind = name.removeprefix("TYPE_").lower()
    if kind in ("message", "group", "enum"):
        return f"{kind} {field.type_name.lstrip('.')}"
    return kind


def _reserved(message: Any) -> tuple[list[tuple[int, int]], set[str]]:
    return [(r.start, r.end) for r in message.reserved_range], set(message.reserved_name)


def _protobuf(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    from google.protobuf import descriptor_pb2

    repeated = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    required = descriptor_pb2.FieldDescriptorProto.LABEL_REQUIRED
    out: list[str] = []
    rmessages, wmessages = _messages(reader), _messages(writer)
    if reader.proto.syntax != writer.proto.syntax and reader.proto.syntax and writer.proto.syntax:
        out.append(f"#/: SYNTAX_CHANGED from {writer.proto.syntax} to {reader.proto.syntax}")
    rpackage, wpackage = reader.proto.package, writer.proto.package

    def unqualified(name: str, package: str) -> str:
        return name[len(package) + 1 :] if package and name.startswith(package + ".") else name

    rby_local = {unqualified(n, rpackage): m for n, m in rmessages.items()}
    for name, wmessage in wmessages.items():
        local = unqualified(name, wpackage)
        rmessage = rby_local.get(local)
        if rmessage is None:
            out.append(f"#/{local}: MESSAGE_REMOVED")
            continue
        rfields = {f.number: f for f in rmessage.field}
        wfields = {f.number: f for f in wmessage.field}
        for number, wf in wfields.items():
            rf = rfields.get(number)
            where = f"#/{local}/{number}"
            if rf is None:
                if wf.label == required:
                    out.append(f"{where}: REQUIRED_FIELD_REMOVED ({wf.name})")
                continue
            rt = _field_type(rf).replace(rpackage + ".", "", 1) if rpackage else _field_type(rf)
            wt = _field_type(wf).replace(wpackage + ".", "", 1) if wpackage else _field_type(wf)
            if rt != wt:
                rg, wg = _WIRE_GROUPS.get(rt), _WIRE_GROUPS.get(wt)
                if rg is None or wg is None or rg != wg:
                    if (
                        rt.split(" ")[0] == "enum"
                        and wg == "varint"
                        or (wt.split(" ")[0] == "enum" and rg == "varint")
                    ):
                        pass  # an enum is an int32 on the wire
                    else:
                        out.append(f"{where}: FIELD_KIND_CHANGED from {wt} to {rt} ({rf.name})")
            if (rf.label == repeated) != (wf.label == repeated):
                out.append(f"{where}: FIELD_LABEL_CHANGED ({rf.name}: repeated or not)")
            if rf.label == required and wf.label != required:
                out.append(f"{where}: REQUIRED_FIELD_ADDED ({rf.name})")
            if rf.HasField("oneof_index") and not wf.HasField("oneof_index"):
                siblings = [
                    f
                    for f in rmessage.field
                    if f.HasField("oneof_index") and f.oneof_index == rf.oneof_index
                ]
                existed = [f for f in siblings if f.number in wfields and f.number != number]
                if existed:
                    out.append(f"{where}: FIELD_MOVED_TO_EXISTING_ONEOF ({rf.name})")
        for number, rf in rfields.items():
            if number not in wfields and rf.label == required:
                out.append(f"#/{local}/{number}: REQUIRED_FIELD_ADDED ({rf.name})")
        wranges, wnames = _reserved(wmessage)
        for number, rf in rfields.items():
            if number in wfields:
                continue
            if any(start <= number < end for start, end in wranges) or rf.name in wnames:
                out.append(
                    f"#/{local}/{number}: FIELD_USES_RESERVED_NUMBER: the reader's field "
                    f"{rf.name} = {number} is reserved by the writer (data written before the "
                    "reservation may hold another type there)"
                )
    return out
