"""kafkalite.protocol.varint: the one varint codec, checked against Kafka's ``ByteUtils``."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol import frames
from kafkalite.protocol.errors import InvalidRequestError
from kafkalite.protocol.varint import (
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    size_of_unsigned_varint,
    size_of_varint,
    size_of_varlong,
    write_unsigned_varint,
    write_varint,
    write_varlong,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
UINT32 = st.integers(0, 2**32 - 1)
BUFFER_TYPES = st.sampled_from([bytes, bytearray, memoryview])


def kafka_read_unsigned(buf: bytes, pos: int, max_bytes: int, bits: int) -> tuple[int, int]:
    """Kafka's ByteUtils.readUnsignedVarint/readUnsignedVarlong, as a plain loop: an error past
    ``max_bytes`` bytes or at the end of the buffer; bits beyond ``bits`` dropped."""
    value = 0
    for i in range(max_bytes):
        if pos + i >= len(buf):
            raise ValueError("truncated")
        b = buf[pos + i]
        value |= (b & 0x7F) << (7 * i)
        if b < 0x80:
            return value & ((1 << bits) - 1), pos + i + 1
    raise ValueError("too long")


def unzigzag(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_varint_known_encodings(value, encoded):
    # Values from the protobuf zig-zag definition (Kafka's ByteUtils agrees).
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))
    assert size_of_varint(value) == len(encoded)


@settings(max_examples=300, deadline=None)
@given(INT32, st.binary(max_size=3), st.binary(max_size=3), BUFFER_TYPES)
def test_varint_round_trip(value, prefix, suffix, kind):
    encoded = encode_varint(value)
    out = bytearray(prefix)
    write_varint(out, value)
    assert bytes(out) == prefix + encoded
    assert len(encoded) == size_of_varint(value) <= 5
    buf = kind(prefix + encoded + suffix)
    assert decode_varint(buf, len(prefix)) == (value, len(prefix) + len(encoded))
    assert decode_varlong(buf, len(prefix)) == (value, len(prefix) + len(encoded))


@settings(max_examples=300, deadline=None)
@given(INT64, st.binary(max_size=3), st.binary(max_size=3), BUFFER_TYPES)
def test_varlong_round_trip(value, prefix, suffix, kind):
    encoded = encode_varlong(value)
    out = bytearray(prefix)
    write_varlong(out, value)
    assert bytes(out) == prefix + encoded
    assert len(encoded) == size_of_varlong(value) <= 10
    buf = kind(prefix + encoded + suffix)
    assert decode_varlong(buf, len(prefix)) == (value, len(prefix) + len(encoded))


@settings(max_examples=300, deadline=None)
@given(UINT32, st.binary(max_size=3), st.binary(max_size=3), BUFFER_TYPES)
def test_unsigned_varint_round_trip(value, prefix, suffix, kind):
    encoded = encode_unsigned_varint(value)
    out = bytearray(prefix)
    write_unsigned_varint(out, value)
    assert bytes(out) == prefix + encoded
    assert len(encoded) == size_of_unsigned_varint(value) <= 5
    buf = kind(prefix + encoded + suffix)
    assert decode_unsigned_varint(buf, len(prefix)) == (value, len(prefix) + len(encoded))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=12), st.integers(0, 3))
def test_decoders_agree_with_kafka_on_any_bytes(data, pos):
    """Whatever the bytes, each decoder answers as Kafka's ByteUtils does: the same value and
    position, or an error (a truncated encoding, more than 5 bytes, more than 10 for varlong)."""
    for decode, max_bytes, bits, signed in (
        (decode_unsigned_varint, 5, 32, False),
        (decode_varint, 5, 32, True),
        (decode_varlong, 10, 64, True),
    ):
        try:
            raw, end = kafka_read_unsigned(data, pos, max_bytes, bits)
        except ValueError:
            with pytest.raises(ValueError):
                decode(data, pos)
            continue
        assert decode(data, pos) == ((unzigzag(raw) if signed else raw), end)


@settings(max_examples=200, deadline=None)
@given(UINT32, st.data())
def test_every_truncation_is_an_error(value, data):
    encoded = encode_varlong(value) if data.draw(st.booleans()) else encode_unsigned_varint(value)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    for decode in (decode_unsigned_varint, decode_varint, decode_varlong):
        if decode is not decode_varlong and len(encoded) > 5:
            continue
        with pytest.raises(ValueError, match="truncated"):
            decode(encoded[:cut])


def test_overflow_rule_is_kafkas():
    # Five bytes at most for a varint (signed or not), ten for a varlong ...
    for decode in (decode_unsigned_varint, decode_varint):
        with pytest.raises(ValueError, match="longer than 5 bytes"):
            decode(b"\x80\x80\x80\x80\x80\x00")
        with pytest.raises(ValueError, match="longer than 5 bytes"):
            decode(b"\xff\xff\xff\xff\xff\x01")
    assert decode_varlong(b"\x80\x80\x80\x80\x80\x00") == (0, 6)
    with pytest.raises(ValueError, match="longer than 10 bytes"):
        decode_varlong(b"\xff" * 10 + b"\x01")
    # ... and the last byte's bits beyond 32 (64) are dropped, as Java's int (long) drops them.
    assert decode_unsigned_varint(b"\xff\xff\xff\xff\x7f") == (2**32 - 1, 5)
    assert decode_varint(b"\xfe\xff\xff\xff\x7f") == (2**31 - 1, 5)
    assert decode_varlong(b"\xff" * 9 + b"\x7f") == (-(2**63), 10)


def test_encoders_refuse_values_out_of_range():
    with pytest.raises(ValueError):
        encode_varint(2**31)
    with pytest.raises(ValueError):
        encode_varlong(-(2**63) - 1)
    with pytest.raises(ValueError):
        encode_unsigned_varint(-1)
    with pytest.raises(ValueError):
        write_unsigned_varint(bytearray(), 2**32)


def test_a_six_byte_varint_in_a_request_header_is_invalid():
    # A flexible request header's tagged-field count, six bytes long: Kafka refuses it.
    header = (
        b"\x00\x12\x00\x03\x00\x00\x00\x07\x00\x01c"  # ApiVersions v3, correlation 7, client "c"
        + b"\x80\x80\x80\x80\x80\x00"
    )
    with pytest.raises(InvalidRequestError, match="longer than 5 bytes"):
        frames.parse_request_header(memoryview(header))
