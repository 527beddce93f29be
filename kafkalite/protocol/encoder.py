"""Compiled message encoders: kio's wire format, generated Python per message class.

kio's writer walks a list of per-field closures and, for flexible versions, encodes the tagged
fields of every struct through a fresh ``io.BytesIO``; a one-partition ProduceResponse v9 takes
~90 µs that way. This module generates, once per dataclass, a plain function that appends the
fields to a ``bytearray`` with precompiled ``struct`` packers (the same bytes, ~10x faster).
The encoding rules are kio's (``kio.serial._serialize``), which follow Kafka's generated code:

- flexible versions: compact strings/bytes/arrays (unsigned varint length + 1, 0 = null),
  a tagged-field section after every struct (count, then tag/size/value in tag order; fields
  holding their default are not written);
- other versions: int16-length strings, int32-length bytes and arrays (-1 = null);
- nullable structs (KIP-893): an int8 marker (-1 null, 1 present) before the struct;
- an array of structs whose value is an ``Encoded`` is written as its bytes, which are the
  whole field as it would be encoded (array length included): a request sent to several
  brokers encodes its large arrays once (the controller's UpdateMetadata and LeaderAndIsr);
- ``records`` fields are written as bytes; with a ``Parts`` collector, a records buffer of at
  least ``Parts.threshold`` bytes, or any non-bytes object (a log slice), is kept by reference
  as a part of its own instead of being copied (zero-copy Fetch responses).

The oracle for this module is kio's own writer: tests compare both on generated messages.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable
from dataclasses import MISSING
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from .varint import write_unsigned_varint

Encoder = Callable[[bytearray, "Parts | None", Any], None]

_ZERO_UUID = bytes(16)


class Parts:
    """Collects the output of one encode as a list of buffers (see the module docstring)."""

    __slots__ = ("items", "threshold")

    def __init__(self, threshold: int) -> None:
        self.items: list[Any] = []
        self.threshold = threshold

    def take(self, out: bytearray, obj: Any) -> None:
        if out:
            self.items.append(bytes(out))
            del out[:]
        self.items.append(obj)


class Encoded:
    """The wire bytes of an array-of-structs field, length prefix included, standing in for
    its tuple of structs (see the module docstring). The producer guarantees they are what the
    message class's encoder would write for that tuple."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"Encoded({len(self.data)} bytes)"


def _compact_str(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    data = value.encode()
    write_unsigned_varint(out, len(data) + 1)
    out += data


def _legacy_str(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    data = value.encode()
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
    out += _H(len(data))
    out += data


def _bytes_like(value: Any) -> bool:
    return isinstance(value, bytes | bytearray | memoryview)


def _put_bytes(out: bytearray, parts: Parts | None, value: Any) -> None:
    if parts is not None and (not _bytes_like(value) or len(value) >= parts.threshold):
        parts.take(out, value)
    elif isinstance(value, str):
        out += value.encode()
    else:
        out += value


def _compact_bytes(out: bytearray, parts: Parts | None, value: Any) -> None:
    if value is None:
        out.append(0)
        return
    if isinstance(value, str):
        value = value.encode()
    write_unsigned_varint(out, len(value) + 1)
    _put_bytes(out, parts, value)


def _legacy_bytes(out: bytearray, parts: Parts | None, value: Any) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += _I(len(value))
    _put_bytes(out, parts, value)


_b = struct.Struct(">b").pack
_H = struct.Struct(">h").pack
_I = struct.Struct(">i").pack
_q = struct.Struct(">q").pack

_NAMESPACE: dict[str, Any] = {
    "write_unsigned_varint": write_unsigned_varint,
    "_compact_str": _compact_str,
    "_legacy_str": _legacy_str,
    "_compact_bytes": _compact_bytes,
    "_legacy_bytes": _legacy_bytes,
    "_ZERO_UUID": _ZERO_UUID,
    "_Encoded": Encoded,
    "_i8": _b,
    "_i16": _H,
    "_i32": _I,
    "_i64": _q,
    "_u8": struct.Struct(">B").pack,
    "_u16": struct.Struct(">H").pack,
    "_u32": struct.Struct(">I").pack,
    "_u64": struct.Struct(">Q").pack,
    "_f64": struct.Struct(">d").pack,
}

_FIXED = {
    "int8": "_i8",
    "int16": "_i16",
    "int32": "_i32",
    "int64": "_i64",
    "uint8": "_u8",
    "uint16": "_u16",
    "uint32": "_u32",
    "uint64": "_u64",
    "float64": "_f64",
}


def _primitive(kafka_type: str, flexible: bool, expr: str) -> list[str]:
    """Statements writing the primitive ``expr`` (may be None only where the type allows)."""
    if kafka_type in _FIXED:
        return [f"out += {_FIXED[kafka_type]}({expr})"]
    if kafka_type == "bool":
        return [f"out += b'\\x01' if {expr} else b'\\x00'"]
    if kafka_type == "error_code":
        return [f"out += _i16(int({expr}))"]
    if kafka_type == "timedelta_i32":
        return [f"out += _i32(round({expr}.total_seconds() * 1000))"]
    if kafka_type == "timedelta_i64":
        return [f"out += _i64(round({expr}.total_seconds() * 1000))"]
    if kafka_type == "datetime_i64":
        return [
            f"_t = {expr}",
            "out += _i64(-1 if _t is None else round(_t.timestamp() * 1000))",
        ]
    if kafka_type == "uuid":
        return [f"_t = {expr}", "out += _ZERO_UUID if _t is None else _t.bytes"]
    if kafka_type == "string":
        return [f"{'_compact_str' if flexible else '_legacy_str'}(out, {expr})"]
    if kafka_type in ("bytes", "records"):
        return [f"{'_compact_bytes' if flexible else '_legacy_bytes'}(out, parts, {expr})"]
    raise NotImplementedError(f"kafka type {kafka_type!r}")


def _array_length(flexible: bool, expr: str) -> list[str]:
    if flexible:
        return [
            f"_n = {expr}",
            "if _n is None: out.append(0)",
            "else: write_unsigned_varint(out, len(_n) + 1)",
        ]
    return [
        f"_n = {expr}",
        "out += _i32(-1 if _n is None else len(_n))",
    ]


def _field_statements(
    field: dataclasses.Field, flexible: bool, expr: str, depth: int, *, tagged: bool = False
) -> list[str]:
    kind = classify_field(field)
    kafka_type = field.metadata.get("kafka_type")
    item = f"_x{depth}"
    if isinstance(kind, PrimitiveField):
        return _primitive(kafka_type, flexible, expr)
    if isinstance(kind, PrimitiveTupleField):
        body = _primitive(kafka_type, flexible, item)
        return [
            *_array_length(flexible, expr),
            f"for {item} in (_n or ()):",
            *("    " + line for line in body),
        ]
    if isinstance(kind, EntityField):
        name = _encoder_name(kind.type_)
        if is_optional(field) and not tagged:  # tagged fields carry no null marker
            return [
                f"_t = {expr}",
                "if _t is None:",
                "    out += b'\\xff'",
                "else:",
                "    out += b'\\x01'",
                f"    {name}(out, parts, _t)",
            ]
        return [f"{name}(out, parts, {expr})"]
    if isinstance(kind, EntityTupleField):
        name = _encoder_name(kind.type_)
        return [
            f"_n = {expr}",
            "if _n.__class__ is _Encoded:",
            "    out += _n.data",
            "else:",
            *("    " + line for line in _array_length(flexible, "_n")),
            f"    for {item} in (_n or ()):",
            f"        {name}(out, parts, {item})",
        ]
    raise NotImplementedError(f"field {field.name}")


def _encoder_name(cls: type) -> str:
    encoder_for(cls)  # compile dependencies first
    return f"_enc_{id(cls)}"


def _source(cls: type) -> str:
    flexible = bool(cls.__flexible__)
    lines = [f"def _enc_{id(cls)}(out, parts, v):"]
    tagged = []
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        if tag is not None:
            tagged.append((tag, field))
            continue
        lines += ["    " + s for s in _field_statements(field, flexible, f"v.{field.name}", 0)]
    if flexible:
        if not tagged:
            lines.append("    out.append(0)")
        else:
            lines.append("    _tags = []")
            for tag, field in sorted(tagged, key=lambda t: t[0]):
                default_name = f"_default_{id(cls)}_{field.name}"
                _NAMESPACE[default_name] = (
                    field.default
                    if field.default is not MISSING
                    else get_tagged_field_default(field)
                )
                body = _field_statements(field, True, "_tv", 1, tagged=True)
                lines += [
                    f"    _tv = v.{field.name}",
                    f"    if _tv != {default_name}:",
                    "        _outer = out",
                    "        out = bytearray()",
                    *("        " + s for s in body),
                    f"        _tags.append(({tag}, out))",
                    "        out = _outer",
                ]
            lines += [
                "    write_unsigned_varint(out, len(_tags))",
                "    for _tag, _data in _tags:",
                "        write_unsigned_varint(out, _tag)",
                "        write_unsigned_varint(out, len(_data))",
                "        out += _data",
            ]
    if len(lines) == 1:
        lines.append("    pass")
    return "\n".join(lines) + "\n"


@functools.cache
def encoder_for(cls: type) -> Encoder:
    """The compiled encoder ``(out: bytearray, parts: Parts | None, message) -> None`` for a
    kio-style message class."""
    source = _source(cls)
    code = compile(source, f"<kafkalite encoder {cls.__module__}.{cls.__name__}>", "exec")
    exec(code, _NAMESPACE)
    return _NAMESPACE[f"_enc_{id(cls)}"]


def encode(message: Any) -> bytes:
    """The message body as bytes."""
    out = bytearray()
    encoder_for(type(message))(out, None, message)
    return bytes(out)
