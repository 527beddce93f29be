"""The three schema formats: parse a schema's text (with its resolved references) into a
`ParsedSchema`, or refuse it with 42201 and a message.

- AVRO (the default when `schemaType` is absent): JSON parsed by fastavro, the named types of
  the references known to it; stored as compact JSON, which is also its identity.
- JSON: a JSON Schema checked against its meta-schema (jsonschema; draft 7 unless `$schema`
  says otherwise), every `$ref` resolvable (the references are resources named by their
  reference name); identity is its compact JSON with sorted keys.
- PROTOBUF: `.proto` text compiled by protoc (grpcio-tools' own, run as a child process, with
  the references given to it as a descriptor set and the well-known types on its include
  path), or a base64 FileDescriptorProto as confluent-kafka's serializer sends; either way the
  result is a FileDescriptorProto built in a DescriptorPool. Identity is that descriptor without
  its file name and source info, so formatting and comments do not make a new schema.

Invariant: parsing never raises anything but `InvalidSchema` for bad input (recursion, odd
types and library errors included), so the HTTP layer answers 422, never 500. Pure: no
kafkalite import but errors.py; the only I/O is protoc's child process and its temp dir.
"""

from __future__ import annotations

import base64
import binascii
import copy
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalite.schema_registry.errors import InvalidSchema

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
SCHEMA_TYPES = (AVRO, JSON, PROTOBUF)

PROTOC_TIMEOUT_S = 30.0
PROTO_MAIN = "schema.proto"
"""The file name a registered .proto is compiled under (imports name the references)."""


@dataclass(frozen=True)
class Reference:
    """A schema reference: the name the schema uses (an Avro full name, a JSON `$ref` URI, a
    .proto import path) for version `version` of subject `subject`."""

    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass
class ParsedSchema:
    schema_type: str
    text: str
    """The text stored and answered."""
    identity: str
    """Equal for the same schema written differently (idempotent registration)."""
    references: tuple[Reference, ...] = ()
    avro: Any = None
    """AVRO: the parsed schema (fastavro's form, named types as names)."""
    named: dict[str, Any] = field(default_factory=dict)
    """AVRO: every named type this schema and its references define, full name -> its dict."""
    json_schema: Any = None
    """JSON: the schema document."""
    resources: dict[str, Any] = field(default_factory=dict)
    """JSON: the documents of the references (and theirs), by reference name."""
    proto: Any = None
    """PROTOBUF: the FileDescriptorProto."""
    files: dict[str, Any] = field(default_factory=dict)
    """PROTOBUF: the FileDescriptorProtos of the references (and theirs), by file name."""

    def serialized(self) -> str:
        """`?format=serialized`: a Protobuf schema as a base64 FileDescriptorProto (what
        confluent-kafka's deserializer asks for); other types as their text."""
        if self.schema_type == PROTOBUF:
            return base64.standard_b64encode(self.proto.SerializeToString()).decode("ascii")
        return self.text


def parse(
    schema_type: str,
    text: str,
    references: Iterable[tuple[Reference, ParsedSchema]] = (),
    *,
    max_bytes: int | None = None,
) -> ParsedSchema:
    """`text` as a schema of `schema_type` whose references resolve to the given parsed
    schemas; InvalidSchema (42201) otherwise."""
    if schema_type not in SCHEMA_TYPES:
        raise InvalidSchema(
            f"unknown schema type {schema_type!r}: one of {', '.join(SCHEMA_TYPES)}"
        )
    if not isinstance(text, str):
        raise InvalidSchema("the schema must be a string")
    size = len(text.encode("utf-8", "surrogatepass"))
    if max_bytes is not None and size > max_bytes:
        raise InvalidSchema(
            f"the schema is {size} bytes, over schema.registry.max.schema.bytes ({max_bytes})"
        )
    refs = list(references)
    try:
        if schema_type == AVRO:
            return _parse_avro(text, refs)
        if schema_type == JSON:
            return _parse_json(text, refs)
        return _parse_protobuf(text, refs)
    except InvalidSchema:
        raise
    except RecursionError:
        raise InvalidSchema("the schema is nested too deeply") from None
    except Exception as e:  # the libraries' own errors, whatever their class: bad input
        raise InvalidSchema(f"{type(e).__name__}: {e}") from None


def _load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InvalidSchema(f"not JSON: {e}") from None


def _compact(value: Any, *, sort_keys: bool = False) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys, ensure_ascii=False)


# ------------------------------------------------------------------------------------- Avro


def _parse_avro(text: str, refs: list[tuple[Reference, ParsedSchema]]) -> ParsedSchema:
    import fastavro.schema

    document = _load_json(text)
    if not isinstance(document, (dict, list, str)):
        raise InvalidSchema("an Avro schema is a JSON object, array or string")
    _check_avro_shape(document)
    named: dict[str, Any] = {}
    for ref, parsed in refs:
        if parsed.schema_type != AVRO:
            raise InvalidSchema(f"reference {ref.name!r} is a {parsed.schema_type} schema")
        named.update(copy.deepcopy(parsed.named))
    # fastavro checks each field's default against the field's type (as Confluent's
    # registry does with validateDefaults)
    parsed_schema = fastavro.schema.parse_schema(
        copy.deepcopy(document), named_schemas=named, _write_hint=False
    )
    compact = _compact(document)
    identity = (
        compact + "|" + "|".join(sorted(f"{r.name}={r.subject}/{r.version}" for r, _ in refs))
    )
    return ParsedSchema(
        AVRO,
        compact,
        identity,
        tuple(r for r, _ in refs),
        avro=parsed_schema,
        named=named,
    )


REQUIRED_AVRO_ATTRIBUTES = {
    "record": ("fields", list),
    "error": ("fields", list),
    "enum": ("symbols", list),
    "fixed": ("size", int),
    "array": ("items", object),
    "map": ("values", object),
}


def _check_avro_shape(schema: Any) -> None:
    """What fastavro lets pass but Avro's specification requires (Java's parser refuses a
    record without `fields`, an enum without `symbols`, a fixed without `size`)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            kind = node.get("type")
            if isinstance(kind, str) and kind in REQUIRED_AVRO_ATTRIBUTES:
                attribute, expected = REQUIRED_AVRO_ATTRIBUTES[kind]
                if not isinstance(node.get(attribute), expected):
                    raise InvalidSchema(f"a {kind} needs {attribute!r}")
                if kind in ("record", "error"):
                    stack.extend(f.get("type") for f in node["fields"] if isinstance(f, dict))
                elif kind == "array":
                    stack.append(node["items"])
                elif kind == "map":
                    stack.append(node["values"])
            elif isinstance(kind, (dict, list)):
                stack.append(kind)


# ------------------------------------------------------------------------------- JSON Schema


def _parse_json(text: str, refs: list[tuple[Reference, ParsedSchema]]) -> ParsedSchema:
    import jsonschema.validators
    import referencing
    import referencing.exceptions
    import referencing.jsonschema

    document = _load_json(text)
    if not isinstance(document, (dict, bool)):
        raise InvalidSchema("a JSON Schema is a JSON object or a boolean")
    resources: dict[str, Any] = {}
    for ref, parsed in refs:
        if parsed.schema_type != JSON:
            raise InvalidSchema(f"reference {ref.name!r} is a {parsed.schema_type} schema")
        resources.update(parsed.resources)
        resources[ref.name] = parsed.json_schema
    cls = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)
    try:
        cls.check_schema(document)
    except jsonschema.exceptions.SchemaError as e:
        raise InvalidSchema(f"not a valid JSON Schema: {e.message}") from None
    spec = referencing.jsonschema.specification_with(
        cls.META_SCHEMA.get("$schema", ""), default=referencing.jsonschema.DRAFT7
    )
    registry: Any = referencing.Registry().with_resources(
        (name, referencing.Resource.from_contents(doc, default_specification=spec))
        for name, doc in resources.items()
    )
    root = referencing.Resource.from_contents(document, default_specification=spec)
    base = root.id() or ""
    registry = registry.with_resource(base, root)
    resolver = registry.resolver(base_uri=base)
    for ref in _json_refs(document):
        try:
            resolver.lookup(ref)
        except referencing.exceptions.Unresolvable as e:
            raise InvalidSchema(f"$ref {ref!r} cannot be resolved: {e}") from None
    identity = (
        _compact(document, sort_keys=True)
        + "|"
        + "|".join(sorted(f"{r.name}={r.subject}/{r.version}" for r, _ in refs))
    )
    return ParsedSchema(
        JSON,
        _compact(document),
        identity,
        tuple(r for r, _ in refs),
        json_schema=document,
        resources=resources,
    )


def _json_refs(document: Any) -> list[str]:
    out: list[str] = []
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                out.append(ref)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


# --------------------------------------------------------------------------------- Protobuf


WELL_KNOWN_MODULES = (
    "any",
    "api",
    "descriptor",
    "duration",
    "empty",
    "field_mask",
    "source_context",
    "struct",
    "timestamp",
    "type",
    "wrappers",
)


@functools.cache
def _well_known_files() -> dict[str, bytes]:
    """google/protobuf/*.proto of the protobuf package, name -> serialized descriptor."""
    import importlib

    out = {}
    for name in WELL_KNOWN_MODULES:
        module = importlib.import_module(f"google.protobuf.{name}_pb2")
        out[module.DESCRIPTOR.name] = module.DESCRIPTOR.serialized_pb
    return out


def _parse_protobuf(text: str, refs: list[tuple[Reference, ParsedSchema]]) -> ParsedSchema:
    from google.protobuf import descriptor_pb2

    files: dict[str, Any] = {}
    for ref, parsed in refs:
        if parsed.schema_type != PROTOBUF:
            raise InvalidSchema(f"reference {ref.name!r} is a {parsed.schema_type} schema")
        files.update(parsed.files)
        proto = descriptor_pb2.FileDescriptorProto()
        proto.CopyFrom(parsed.proto)
        proto.name = ref.name
        files[ref.name] = proto
    main = _from_base64(text)
    if main is None:
        main = _compile(text, files)
    _build(main, files)
    identity_proto = descriptor_pb2.FileDescriptorProto()
    identity_proto.CopyFrom(main)
    identity_proto.ClearField("name")
    identity_proto.ClearField("source_code_info")
    identity = base64.standard_b64encode(identity_proto.SerializeToString(deterministic=True))
    return ParsedSchema(
        PROTOBUF,
        text,
        identity.decode("ascii")
        + "|"
        + "|".join(sorted(f"{r.name}={r.subject}/{r.version}" for r, _ in refs)),
        tuple(r for r, _ in refs),
        proto=main,
        files=files,
    )


def _from_base64(text: str) -> Any:
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped):
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return None
    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(raw)
    except DecodeError:
        return None
    if not proto.name and not proto.message_type and not proto.enum_type:
        return None
    if not proto.name:
        proto.name = PROTO_MAIN
    return proto


COMPILED_CACHE_SIZE = 256
_compiled_lock = threading.Lock()
_compiled: dict[tuple[str, tuple[tuple[str, bytes], ...]], bytes | str] = {}
"""Recent protoc results (a serialized descriptor, or the error message), by text and
imports: a client repeating a lookup or a registration does not start protoc again."""


def _compile(text: str, files: Mapping[str, Any]) -> Any:
    """`text` compiled by protoc (remembered: `_compiled`)."""
    from google.protobuf import descriptor_pb2

    key = (
        text,
        tuple(sorted((n, p.SerializeToString(deterministic=True)) for n, p in files.items())),
    )
    with _compiled_lock:  # parsing runs in worker threads
        found = _compiled.get(key)
    if found is None:
        try:
            found = _run_protoc(text, files).SerializeToString()
        except InvalidSchema as e:
            found = e.message.removeprefix("Invalid schema: ")
        with _compiled_lock:
            if len(_compiled) >= COMPILED_CACHE_SIZE:
                _compiled.pop(next(iter(_compiled)))
            _compiled[key] = found
    if isinstance(found, str):
        raise InvalidSchema(found)
    return descriptor_pb2.FileDescriptorProto.FromString(found)


def _run_protoc(text: str, files: Mapping[str, Any]) -> Any:
    """`text` compiled by grpcio-tools' protoc into its FileDescriptorProto."""
    import grpc_tools
    from google.protobuf import descriptor_pb2

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="kafkalite-proto-") as tmp:
        main = os.path.join(tmp, "src", PROTO_MAIN)
        os.makedirs(os.path.dirname(main))
        with open(main, "w", encoding="utf-8") as f:
            f.write(text)
        out = os.path.join(tmp, "out.pb")
        args = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"--proto_path={os.path.dirname(main)}",
            f"--proto_path={include}",
            "--include_imports",
            f"--descriptor_set_out={out}",
        ]
        if files:
            given = descriptor_pb2.FileDescriptorSet()
            for proto in _dependency_order(files):
                given.file.add().CopyFrom(proto)
            refs = os.path.join(tmp, "refs.pb")
            with open(refs, "wb") as f:
                f.write(given.SerializeToString())
            args.append(f"--descriptor_set_in={refs}")
        args.append(PROTO_MAIN)
        try:
            done = subprocess.run(args, capture_output=True, timeout=PROTOC_TIMEOUT_S, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise InvalidSchema(f"protoc did not finish within {PROTOC_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").strip() or "protoc failed"
            raise InvalidSchema(
                message.replace(os.path.join(tmp, "src") + os.sep, "").replace(tmp, "")[:2000]
            )
        result = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            result.ParseFromString(f.read())
    for proto in result.file:
        if proto.name == PROTO_MAIN:
            return proto
    raise InvalidSchema("protoc gave no descriptor")


def _dependency_order(files: Mapping[str, Any]) -> list[Any]:
    out: list[Any] = []
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in done or name not in files:
            return
        if name in path:
            raise InvalidSchema(f"import cycle: {' -> '.join((*path, name))}")
        for dep in files[name].dependency:
            visit(dep, (*path, name))
        done.add(name)
        out.append(files[name])

    for name in files:
        visit(name, ())
    return out


def _build(main: Any, files: Mapping[str, Any]) -> None:
    """Build `main` in a fresh DescriptorPool with its imports: every type it names must
    resolve (protoc has checked a text schema already; a base64 one is checked here)."""
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    well_known = _well_known_files()
    added: set[str] = set()

    def add(name: str, path: tuple[str, ...]) -> None:
        if name in added:
            return
        if name in path:
            raise InvalidSchema(f"import cycle: {' -> '.join((*path, name))}")
        if name in files:
            proto = files[name]
            for dep in proto.dependency:
                add(dep, (*path, name))
            pool.Add(proto)
        elif name in well_known:
            pool.AddSerializedFile(well_known[name])
        else:
            raise InvalidSchema(f"import {name!r} is not a reference of the schema")
        added.add(name)

    for dep in main.dependency:
        add(dep, (main.name,))
    if main.name in added:
        raise InvalidSchema(f"the schema imports its own name {main.name!r}")
    try:
        pool.Add(main)
        pool.FindFileByName(main.name)
    except (TypeError, KeyError, ValueError) as e:
        raise InvalidSchema(f"{e}") from None
