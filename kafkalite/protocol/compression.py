"""Record-batch compression codecs, with the framings Kafka and its clients put on the wire.

The records section of a v2 batch (everything after the 61-byte header) is compressed as one
block when attribute bits 0-2 name a codec. All codecs come from ``cramjam``; only the framing is
done here:

- gzip (1): a gzip stream (RFC 1952), as ``GZIPOutputStream`` writes it; level 6 by default.
- snappy (2): Kafka's Java producer writes snappy-java's *xerial* block framing: the 16-byte
  header ``82 'SNAPPY' 00``, int32 version 1, int32 compatible version 1, then per block of at most
  32 KiB of input an int32 big-endian compressed length and a raw snappy block. librdkafka
  writes one raw snappy block with no framing. We write xerial (what Kafka writes) and read both,
  telling them apart by the 8-byte magic as snappy-java's ``SnappyInputStream`` does.
- lz4 (3): the LZ4 frame format (KIP-57) with independent blocks and no content checksum: Kafka's
  ``Lz4BlockInputStream`` decompresses each block on its own, so linked blocks are unreadable to
  it. Level 9 by default (Kafka's default since KIP-390).
- zstd (4): a zstd frame; level 3 by default (KIP-390).
"""

from __future__ import annotations

import struct

import cramjam

from kafkalite.protocol.errors import CorruptRecordError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")

DEFAULT_LEVELS = {GZIP: 6, LZ4: 9, ZSTD: 3}


def _xerial_snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    mv = memoryview(data)
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(mv), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(mv[start : start + XERIAL_BLOCK_SIZE])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: memoryview) -> bytes:
    if len(data) < 16 or data[:8] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(data))
    # Version and compat fields are ignored, as snappy-java and kafka-python do (some writers
    # encode them little-endian).
    out = bytearray()
    pos, end = 16, len(data)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("Truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordError(f"Bad xerial snappy block length {length}")
        out += cramjam.snappy.decompress_raw(data[pos : pos + length])
        pos += length
    return bytes(out)


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress a batch's records section with ``codec`` in Kafka's framing."""
    if codec == NONE:
        return bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(codec)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == SNAPPY:
        return _xerial_snappy_compress(data)
    if codec == LZ4:
        compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        compressor.compress(bytes(data))
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise ValueError(f"Unknown compression type id {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress a batch's records section; ``CorruptRecordError`` if the data is damaged."""
    mv = memoryview(data)
    try:
        if codec == NONE:
            return bytes(mv)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(mv))
        if codec == SNAPPY:
            return _snappy_decompress(mv)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(mv))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(mv))
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"Cannot decompress {CODEC_NAMES[codec]} records: {e}") from e
    raise CorruptRecordError(f"Unknown compression type id {codec}")
