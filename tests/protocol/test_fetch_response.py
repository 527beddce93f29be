"""The hand-written FetchResponse encoder agrees with kio's decoder, field for field."""

import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader

from kafkalite.broker.types import EpochEndOffset, FetchPartitionData
from kafkalite.protocol.api import response_class
from kafkalite.protocol.fetch_response import (
    encode_fetch_response,
    encode_fetch_response_in_steps,
)
from kafkalite.storage.file_records import FileRecords


class Slice:
    """Stands in for the log's zero-copy record slice."""

    def __init__(self, data: bytes):
        self.data = data

    def __len__(self):
        return len(self.data)

    def view(self):
        return memoryview(self.data)


partition_data = st.builds(
    FetchPartitionData,
    error_code=st.sampled_from([0, 1, 3, 6]),
    high_watermark=st.integers(-1, 2**40),
    last_stable_offset=st.integers(0, 2**40),
    log_start_offset=st.integers(-1, 2**40),
    records=st.one_of(st.just(b""), st.binary(min_size=1, max_size=300).map(Slice)),
    preferred_read_replica=st.just(-1),
    diverging_epoch=st.one_of(
        st.none(),
        st.builds(EpochEndOffset, leader_epoch=st.integers(0, 100), end_offset=st.integers(0, 99)),
    ),
    aborted_transactions=st.one_of(
        st.none(), st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99)), max_size=2)
    ),
)
topics = st.lists(
    st.tuples(
        st.text("abc-_.", min_size=1, max_size=10),
        st.lists(st.tuples(st.integers(0, 1000), partition_data), max_size=3),
    ),
    max_size=3,
)


@settings(max_examples=150, deadline=None)
@given(version=st.integers(4, 12), topics=topics, session_id=st.integers(0, 2**31 - 1))
def test_matches_kio_decoder(version, topics, session_id):
    buffers = encode_fetch_response(7, version, topics, session_id=session_id, error_code=0)
    frame = b"".join(bytes(b) for b in buffers)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    (correlation_id,) = struct.unpack_from(">i", frame, 4)
    assert correlation_id == 7
    offset = 8 + (1 if version >= 12 else 0)  # response header v1 has an empty tag section
    cls = response_class(1, version)
    response, used = entity_reader(cls)(frame, offset)
    assert offset + used == len(frame)
    if version >= 7:
        assert response.session_id == session_id
    assert [t.topic for t in response.responses] == [t for t, _ in topics]
    for decoded_topic, (_, partitions) in zip(response.responses, topics, strict=True):
        for got, (index, data) in zip(decoded_topic.partitions, partitions, strict=True):
            assert got.partition_index == index
            assert got.error_code.value == data.error_code
            assert got.high_watermark == data.high_watermark
            assert got.last_stable_offset == data.last_stable_offset
            if version >= 5:
                assert got.log_start_offset == data.log_start_offset
            expected = data.records.data if isinstance(data.records, Slice) else b""
            assert bytes(got.records) == expected
            if data.aborted_transactions is None:
                assert got.aborted_transactions is None
            else:
                assert [(a.producer_id, a.first_offset) for a in got.aborted_transactions] == list(
                    data.aborted_transactions
                )
            if version >= 12 and data.diverging_epoch is not None:
                assert got.diverging_epoch.epoch == data.diverging_epoch.leader_epoch
                assert got.diverging_epoch.end_offset == data.diverging_epoch.end_offset


@settings(max_examples=100, deadline=None)
@given(
    version=st.integers(4, 12),
    topics=topics,
    session_id=st.integers(0, 2**31 - 1),
    step=st.integers(1, 4),
)
def test_the_encoding_in_steps_gives_the_same_buffers(version, topics, session_id, step):
    """A response of many partitions is encoded a few partitions at a time (the Fetch
    handler gives the loop back in between): the same frame, the record slices as the same
    parts, one step per ``step`` partitions of each topic."""
    whole = encode_fetch_response(7, version, topics, session_id=session_id, error_code=0)
    steps = encode_fetch_response_in_steps(
        7, version, topics, step=step, session_id=session_id, error_code=0
    )
    taken = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            parts = done.value
            break
        taken += 1
    assert taken == sum(-(-len(partitions) // step) for _, partitions in topics)
    assert [type(p) for p in parts] == [type(p) for p in whole]
    assert b"".join(bytes(p.view() if isinstance(p, Slice) else p) for p in parts) == b"".join(
        bytes(p.view() if isinstance(p, Slice) else p) for p in whole
    )


def test_record_data_is_not_copied():
    payload = bytearray(b"x" * 1000)
    data = FetchPartitionData(
        high_watermark=5, last_stable_offset=5, log_start_offset=0, records=memoryview(payload)
    )
    buffers = encode_fetch_response(1, 11, [("t", [(0, data)])])
    assert any(isinstance(b, memoryview) and b.obj is payload for b in buffers)


def test_log_slices_go_out_as_file_regions(tmp_path):
    """A slice of a segment file is handed to the connection as it is (sent with sendfile or
    viewed there: network/zerocopy.py), never read into the frame."""
    records = FileRecords(tmp_path / "00000000000000000000.log")
    records.append(b"0123456789" * 30)
    region = records.slice(10, 200)
    data = FetchPartitionData(
        high_watermark=5, last_stable_offset=5, log_start_offset=0, records=region
    )
    for version in (4, 11, 12):
        buffers = encode_fetch_response(3, version, [("t", [(0, data)])])
        assert any(b is region for b in buffers)
        frame = b"".join(bytes(b) for b in buffers)
        assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
        offset = 8 + (1 if version >= 12 else 0)
        response, _ = entity_reader(response_class(1, version))(frame, offset)
        assert bytes(response.responses[0].partitions[0].records) == bytes(region)
    records.close()
