"""bench/spark_tasks.py: the generated data set, and the producer/consumer task bodies driven by
threads (no Spark) against a real redis-server."""

from __future__ import annotations

import json
import threading

import spark_tasks
from hypothesis import given, settings
from hypothesis import strategies as st
from spark_tasks import (
    KIND_DATA,
    KIND_MARKER,
    TAG_ACK,
    TAG_RECEIVED,
    TAG_TASK,
    VALUE_HEADER,
    LoadSpec,
    key_index_from,
    key_of,
    make_value,
    parse_value,
    partition_of,
    partitions_of_consumer,
    payload_pool,
    producer_of,
    slice_of,
    slice_size,
)


@settings(max_examples=60, deadline=None)
@given(
    records=st.integers(0, 400),
    keys=st.integers(1, 50),
    producers=st.integers(1, 6),
)
def test_slices_partition_the_data_set_by_key(records, keys, producers):
    producers = min(producers, keys)
    seen = []
    for p in range(producers):
        mine = list(slice_of(p, records, keys, producers))
        assert mine == sorted(mine)
        assert len(mine) == slice_size(p, records, keys, producers)
        assert all(producer_of(seq, keys, producers) == p for seq in mine)
        seen += mine
    assert sorted(seen) == list(range(records))


@settings(max_examples=60, deadline=None)
@given(partitions=st.integers(1, 64), consumers=st.integers(1, 64))
def test_consumer_ranges_cover_every_partition_once(partitions, consumers):
    consumers = min(consumers, partitions)
    ranges = [partitions_of_consumer(c, partitions, consumers) for c in range(consumers)]
    assert all(len(r) >= 1 for r in ranges)
    assert [p for r in ranges for p in r] == list(range(partitions))


@settings(max_examples=100, deadline=None)
@given(
    producer=st.integers(0, 1000),
    seq=st.integers(-1, 2**62),
    send_ns=st.integers(0, 2**62),
    size=st.integers(VALUE_HEADER.size, 600),
    kind=st.sampled_from([KIND_DATA, KIND_MARKER]),
)
def test_value_round_trip(producer, seq, send_ns, size, kind):
    pool = payload_pool(size, seed=3)
    value = make_value(pool, producer, seq, send_ns, size, kind)
    assert len(value) == size
    assert parse_value(value) == (kind, producer, seq, send_ns)


def test_foreign_values_and_keys_are_recognised():
    assert parse_value(None) is None
    assert parse_value(b"short") is None
    assert parse_value(b"\x00" * 64) is None
    assert key_index_from(key_of(42)) == 42
    assert key_index_from(None) == -1
    assert key_index_from(b"other") == -1
    assert key_index_from(b"key-zz") == -1


def test_partition_follows_the_key():
    keys, partitions = 10, 4
    for seq in range(100):
        assert partition_of(seq, keys, partitions) == (seq % keys) % partitions


def test_spec_rejects_impossible_layouts():
    base = dict(transport="redis", address="x:1", topic="t", records=10, value_size=64,
                keys=4, partitions=2, producers=2, consumers=2)  # fmt: skip
    LoadSpec(**base)
    for bad in ({"value_size": 8}, {"keys": 1}, {"consumers": 3}, {"transport": "nats"}):
        try:
            LoadSpec(**{**base, **bad})
        except ValueError:
            continue
        raise AssertionError(f"{bad} accepted")


def run_threads(spec: LoadSpec) -> list[list[tuple]]:
    """Every task of the barrier stage in its own thread, as Spark would run them."""
    barrier = threading.Barrier(spec.tasks, timeout=60)
    outputs: list[list[tuple]] = [[] for _ in range(spec.tasks)]

    def task(index: int) -> None:
        outputs[index] = list(spark_tasks.run_role(spec, index, barrier.wait))

    threads = [threading.Thread(target=task, args=(i,)) for i in range(spec.tasks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    return outputs


def test_redis_tasks_deliver_every_record_in_key_order(redis_server):
    spec = LoadSpec(transport="redis", address=redis_server.address, topic="t", records=3000,
                    value_size=64, keys=30, partitions=3, producers=2, consumers=2,
                    redis_pipeline=100, idle_timeout_s=20)  # fmt: skip
    outputs = run_threads(spec)
    stats = [json.loads(rows[-1][1]) for rows in outputs]
    assert all(rows[-1][0] == TAG_TASK for rows in outputs)
    assert all(not s["errors"] for s in stats), stats
    acked = [r for rows in outputs for r in rows if r[0] == TAG_ACK]
    received = [r for rows in outputs for r in rows if r[0] == TAG_RECEIVED]
    assert sorted(r[2] for r in acked) == list(range(spec.records))
    assert sorted(r[5] for r in received) == list(range(spec.records))
    # Per partition and key, seq grows with offset; every record sits where the data set says.
    last: dict[tuple[int, int], int] = {}
    for _, _consumer, partition, _offset, key_index, seq, producer, *_ in sorted(
        received, key=lambda r: (r[2], r[3])
    ):
        assert key_index == seq % spec.keys
        assert partition == key_index % spec.partitions
        assert producer == key_index % spec.producers
        assert seq > last.get((partition, key_index), -1)
        last[(partition, key_index)] = seq
    producers = [s for s in stats if s["role"] == "producer"]
    assert sum(s["attempted"] for s in producers) == spec.records
    assert all(s["markers_sent"] == spec.partitions for s in producers)


def test_consumer_reports_an_idle_timeout_when_markers_never_come(redis_server):
    # One consumer, no records and no producer markers ever: it must give up and say why.
    spec = LoadSpec(transport="redis", address=redis_server.address, topic="idle", records=1,
                    value_size=64, keys=1, partitions=1, producers=1, consumers=1,
                    idle_timeout_s=0.5)  # fmt: skip
    consumer = spark_tasks.RedisConsumerTask(spec, 0)
    consumer.setup()
    rows: list[tuple] = []
    consumer.run(rows)
    consumer.close()
    assert consumer.stats["timed_out"] is True
    assert "without end markers" in consumer.stats["errors"][0]
    assert rows == []
