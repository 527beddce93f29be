"""LogSegment: Kafka's file names and on-disk formats (read back with plain struct), sparse
indexing, reads, timestamp lookup, recovery and truncation."""

from __future__ import annotations

import struct

from kafkalite.protocol.records import iter_batch_headers, set_base_offset
from kafkalite.storage.segment import LogSegment, batch_summaries
from tests.storage.conftest import make_batch


def append(
    segment: LogSegment, base_offset: int, records: int, value_size: int, timestamp: int
) -> bytearray:
    batch = make_batch(records, value_size, timestamp)
    set_base_offset(batch, 0, base_offset)
    segment.append(batch, batch_summaries(h for _, h in iter_batch_headers(batch)))
    return batch


def test_files_have_kafka_names_and_formats(tmp_path):
    segment = LogSegment.open(tmp_path, 170410, index_interval_bytes=100, max_index_size=4096)
    written = bytearray()
    positions = []
    for i in range(10):
        positions.append(len(written))
        written += append(segment, 170410 + 3 * i, 3, 40, 1_000 + 10 * i)
    segment.on_become_inactive_segment()
    segment.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "00000000000000170410.index",
        "00000000000000170410.log",
        "00000000000000170410.timeindex",
    ]
    log_bytes = (tmp_path / "00000000000000170410.log").read_bytes()
    assert log_bytes == written
    # .log: base offset int64, batch length int32, leader epoch int32, magic int8 ...
    pos = 0
    for i in range(10):
        base_offset, batch_length, _epoch, magic = struct.unpack_from(">qiib", log_bytes, pos)
        assert (base_offset, magic) == (170410 + 3 * i, 2)
        pos += batch_length + 12
    assert pos == len(log_bytes)
    # .index: (relative offset int32, position int32) big-endian, one per >100 bytes.
    index_entries = list(
        struct.iter_unpack(">ii", (tmp_path / "00000000000000170410.index").read_bytes())
    )
    assert index_entries, "an entry is expected after index.interval.bytes"
    for relative, position in index_entries:
        assert position in positions
        batch_no = positions.index(position)
        assert relative == 3 * batch_no + 2  # the batch's last offset, relative to the base
    # .timeindex: (timestamp int64, relative offset int32); last entry = max timestamp of segment.
    time_entries = list(
        struct.iter_unpack(">qi", (tmp_path / "00000000000000170410.timeindex").read_bytes())
    )
    assert time_entries[-1] == (1_000 + 90 + 2, 29)
    assert [t for t, _ in time_entries] == sorted({t for t, _ in time_entries})


def test_read_translate_and_timestamp_lookup(tmp_path):
    segment = LogSegment.open(tmp_path, 0, index_interval_bytes=64, max_index_size=4096)
    batches = [append(segment, 2 * i, 2, 30, 5_000 + 100 * i) for i in range(20)]
    for offset in range(40):
        batch = segment.translate_offset(offset)
        assert batch is not None and batch.base_offset == offset - offset % 2
        assert batch.position == sum(len(b) for b in batches[: offset // 2])
    assert segment.translate_offset(40) is None
    info = segment.read(7, max_size=1, min_one_message=True)
    assert bytes(info.records) == bytes(batches[3])  # whole first batch despite max_size=1
    info = segment.read(7, max_size=len(batches[3]) + 10)
    assert bytes(info.records) == bytes(batches[3] + batches[4])[: len(batches[3]) + 10]
    assert info.records.view().tobytes() == bytes(info.records)
    assert segment.read(40, 100) is None
    found = segment.find_offset_by_timestamp(5_000 + 100 * 7 + 1)
    assert found is not None and found.base_offset == 14
    assert segment.find_offset_by_timestamp(10**15) is None
    assert segment.read_next_offset() == 40


def test_recover_rebuilds_indexes_and_cuts_torn_tail(tmp_path):
    segment = LogSegment.open(tmp_path, 0, index_interval_bytes=64, max_index_size=4096)
    batches = [append(segment, i, 1, 50, 1_000 + i) for i in range(30)]
    entries_before = [segment.offset_index.entry(n) for n in range(segment.offset_index.entries)]
    segment.log.append(batches[0][:40])  # a torn batch at the end
    assert segment.recover() == 40
    assert [
        segment.offset_index.entry(n) for n in range(segment.offset_index.entries)
    ] == entries_before
    assert segment.size == sum(len(b) for b in batches)
    assert segment.read_next_offset() == 30
    assert segment.max_timestamp_so_far == 1_029


def test_recover_into_indexes_smaller_than_the_scan_needs(tmp_path):
    # Written with room for 9 entries, recovered with segment.index.bytes = 48 (6 offset, 4 time
    # entries): the rebuilt indexes stop at full and lookups still find every batch.
    segment = LogSegment.open(tmp_path, 0, index_interval_bytes=0, max_index_size=4096)
    batches = [append(segment, i, 1, 10, 1_000 + i) for i in range(10)]
    segment.close()
    segment = LogSegment.open(tmp_path, 0, index_interval_bytes=0, max_index_size=48)
    assert segment.recover() == 0
    assert segment.offset_index.entries == 3  # the time index (one slot reserved) filled first
    assert segment.time_index.last_entry == (1_009, 9)  # the final entry covers the segment
    for offset in range(10):
        batch = segment.translate_offset(offset)
        assert batch is not None and batch.position == sum(len(b) for b in batches[:offset])
    assert segment.find_offset_by_timestamp(1_007).base_offset == 7
    assert segment.read_next_offset() == 10


def test_truncate_to_drops_batches_and_index_entries(tmp_path):
    segment = LogSegment.open(tmp_path, 100, index_interval_bytes=32, max_index_size=4096)
    batches = [append(segment, 100 + 2 * i, 2, 20, 1_000 + i) for i in range(20)]
    removed = segment.truncate_to(111)  # inside batch 110-111: the batch goes too
    assert removed == sum(len(b) for b in batches[5:])
    assert segment.read_next_offset() == 110
    assert segment.offset_index.last_offset < 110
    assert segment.max_timestamp_so_far == 1_004 + 1
    append(segment, 110, 2, 20, 2_000)
    assert segment.read_next_offset() == 112
