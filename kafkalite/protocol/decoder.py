"""Pure-Python message decoders, generated per class: the fallback for kio's native reader.

kio's native reader is fast (a few µs per request) but refuses a tagged field it has no schema
for, while Kafka's rule (KIP-482) is to skip unknown tags: a newer client may add tags to a
version we already speak. ``frames`` decodes with the native reader and, only when that fails
on an unknown tag, decodes again with the decoder generated here, which skips them. Same
format as ``encoder.py``; the result equals what the native reader returns for known fields
(plain ints and strs, kio's ErrorCode, ``timedelta`` / tz-aware ``datetime``, ``UUID`` or None
for the zero UUID, ``bytes`` for bytes and records).

Decoders raise ``InvalidRequestError`` on truncated or garbled input. A millisecond count that
fits its int64 but not Python's ``timedelta`` (about 2.7 million years; Kafka reads any long)
is decoded as an ``OutOfRange`` (a timedelta subclass, clamped to the nearest limit, with the
wire value) so the caller can answer the request (``out_of_range`` finds one) rather than treat
the frame as unreadable.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import struct
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.serial.readers import tz_aware_from_i64

from .errors import InvalidRequestError
from .varint import decode_unsigned_varint

Decoder = Callable[[Any, int], tuple[Any, int]]


class OutOfRange(datetime.timedelta):
    """A duration beyond timedelta's range, clamped to it; ``wire_value`` is what was sent."""

    wire_value: int

    @classmethod
    def of(cls, milliseconds: int) -> OutOfRange:
        limit = datetime.timedelta.max if milliseconds > 0 else datetime.timedelta.min
        out = cls(limit.days, limit.seconds, limit.microseconds)
        out.wire_value = milliseconds
        return out


def out_of_range(message: Any) -> str | None:
    """The path of the first ``OutOfRange`` value in a decoded message, else None."""
    if isinstance(message, OutOfRange):
        return ""
    if isinstance(message, tuple):
        for i, item in enumerate(message):
            found = out_of_range(item)
            if found is not None:
                return f"[{i}]{found}"
        return None
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        for field in dataclasses.fields(message):
            found = out_of_range(getattr(message, field.name))
            if found is not None:
                return f".{field.name}{found}"
    return None


_FIXED = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
    "uint8": struct.Struct(">B"),
    "uint16": struct.Struct(">H"),
    "uint32": struct.Struct(">I"),
    "uint64": struct.Struct(">Q"),
    "float64": struct.Struct(">d"),
    "bool": struct.Struct(">?"),
    "error_code": struct.Struct(">h"),
    "timedelta_i32": struct.Struct(">i"),
    "timedelta_i64": struct.Struct(">q"),
    "datetime_i64": struct.Struct(">q"),
}
_I16 = _FIXED["int16"]
_I32 = _FIXED["int32"]
_ZERO_UUID = uuid.UUID(int=0)


def _uvarint(buf: Any, pos: int) -> tuple[int, int]:
    try:
        return decode_unsigned_varint(buf, pos)
    except ValueError as e:
        raise InvalidRequestError(str(e)) from None


def _take(buf: Any, pos: int, size: int) -> tuple[bytes, int]:
    end = pos + size
    if size < 0 or end > len(buf):
        raise InvalidRequestError("truncated field")
    return bytes(buf[pos:end]), end


def _fixed(kafka_type: str) -> Callable[[Any, int], tuple[Any, int]]:
    unpack = _FIXED[kafka_type].unpack_from
    size = _FIXED[kafka_type].size

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        if pos + size > len(buf):
            raise InvalidRequestError("truncated field")
        return unpack(buf, pos)[0], pos + size

    if kafka_type == "error_code":

        def read_error(buf: Any, pos: int) -> tuple[Any, int]:
            value, pos = read(buf, pos)
            try:
                return KioErrorCode(value), pos
            except ValueError:
                raise InvalidRequestError(f"unknown error code {value}") from None

        return read_error
    if kafka_type in ("timedelta_i32", "timedelta_i64"):

        def read_delta(buf: Any, pos: int) -> tuple[Any, int]:
            value, pos = read(buf, pos)
            try:
                return datetime.timedelta(milliseconds=value), pos
            except OverflowError:
                return OutOfRange.of(value), pos

        return read_delta
    return read


def _datetime(nullable: bool) -> Callable[[Any, int], tuple[Any, int]]:
    read = _fixed("int64")

    def read_datetime(buf: Any, pos: int) -> tuple[Any, int]:
        value, pos = read(buf, pos)
        if nullable and value == -1:
            return None, pos
        return tz_aware_from_i64(value), pos

    return read_datetime


def _string(flexible: bool, as_bytes: bool) -> Callable[[Any, int], tuple[Any, int]]:
    def read(buf: Any, pos: int) -> tuple[Any, int]:
        if flexible:
            n, pos = _uvarint(buf, pos)
            size = n - 1
        elif as_bytes:
            if pos + 4 > len(buf):
                raise InvalidRequestError("truncated length")
            size = _I32.unpack_from(buf, pos)[0]
            pos += 4
        else:
            if pos + 2 > len(buf):
                raise InvalidRequestError("truncated length")
            size = _I16.unpack_from(buf, pos)[0]
            pos += 2
        if size == -1:
            return None, pos
        data, pos = _take(buf, pos, size)
        if as_bytes:
            return data, pos
        try:
            return data.decode(), pos
        except UnicodeDecodeError:
            raise InvalidRequestError("string is not UTF-8") from None

    return read


def _read_uuid(buf: Any, pos: int) -> tuple[Any, int]:
    data, pos = _take(buf, pos, 16)
    value = uuid.UUID(bytes=data)
    return (None if value == _ZERO_UUID else value), pos


def _primitive(kafka_type: str, flexible: bool, nullable: bool) -> Callable:
    if kafka_type in ("string",):
        return _string(flexible, as_bytes=False)
    if kafka_type in ("bytes", "records"):
        return _string(flexible, as_bytes=True)
    if kafka_type == "uuid":
        return _read_uuid
    if kafka_type == "datetime_i64":
        return _datetime(nullable)
    return _fixed(kafka_type)


def _array(flexible: bool, item: Callable) -> Callable:
    def read(buf: Any, pos: int) -> tuple[Any, int]:
        if flexible:
            n, pos = _uvarint(buf, pos)
            count = n - 1
        else:
            if pos + 4 > len(buf):
                raise InvalidRequestError("truncated array length")
            count = _I32.unpack_from(buf, pos)[0]
            pos += 4
        if count == -1:
            return None, pos
        if count < 0 or count > len(buf) - pos:
            raise InvalidRequestError(f"array length {count} exceeds the frame")
        items = []
        for _ in range(count):
            value, pos = item(buf, pos)
            items.append(value)
        return tuple(items), pos

    return read


def _nullable_entity(read_entity: Callable) -> Callable:
    def read(buf: Any, pos: int) -> tuple[Any, int]:
        if pos >= len(buf):
            raise InvalidRequestError("truncated struct marker")
        marker = buf[pos]
        if marker == 0xFF:
            return None, pos + 1
        return read_entity(buf, pos + 1)

    return read


def _field_reader(field: dataclasses.Field, flexible: bool, tagged: bool) -> Callable:
    kind = classify_field(field)
    kafka_type = field.metadata.get("kafka_type")
    nullable = is_optional(field) and not tagged
    if isinstance(kind, PrimitiveField):
        return _primitive(kafka_type, flexible, nullable)
    if isinstance(kind, PrimitiveTupleField):
        return _array(flexible, _primitive(kafka_type, flexible, False))
    if isinstance(kind, EntityField):
        read = decoder_for(kind.type_)
        return _nullable_entity(read) if nullable else read
    if isinstance(kind, EntityTupleField):
        return _array(flexible, decoder_for(kind.type_))
    raise NotImplementedError(field.name)


@functools.cache
def decoder_for(cls: type) -> Decoder:
    """``(buf, pos) -> (message, new_pos)`` for a kio-style message class; unknown tagged
    fields are skipped."""
    flexible = bool(cls.__flexible__)
    regular: list[tuple[str, Callable]] = []
    tagged: dict[int, tuple[str, Callable]] = {}
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        if tag is None:
            regular.append((field.name, _field_reader(field, flexible, False)))
        else:
            tagged[tag] = (field.name, _field_reader(field, True, True))

    def decode(buf: Any, pos: int) -> tuple[Any, int]:
        values: dict[str, Any] = {}
        for name, read in regular:
            values[name], pos = read(buf, pos)
        if flexible:
            count, pos = _uvarint(buf, pos)
            for _ in range(count):
                tag, pos = _uvarint(buf, pos)
                size, pos = _uvarint(buf, pos)
                end = pos + size
                if end > len(buf):
                    raise InvalidRequestError("truncated tagged field")
                known = tagged.get(tag)
                if known is not None:
                    name, read = known
                    values[name], used = read(buf, pos)
                    if used != end:
                        raise InvalidRequestError(f"tagged field {tag} has the wrong size")
                pos = end
        try:
            return cls(**values), pos
        except (TypeError, ValueError) as e:
            raise InvalidRequestError(f"cannot build {cls.__name__}: {e}") from None

    return decode
