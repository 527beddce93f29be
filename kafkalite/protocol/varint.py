"""Variable-length integers as Kafka's record format and flexible message versions use them.

Protobuf base-128 varints: 7 bits per byte, least significant group first, high bit set on
every byte but the last. Signed values are zig-zag encoded first (0, -1, 1, -2, ... -> 0, 1, 2,
3, ...) so small negative numbers stay short (Kafka's ``ByteUtils.writeVarint`` /
``writeVarlong``). ``varint`` means a signed 32-bit value (at most 5 bytes), ``varlong`` a signed
64-bit value (at most 10 bytes); ``unsigned_varint`` is the unsigned 32-bit form used by compact
strings and tagged fields.

Decoders take ``(buf, pos)`` and return ``(value, new_pos)``; they raise ``ValueError`` on a
truncated or over-long encoding (callers convert it to the protocol error that fits). The overflow
rule is Kafka's (``ByteUtils.readUnsignedVarint`` / ``readVarint`` / ``readVarlong``): a varint
(signed or unsigned) longer than 5 bytes or a varlong longer than 10 is an error; the bits of the
last byte beyond 32 (64) are dropped, as Java's int (long) arithmetic drops them.

This is the only varint code in kafkalite. The one-byte case (almost every length, count and
delta) is the fast path: each decoder returns it before any loop, and the hottest loops
(``records.py``'s record walk, ``produce_request.py``'s reader) test ``b < 0x80`` inline and call
here only for the longer encodings.
"""

from __future__ import annotations

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_UINT32_MAX = (1 << 32) - 1
_UINT64_MAX = (1 << 64) - 1

# Encodings of the zig-zagged values 0..127 are one byte each; precompute them.
_ONE_BYTE = [bytes([i]) for i in range(128)]


def _write_unsigned(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _encode_unsigned(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    _write_unsigned(out, value)
    return bytes(out)


def zigzag(value: int) -> int:
    """Signed -> unsigned, for any value in the int64 range."""
    return (value << 1) ^ (value >> 63)


def unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def encode_varint(value: int) -> bytes:
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return _encode_unsigned((value << 1) ^ (value >> 31))


def encode_varlong(value: int) -> bytes:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return _encode_unsigned((value << 1) ^ (value >> 63))


def encode_unsigned_varint(value: int) -> bytes:
    if not 0 <= value <= _UINT32_MAX:
        raise ValueError(f"unsigned varint out of uint32 range: {value}")
    return _encode_unsigned(value)


def write_varint(out: bytearray, value: int) -> None:
    """Append the zig-zag varint encoding of an int32 to ``out``."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    _write_unsigned(out, (value << 1) ^ (value >> 31))


def write_unsigned_varint(out: bytearray, value: int) -> None:
    """Append the unsigned varint encoding of a uint32 to ``out``."""
    if 0 <= value < 0x80:
        out.append(value)
        return
    if not 0 <= value <= _UINT32_MAX:
        raise ValueError(f"unsigned varint out of uint32 range: {value}")
    _write_unsigned(out, value)


def write_varlong(out: bytearray, value: int) -> None:
    """Append the zig-zag varlong encoding of an int64 to ``out``."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    _write_unsigned(out, (value << 1) ^ (value >> 63))


def _decode_unsigned(
    buf: bytes | bytearray | memoryview, pos: int, max_bytes: int
) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise ValueError(f"varint longer than {max_bytes} bytes")


def decode_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode a zig-zag int32 varint at ``pos``: ``(value, position after it)``."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:  # the common one-byte case
            return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = decode_unsigned_varint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode a zig-zag int64 varlong at ``pos``: ``(value, position after it)``."""
    b = buf[pos] if pos < len(buf) else 0x80
    if not b & 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = _decode_unsigned(buf, pos, 10)
    raw &= _UINT64_MAX
    return (raw >> 1) ^ -(raw & 1), pos


def decode_unsigned_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned uint32 varint at ``pos``: ``(value, position after it)``.

    Unrolled as Kafka's ``ByteUtils.readUnsignedVarint`` is: no loop, no shift counter."""
    try:
        b = buf[pos]
        if b < 0x80:  # the common one-byte case
            return b, pos + 1
        value = b & 0x7F
        b = buf[pos + 1]
        if b < 0x80:
            return value | b << 7, pos + 2
        value |= (b & 0x7F) << 7
        b = buf[pos + 2]
        if b < 0x80:
            return value | b << 14, pos + 3
        value |= (b & 0x7F) << 14
        b = buf[pos + 3]
        if b < 0x80:
            return value | b << 21, pos + 4
        value |= (b & 0x7F) << 21
        b = buf[pos + 4]
    except IndexError:
        raise ValueError("truncated varint") from None
    if b < 0x80:
        return (value | b << 28) & _UINT32_MAX, pos + 5
    raise ValueError("varint longer than 5 bytes")


def size_of_varint(value: int) -> int:
    """Bytes ``encode_varint(value)`` takes."""
    return size_of_unsigned_varint(((value << 1) ^ (value >> 31)) & _UINT32_MAX)


def size_of_varlong(value: int) -> int:
    return size_of_unsigned_varint(((value << 1) ^ (value >> 63)) & _UINT64_MAX)


def size_of_unsigned_varint(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)
