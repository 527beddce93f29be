"""What online migration between a classic and a consumer group needs of the ``consumer``
embedded protocol: a classic member's subscription (topics and, v1+, the partitions it still
owns) and the assignment bytes SyncGroup hands a classic member of a consumer group.

ConsumerProtocolSubscription:

    version int16, topics [string] (int32 count), user_data bytes?,
    v1+: owned_partitions [topic string, partitions [int32]], v2+: generation_id int32,
    v3+: rack_id string?

ConsumerProtocolAssignment (every version has the same layout):

    version int16, assigned_partitions [topic string, partitions [int32]], user_data bytes?

Parsing never raises: bytes that do not parse are ``None`` (the caller answers as Kafka does
for a member whose metadata it cannot read). Every length is checked against the bytes left.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ClassicSubscription:
    version: int
    topics: tuple[str, ...]
    #: (topic, partitions) the member still owns; empty before v1 (an eager member has revoked
    #: everything before it rejoins)
    owned: tuple[tuple[str, tuple[int, ...]], ...] = ()


class _Buf:
    __slots__ = ("b", "pos")

    def __init__(self, b: bytes) -> None:
        self.b = b
        self.pos = 0

    def left(self) -> int:
        return len(self.b) - self.pos

    def int16(self) -> int:
        (v,) = struct.unpack_from(">h", self.b, self.pos)
        self.pos += 2
        return int(v)

    def int32(self) -> int:
        (v,) = struct.unpack_from(">i", self.b, self.pos)
        self.pos += 4
        return int(v)

    def string(self) -> str:
        n = self.int16()
        if n < 0 or n > self.left():
            raise ValueError("bad string")
        s = self.b[self.pos : self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def skip_bytes(self) -> None:
        n = self.int32()
        if n > self.left():
            raise ValueError("bad bytes")
        if n > 0:
            self.pos += n

    def count(self, min_item: int) -> int:
        n = self.int32()
        if n < 0 or n * min_item > self.left():
            raise ValueError("bad array")
        return n

    def topic_partitions(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        out = []
        for _ in range(self.count(6)):
            topic = self.string()
            n = self.count(4)
            parts = struct.unpack_from(f">{n}i", self.b, self.pos)
            self.pos += 4 * n
            out.append((topic, tuple(sorted(parts))))
        return tuple(out)


def parse_subscription(metadata: bytes) -> ClassicSubscription | None:
    try:
        buf = _Buf(bytes(metadata))
        version = buf.int16()
        if version < 0:
            return None
        topics = tuple(buf.string() for _ in range(buf.count(2)))
        owned: tuple[tuple[str, tuple[int, ...]], ...] = ()
        if buf.left() >= 4:
            buf.skip_bytes()
            if version >= 1 and buf.left() >= 4:
                owned = buf.topic_partitions()
        return ClassicSubscription(version, topics, owned)
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def encode_assignment(partitions: Iterable[tuple[str, Iterable[int]]], version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment with no user data, topics and partitions sorted."""
    items = sorted((t, sorted(ps)) for t, ps in partitions)
    out = bytearray(struct.pack(">hi", max(0, min(version, 3)), len(items)))
    for topic, ps in items:
        name = topic.encode("utf-8")
        out += struct.pack(">h", len(name)) + name
        out += struct.pack(f">i{len(ps)}i", len(ps), *ps)
    out += struct.pack(">i", -1)
    return bytes(out)
