import datetime
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.fetch.v12.response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v7.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.static.primitive import Records

from kafkalite.protocol.api import SUPPORTED_VERSIONS, ApiKey, request_class, response_class
from kafkalite.protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    UnsupportedVersionError,
)
from kafkalite.protocol.frames import (
    RequestHeader,
    api_versions_fallback,
    api_versions_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_parts,
    ensure_supported,
    is_api_versions_above,
    parse_request_header,
)
from kafkalite.protocol.request_checks import InvalidRequestFieldError, null_field

# kio declares ``records`` fields as the phantom type Records (bytes); any bytes will do.
st.register_type_strategy(Records, st.binary(max_size=64))

SETTINGS = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# (key, version) pairs covering flexible and non-flexible encodings, the inter-broker
# messages and the data path.
MESSAGES = [
    (ApiKey.PRODUCE, 3),
    (ApiKey.PRODUCE, 9),
    (ApiKey.FETCH, 4),
    (ApiKey.FETCH, 12),
    (ApiKey.LIST_OFFSETS, 1),
    (ApiKey.LIST_OFFSETS, 9),
    (ApiKey.METADATA, 0),
    (ApiKey.METADATA, 12),
    (ApiKey.API_VERSIONS, 0),
    (ApiKey.API_VERSIONS, 3),
    (ApiKey.CREATE_TOPICS, 7),
    (ApiKey.JOIN_GROUP, 5),
    (ApiKey.LEADER_AND_ISR, 4),
    (ApiKey.LEADER_AND_ISR, 7),
    (ApiKey.STOP_REPLICA, 2),
    (ApiKey.STOP_REPLICA, 4),
    (ApiKey.UPDATE_METADATA, 7),
    (ApiKey.CONTROLLED_SHUTDOWN, 3),
]

client_ids = st.one_of(st.none(), st.text(max_size=20))
correlation_ids = st.integers(-(2**31), 2**31 - 1)


def decode_checked(header, frame, offset, **kw):
    """decode_request; a request refused for a forbidden null or a value out of range (which
    generated requests may have) still decodes to the message sent, carried by the error."""
    try:
        return decode_request(header, frame, offset, **kw)
    except InvalidRequestFieldError as e:
        assert "is null" in str(e) or null_field(e.request) is None
        return e.request


@pytest.mark.parametrize("key,version", MESSAGES)
def test_request_round_trip(key, version):
    cls = request_class(key, version)

    @SETTINGS
    @given(st.from_type(cls), correlation_ids, client_ids)
    def check(request, correlation_id, client_id):
        frame = encode_request(key, version, correlation_id, client_id, request)
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        header, offset = parse_request_header(frame[4:])
        assert header == RequestHeader(key, version, correlation_id, client_id)
        assert decode_checked(header, frame[4:], offset, strict=True) == request
        # A writable buffer (what the network layer reads into) decodes the same.
        assert decode_checked(header, bytearray(frame[4:]), offset) == request

    check()


@pytest.mark.parametrize("key,version", MESSAGES)
def test_response_round_trip(key, version):
    cls = response_class(key, version)

    responses = st.from_type(cls)
    if key == ApiKey.API_VERSIONS:
        # UNSUPPORTED_VERSION marks the v0 fallback body (tested separately).
        responses = responses.filter(lambda r: r.error_code != ErrorCode.UNSUPPORTED_VERSION)

    @SETTINGS
    @given(responses, correlation_ids)
    def check(response, correlation_id):
        header = RequestHeader(key, version, correlation_id, "c")
        frame = encode_response(header, response)
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        assert decode_response(key, version, frame[4:], strict=True) == (correlation_id, response)
        size, parts = encode_response_parts(header, response, copy_threshold=8)
        assert size == len(frame)
        assert b"".join(bytes(p) for p in parts) == frame

    check()


@SETTINGS
@given(correlation_ids, client_ids, st.integers(-(2**15), 2**15 - 1))
def test_header_v1_round_trip_any_key(correlation_id, client_id, version):
    raw = struct.pack(">hhi", ApiKey.OFFSET_DELETE, version, correlation_id)
    encoded = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode()))
    raw += encoded + (client_id.encode() if client_id is not None else b"")
    if version < 0:
        with pytest.raises(InvalidRequestError):
            parse_request_header(raw)
        return
    header, offset = parse_request_header(raw)
    assert header.correlation_id == correlation_id and header.client_id == client_id
    assert offset == len(raw)


def test_header_v2_skips_tagged_fields():
    raw = struct.pack(">hhih", 3, 12, 9, 1) + b"c"
    raw += b"\x02" + b"\x00\x02ab" + b"\x05\x00"  # two tagged fields
    header, offset = parse_request_header(raw + b"BODY")
    assert header == RequestHeader(3, 12, 9, "c")
    assert offset == len(raw)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x00\x03\x00",
        struct.pack(">hhih", 3, 1, 1, 5) + b"ab",  # client id longer than the frame
        struct.pack(">hhih", 3, 1, 1, -2),  # negative length other than -1
        struct.pack(">hhih", 3, 12, 1, -1) + b"\x01\x00\x05ab",  # truncated tagged field
        struct.pack(">hhih", 3, 12, 1, -1) + b"\xff\xff\xff\xff\xff\x01",  # varint too long
        struct.pack(">hhih", 3, 1, 1, 2) + b"\xff\xfe",  # client id not UTF-8
    ],
)
def test_malformed_headers(payload):
    with pytest.raises(InvalidRequestError):
        parse_request_header(payload)


def test_unknown_key_raises_unsupported_with_header():
    payload = struct.pack(">hhih", 999, 0, 77, -1)
    with pytest.raises(UnsupportedVersionError) as info:
        parse_request_header(payload)
    assert info.value.header.correlation_id == 77


def _metadata_frame(version=12):
    req = MetadataRequest(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )
    return encode_request(ApiKey.METADATA, version, 5, "x", req)[4:]


def test_version_outside_codec_raises_unsupported():
    payload = struct.pack(">hhih", ApiKey.PRODUCE, 2, 1, -1) + b"\x00" * 20
    header, offset = parse_request_header(payload)
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(header, payload, offset)
    assert info.value.header == header


def test_truncated_and_padded_bodies_are_invalid():
    frame = _metadata_frame()
    header, offset = parse_request_header(frame)
    for cut in range(offset, len(frame)):
        with pytest.raises(InvalidRequestError):
            decode_request(header, frame[:cut], offset)
    padded = frame + b"\x00\x00\x00"
    assert decode_request(header, padded, offset) == decode_request(header, frame, offset)
    with pytest.raises(InvalidRequestError):
        decode_request(header, padded, offset, strict=True)


@SETTINGS
@given(st.binary(max_size=64))
def test_garbage_bodies_raise_typed_errors_only(garbage):
    header = RequestHeader(ApiKey.METADATA, 12, 1, None)
    try:
        decode_request(header, garbage, 0)
    except InvalidRequestError:
        pass


def test_ensure_supported():
    ensure_supported(RequestHeader(ApiKey.FETCH, 12, 1, None), SUPPORTED_VERSIONS)
    with pytest.raises(UnsupportedVersionError):
        ensure_supported(RequestHeader(ApiKey.FETCH, 13, 1, None), SUPPORTED_VERSIONS)
    with pytest.raises(UnsupportedVersionError):
        ensure_supported(RequestHeader(ApiKey.JOIN_GROUP, 1, 1, None), SUPPORTED_VERSIONS)


def test_api_versions_from_a_newer_client_gets_v0_fallback():
    # A v9 ApiVersions request (flexible header) from some future client.
    payload = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 123, 1) + b"c" + b"\x00" + b"\x00" * 3
    header, _ = parse_request_header(payload)
    assert is_api_versions_above(header)
    frame = api_versions_fallback(header.correlation_id, SUPPORTED_VERSIONS)
    correlation_id, response = decode_response(ApiKey.API_VERSIONS, 0, frame[4:])
    assert correlation_id == 123
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {int(k): v for k, v in SUPPORTED_VERSIONS.items()}


def test_api_versions_response_uses_header_v0_even_when_flexible():
    response = api_versions_response(3, SUPPORTED_VERSIONS, throttle_time_ms=5)
    frame = encode_response(RequestHeader(ApiKey.API_VERSIONS, 3, 1, None), response)
    # size, correlation id, then directly the body's error code (no tagged-field byte).
    assert frame[8:10] == b"\x00\x00"
    assert decode_response(ApiKey.API_VERSIONS, 3, frame[4:])[1].throttle_time == (
        datetime.timedelta(milliseconds=5)
    )


def test_encode_response_rejects_mismatched_version():
    response = api_versions_response(3, SUPPORTED_VERSIONS)
    with pytest.raises(ValueError):
        encode_response(RequestHeader(ApiKey.API_VERSIONS, 2, 1, None), response)


class LogSlice:
    """Stands in for a storage read result: only len() and identity matter to the encoder."""

    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size


def _fetch_response(records):
    return FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.NONE,
        session_id=0,
        responses=(
            FetchableTopicResponse(
                topic="t",
                partitions=(
                    PartitionData(
                        partition_index=0,
                        error_code=ErrorCode.NONE,
                        high_watermark=10,
                        last_stable_offset=10,
                        log_start_offset=0,
                        aborted_transactions=(),
                        preferred_read_replica=-1,
                        records=records,
                    ),
                ),
            ),
        ),
    )


def test_fetch_response_parts_keep_record_buffers_by_reference():
    segment = bytearray(b"R" * 100_000)
    view = memoryview(segment)[10:50_010]
    log_slice = LogSlice(1234)
    header = RequestHeader(ApiKey.FETCH, 12, 3, None)
    size, parts = encode_response_parts(header, _fetch_response(view))
    assert any(p is view for p in parts)
    assert size == len(encode_response(header, _fetch_response(bytes(view))))
    size, parts = encode_response_parts(header, _fetch_response(log_slice))
    assert any(p is log_slice for p in parts)
    assert size == 4 + sum(len(p) for p in parts) - 4


def test_produce_request_records_are_opaque_bytes():
    records = b"\x00" * 61 + b"not decoded"
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            TopicProduceData(
                name="t", partition_data=(PartitionProduceData(index=0, records=records),)
            ),
        ),
    )
    frame = encode_request(ApiKey.PRODUCE, 7, 1, "p", request)[4:]
    header, offset = parse_request_header(frame)
    decoded = decode_request(header, frame, offset)
    assert decoded.topic_data[0].partition_data[0].records == records


def test_api_versions_v0_fallback_body_decodes_under_newer_request_version():
    frame = api_versions_fallback(9, SUPPORTED_VERSIONS)
    correlation_id, response = decode_response(ApiKey.API_VERSIONS, 4, frame[4:])
    assert correlation_id == 9
    assert type(response).__version__ == 0
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_unknown_tagged_field_in_body_is_skipped():
    frame = _metadata_frame()
    header, offset = parse_request_header(frame)
    expected = decode_request(header, frame, offset)
    patched = bytearray(frame)
    assert patched[-1] == 0  # no tagged fields
    patched[-1:] = b"\x01\x1f\x01\x00"  # one tagged field, tag 31, one byte
    assert decode_request(header, patched, offset) == expected
    patched[-2] = 0x05  # now it claims 5 bytes that are not there
    with pytest.raises(InvalidRequestError):
        decode_request(header, patched, offset)
