"""Kafka request and response frames: headers, bodies, size prefixes.

Wire format (Kafka protocol guide, KIP-482 for the flexible encoding)::

    frame            = size:int32  payload            (size = len(payload))
    request payload  = request_header  request_body
    request_header   = api_key:int16 api_version:int16 correlation_id:int32
                       client_id:nullable_string(int16 length)          (header v1)
                       [tagged_fields]                                 (header v2, flexible versions)
    response payload = correlation_id:int32 [tagged_fields] response_body
                       (tagged fields = response header v1, flexible versions, never for ApiVersions)

Conventions of this module:

- Decoders take the *payload* (what follows the 4-byte size prefix, which the network layer
  strips while framing); encoders return whole frames, size prefix included.
- No I/O. Bodies are kio dataclasses (or the project-defined ones for keys 4-7, same shape),
  decoded by kio's native reader and encoded by ``encoder.py`` (kio's format, compiled per
  class; about ten times faster than kio's own writer, which the tests use as the oracle).
- Every body is length-checked by ``validator.py`` before the native reader sees it: declared
  array/string lengths larger than the bytes left are rejected (the native reader would try to
  allocate them and abort the process). Never hand untrusted bytes to kio's reader directly.
- A body with a tagged field kio has no schema for is decoded again by ``decoder.py``, which
  skips unknown tags as KIP-482 requires (kio's reader refuses them).
- Malformed input raises ``InvalidRequestError`` (truncated, garbled; trailing bytes only with
  ``strict=True``, Kafka ignores them); an unknown API key or a version outside the codec
  raises ``UnsupportedVersionError``. Both carry the parsed header when there is one
  (``.header``) so the network layer can answer or log it.
- ``records`` fields: kio decodes them as ``bytes`` (one copy out of the frame) and never looks
  inside; the broker reads only batch headers. On the way out, ``encode_response_parts``
  keeps large ``records`` buffers and any non-bytes object (a segment-file slice) as separate
  parts instead of copying them, so a Fetch response can be sent with
  ``writelines``/``sendfile`` without copying record data (the object needs ``len()``).
"""

from __future__ import annotations

import datetime
import functools
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader
from kio.serial.errors import DecodeError as _KioDecodeError

from .api import (
    CODEC_VERSIONS,
    ApiKey,
    is_flexible,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)
from .decoder import decoder_for, out_of_range
from .encoder import Parts, encoder_for
from .errors import ErrorCode, InvalidRequestError, KafkaError, UnsupportedVersionError
from .request_checks import InvalidRequestFieldError, check_request
from .validator import validator_for
from .varint import decode_unsigned_varint

Buffer = bytes | bytearray | memoryview

_HEADER_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_SIZE_AND_CORRELATION = struct.Struct(">ii")

# What the kio readers raise on bad input besides their own DecodeError.
_DECODE_FAILURES = (_KioDecodeError, ValueError, TypeError, IndexError, OverflowError)


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A parsed request header (v1 or v2; v2's tagged fields carry nothing we use)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    @property
    def flexible(self) -> bool:
        return is_flexible(self.api_key, self.api_version)


def _attach(error: KafkaError, header: RequestHeader | None) -> KafkaError:
    error.header = header  # type: ignore[attr-defined]
    return error


def _read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    try:
        return decode_unsigned_varint(buf, pos)
    except ValueError as e:
        raise InvalidRequestError(str(e)) from None


def _skip_tagged_fields(buf: Buffer, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise InvalidRequestError("truncated tagged field")
    return pos


def parse_request_header(frame: Buffer) -> tuple[RequestHeader, int]:
    """Parse the request header at the start of ``frame`` (the payload, without the size
    prefix). Returns the header and the offset of the body.

    The header layout depends on the API version (v2 with tagged fields for flexible versions),
    so an unknown API key raises ``UnsupportedVersionError`` (with ``.header`` set from the
    fixed v1 fields, which every version shares) once the v1 part is read. A version outside the
    codec is *not* rejected here: ``decode_request`` does that, after the caller has had the
    chance to answer an ApiVersions request from a newer client (``api_versions_fallback``).
    """
    if len(frame) < _HEADER_FIXED.size:
        raise InvalidRequestError(f"request header needs 10 bytes, frame has {len(frame)}")
    api_key, api_version, correlation_id, client_id_len = _HEADER_FIXED.unpack_from(frame, 0)
    pos = _HEADER_FIXED.size
    if client_id_len == -1:
        client_id = None
    elif client_id_len < 0:
        raise InvalidRequestError(f"negative client_id length {client_id_len}")
    else:
        end = pos + client_id_len
        if end > len(frame):
            raise InvalidRequestError("truncated client_id")
        try:
            client_id = bytes(frame[pos:end]).decode()
        except UnicodeDecodeError:
            raise InvalidRequestError("client_id is not UTF-8") from None
        pos = end
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    if api_key not in ApiKey._value2member_map_:
        raise _attach(UnsupportedVersionError(f"unknown API key {api_key}"), header)
    if api_version < 0:
        raise _attach(InvalidRequestError(f"negative API version {api_version}"), header)
    if request_header_version(api_key, api_version) == 2:
        try:
            pos = _skip_tagged_fields(frame, pos)
        except InvalidRequestError as e:
            raise _attach(e, header) from None
    return header, pos


@functools.cache
def _reader(cls: type) -> Callable[[Any, int], tuple[Any, int]]:
    return entity_reader(cls)


def _readonly(frame: Buffer) -> bytes | memoryview:
    # kio's native reader refuses writable buffers (it may keep references into them).
    if isinstance(frame, bytes):
        return frame
    view = memoryview(frame)
    return view if view.readonly else view.toreadonly()


def _decode_body(
    cls: type,
    frame: Buffer,
    offset: int,
    what: str,
    strict: bool,
    *,
    nulls: list[str] | None = None,
) -> Any:
    """Decode one message body. With a ``nulls`` list, the paths of nulls the schema does not
    allow are appended to it, and such a null (kio's native reader refuses it in a string,
    accepts it in an array) is read as None by the pure-Python decoder instead of failing, for
    request_checks to refuse with an answer."""
    buf = _readonly(frame)
    fallback = False
    try:
        # Lengths are checked against the bytes left before the native reader allocates
        # anything: it would abort the process on a huge declared array (see validator.py).
        validator_for(cls)(buf, offset, nulls)
        message, size = _reader(cls)(buf, offset)
    except KeyError:
        # kio's native reader refuses tagged fields it has no schema for; Kafka skips them
        # (KIP-482), and so does the generated pure-Python decoder.
        try:
            message, end = decoder_for(cls)(buf, offset)
        except InvalidRequestError as e:
            raise InvalidRequestError(f"malformed {what}: {e}") from None
        size, fallback = end - offset, True
    except _DECODE_FAILURES as e:
        # A forbidden null, or a duration beyond timedelta (the native reader's ValueError or
        # OverflowError): the body is well-formed as Kafka reads it, and is answered (by
        # request_checks, or INVALID_REQUEST here) instead of closing the connection.
        try:
            message, end = decoder_for(cls)(buf, offset)
        except InvalidRequestError:
            raise InvalidRequestError(f"malformed {what}: {e}") from None
        path = out_of_range(message)
        if path is not None:
            raise InvalidRequestFieldError(
                f"malformed {what}: {cls.__name__}{path} is out of range", message
            ) from None
        if nulls is None or not nulls:  # nothing explains the failure
            raise InvalidRequestError(f"malformed {what}: {e}") from None
        size = end - offset
    if fallback:
        path = out_of_range(message)
        if path is not None:
            raise InvalidRequestFieldError(
                f"malformed {what}: {cls.__name__}{path} is out of range", message
            )
    if strict and offset + size != len(buf):
        raise InvalidRequestError(
            f"malformed {what}: {len(buf) - offset - size} bytes left after the body"
        )
    return message


def decode_request(
    header: RequestHeader, frame: Buffer, body_offset: int, *, strict: bool = False
) -> Any:
    """Decode the body of a request whose header ``parse_request_header`` returned.

    Bytes after the body are ignored, as Kafka's broker does (RequestContext.parseRequest does
    not check what remains); ``strict=True`` rejects them (codec tests).
    Raises UnsupportedVersionError for a version outside the codec and InvalidRequestError for
    a malformed body (both with ``.header``); InvalidRequestFieldError (with the decoded
    request) for a body that decodes but has a null its schema forbids or a value out of range
    (request_checks.py)."""
    try:
        cls = request_class(header.api_key, header.api_version)
        name = f"{ApiKey(header.api_key).name} request"
        nulls: list[str] = []
        request = _decode_body(cls, frame, body_offset, name, strict, nulls=nulls)
        check_request(header.api_key, request, nulls)
        return request
    except KafkaError as e:
        raise _attach(e, header) from None


def _response_header(header: RequestHeader) -> bytes:
    out = _INT32.pack(header.correlation_id)
    if response_header_version(header.api_key, header.api_version) == 1:
        out += b"\x00"  # no tagged fields
    return out


def _check_response_type(header: RequestHeader, response: Any) -> None:
    cls = type(response)
    if cls.__api_key__ != header.api_key or cls.__version__ != header.api_version:
        raise ValueError(
            f"{cls.__name__} v{cls.__version__} does not answer "
            f"{ApiKey(header.api_key).name} v{header.api_version}"
        )


def encode_response(header: RequestHeader, response: Any) -> bytes:
    """The whole response frame (size prefix, response header v0/v1, body) for ``header``'s
    request. ``response`` must be the response class of the request's key and version.
    Error codes in the body may be ``ErrorCode`` members (kafkalite's or kio's) or ints."""
    _check_response_type(header, response)
    out = bytearray(4)
    out += _response_header(header)
    encoder_for(type(response))(out, None, response)
    _INT32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_response_parts(
    header: RequestHeader, response: Any, *, copy_threshold: int = 16384
) -> tuple[int, list[Any]]:
    """Like ``encode_response`` but without copying large buffers: returns ``(frame_size,
    parts)`` where the parts, written in order, make up the frame. Parts are ``bytes``, or the
    very objects found in the response's ``records`` fields when they are buffers of at least
    ``copy_threshold`` bytes or not bytes-like at all (e.g. a zero-copy log slice, which the
    network layer sends with sendfile). Such objects only need ``len()``."""
    _check_response_type(header, response)
    parts = Parts(copy_threshold)
    out = bytearray(4)
    out += _response_header(header)
    encoder_for(type(response))(out, parts, response)
    if out:
        parts.items.append(bytes(out))
    items = parts.items
    size = sum(p.nbytes if isinstance(p, memoryview) else len(p) for p in items)
    first = bytearray(items[0])
    _INT32.pack_into(first, 0, size - 4)
    items[0] = bytes(first)
    return size, items


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    request: Any,
) -> bytes:
    """The whole request frame: size prefix, header v1/v2, body. Used by kafkalite's client."""
    cls = type(request)
    if cls.__api_key__ != api_key or cls.__version__ != api_version:
        raise ValueError(f"{cls.__name__} v{cls.__version__} is not {api_key} v{api_version}")
    out = bytearray(4)
    if client_id is None:
        client = b"\xff\xff"
    else:
        encoded = client_id.encode()
        client = struct.pack(">h", len(encoded)) + encoded
    out += struct.pack(">hhi", api_key, api_version, correlation_id) + client
    if request_header_version(api_key, api_version) == 2:
        out.append(0)
    encoder_for(cls)(out, None, request)
    _INT32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def peek_correlation_id(frame: Buffer) -> int:
    """The correlation id at the start of a response payload (to match it to its request
    before knowing which key and version to decode it as)."""
    if len(frame) < 4:
        raise InvalidRequestError("response shorter than its correlation id")
    return _INT32.unpack_from(frame, 0)[0]


def decode_response(
    api_key: int, api_version: int, frame: Buffer, *, strict: bool = False
) -> tuple[int, Any]:
    """Decode a response payload (without the size prefix) -> (correlation_id, response).
    Raises InvalidRequestError when it is malformed, UnsupportedVersionError for a version
    outside the codec. Bytes after the body are ignored unless ``strict``.

    An ApiVersions response carrying UNSUPPORTED_VERSION is read as v0 whatever version was
    asked for: a broker that does not know the request's version answers with a v0 body
    (KIP-511), so the result is then an ApiVersionsResponse v0."""
    correlation_id = peek_correlation_id(frame)
    pos = 4
    if response_header_version(api_key, api_version) == 1:
        pos = _skip_tagged_fields(frame, pos)
    name = ApiKey(api_key).name
    if api_key == ApiKey.API_VERSIONS and api_version > 0:
        # Every ApiVersions response version starts with its int16 error code.
        if len(frame) >= pos + 2 and _INT16.unpack_from(frame, pos)[0] == (
            ErrorCode.UNSUPPORTED_VERSION
        ):
            v0 = response_class(ApiKey.API_VERSIONS, 0)
            return correlation_id, _decode_body(v0, frame, pos, "ApiVersions v0 fallback", strict)
    cls = response_class(api_key, api_version)
    return correlation_id, _decode_body(cls, frame, pos, f"{name} response", strict)


def api_versions_response(
    api_version: int,
    versions: dict[int, tuple[int, int]],
    *,
    error_code: ErrorCode = ErrorCode.NONE,
    throttle_time_ms: int = 0,
) -> Any:
    """An ApiVersionsResponse of ``api_version`` listing ``versions`` (key -> (min, max))."""
    cls = response_class(ApiKey.API_VERSIONS, api_version)
    module = sys.modules[cls.__module__]
    entries = tuple(
        module.ApiVersion(api_key=key, min_version=low, max_version=high)
        for key, (low, high) in sorted(versions.items())
    )
    fields: dict[str, Any] = {"error_code": error_code, "api_keys": entries}
    if "throttle_time" in cls.__dataclass_fields__:
        fields["throttle_time"] = datetime.timedelta(milliseconds=throttle_time_ms)
    return cls(**fields)


def api_versions_fallback(correlation_id: int, versions: dict[int, tuple[int, int]]) -> bytes:
    """The frame answering an ApiVersions request whose version we do not support: an
    ApiVersionsResponse v0 with UNSUPPORTED_VERSION and our version table, so the client can
    retry with a version we have (KIP-511; what Kafka's ApiVersionsRequest.getErrorResponse
    does). Response header v0, as for every ApiVersions response."""
    # imported here: a client that never meets an older broker never loads v0's messages
    from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
    from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0

    body = ApiVersionsResponseV0(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=tuple(
            ApiVersionV0(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in sorted(versions.items())
        ),
    )
    header = RequestHeader(ApiKey.API_VERSIONS, 0, correlation_id, None)
    return encode_response(header, body)


def ensure_supported(header: RequestHeader, versions: dict[int, tuple[int, int]]) -> None:
    """Raise UnsupportedVersionError (with ``.header``) unless ``versions`` (the advertised
    table) covers the request's key and version."""
    low_high = versions.get(header.api_key)
    if low_high is None or not low_high[0] <= header.api_version <= low_high[1]:
        name = (
            ApiKey(header.api_key).name
            if header.api_key in ApiKey._value2member_map_
            else header.api_key
        )
        raise _attach(
            UnsupportedVersionError(f"{name} v{header.api_version} is not enabled"), header
        )


def is_api_versions_above(header: RequestHeader) -> bool:
    """True for an ApiVersions request newer than the codec (answer with
    ``api_versions_fallback`` instead of failing)."""
    return (
        header.api_key == ApiKey.API_VERSIONS
        and header.api_version > CODEC_VERSIONS[ApiKey.API_VERSIONS][1]
    )
