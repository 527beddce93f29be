"""Batch reads and writes through ``format("kafkalite")`` with a real local Spark session and a
real broker: every offset option of Spark's Kafka source, minPartitions, headers, data loss,
and writes (back-to-back read, a missing topic failing with Kafka's error)."""

from __future__ import annotations

import datetime

import pytest
from confluent_kafka import TopicPartition as CkTopicPartition

PARTITIONS = 4
PER_PARTITION = 100
BASE_MS = 1_700_000_000_000


@pytest.fixture(scope="module")
def source(kafka) -> str:
    """4 partitions x 100 records; record i of partition p: key k<p>-<i>, value v<p>-<i>,
    timestamp BASE + i s, a header on even i."""
    topic = kafka.create("src", PARTITIONS)
    kafka.produce(topic, [
        {"key": f"k{p}-{i}", "value": f"v{p}-{i}", "partition": p, "timestamp": BASE_MS + i * 1000,
         "headers": [("h", f"{i}".encode())] if i % 2 == 0 else None}
        for p in range(PARTITIONS) for i in range(PER_PARTITION)
    ])  # fmt: skip
    return topic


def read(spark, bootstrap: str, **options):
    reader = spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def offsets_of(df) -> set[tuple[int, int]]:
    return {(r.partition, r.offset) for r in df.select("partition", "offset").collect()}


def expected(ranges: dict[int, range]) -> set[tuple[int, int]]:
    return {(p, o) for p, offsets in ranges.items() for o in offsets}


def test_read_everything_with_sparks_kafka_schema(kspark, kafka, source):
    df = read(kspark, kafka.bootstrap, subscribe=source)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
        ("offset", "bigint"), ("timestamp", "timestamp"), ("timestampType", "int"),
    ]  # fmt: skip
    rows = df.collect()
    assert len(rows) == PARTITIONS * PER_PARTITION
    assert df.rdd.getNumPartitions() == PARTITIONS
    for r in rows:
        assert bytes(r.key) == f"k{r.partition}-{r.offset}".encode()
        assert bytes(r.value) == f"v{r.partition}-{r.offset}".encode()
        assert r.topic == source and r.timestampType == 0
    sample = next(r for r in rows if r.partition == 2 and r.offset == 7)
    stamp = datetime.datetime.fromtimestamp((BASE_MS + 7000) / 1000)  # session time zone: local
    assert sample.timestamp == stamp


def test_offsets_json_and_the_batch_rules(kspark, kafka, source):
    df = read(kspark, kafka.bootstrap, subscribe=source,
              startingOffsets=f'{{"{source}":{{"0":10,"1":-2,"2":50,"3":99}}}}',
              endingOffsets=f'{{"{source}":{{"0":20,"1":5,"2":-1,"3":100}}}}')  # fmt: skip
    assert offsets_of(df) == expected({0: range(10, 20), 1: range(0, 5), 2: range(50, 100),
                                       3: range(99, 100)})  # fmt: skip
    with pytest.raises(Exception, match="starting offset can't be latest for batch queries"):
        read(kspark, kafka.bootstrap, subscribe=source, startingOffsets="latest").collect()
    with pytest.raises(Exception, match="must name every partition read"):
        read(kspark, kafka.bootstrap, subscribe=source,
             startingOffsets=f'{{"{source}":{{"0":1}}}}').collect()  # fmt: skip


def test_timestamps_select_the_first_offset_at_or_after(kspark, kafka, source):
    df = read(kspark, kafka.bootstrap, subscribe=source, startingTimestamp=str(BASE_MS + 90_000),
              endingOffsetsByTimestamp=f'{{"{source}":{{"0":{BASE_MS + 95_000},'
              f'"1":{BASE_MS + 95_000},"2":{BASE_MS + 10**9},"3":{BASE_MS + 95_500}}}}}')  # fmt: skip
    assert offsets_of(df) == expected({0: range(90, 95), 1: range(90, 95), 2: range(90, 100),
                                       3: range(90, 96)})  # fmt: skip
    by_partition = f'{{"{source}":{{"0":{BASE_MS},"1":{BASE_MS + 98_500},"2":{BASE_MS + 99_000},' \
                   f'"3":{BASE_MS + 99_000}}}}}'  # fmt: skip
    df = read(kspark, kafka.bootstrap, subscribe=source, startingOffsetsByTimestamp=by_partition,
              endingOffsets=f'{{"{source}":{{"0":3,"1":-1,"2":-1,"3":-1}}}}')  # fmt: skip
    assert offsets_of(df) == expected({0: range(0, 3), 1: range(99, 100), 2: range(99, 100),
                                       3: range(99, 100)})  # fmt: skip
    late = str(BASE_MS + 10**9)
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        read(kspark, kafka.bootstrap, subscribe=source, startingTimestamp=late).collect()
    assert read(kspark, kafka.bootstrap, subscribe=source, startingTimestamp=late,
                startingOffsetsByTimestampStrategy="latest").count() == 0  # fmt: skip


def test_pattern_assign_and_min_partitions(kspark, kafka, source):
    assigned = read(kspark, kafka.bootstrap, assign=f'{{"{source}":[1,3]}}')
    assert {p for p, _ in offsets_of(assigned)} == {1, 3}
    pattern = read(kspark, kafka.bootstrap, subscribePattern="s.c", minPartitions="16")
    assert pattern.rdd.getNumPartitions() == 16
    rows = pattern.select("partition", "offset").collect()
    assert len(rows) == len(set(rows)) == PARTITIONS * PER_PARTITION
    with pytest.raises(Exception, match="exactly one of the options subscribe"):
        read(kspark, kafka.bootstrap).collect()


def test_headers_round_trip(kspark, kafka, source):
    kafka.create("hdr", 1)
    src = read(kspark, kafka.bootstrap, subscribe=source, includeHeaders="true",
               endingOffsets=f'{{"{source}":{{"0":4,"1":0,"2":0,"3":0}}}}')  # fmt: skip
    rows = src.orderBy("offset").collect()
    assert [[(h.key, bytes(h.value)) for h in r.headers or []] for r in rows] == [
        [("h", b"0")], [], [("h", b"2")], [],
    ]  # fmt: skip
    src.select("key", "value", "headers").write.format("kafkalite").option(
        "kafka.bootstrap.servers", kafka.bootstrap
    ).option("topic", "hdr").mode("append").save()
    back = read(kspark, kafka.bootstrap, subscribe="hdr", includeHeaders="true")
    got = sorted((bytes(r.value), [(h.key, bytes(h.value)) for h in r.headers or []])
                 for r in back.collect())  # fmt: skip
    assert got == [(b"v0-0", [("h", b"0")]), (b"v0-1", []), (b"v0-2", [("h", b"2")]),
                   (b"v0-3", [])]  # fmt: skip


def test_write_then_read_back(kspark, kafka):
    from pyspark.sql import functions as F

    kafka.create("out-a", 3)
    kafka.create("out-b", 1)
    df = kspark.range(300).select(
        F.col("id").cast("string").alias("key"),
        F.concat(F.lit("value-"), F.col("id").cast("string")).alias("value"),
        F.when(F.col("id") < 200, F.lit("out-a")).otherwise(F.lit("out-b")).alias("topic"),
        F.when(F.col("id") < 30, F.lit(2)).alias("partition"),
    )
    df.write.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap).mode(
        "append"
    ).save()
    back = read(kspark, kafka.bootstrap, subscribe="out-a,out-b").collect()
    got = {(r.topic, bytes(r.key).decode(), bytes(r.value).decode()) for r in back}
    assert len(back) == 300
    assert got == {("out-a" if i < 200 else "out-b", str(i), f"value-{i}") for i in range(300)}
    assert all(r.partition == 2 for r in back if int(bytes(r.key)) < 30)


def test_write_to_a_missing_topic_fails_with_the_kafka_error(kspark, kafka):
    df = kspark.createDataFrame([("a",), ("b",)], "value string")
    with pytest.raises(
        Exception, match="writing to topic no-such-topic failed: UNKNOWN_TOPIC_OR_PART"
    ):
        df.write.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap).option(
            "topic", "no-such-topic"
        ).mode("append").save()
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        kspark.range(1).write.format("kafkalite").option(
            "kafka.bootstrap.servers", kafka.bootstrap
        ).option("topic", "out-b").mode("append").save()


def test_data_loss_follows_fail_on_data_loss(kspark, kafka):
    topic = kafka.create("lossy", 1)
    kafka.produce(topic, [{"value": f"{i}"} for i in range(50)])
    deleted = kafka.admin.delete_records([CkTopicPartition(topic, 0, 20)])
    next(iter(deleted.values())).result(30)
    start = f'{{"{topic}":{{"0":5}}}}'
    with pytest.raises(Exception, match=r"are below its log start offset 20.*failOnDataLoss"):
        read(kspark, kafka.bootstrap, subscribe=topic, startingOffsets=start).collect()
    df = read(kspark, kafka.bootstrap, subscribe=topic, startingOffsets=start,
              failOnDataLoss="false")  # fmt: skip
    assert sorted(o for _, o in offsets_of(df)) == list(range(20, 50))
