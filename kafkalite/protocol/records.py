"""Kafka record batches (message format v2, ``magic = 2``): the header on the hot path, and the
full record codec for tools, tests, compaction and the group coordinator.

Wire and on-disk format (apache/kafka ``DefaultRecordBatch``), all integers big-endian::

    offset  size  field
         0     8  baseOffset            first offset of the batch (assigned by the leader)
         8     4  batchLength           bytes that follow this field (whole batch = batchLength + 12)
        12     4  partitionLeaderEpoch  epoch of the leader that appended it (assigned by the leader)
        16     1  magic                 2
        17     4  crc                   CRC32C (Castagnoli) of bytes [21, end of batch), unsigned
        21     2  attributes            bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
                                        bit 3 timestamp type (0 CreateTime, 1 LogAppendTime),
                                        bit 4 transactional, bit 5 control, bit 6 delete horizon set
        23     4  lastOffsetDelta       last offset - baseOffset
        27     8  baseTimestamp         (the delete horizon when bit 6 is set)
        35     8  maxTimestamp
        43     8  producerId            -1 when not idempotent
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount
        61     -  records               (compressed as one block when the codec is not none)

Each record (``DefaultRecord``) is: length varint, attributes int8 (unused), timestampDelta
varlong, offsetDelta varint, keyLength varint (-1 = null) + key, valueLength varint (-1 = null) +
value, header count varint, then per header keyLength varint + UTF-8 key, valueLength varint
(-1 = null) + value. Varints are zig-zag encoded protobuf varints (see ``varint.py``).

Invariants the hot path relies on:

- The CRC does not cover baseOffset, batchLength, partitionLeaderEpoch or magic, so the leader
  assigns offsets and its epoch by patching those bytes in place (``set_base_offset``,
  ``set_partition_leader_epoch``) without recomputing the CRC. Re-stamping LogAppendTime changes
  covered bytes, so ``set_max_timestamp_and_type`` recomputes it.
- Nothing in the header half of this module looks at individual records or copies batch bytes:
  the broker reads 61 bytes per batch and one CRC32C pass over the batch (hardware ``crc32c``).
  Compressed batches pass through untouched.
- ``validate_batches`` accepts a buffer only if it is an exact sequence of complete batches; a
  log recovery scan (``scan_valid_prefix``) instead reports how many leading bytes are good so the
  caller can truncate a torn or corrupt tail.

Errors: structural damage (short or torn batch, bad length, unknown magic, CRC mismatch) raises
``CorruptRecordError`` (Kafka's CORRUPT_MESSAGE); a well-formed batch the broker must refuse
(legacy magic 0/1, inconsistent count, control batch from a client, ...) raises
``InvalidRecordError`` (INVALID_RECORD), matching Kafka's ``LogValidator``.
"""

from __future__ import annotations

import enum
import struct
import time
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from crc32c import crc32c

from kafkalite.protocol.compression import compress, decompress
from kafkalite.protocol.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from kafkalite.protocol.varint import decode_varint, decode_varlong, write_varint, write_varlong

# ---------------------------------------------------------------------------------------------
# Layout constants (Kafka's DefaultRecordBatch names, snake-cased)

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

#: Size of the fixed batch header; also the smallest possible batch (no records).
BATCH_HEADER_SIZE = 61
#: baseOffset + batchLength: the bytes not counted by batchLength (Kafka's ``LOG_OVERHEAD``).
LOG_OVERHEAD = 12
#: The smallest legal batchLength value.
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

CURRENT_MAGIC = 2

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1


class CompressionType(enum.IntEnum):
    """The codec id in attribute bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    """Attribute bit 3: who set the timestamps (``message.timestamp.type``)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


# One precompiled unpacker for the whole 61-byte header, and small ones for patches.
_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == BATCH_HEADER_SIZE
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class RecordBatchHeader(NamedTuple):
    """The 61-byte v2 batch header, decoded; ``crc`` is the stored (unsigned) value.

    Immutable. A NamedTuple rather than a frozen dataclass because one is built per batch on the
    produce path: from the unpacked tuple it costs a tuple allocation, a tenth of a dataclass's
    ``__init__``. Fields are in wire order.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies (batchLength + 12)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        """When tombstones in a compacted batch may go (KIP-534): baseTimestamp if bit 6 is set,
        else -1."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG_MASK else NO_TIMESTAMP

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps at 2**31 like Kafka's), or -1 without a sequence."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


_new_header = tuple.__new__


def _as_bytes_view(buf: bytes | bytearray | memoryview) -> memoryview:
    mv = memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def parse_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> RecordBatchHeader:
    """Decode the header of the batch starting at ``pos``; no check beyond there being 61 bytes."""
    if len(buf) - pos < BATCH_HEADER_SIZE or pos < 0:
        raise CorruptRecordError(
            f"Record batch header at position {pos} is truncated: "
            f"{max(0, len(buf) - pos)} of {BATCH_HEADER_SIZE} bytes"
        )
    return _new_header(RecordBatchHeader, _HEADER.unpack_from(buf, pos))


def _read_header(mv: memoryview, pos: int, end: int) -> RecordBatchHeader:
    """The header of a complete v2 batch at ``pos`` (length within ``end``, magic 2).

    Raises ``CorruptRecordError`` for a short or torn batch, a bad length or an unknown magic,
    ``InvalidRecordError`` for a legacy (magic 0/1) message set.
    """
    remaining = end - pos
    if remaining < LOG_OVERHEAD:
        raise CorruptRecordError(
            f"Truncated record batch at position {pos}: {remaining} bytes left, "
            f"less than the {LOG_OVERHEAD}-byte log overhead"
        )
    batch_length = _INT32.unpack_from(mv, pos + LENGTH_OFFSET)[0]
    if batch_length < MIN_BATCH_LENGTH:
        if remaining > MAGIC_OFFSET and mv[pos + MAGIC_OFFSET] in (0, 1):
            _raise_legacy(mv[pos + MAGIC_OFFSET], pos)
        raise CorruptRecordError(
            f"Record batch at position {pos} has batchLength {batch_length}, "
            f"less than the minimum {MIN_BATCH_LENGTH}"
        )
    if batch_length + LOG_OVERHEAD > remaining:
        raise CorruptRecordError(
            f"Truncated record batch at position {pos}: batchLength says "
            f"{batch_length + LOG_OVERHEAD} bytes, {remaining} available"
        )
    header = _new_header(RecordBatchHeader, _HEADER.unpack_from(mv, pos))
    magic = header[3]
    if magic != CURRENT_MAGIC:
        if magic in (0, 1):
            _raise_legacy(magic, pos)
        raise CorruptRecordError(f"Invalid magic {magic} in record batch at position {pos}")
    return header


def _raise_legacy(magic: int, pos: int) -> None:
    # A legacy message set: well-formed for its time, but this broker only speaks v2 (Kafka
    # refuses it for Produce v3+ with INVALID_RECORD).
    raise InvalidRecordError(
        f"Record batch at position {pos} has magic {magic}; only magic 2 is supported"
    )


def _check_crc(mv: memoryview, pos: int, header: RecordBatchHeader) -> None:
    computed = crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + header[1] + LOG_OVERHEAD])
    if header[4] != computed:
        raise CorruptRecordError(
            f"Record batch at position {pos} is corrupt "
            f"(stored crc = {header[4]}, computed crc = {computed})"
        )


#: Kafka's ``LegacyRecord.RECORD_OVERHEAD_V0``: ``ByteBufferLogInputStream.nextBatchSize`` and
#: ``FileLogInputStream.nextBatch`` call a batchLength below it corrupt before looking further.
_MIN_FRAMED_LENGTH = 14


def complete_batches_length(buf: Any, start: int = 0, end: int | None = None) -> int:
    """Bytes of ``buf[start:end]`` (any buffer: bytes, a memoryview, a segment's map) covered by complete batches, read from the length fields only
    (no CRC, no header): the one batch-framing rule, used wherever a read, a fetch or a follower's
    append may end inside a batch.

    As Kafka's log input streams do, a trailing partial batch (fewer than ``LOG_OVERHEAD`` bytes,
    or fewer than its batchLength announces) is left out: it is a read cut at its size limit. A
    garbled batchLength (below 14) is not a cut but corruption, which Kafka reports with
    ``CorruptRecordException``: the whole of ``buf[start:end]`` is then kept, so the validation
    of an append reports ``CorruptRecordError`` and a fetch passes the bytes on as Kafka's does
    (the client reports the corruption); nothing garbled is dropped silently.
    """
    if end is None:
        end = len(buf)
    unpack = _INT32.unpack_from
    pos = start
    while end - pos >= LOG_OVERHEAD:
        length = unpack(buf, pos + LENGTH_OFFSET)[0]
        if length < _MIN_FRAMED_LENGTH:
            return end - start
        if length > end - pos - LOG_OVERHEAD:
            break
        pos += LOG_OVERHEAD + length
    return pos - start


def iter_batch_headers(
    buf: bytes | bytearray | memoryview,
) -> Iterator[tuple[int, RecordBatchHeader]]:
    """Yield ``(position, header)`` for each batch in ``buf`` without checking CRCs.

    Stops at the exact end of ``buf``; raises ``CorruptRecordError`` on a short, torn or
    garbled batch (bad length, magic other than 2). Use it on data already validated (a log
    segment, a fetch response from a trusted replica).
    """
    mv = _as_bytes_view(buf)
    end = len(mv)
    pos = 0
    while pos < end:
        try:
            header = _read_header(mv, pos, end)
        except InvalidRecordError as e:
            raise CorruptRecordError(str(e)) from e
        yield pos, header
        pos += header[1] + LOG_OVERHEAD


def _check_header(header: RecordBatchHeader, pos: int, origin_client: bool) -> None:
    """Kafka's per-batch checks beyond the CRC (``LogValidator.validateBatch``)."""
    # Indexing, not attribute access: this runs per batch on the produce path.
    attributes = header[5]
    last_offset_delta = header[6]
    producer_id = header[9]
    count = header[12]
    if count < 0:
        raise InvalidRecordError(f"Invalid record count {count} in batch at position {pos}")
    if last_offset_delta < 0:
        raise InvalidRecordError(
            f"Invalid lastOffsetDelta {last_offset_delta} in batch at position {pos}"
        )
    if attributes & COMPRESSION_CODEC_MASK > CompressionType.ZSTD:
        raise InvalidRecordError(
            f"Unknown compression type id {attributes & COMPRESSION_CODEC_MASK} "
            f"in batch at position {pos}"
        )
    if attributes & TRANSACTIONAL_FLAG_MASK and producer_id < 0:
        raise InvalidRecordError(f"Transactional batch at position {pos} has no producer id")
    if not origin_client:
        return
    # Records from clients (Produce) must describe themselves exactly: compaction may later
    # leave gaps, so these hold only on first append.
    if count == 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {count}")
    if last_offset_delta + 1 != count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{header.base_offset}, {header.last_offset}] "
            f"and count of records {count}"
        )
    if attributes & CONTROL_FLAG_MASK:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if producer_id >= 0 and header[11] < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {header[11]} in record batch with producerId {producer_id}"
        )


def validate_batches(
    buf: bytes | bytearray | memoryview,
    *,
    origin_client: bool = False,
    max_batch_size: int | None = None,
) -> list[RecordBatchHeader]:
    """Check that ``buf`` is a sequence of complete, intact v2 batches; return their headers.

    Per batch: length consistent with the buffer, magic 2, CRC32C over attributes..end, record
    count and lastOffsetDelta non-negative, a known codec, no transactional batch without a
    producer id. With ``origin_client=True`` (a Produce from a client; Kafka's
    ``AppendOrigin.CLIENT``) also: count > 0 and equal to lastOffsetDelta + 1, no control
    batches, a base sequence whenever there is a producer id. ``max_batch_size``
    (``max.message.bytes``) bounds each batch's size -> ``RecordTooLargeError``.

    An empty buffer is an empty list (the caller decides whether that is an error). Records are
    never decoded; the work is one header unpack and one CRC pass per batch.
    """
    mv = _as_bytes_view(buf)
    end = len(mv)
    pos = 0
    headers: list[RecordBatchHeader] = []
    while pos < end:
        header = _read_header(mv, pos, end)
        size = header[1] + LOG_OVERHEAD
        if max_batch_size is not None and size > max_batch_size:
            raise RecordTooLargeError(
                f"The record batch at position {pos} is {size} bytes, larger than the maximum "
                f"allowed batch size {max_batch_size}"
            )
        _check_crc(mv, pos, header)
        _check_header(header, pos, origin_client)
        headers.append(header)
        pos += size
    return headers


def scan_valid_prefix(buf: bytes | bytearray | memoryview) -> tuple[int, list[RecordBatchHeader]]:
    """Return ``(valid_bytes, headers)`` for the complete, intact batches at the start of buf.

    For log recovery (Kafka's ``LogSegment.recover``): scanning stops at the first batch that is
    torn, has a bad length or magic, fails its CRC or fails the structural header checks; the
    caller truncates the segment to ``valid_bytes``. Never raises for bad data.
    """
    mv = _as_bytes_view(buf)
    end = len(mv)
    pos = 0
    headers: list[RecordBatchHeader] = []
    try:
        while pos < end:
            header = _read_header(mv, pos, end)
            _check_crc(mv, pos, header)
            _check_header(header, pos, False)
            headers.append(header)
            pos += header[1] + LOG_OVERHEAD
    except (CorruptRecordError, InvalidRecordError):
        pass
    return pos, headers


# ---------------------------------------------------------------------------------------------
# In-place patches (the leader's offset and epoch assignment, LogAppendTime re-stamping)


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Write baseOffset of the batch at ``pos``; not covered by the CRC."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Write partitionLeaderEpoch of the batch at ``pos``; not covered by the CRC."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp_and_type(
    buf: bytearray | memoryview, pos: int, timestamp_type: int, max_timestamp: int
) -> None:
    """Set the timestamp type bit and maxTimestamp of the batch at ``pos``; recompute the CRC.

    Kafka's ``DefaultRecordBatch.setMaxTimestamp``: with LogAppendTime the broker writes the
    append time here and readers take it as every record's timestamp; records stay untouched.
    A no-op (no CRC pass) when both already hold.
    """
    mv = _as_bytes_view(buf)
    attributes = _INT16.unpack_from(mv, pos + ATTRIBUTES_OFFSET)[0]
    current_type = 1 if attributes & TIMESTAMP_TYPE_MASK else 0
    current_max = _INT64.unpack_from(mv, pos + MAX_TIMESTAMP_OFFSET)[0]
    if current_type == timestamp_type and current_max == max_timestamp:
        return
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    elif timestamp_type == TimestampType.CREATE_TIME:
        attributes &= ~TIMESTAMP_TYPE_MASK
    else:
        raise ValueError(f"Invalid timestamp type {timestamp_type}")
    _INT16.pack_into(mv, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(mv, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    size = _INT32.unpack_from(mv, pos + LENGTH_OFFSET)[0] + LOG_OVERHEAD
    _UINT32.pack_into(mv, pos + CRC_OFFSET, crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size]))


def assign_offsets(
    buf: bytearray | memoryview, first_offset: int, partition_leader_epoch: int
) -> int:
    """Number the batches in ``buf`` consecutively from ``first_offset`` (leader append).

    Patches baseOffset and partitionLeaderEpoch of every batch in place and returns the next
    offset to assign (last offset + 1). ``buf`` must already have passed ``validate_batches``.
    """
    mv = _as_bytes_view(buf)
    end = len(mv)
    pos = 0
    next_offset = first_offset
    length_unpack = _INT32.unpack_from
    while pos < end:
        _INT64.pack_into(mv, pos, next_offset)
        _INT32.pack_into(mv, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
        next_offset += length_unpack(mv, pos + LAST_OFFSET_DELTA_OFFSET)[0] + 1
        pos += length_unpack(mv, pos + LENGTH_OFFSET)[0] + LOG_OVERHEAD
    return next_offset


# ---------------------------------------------------------------------------------------------
# Full record codec (tools, tests, compaction, coordinators): never on the produce/fetch path


class Header(NamedTuple):
    """A record header: UTF-8 key, nullable bytes value. Compares equal to a plain tuple."""

    key: str
    value: bytes | None


class Record(NamedTuple):
    """One record of a v2 batch, as stored: offset and timestamp relative to the batch.

    Immutable (a NamedTuple: decoding builds one per record, ten times cheaper than a frozen
    dataclass).
    """

    offset_delta: int = 0
    timestamp_delta: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[Header, ...] = ()


class ControlRecordType(enum.IntEnum):
    """Key ``type`` of a record in a control batch (Kafka's ``ControlRecordType``)."""

    ABORT = 0
    COMMIT = 1
    # KRaft-only types exist (2..), kafkalite never writes them.


_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER_VALUE = struct.Struct(">hi")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _encode_record(out: bytearray, record: Record, offset_delta: int) -> None:
    body = bytearray(b"\x00")  # attributes: unused
    write_varlong(body, record.timestamp_delta)
    write_varint(body, offset_delta)
    key = record.key
    if key is None:
        body.append(1)  # varint -1
    else:
        write_varint(body, len(key))
        body += key
    value = record.value
    if value is None:
        body.append(1)
    else:
        write_varint(body, len(value))
        body += value
    write_varint(body, len(record.headers))
    for h_key, h_value in record.headers:
        encoded_key = h_key.encode()
        write_varint(body, len(encoded_key))
        body += encoded_key
        if h_value is None:
            body.append(1)
        else:
            write_varint(body, len(h_value))
            body += h_value
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: int = TimestampType.CREATE_TIME,
    base_timestamp: int | None = None,
    keep_offset_deltas: bool = False,
    compression_level: int | None = None,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """Encode ``records`` as one v2 batch (what a producer sends, or what compaction rewrites).

    Record timestamps are ``base_timestamp`` (default: now, in ms) plus each record's
    ``timestamp_delta``. Offset deltas are 0, 1, 2, ... in order unless ``keep_offset_deltas``
    (then the records' own deltas are written, e.g. to rebuild a compacted batch; they must be
    increasing). With LogAppendTime, maxTimestamp is ``base_timestamp`` (the append time) as
    Kafka's broker writes it. ``delete_horizon_ms`` (compaction, KIP-534) sets attribute bit 6
    and takes the place of ``base_timestamp``: record deltas are then relative to it.
    ``last_offset_delta`` overrides the header's lastOffsetDelta (compaction keeps the original
    batch's, so the producer's last sequence survives: Kafka's ``overrideLastOffset``); it must
    not be below the last record's delta. ``max_timestamp`` overrides the header's (compaction
    keeps a LogAppendTime batch's append time). The CRC is computed; ``validate_batches``
    accepts the result.
    """
    records = list(records)
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    elif base_timestamp is None:
        base_timestamp = _now_ms()
    body = bytearray()
    last_delta = -1
    max_timestamp_delta = None
    for index, record in enumerate(records):
        offset_delta = record.offset_delta if keep_offset_deltas else index
        if offset_delta <= last_delta:
            raise ValueError(f"offset deltas must increase: {offset_delta} after {last_delta}")
        last_delta = offset_delta
        _encode_record(body, record, offset_delta)
        if max_timestamp_delta is None or record.timestamp_delta > max_timestamp_delta:
            max_timestamp_delta = record.timestamp_delta
    if max_timestamp is not None:
        pass
    elif timestamp_type == TimestampType.LOG_APPEND_TIME or max_timestamp_delta is None:
        max_timestamp = base_timestamp
    else:
        max_timestamp = base_timestamp + max_timestamp_delta
    if last_offset_delta is not None and last_offset_delta < last_delta:
        raise ValueError(f"last offset delta {last_offset_delta} is below a record's {last_delta}")
    if compression < 0 or compression > CompressionType.ZSTD:
        raise ValueError(f"Unknown compression type id {compression}")
    payload = compress(compression, body, compression_level) if compression else body
    attributes = compression
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    batch = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(
        batch,
        0,
        base_offset,
        BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        max(last_delta, 0) if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    batch += payload
    _UINT32.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def _decode_records(data: bytes, count: int) -> list[Record]:
    """Parse ``count`` records filling ``data`` exactly; ``ValueError``/``IndexError`` if not.

    One-byte varints (almost every length and delta) are decoded inline: this loop is what the
    group coordinator and compaction spend their time in.
    """
    records = []
    append = records.append
    new_record = tuple.__new__
    end = len(data)
    pos = 0
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, pos = decode_varint(data, pos)
        record_end = pos + length
        if length < 0 or record_end > end:
            raise ValueError(f"record length {length} runs past the end of the batch")
        pos += 1  # attributes: unused
        b = data[pos]
        if b < 0x80:
            timestamp_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            timestamp_delta, pos = decode_varlong(data, pos)
        b = data[pos]
        if b < 0x80:
            offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            offset_delta, pos = decode_varint(data, pos)
        b = data[pos]
        if b < 0x80:
            size, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            size, pos = decode_varint(data, pos)
        if size < 0:
            key = None
        else:
            key = data[pos : pos + size]
            pos += size
        b = data[pos]
        if b < 0x80:
            size, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            size, pos = decode_varint(data, pos)
        if size < 0:
            value = None
        else:
            value = data[pos : pos + size]
            pos += size
        header_count, pos = decode_varint(data, pos)
        if header_count == 0:
            headers = ()
        elif header_count < 0:
            raise ValueError(f"Found invalid number of record headers {header_count}")
        else:
            header_list = []
            for _ in range(header_count):
                size, pos = decode_varint(data, pos)
                if size < 0:
                    raise ValueError("Invalid negative header key size")
                h_key = data[pos : pos + size].decode()
                pos += size
                size, pos = decode_varint(data, pos)
                if size < 0:
                    h_value = None
                else:
                    h_value = data[pos : pos + size]
                    pos += size
                header_list.append(Header(h_key, h_value))
            headers = tuple(header_list)
        if pos != record_end:
            raise ValueError(
                f"Invalid record size: expected to read {length} bytes in record payload, "
                f"but instead read {length - (record_end - pos)}"
            )
        append(new_record(Record, (offset_delta, timestamp_delta, key, value, headers)))
    if pos != end:
        raise ValueError(f"{end - pos} bytes left over after the last record of the batch")
    return records


def decode_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0
) -> tuple[RecordBatchHeader, list[Record]]:
    """Decode the batch at ``pos``: check length, magic and CRC, decompress, parse records.

    Raises ``CorruptRecordError`` on any damage (including records that do not add up to the
    header's count or length). Records keep their deltas: absolute offset is
    ``header.base_offset + record.offset_delta``; the absolute timestamp is
    ``header.base_timestamp + record.timestamp_delta``, or ``header.max_timestamp`` for a
    LogAppendTime batch (see ``record_timestamp``).
    """
    mv = _as_bytes_view(buf)
    try:
        header = _read_header(mv, pos, len(mv))
    except InvalidRecordError as e:
        raise CorruptRecordError(str(e)) from e
    size = header.size
    _check_crc(mv, pos, header)
    if header.record_count < 0:
        raise CorruptRecordError(f"Invalid record count {header.record_count}")
    data = decompress(header.compression, mv[pos + RECORDS_OFFSET : pos + size])
    try:
        records = _decode_records(data, header.record_count)
    except (ValueError, IndexError, UnicodeDecodeError) as e:
        raise CorruptRecordError(f"Corrupt records in batch at position {pos}: {e}") from e
    return header, records


def iter_batches(
    buf: bytes | bytearray | memoryview,
) -> Iterator[tuple[RecordBatchHeader, list[Record]]]:
    """Decode every complete batch in ``buf`` (a fetch response's records, a segment file).

    A trailing partial batch is ignored, as consumers do (a fetch may cut the last batch at
    the size limit); damage inside a complete batch raises ``CorruptRecordError``.
    """
    mv = _as_bytes_view(buf)
    end = len(mv)
    pos = 0
    while end - pos >= LOG_OVERHEAD:
        size = _INT32.unpack_from(mv, pos + LENGTH_OFFSET)[0] + LOG_OVERHEAD
        if size > end - pos:
            return
        yield decode_batch(mv[pos : pos + size])
        pos += size


def records_without_key(
    buf: bytes | bytearray | memoryview, headers: list[RecordBatchHeader]
) -> list[int]:
    """The indexes of the records with a null key in the non-control batches of ``buf``,
    counted from its first record (Kafka's batchIndex: one batch per produced partition, so
    the record's index in its batch). ``headers`` are the buffer's validated batch headers."""
    mv = _as_bytes_view(buf)
    out: list[int] = []
    pos = index = 0
    for header in headers:
        size = header.size
        if not header.attributes & CONTROL_FLAG_MASK and header.record_count > 0:
            _, records = decode_batch(mv[pos : pos + size])
            out += [index + i for i, record in enumerate(records) if record.key is None]
            index += len(records)
        pos += size
    return out


def has_record_without_key(
    buf: bytes | bytearray | memoryview, headers: list[RecordBatchHeader]
) -> bool:
    """True if a record of a non-control batch in ``buf`` has a null key (a compacted topic
    refuses it). ``headers`` are the buffer's validated batch headers, in order; each batch is
    decompressed and decoded."""
    mv = _as_bytes_view(buf)
    pos = 0
    for header in headers:
        size = header.size
        if not header.attributes & CONTROL_FLAG_MASK and header.record_count > 0:
            _, records = decode_batch(mv[pos : pos + size])
            if any(record.key is None for record in records):
                return True
        pos += size
    return False


def record_offset(header: RecordBatchHeader, record: Record) -> int:
    return header.base_offset + record.offset_delta


def record_timestamp(header: RecordBatchHeader, record: Record) -> int:
    """The record's timestamp as consumers see it (LogAppendTime: the batch's maxTimestamp)."""
    if header.attributes & TIMESTAMP_TYPE_MASK:
        return header.max_timestamp
    return header.base_timestamp + record.timestamp_delta


# Control batches (transaction markers)


def control_record_key(record_type: ControlRecordType) -> bytes:
    return _CONTROL_KEY.pack(0, record_type)


def parse_control_record_type(record: Record) -> ControlRecordType:
    """The type of a record from a control batch; ``CorruptRecordError`` if unreadable."""
    key = record.key
    if key is None or len(key) < 4:
        raise CorruptRecordError("Control record has no valid key")
    version, record_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"Invalid version {version} found for control record")
    # Newer key versions only append fields; Kafka reads them the same way.
    try:
        return ControlRecordType(record_type)
    except ValueError as e:
        raise CorruptRecordError(f"Unknown control record type {record_type}") from e


def parse_end_txn_marker(record: Record) -> tuple[ControlRecordType, int]:
    """``(ABORT|COMMIT, coordinator_epoch)`` of an end-transaction marker record."""
    record_type = parse_control_record_type(record)
    if record_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise CorruptRecordError(f"Not an end transaction marker: {record_type.name}")
    value = record.value
    if value is None or len(value) < _END_TXN_MARKER_VALUE.size:
        raise CorruptRecordError("End transaction marker has no valid value")
    _version, coordinator_epoch = _END_TXN_MARKER_VALUE.unpack_from(value)
    return record_type, coordinator_epoch


def build_end_txn_marker_batch(
    *,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A control batch holding one COMMIT or ABORT marker (Kafka's ``EndTransactionMarker``)."""
    record_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    marker = Record(
        key=control_record_key(record_type),
        value=_END_TXN_MARKER_VALUE.pack(0, coordinator_epoch),
    )
    return build_batch(
        [marker],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
        base_timestamp=timestamp,
    )
