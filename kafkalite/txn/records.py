"""The record formats of the ``__transaction_state`` topic, and which partition holds an id.

Kafka's transaction coordinator keeps one record per transactional id in the compacted
``__transaction_state`` topic (``transaction-coordinator/.../TransactionLogKey.json`` and
``TransactionLogValue.json``); kafkalite writes them byte for byte the same, so Kafka's tooling
(``kafka-dump-log --transaction-log-decoder``) reads the topic, and a broker that becomes leader
of a partition rebuilds its transactional ids by replaying it.

Every key and value starts with an int16 *version*. Strings are int16 length + UTF-8; arrays
int32 count (-1 = null). Value version 1 is "flexible" (compact strings and arrays, tagged
fields); kafkalite writes version 0, as Kafka 3.x did before KIP-890, and reads both.

    TransactionLogKey v0     transactional_id string
    TransactionLogValue v0   producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
                             transaction_status int8, transaction_partitions
                             [topic string, partition_ids [int32]] (nullable),
                             transaction_last_update_timestamp_ms int64,
                             transaction_start_timestamp_ms int64
    TransactionLogValue v1   the same, flexible; tagged 0 previous_producer_id int64,
                             1 next_producer_id int64, 2 client_transaction_version int16

A tombstone (value None) removes the transactional id (written when it expires).
Status bytes are ``TransactionState`` values (metadata.py). Partition of an id:
``abs(java String.hashCode(id)) % transaction.state.log.num.partitions``, as Kafka.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafkalite.protocol.types import TopicPartition, java_string_hash_code, kafka_abs
from kafkalite.protocol.varint import decode_unsigned_varint

KEY_VERSION = 0
VALUE_VERSION = 0

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TxnRecordFormatError(ValueError):
    """A ``__transaction_state`` record this broker cannot read."""


def partition_for(transactional_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hash_code(transactional_id)) % num_partitions


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: int
    partitions: tuple[TopicPartition, ...] = ()
    last_update_timestamp_ms: int = -1
    start_timestamp_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    extra: dict = field(default_factory=dict, compare=False)


def _string(s: str) -> bytes:
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


class _Reader:
    def __init__(self, buf: bytes | memoryview, flexible: bool = False) -> None:
        self.buf = bytes(buf)
        self.pos = 0
        self.flexible = flexible

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise TxnRecordFormatError("transaction log record is truncated")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, s: struct.Struct) -> int:
        return s.unpack(self.take(s.size))[0]

    def uvarint(self) -> int:
        try:
            value, self.pos = decode_unsigned_varint(self.buf, self.pos)
        except ValueError as e:
            raise TxnRecordFormatError(f"bad unsigned varint: {e}") from None
        return value

    def string(self) -> str:
        n = self.uvarint() - 1 if self.flexible else self.unpack(_I16)
        if n < 0:
            raise TxnRecordFormatError("null string where a string is required")
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as e:
            raise TxnRecordFormatError(str(e)) from e

    def array_len(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.unpack(_I32)

    def tagged(self) -> dict[int, bytes]:
        if not self.flexible:
            return {}
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out


def decode_key(buf: bytes | memoryview) -> str:
    r = _Reader(buf)
    version = r.unpack(_I16)
    if version != KEY_VERSION:
        raise TxnRecordFormatError(f"unknown transaction log key version {version}")
    return r.string()


def encode_value(value: TransactionLogValue) -> bytes:
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _I64.pack(value.producer_id)
    out += _I16.pack(value.producer_epoch)
    out += _I32.pack(value.transaction_timeout_ms)
    out += _I8.pack(value.state)
    by_topic: dict[str, list[int]] = {}
    for tp in value.partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out += _I32.pack(len(by_topic))
    for topic, ids in by_topic.items():
        out += _string(topic)
        out += _I32.pack(len(ids))
        for p in ids:
            out += _I32.pack(p)
    out += _I64.pack(value.last_update_timestamp_ms)
    out += _I64.pack(value.start_timestamp_ms)
    return bytes(out)


def decode_value(buf: bytes | memoryview | None) -> TransactionLogValue | None:
    """The value of a record; None for a tombstone."""
    if buf is None:
        return None
    version = _Reader(buf).unpack(_I16)
    if version not in (0, 1):
        raise TxnRecordFormatError(f"unknown transaction log value version {version}")
    r = _Reader(buf, flexible=version >= 1)
    r.pos = 2
    producer_id = r.unpack(_I64)
    producer_epoch = r.unpack(_I16)
    timeout = r.unpack(_I32)
    state = r.unpack(_I8)
    partitions: list[TopicPartition] = []
    topics = r.array_len()
    for _ in range(max(topics, 0)):
        topic = r.string()
        for _ in range(max(r.array_len(), 0)):
            partitions.append(TopicPartition(topic, r.unpack(_I32)))
        r.tagged()
    last_update = r.unpack(_I64)
    start = r.unpack(_I64)
    tags = r.tagged()
    previous = _I64.unpack(tags[0])[0] if len(tags.get(0, b"")) == 8 else -1
    next_ = _I64.unpack(tags[1])[0] if len(tags.get(1, b"")) == 8 else -1
    client_version = _I16.unpack(tags[2])[0] if len(tags.get(2, b"")) == 2 else 0
    return TransactionLogValue(
        producer_id,
        producer_epoch,
        timeout,
        state,
        tuple(partitions),
        last_update,
        start,
        previous,
        next_,
        client_version,
    )
