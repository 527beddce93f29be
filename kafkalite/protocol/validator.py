"""Structural pre-check of message bodies before kio's native reader sees them.

kio's native reader sizes every array from the length the frame declares before reading any
element. A 40-byte frame declaring an array of 2^31 structs makes it request hundreds of GB,
and a failed allocation in native code aborts the whole process (not an exception): any
client could kill the broker. Kafka's own parser guards against this by refusing a length
larger than the bytes left (``ByteBufferAccessor`` / ``MessageUtil``); this module does the
same, once per message, before the native decode:

- every array length must be null or at most the number of bytes left (each element takes at
  least one byte), every string/bytes length must fit in what is left;
- the walk covers nested structs, nullable structs and known tagged fields (the native reader
  decodes those too); unknown tags are skipped by their declared size.

``validator_for(cls)`` generates, once per class, a function ``(buf, pos) -> end`` that walks
the body without building anything, raising ``InvalidRequestError`` on the first violation.
Given a list, it also notes every null where the version's schema allows none (a comparison per
field on a walk that happens anyway), for request_checks to refuse the request with an answer.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from .errors import InvalidRequestError
from .varint import decode_unsigned_varint

Validator = Callable[..., int]

_SIZES = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}


def _bad(message: str) -> InvalidRequestError:
    return InvalidRequestError(message)


def _uvarint(buf: Any, pos: int) -> tuple[int, int]:
    try:
        return decode_unsigned_varint(buf, pos)
    except ValueError as e:
        raise _bad(str(e)) from None


_i16 = struct.Struct(">h").unpack_from
_i32 = struct.Struct(">i").unpack_from


def _length(buf: Any, pos: int, flexible: bool, int16: bool) -> tuple[int, int]:
    """(declared length, new position); -1 for null. Checks it fits in what is left."""
    if flexible:
        n, pos = _uvarint(buf, pos)
        size = n - 1
    elif int16:
        if pos + 2 > len(buf):
            raise _bad("truncated length")
        size = _i16(buf, pos)[0]
        pos += 2
    else:
        if pos + 4 > len(buf):
            raise _bad("truncated length")
        size = _i32(buf, pos)[0]
        pos += 4
    if size < -1 or size > len(buf) - pos:
        raise _bad(f"length {size} exceeds the {len(buf) - pos} bytes left")
    return size, pos


_NAMESPACE: dict[str, Any] = {"_uvarint": _uvarint, "_length": _length, "_bad": _bad}


def _read_length(target: str, flexible: bool, int16: bool, fast: bool) -> list[str]:
    """Statements setting ``target`` and ``pos`` as ``_length`` does. ``fast``: a compact
    length of one varint byte (any length up to 126, most of a message's) is read inline, with
    the same check and message; anything else calls ``_length``. A call and a varint decoder's
    call per length were half of the walk's time (3 µs a partition of a LeaderAndIsr)."""
    if not (fast and flexible):
        return [f"{target}, pos = _length(buf, pos, {flexible}, {int16})"]
    return [
        "if pos < len(buf) and buf[pos] < 0x80:",
        f"    {target} = buf[pos] - 1",
        "    pos += 1",
        f"    if {target} > len(buf) - pos:",
        f"        raise _bad(f'length {{{target}}} exceeds the {{len(buf) - pos}} bytes left')",
        "else:",
        f"    {target}, pos = _length(buf, pos, True, False)",
    ]


def _read_uvarint(target: str, fast: bool) -> list[str]:
    """Statements setting ``target`` and ``pos`` as ``_uvarint`` does, one byte inline when
    ``fast`` (a tagged-field count, tag or size is nearly always one byte)."""
    if not fast:
        return [f"{target}, pos = _uvarint(buf, pos)"]
    return [
        "if pos < len(buf) and buf[pos] < 0x80:",
        f"    {target} = buf[pos]",
        "    pos += 1",
        "else:",
        f"    {target}, pos = _uvarint(buf, pos)",
    ]


def _primitive(
    kafka_type: str, flexible: bool, null: str | None = None, fast: bool = True
) -> list[str]:
    """Statements skipping one value; ``null``: the field path to record in ``nulls`` when a
    string or bytes the schema does not allow to be null is null."""
    if kafka_type in _SIZES:
        return [f"pos += {_SIZES[kafka_type]}"]
    if kafka_type in ("string", "bytes", "records"):
        short = kafka_type == "string"
        lines = [*_read_length("_s", flexible, short, fast), "if _s > 0: pos += _s"]
        if null is not None:
            lines.append(f"elif _s == -1 and nulls is not None: nulls.append({null!r})")
        return lines
    raise NotImplementedError(kafka_type)


def _null_check(field: dataclasses.Field, tagged: bool, owner: str) -> str | None:
    """The path recorded when this field is null but its schema does not allow it."""
    if tagged or is_optional(field):
        return None
    return f"{owner}.{field.name}"


def _field(
    field: dataclasses.Field,
    flexible: bool,
    depth: int,
    tagged: bool,
    owner: str = "",
    fast: bool = True,
) -> list[str]:
    kind = classify_field(field)
    kafka_type = field.metadata.get("kafka_type")
    null = _null_check(field, tagged, owner)
    if isinstance(kind, PrimitiveField):
        return _primitive(kafka_type, flexible, null, fast)
    loop = f"_i{depth}"
    record_null = (
        [f"if _n == -1 and nulls is not None: nulls.append({null!r})"] if null is not None else []
    )
    if isinstance(kind, PrimitiveTupleField):
        lines = [*_read_length("_n", flexible, False, fast), *record_null]
        if kafka_type in _SIZES:
            return [*lines, f"if _n > 0: pos += _n * {_SIZES[kafka_type]}"]
        return [
            *lines,
            f"for {loop} in range(max(_n, 0)):",
            *("    " + s for s in _primitive(kafka_type, flexible, fast=fast)),
        ]
    if isinstance(kind, EntityField):
        name = _name(kind.type_, fast)
        if is_optional(field) and not tagged:
            return [
                "if pos >= len(buf): raise _bad('truncated struct marker')",
                "if buf[pos] == 0xFF: pos += 1",
                f"else: pos = {name}(buf, pos + 1, nulls)",
            ]
        return [f"pos = {name}(buf, pos, nulls)"]
    if isinstance(kind, EntityTupleField):
        name = _name(kind.type_, fast)
        return [
            *_read_length("_n", flexible, False, fast),
            *record_null,
            f"for {loop} in range(max(_n, 0)):",
            f"    pos = {name}(buf, pos, nulls)",
        ]
    raise NotImplementedError(field.name)


def _name(cls: type, fast: bool = True) -> str:
    """The name of ``cls``'s walk in the namespace, compiled first if it is not yet."""
    (validator_for if fast else reference_validator_for)(cls)
    return _name_of(cls, fast)


def _source(cls: type, fast: bool = True) -> str:
    flexible = bool(cls.__flexible__)
    lines = [f"def {_name_of(cls, fast)}(buf, pos, nulls=None):"]
    tagged: dict[int, dataclasses.Field] = {}
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        if tag is not None:
            tagged[tag] = field
            continue
        lines += ["    " + s for s in _field(field, flexible, 0, False, cls.__name__, fast)]
    if flexible:
        lines += [
            *("    " + s for s in _read_uvarint("_count", fast)),
            "    for _k in range(_count):",
            "        _tag, pos = _uvarint(buf, pos)",
            "        _size, pos = _uvarint(buf, pos)",
            "        _end = pos + _size",
            "        if _end > len(buf): raise _bad('truncated tagged field')",
        ]
        for tag, field in sorted(tagged.items()):
            lines += [
                f"        if _tag == {tag}:",
                "            _whole = buf",
                "            buf = buf[:_end]",  # a known tag may not read past its size
                *("            " + s for s in _field(field, True, 1, True, "", fast)),
                "            buf = _whole",
            ]
        lines.append("        pos = _end")
    lines += ["    if pos > len(buf): raise _bad('body is truncated')", "    return pos"]
    return "\n".join(lines) + "\n"


@functools.cache
def validator_for(cls: type) -> Validator:
    """``(buf, pos, nulls=None) -> end of the body`` for a kio-style message class; raises
    InvalidRequestError when a length does not fit the bytes left or the body is truncated.
    With a ``nulls`` list, the path (``Struct.field``) of every null found where the version's
    schema does not allow one is appended to it (the walk goes on: every length is still
    checked)."""
    return _compiled(cls, fast=True)


@functools.cache
def reference_validator_for(cls: type) -> Validator:
    """``validator_for`` without the inline one-byte lengths: every length read by ``_length``
    and ``_uvarint``. The tests compare the two walks on damaged frames."""
    return _compiled(cls, fast=False)


def _name_of(cls: type, fast: bool) -> str:
    return f"_val_{id(cls)}" if fast else f"_ref_{id(cls)}"


def _compiled(cls: type, *, fast: bool) -> Validator:
    source = _source(cls, fast)
    kind = "validator" if fast else "reference validator"
    code = compile(source, f"<kafkalite {kind} {cls.__module__}.{cls.__name__}>", "exec")
    exec(code, _NAMESPACE)
    return _NAMESPACE[_name_of(cls, fast)]
