"""complete_batches_length: the one batch-framing rule (Kafka's log input streams).

A trailing partial batch is a read cut at its size limit and is left out; a garbled batchLength
is corruption (Kafka's CorruptRecordException) and is kept, so that whoever validates the bytes
reports it. Two copies used to disagree on the garbled case: one dropped the rest silently.
"""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.partition import whole_batches
from kafkalite.protocol.errors import CorruptRecordError
from kafkalite.protocol.records import (
    LOG_OVERHEAD,
    Record,
    build_batch,
    complete_batches_length,
)
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log


def batch(n: int, base_offset: int = 0) -> bytes:
    return bytes(
        build_batch([Record(key=None, value=b"v%d" % i) for i in range(n)], base_offset=base_offset)
    )


def garbled(length: int) -> bytes:
    """The start of a v2 batch whose batchLength field says ``length``, plus some bytes."""
    return struct.pack(">qiib", 0, length, 0, 2) + bytes(15)


BATCHES = batch(1) + batch(3, 1) + batch(2, 4)
SIZES = [len(batch(1)), len(batch(3, 1)), len(batch(2, 4))]


def test_complete_batches_are_all_covered():
    assert complete_batches_length(BATCHES) == len(BATCHES)
    assert complete_batches_length(b"") == 0
    assert complete_batches_length(memoryview(BATCHES)) == len(BATCHES)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(BATCHES)))
def test_a_partial_tail_is_left_out(cut):
    whole = max([0] + [sum(SIZES[:i]) for i in range(1, 4) if sum(SIZES[:i]) <= cut])
    assert complete_batches_length(BATCHES[:cut]) == whole


def test_a_window_of_a_larger_buffer():
    buf = b"x" * 7 + BATCHES + b"y" * 5
    first_two = SIZES[0] + SIZES[1]
    assert complete_batches_length(buf, 7, 7 + len(BATCHES)) == len(BATCHES)
    assert complete_batches_length(buf, 7, 7 + first_two + 3) == first_two
    assert complete_batches_length(buf, 7 + SIZES[0], 7 + first_two) == SIZES[1]


@pytest.mark.parametrize("length", [-(2**31), -12, -1, 0, 1, 13])
def test_a_garbled_length_keeps_everything_for_validation(length):
    """Kafka's ByteBufferLogInputStream / FileLogInputStream throw CorruptRecordException for a
    batchLength below LegacyRecord.RECORD_OVERHEAD_V0 (14): not a cut, never dropped."""
    data = batch(2) + garbled(length)
    assert complete_batches_length(data) == len(data)
    assert complete_batches_length(garbled(length)) == len(garbled(length))
    # even when the garbled batch is the last few bytes (a real cut would be dropped)
    assert complete_batches_length(data[: len(batch(2)) + LOG_OVERHEAD]) == len(batch(2)) + 12


def test_a_short_but_plausible_length_is_framed_and_left_to_validation():
    # 14..48 passes the framing check (validation rejects it as below the v2 header size);
    # past the end of the buffer it is a cut like any other
    data = batch(1) + garbled(20)
    assert complete_batches_length(data) == len(data)
    assert complete_batches_length(data[:-1]) == len(batch(1))


def test_fetch_passes_garbled_bytes_on_and_trims_a_cut_batch():
    assert whole_batches(BATCHES[:-3]) == BATCHES[: SIZES[0] + SIZES[1]]
    data = batch(2) + garbled(0)
    assert whole_batches(data) == data  # as Kafka sends the log's bytes; the client reports it


def test_follower_append_of_a_garbled_length_is_corruption(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig())
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(batch(2) + garbled(0))
    assert log.log_end_offset == 0
    log.append_as_follower(batch(2) + batch(1, 2)[:-4])  # a cut tail is dropped, as before
    assert log.log_end_offset == 2
    log.close()
