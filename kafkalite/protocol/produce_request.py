"""Hand-written ProduceRequest decoder (v3-v11) that leaves record data inside the frame.

kio decodes `records` into an immutable `bytes` copy; the broker, though, patches baseOffset and
partitionLeaderEpoch of every batch in place before appending (docs/architecture.md, The data
path). Decoding by
hand yields, for each partition, a writable `memoryview` into the request frame (a `bytearray`
the connection handed over), so record data is copied once: from the socket into the frame.

Layout (ProduceRequest.json; v9+ flexible: compact strings/arrays/bytes, tagged fields):

    transactional_id nullable string, acks int16, timeout_ms int32,
    topic_data: [name string, partition_data: [index int32, records nullable bytes]]

A truncated or garbled request raises InvalidRequestError (the connection is closed); bytes after
a complete body are ignored, like Kafka. A null where the schema allows none (topic_data,
partition_data, a topic name) is read as empty and raises InvalidRequestFieldError with the
request decoded that way, so it is answered with INVALID_REQUEST for every partition it names
(protocol/request_checks.py, the same rule as for the other APIs).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafkalite.protocol.errors import InvalidRequestError
from kafkalite.protocol.request_checks import InvalidRequestFieldError
from kafkalite.protocol.varint import decode_unsigned_varint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


@dataclass(slots=True)
class ProducePartitionData:
    index: int
    records: memoryview | None


@dataclass(slots=True)
class ProduceTopicData:
    name: str
    partition_data: list[ProducePartitionData] = field(default_factory=list)


@dataclass(slots=True)
class ProduceRequestData:
    version: int
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[ProduceTopicData]


class _Reader:
    __slots__ = ("buf", "pos", "flexible", "null_field")

    def __init__(self, buf: memoryview, pos: int, flexible: bool) -> None:
        self.buf, self.pos, self.flexible = buf, pos, flexible
        self.null_field: str | None = None
        """The first non-nullable field found null (read as empty)."""

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise InvalidRequestError("truncated ProduceRequest")

    def uvarint(self) -> int:
        buf, pos = self.buf, self.pos
        if pos < len(buf):
            b = buf[pos]
            if b < 0x80:  # one byte: every count and length below 128, the common case
                self.pos = pos + 1
                return b
        try:
            value, self.pos = decode_unsigned_varint(buf, pos)
        except ValueError as e:
            raise InvalidRequestError(f"bad varint in ProduceRequest: {e}") from None
        return value

    def int16(self) -> int:
        self.need(2)
        (v,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return v

    def int32(self) -> int:
        self.need(4)
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def length(self) -> int:
        """Length of a nullable string/bytes/array; -1 for null."""
        if self.flexible:
            return self.uvarint() - 1
        return self.int32()

    def string(self, what: str | None = None) -> str | None:
        """A string; None for null when nullable (`what` is None), else "" and noted."""
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < -1:
            raise InvalidRequestError("negative string length in ProduceRequest")
        if n == -1:
            if what is None:
                return None
            self.null_field = self.null_field or what
            return ""
        self.need(n)
        try:
            value = bytes(self.buf[self.pos : self.pos + n]).decode()
        except UnicodeDecodeError:
            raise InvalidRequestError("non-UTF-8 string in ProduceRequest") from None
        self.pos += n
        return value

    def array_length(self, what: str) -> int:
        n = self.length()
        if n < -1:
            raise InvalidRequestError("negative array length in ProduceRequest")
        if n == -1:
            self.null_field = self.null_field or what
            return 0
        if n > len(self.buf):
            raise InvalidRequestError("array longer than the request")
        return n

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        pos = self.pos
        if pos < len(self.buf) and self.buf[pos] == 0:  # no tagged fields
            self.pos = pos + 1
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            size = self.uvarint()
            self.need(size)
            self.pos += size


def decode_produce_request(
    header: object, frame: bytearray, body_offset: int
) -> ProduceRequestData:
    version = header.api_version  # type: ignore[attr-defined]
    r = _Reader(memoryview(frame), body_offset, version >= 9)
    transactional_id = r.string()
    r.need(6)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(r.buf, r.pos)
    r.pos += 6
    topics = []
    for _ in range(r.array_length("topic_data")):
        topic = ProduceTopicData(r.string("topic_data.name"))  # type: ignore[arg-type]
        for _ in range(r.array_length("topic_data.partition_data")):
            index = r.int32()
            n = r.length()
            records = None
            if n >= 0:
                r.need(n)
                records = r.buf[r.pos : r.pos + n]
                r.pos += n
            topic.partition_data.append(ProducePartitionData(index, records))
            r.skip_tagged_fields()
        r.skip_tagged_fields()
        topics.append(topic)
    r.skip_tagged_fields()
    # Bytes after the body are ignored, as Kafka's request parsing does.
    request = ProduceRequestData(version, transactional_id, acks, timeout_ms, topics)
    if r.null_field is not None:
        raise InvalidRequestFieldError(
            f"malformed PRODUCE request: {r.null_field} is null, which its schema does not allow",
            request,
        )
    return request
