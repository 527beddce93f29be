"""Produce: the hand-written request decoder against kio's encoder, and the handler's answers."""

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.network.connection import NO_RESPONSE, CloseConnection
from kafkalite.protocol import frames
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.produce_request import decode_produce_request
from kafkalite.protocol.records import Record, build_batch
from kafkalite.protocol.types import TopicPartition


def produce_request(version, topics, acks=1, transactional_id=None):
    cls = request_class(ApiKey.PRODUCE, version)
    import sys

    module = sys.modules[cls.__module__]
    return cls(
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=1500),
        topic_data=tuple(
            module.TopicProduceData(
                name=name,
                partition_data=tuple(
                    module.PartitionProduceData(index=i, records=r) for i, r in parts
                ),
            )
            for name, parts in topics
        ),
    )


topics_strategy = st.lists(
    st.tuples(
        st.text("abcxyz-._", min_size=1, max_size=8),
        st.lists(
            st.tuples(st.integers(0, 99), st.one_of(st.none(), st.binary(max_size=64))), max_size=3
        ),
    ),
    max_size=3,
)


@settings(max_examples=100, deadline=None)
@given(
    version=st.integers(3, 11),
    topics=topics_strategy,
    txn=st.one_of(st.none(), st.text(max_size=5)),
    acks=st.sampled_from([-1, 0, 1]),
)
def test_decoder_agrees_with_kio(version, topics, txn, acks):
    frame = bytearray(
        frames.encode_request(
            ApiKey.PRODUCE, version, 1, "c", produce_request(version, topics, acks, txn)
        )[4:]
    )
    header, offset = frames.parse_request_header(frame)
    decoded = decode_produce_request(header, frame, offset)
    assert decoded.acks == acks and decoded.timeout_ms == 1500
    assert decoded.transactional_id == txn
    got = [
        (
            t.name,
            [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data],
        )
        for t in decoded.topic_data
    ]
    assert got == [(name, list(parts)) for name, parts in topics]


def test_decoder_rejects_truncation_and_ignores_trailing_bytes():
    from kafkalite.protocol.errors import InvalidRequestError

    full = bytearray(
        frames.encode_request(0, 9, 1, "c", produce_request(9, [("t", [(0, b"abc")])]))[4:]
    )
    header, offset = frames.parse_request_header(full)
    for cut in range(offset, len(full) - 1):
        with pytest.raises(InvalidRequestError):
            decode_produce_request(header, full[:cut], offset)
    padded = decode_produce_request(header, full + b"\x00\x01", offset)
    assert bytes(padded.topic_data[0].partition_data[0].records) == b"abc"


def batch():
    return build_batch([Record(0, 0, b"k", b"v")], base_timestamp=1_700_000_000_000)


@pytest.mark.parametrize("version", [3, 7, 9, 11])
async def test_produce_answers_per_partition(call, services, version):
    request = produce_request(version, [("t", [(0, batch())]), ("unknown", [(1, batch())])])
    response = await call(ApiKey.PRODUCE, version, request)
    by_topic = {t.name: t.partition_responses[0] for t in response.responses}
    assert by_topic["t"].error_code.value == 0 and by_topic["t"].base_offset == 42
    assert by_topic["unknown"].error_code.value == 3
    assert services.replica_manager.appended[TopicPartition("t", 0)] == batch()


async def test_acks_zero_has_no_response_and_closes_on_error(call):
    assert (
        await call(ApiKey.PRODUCE, 9, produce_request(9, [("t", [(0, batch())])], acks=0))
        is NO_RESPONSE
    )
    with pytest.raises(CloseConnection):
        await call(ApiKey.PRODUCE, 9, produce_request(9, [("unknown", [(0, batch())])], acks=0))


async def test_invalid_acks_and_null_records(call):
    response = await call(ApiKey.PRODUCE, 9, produce_request(9, [("t", [(0, batch())])], acks=2))
    assert response.responses[0].partition_responses[0].error_code.value == 21
    response = await call(ApiKey.PRODUCE, 9, produce_request(9, [("t", [(0, None)])]))
    assert response.responses[0].partition_responses[0].error_code.value == 87
