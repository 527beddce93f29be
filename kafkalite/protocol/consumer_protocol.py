"""The parts of the ``consumer`` embedded protocol the coordinator must understand.

For protocol type ``consumer`` a member's JoinGroup metadata is a ConsumerProtocolSubscription:

    version int16, topics [string] (int32 count), user_data bytes,
    v1+: owned_partitions [topic string, partitions [int32]], v2+: generation_id int32,
    v3+: rack_id string?

The coordinator only reads ``topics``: Kafka uses them to expire offsets of topics a stable group
no longer subscribes to and to refuse OffsetDelete of subscribed topics. Anything it cannot parse
means "unknown subscription" (None), never an error: assignors and user data are the clients'
business and pass through untouched.
"""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics named by a ConsumerProtocolSubscription, or None if it does not parse."""
    try:
        pos = 2  # version; every version starts with the topic list
        (count,) = struct.unpack_from(">i", subscription, pos)
        pos += 4
        if count < 0:
            return None
        topics = set()
        for _ in range(count):
            (n,) = struct.unpack_from(">h", subscription, pos)
            pos += 2
            if n < 0 or pos + n > len(subscription):
                return None
            topics.add(subscription[pos : pos + n].decode("utf-8"))
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def assigned_partitions(assignment: bytes) -> list[tuple[str, list[int]]] | None:
    """(topic, sorted partitions) of a ConsumerProtocolAssignment (version int16, [topic string,
    partitions [int32]], user_data bytes), or None if it does not parse. Every length is checked
    against the bytes left, so a hostile assignment costs no more than its own size."""
    try:
        pos = 2  # version; every version starts with the assignment list
        (count,) = struct.unpack_from(">i", assignment, pos)
        pos += 4
        if count < 0 or count * 6 > len(assignment) - pos:
            return None
        out = []
        for _ in range(count):
            (n,) = struct.unpack_from(">h", assignment, pos)
            pos += 2
            if n < 0 or pos + n > len(assignment):
                return None
            topic = assignment[pos : pos + n].decode("utf-8")
            pos += n
            (partitions,) = struct.unpack_from(">i", assignment, pos)
            pos += 4
            if partitions < 0 or pos + 4 * partitions > len(assignment):
                return None
            out.append((topic, sorted(struct.unpack_from(f">{partitions}i", assignment, pos))))
            pos += 4 * partitions
        return out
    except (struct.error, UnicodeDecodeError):
        return None


def encode_subscription(
    topics: list[str], user_data: bytes | None = None, version: int = 0
) -> bytes:
    """A ConsumerProtocolSubscription v0 (test helper and tooling; clients write their own)."""
    out = bytearray(struct.pack(">hi", version, len(topics)))
    for t in topics:
        data = t.encode("utf-8")
        out += struct.pack(">h", len(data)) + data
    if user_data is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(user_data)) + user_data
    return bytes(out)
