"""Interoperability with the record-batch code of real Kafka clients, for every codec.

Batches built by kafka-python's and aiokafka's own ``DefaultRecordBatchBuilder`` must validate
and decode here, and those libraries' ``DefaultRecordBatch`` readers must decode ours. kafka-python
needs ``python-snappy``, ``lz4`` and ``zstandard`` for its codecs; aiokafka uses cramjam.
"""

from __future__ import annotations

import importlib

import pytest

from kafkalite.protocol.records import (
    CompressionType,
    Header,
    Record,
    build_batch,
    build_end_txn_marker_batch,
    decode_batch,
    record_timestamp,
    validate_batches,
)

CODECS = list(CompressionType)
INSTALL_HINT = "install the test extras: .venv/bin/pip install -e '.[test]'"


def _require(module: str):
    try:
        return importlib.import_module(module)
    except ImportError as e:  # a missing component fails, it never skips
        pytest.fail(f"{module} is needed for this test ({e}); {INSTALL_HINT}")


def kafka_python_builder():
    for codec_lib in ("snappy", "lz4.frame", "zstandard"):
        _require(codec_lib)
    return _require("kafka.record.default_records")


def aiokafka_modules():
    _require("cramjam")
    return _require("aiokafka.record.default_records")


SAMPLE = [
    (1_700_000_000_000, b"key-0", b"value-0" * 50, []),
    (1_700_000_000_007, None, b"value-1", [("h1", b"v1"), ("h2", None)]),
    (1_700_000_000_003, b"key-2", None, []),
    (1_700_000_000_009, b"", b"", [("", b"")]),
]


def expected_records(base_timestamp):
    return [
        Record(i, ts - base_timestamp, key, value, tuple(Header(k, v) for k, v in headers))
        for i, (ts, key, value, headers) in enumerate(SAMPLE)
    ]


def our_batch(codec, **kwargs):
    base = SAMPLE[0][0]
    records = [
        Record(timestamp_delta=ts - base, key=key, value=value, headers=tuple(headers))
        for ts, key, value, headers in SAMPLE
    ]
    return build_batch(records, compression=codec, base_timestamp=base, base_offset=100, **kwargs)


def fill(builder):
    for i, (ts, key, value, headers) in enumerate(SAMPLE):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


def check_theirs(buf, codec, producer=(-1, -1, -1), transactional=False):
    (header,) = validate_batches(buf, origin_client=True)
    assert header.compression == codec
    assert header.record_count == len(SAMPLE)
    assert header.last_offset_delta == len(SAMPLE) - 1
    assert header.base_timestamp == SAMPLE[0][0]
    assert header.max_timestamp == max(ts for ts, *_ in SAMPLE)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert header.is_transactional == transactional
    decoded_header, records = decode_batch(buf)
    assert decoded_header == header
    assert records == expected_records(SAMPLE[0][0])
    assert [record_timestamp(header, r) for r in records] == [ts for ts, *_ in SAMPLE]


def check_ours_with(batch_cls, codec, buf):
    batch = batch_cls(buf)
    assert batch.validate_crc()
    assert batch.base_offset == 100
    assert batch.compression_type == codec
    assert batch.producer_id == 77 and batch.producer_epoch == 2 and batch.base_sequence == 5
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [
        (100 + i, ts, key, value, [tuple(h) for h in headers])
        for i, (ts, key, value, headers) in enumerate(SAMPLE)
    ]


@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
def test_kafka_python_builder_to_us(codec):
    dr = kafka_python_builder()
    builder = dr.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    check_theirs(fill(builder), codec)


@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
def test_kafka_python_transactional_builder_to_us(codec):
    dr = kafka_python_builder()
    builder = dr.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=True,
        producer_id=1234,
        producer_epoch=7,
        base_sequence=40,
        batch_size=1 << 20,
    )
    check_theirs(fill(builder), codec, producer=(1234, 7, 40), transactional=True)


@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
def test_us_to_kafka_python_reader(codec):
    dr = kafka_python_builder()
    buf = our_batch(codec, producer_id=77, producer_epoch=2, base_sequence=5)
    check_ours_with(dr.DefaultRecordBatch, codec, buf)


@pytest.mark.parametrize("impl", ["cython", "python"])
@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
def test_aiokafka_builder_to_us(codec, impl):
    dr = aiokafka_modules()
    builder_cls = (
        dr.DefaultRecordBatchBuilder if impl == "cython" else dr._DefaultRecordBatchBuilderPy
    )
    builder = builder_cls(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    check_theirs(fill(builder), codec)


@pytest.mark.parametrize("impl", ["cython", "python"])
@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
def test_us_to_aiokafka_reader(codec, impl):
    dr = aiokafka_modules()
    batch_cls = dr.DefaultRecordBatch if impl == "cython" else dr._DefaultRecordBatchPy
    buf = our_batch(codec, producer_id=77, producer_epoch=2, base_sequence=5)
    check_ours_with(batch_cls, codec, buf)


def test_our_control_batch_read_by_kafka_python():
    dr = kafka_python_builder()
    buf = build_end_txn_marker_batch(
        producer_id=9, producer_epoch=1, commit=True, coordinator_epoch=4, base_offset=50
    )
    batch = dr.DefaultRecordBatch(buf)
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    (record,) = list(batch)
    assert record.offset == 50
    assert record.commit and not record.abort
