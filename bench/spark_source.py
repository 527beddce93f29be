"""Spark's `format("kafkalite")` data source (kafkalite.spark) measured against the same jobs
written by hand with confluent-kafka in mapPartitions, in the same run, on the same broker.

    .venv/bin/python bench/spark_source.py                       # 4M x 100 B, 4 partitions
    .venv/bin/python bench/spark_source.py --records 400000 --stream-seconds 10

What a run does (a broker on the embedded store is started here unless --bootstrap):

1. batch write: a DataFrame of `records` values of `value_size` bytes (spark.range, one Spark
   partition per Kafka partition) written by `df.write.format("kafkalite")`, then the same
   DataFrame written by a hand-written job (`df.rdd.mapPartitions` producing each row with a
   confluent-kafka producer of the same settings: idempotent, linger 5 ms, 1 MB batches);
2. batch read: `spark.read.format("kafkalite")` and an aggregate over every value (count and
   total length), then the same aggregate over a DataFrame made by a hand-written job
   (`mapPartitions` consuming one Kafka partition each with confluent-kafka, rows into
   `createDataFrame`); and, as a reference, the hand-written job without a DataFrame (Python
   only: it moves nothing into Spark's JVM);
3. executor client: one partition's records read outside Spark by the data source's reader
   (confluent-kafka into Arrow) and by kafkalite's own client (Fetch + the Python record
   decoder), to say which client the executors should use;
4. streaming: a query `readStream.format("kafkalite")` -> `writeStream.format("kafkalite")`
   with a `--trigger-ms` trigger while a producer writes `--stream-rate` records/s (each value
   starts with its send time); a consumer of the output topic measures end-to-end latency
   (send -> Spark -> output topic -> consumer), p50/p99/p99.9 after a warm-up.

Figures go to bench/results/spark_source-<stamp>.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
for path in (str(BENCH_DIR), str(REPO_DIR)):
    if path not in sys.path:
        sys.path.insert(0, path)

from local_broker import LocalBroker, SetupError  # noqa: E402

RESULTS_DIR = BENCH_DIR / "results"
PRODUCER_SETTINGS = {"enable.idempotence": True, "linger.ms": 5, "batch.size": 1_000_000}


# ------------------------------------------------------------------------------ hand-written jobs


def hand_produce(bootstrap: str, topic: str, rows: Any) -> Any:
    """mapPartitions body: produce every row's value with confluent-kafka, yield the count."""
    from confluent_kafka import Producer

    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS,
                         "delivery.report.only.error": True, "on_delivery": on_delivery})  # fmt: skip
    count = 0
    for row in rows:
        while True:
            try:
                producer.produce(topic, row.value)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
    while producer.flush(1.0):
        pass
    if errors:
        raise RuntimeError(f"delivery failed: {errors[0]}")
    yield count


def hand_consume(bootstrap: str, topic: str, ends: dict[int, int], partitions: Any) -> Any:
    """mapPartitions body: read Kafka partition p (0 .. its end offset) with confluent-kafka,
    yield rows of Spark's Kafka schema."""
    from confluent_kafka import Consumer, TopicPartition

    for p in partitions:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"hand-{p}",
                             "enable.auto.commit": False})  # fmt: skip
        consumer.assign([TopicPartition(topic, p, 0)])
        end = ends[p]
        done = 0
        while done < end:
            for m in consumer.consume(10000, timeout=1.0):
                if m.error():
                    raise RuntimeError(str(m.error()))
                ts_type, ts = m.timestamp()
                yield (m.key(), m.value(), topic, p, m.offset(),
                       datetime.datetime.fromtimestamp(ts / 1000, datetime.UTC), ts_type - 1)  # fmt: skip
                done = m.offset() + 1
        consumer.close()


def hand_consume_bare(bootstrap: str, topic: str, ends: dict[int, int], partitions: Any) -> Any:
    """The same read with nothing handed to Spark but (count, bytes)."""
    from confluent_kafka import Consumer, TopicPartition

    for p in partitions:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bare-{p}",
                             "enable.auto.commit": False})  # fmt: skip
        consumer.assign([TopicPartition(topic, p, 0)])
        end, done, count, nbytes = ends[p], 0, 0, 0
        while done < end:
            messages = consumer.consume(10000, timeout=1.0)
            if messages:
                count += len(messages)
                nbytes += sum(len(m.value()) for m in messages)
                done = messages[-1].offset() + 1
        consumer.close()
        yield (count, nbytes)


# ------------------------------------------------------------------------------ phases


def timed(fn: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def figures(records: int, seconds: float) -> dict[str, Any]:
    return {"records": records, "seconds": round(seconds, 3),
            "records_per_s": round(records / seconds, 1) if seconds else None}  # fmt: skip


def batch_phases(
    spark: Any, bootstrap: str, args: argparse.Namespace, create: Any
) -> dict[str, Any]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )  # fmt: skip

    n, parts = args.records, args.partitions
    ds_topic, hand_topic = create("bench-ds", parts), create("bench-hand", parts)
    df = spark.range(0, n, numPartitions=parts).select(
        F.lpad(F.col("id").cast("string"), args.value_size, "x").cast("binary").alias("value")
    )
    out: dict[str, Any] = {}
    print("batch write: data source ...", flush=True)
    _, s = timed(lambda: df.write.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
                 .option("topic", ds_topic).mode("append").save())  # fmt: skip
    out["write_data_source"] = figures(n, s)
    print("batch write: hand-written mapPartitions ...", flush=True)
    written, s = timed(lambda: df.rdd.mapPartitions(
        lambda rows: hand_produce(bootstrap, hand_topic, rows)).sum())  # fmt: skip
    assert written == n, written
    out["write_hand"] = figures(n, s)

    def aggregate(frame: Any) -> tuple[int, int]:
        row = frame.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).first()
        return row.n, row.b

    print("batch read: data source ...", flush=True)
    reader = (spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", ds_topic))  # fmt: skip
    if args.min_partitions:
        reader = reader.option("minPartitions", str(args.min_partitions))
    (count, nbytes), s = timed(lambda: aggregate(reader.load()))
    assert (count, nbytes) == (n, n * args.value_size), (count, nbytes)
    out["read_data_source"] = figures(n, s)

    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe"})
    ends = {p: probe.get_watermark_offsets(TopicPartition(hand_topic, p), timeout=10)[1]
            for p in range(parts)}  # fmt: skip
    probe.close()
    schema = StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("offset", LongType()), StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ])  # fmt: skip
    sc = spark.sparkContext
    print("batch read: hand-written mapPartitions into a DataFrame ...", flush=True)
    rdd = sc.parallelize(range(parts), parts).mapPartitions(
        lambda ps: hand_consume(bootstrap, hand_topic, ends, ps))  # fmt: skip
    (count, nbytes), s = timed(lambda: aggregate(spark.createDataFrame(rdd, schema)))
    assert (count, nbytes) == (n, n * args.value_size), (count, nbytes)
    out["read_hand"] = figures(n, s)
    print("batch read: hand-written mapPartitions, Python only ...", flush=True)
    totals, s = timed(lambda: sc.parallelize(range(parts), parts).mapPartitions(
        lambda ps: hand_consume_bare(bootstrap, hand_topic, ends, ps)).collect())  # fmt: skip
    assert sum(c for c, _ in totals) == n
    out["read_hand_python_only"] = figures(n, s)
    out["topic"] = ds_topic
    return out


def client_phase(bootstrap: str, topic: str, records: int) -> dict[str, Any]:
    """One partition read in this process by the data source's reader (confluent-kafka into
    Arrow) and by kafkalite's client (Fetch + Python record decoding), same records."""
    import pyarrow as pa
    from confluent_kafka import Consumer, TopicPartition

    from kafkalite.spark.kafka import read_range
    from kafkalite.spark.options import OffsetRange
    from kafkalite.spark.source import read_schema

    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe"})
    end = min(records, probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    probe.close()
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(read_schema(False), timezone="UTC")

    def confluent() -> int:
        r = OffsetRange(topic, 0, 0, end)
        return sum(b.num_rows for b in read_range(r, {"bootstrap.servers": bootstrap}, schema,
                                                  fail_on_data_loss=True))  # fmt: skip

    def own() -> int:
        return asyncio.run(own_client_read(bootstrap, topic, end, pa))

    out = {}
    for name, fn in (("confluent_kafka_arrow", confluent), ("kafkalite_client_arrow", own)):
        print(f"executor client: {name} ...", flush=True)
        count, s = timed(fn)
        assert count == end, (name, count, end)
        out[name] = figures(count, s)
    return out


async def own_client_read(bootstrap: str, topic: str, end: int, pa: Any) -> int:
    from kafkalite.client.client import KafkaClient
    from kafkalite.protocol.records import iter_batches
    from kafkalite.protocol.types import TopicPartition

    tp = TopicPartition(topic, 0)
    count, offset = 0, 0
    async with KafkaClient(bootstrap) as client:
        while offset < end:
            response = await client.fetch(tp, offset, max_bytes=8 * 1024 * 1024)
            data = response.responses[0].partitions[0].records or b""
            keys, values, offsets, stamps = [], [], [], []
            for header, records in iter_batches(data):
                for r in records:
                    o = header.base_offset + r.offset_delta
                    if offset <= o < end:
                        keys.append(r.key)
                        values.append(r.value)
                        offsets.append(o)
                        stamps.append(header.base_timestamp + r.timestamp_delta)
            if offsets:
                pa.RecordBatch.from_arrays(
                    [pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
                     pa.array(offsets, pa.int64()), pa.array(stamps, pa.int64())],
                    names=["key", "value", "offset", "timestamp"],
                )  # fmt: skip
                count += len(offsets)
                offset = offsets[-1] + 1
    return count


def percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return round(sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))], 2)


def stream_phase(
    spark: Any, bootstrap: str, args: argparse.Namespace, create: Any
) -> dict[str, Any]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    parts = args.partitions
    source, sink = create("bench-stream-in", parts), create("bench-stream-out", parts)
    checkpoint = tempfile.mkdtemp(prefix="spark-source-checkpoint-")
    query = (
        spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source).option("startingOffsets", "earliest").load()
        .select("key", "value")
        .writeStream.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink).option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{args.trigger_ms} milliseconds").start()
    )  # fmt: skip
    latencies: list[float] = []
    stop = threading.Event()
    measure_from = [0]

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 5})  # fmt: skip
        consumer.assign([TopicPartition(sink, p, 0) for p in range(parts)])
        while not stop.is_set():
            for m in consumer.consume(1000, timeout=0.1):
                if m.error() is None:
                    sent = struct.unpack_from(">q", m.value())[0]
                    if sent >= measure_from[0]:
                        latencies.append((time.time_ns() - sent) / 1e6)
        consumer.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 1, "enable.idempotence": True}
    )
    pad = b"x" * max(0, args.value_size - 8)
    warmup_s, seconds, rate = args.stream_warmup, args.stream_seconds, args.stream_rate
    print(f"streaming: {rate} records/s for {warmup_s + seconds:.0f} s, trigger {args.trigger_ms} ms ...",
          flush=True)  # fmt: skip
    started = time.monotonic()
    measure_from[0] = time.time_ns() + int(warmup_s * 1e9)
    sent = 0
    tick = 0.01
    while (elapsed := time.monotonic() - started) < warmup_s + seconds:
        due = int(elapsed * rate)
        while sent < due:
            try:
                producer.produce(source, struct.pack(">q", time.time_ns()) + pad)
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        time.sleep(tick)  # pacing of the load generator
    producer.flush(30)
    measured = int(seconds * rate)
    deadline = time.monotonic() + 30
    while len(latencies) < measured * 0.999 and time.monotonic() < deadline:
        time.sleep(0.1)  # waiting for the tail of the stream to arrive
    stop.set()
    reader.join(10)
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    query.stop()
    values = sorted(latencies)
    batch_ms = sorted(p["durationMs"].get("triggerExecution", 0) for p in progress)
    return {
        "rate": rate, "trigger_ms": args.trigger_ms, "sent": sent, "measured": len(values),
        "latency_ms": {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99),
                       "p99.9": percentile(values, 0.999),
                       "max": round(values[-1], 2) if values else None},
        "micro_batch_ms_p50": percentile(batch_ms, 0.5),
    }  # fmt: skip


# ------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spark_source.py", description=__doc__.split("\n")[0])
    p.add_argument("--bootstrap", help="existing cluster (default: start a broker)")
    p.add_argument("--records", type=int, default=4_000_000)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--min-partitions", type=int, default=0, help="minPartitions of the read")
    p.add_argument("--master", default="local[4]")
    p.add_argument("--client-records", type=int, default=1_000_000,
                   help="records of partition 0 read by each client in the client phase")  # fmt: skip
    p.add_argument("--stream-rate", type=int, default=10_000)
    p.add_argument("--stream-seconds", type=float, default=20.0)
    p.add_argument("--stream-warmup", type=float, default=5.0)
    p.add_argument("--trigger-ms", type=int, default=100)
    p.add_argument("--skip", action="append", default=[], choices=["batch", "clients", "stream"])
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = p.parse_args(argv)

    import spark_load

    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    broker = None
    try:
        spark_load.check_pyspark()
        spark_load.check_java()
        if args.bootstrap:
            bootstrap = args.bootstrap
            spark_load.check_broker(bootstrap)
        else:
            broker = LocalBroker(python=spark_load.venv_python()).start()
            bootstrap = broker.bootstrap
    except SetupError as e:
        print(f"setup: {e}", file=sys.stderr)
        return 2
    os.environ["PYTHONPATH"] = os.pathsep.join(
        x for x in (str(REPO_DIR), os.environ.get("PYTHONPATH")) if x
    )  # the Python workers import this checkout's kafkalite.spark
    spark = None
    try:
        spark = spark_load.build_spark(args.master, app_name="kafkalite-spark-source")
        from kafkalite.spark import KafkaDataSource

        spark.dataSource.register(KafkaDataSource)

        def create(name: str, partitions: int) -> str:
            topic = f"{name}-{stamp.lower()}"
            spark_load.resolve_topic(bootstrap, topic, partitions=partitions,
                                     replication_factor=1, create=True)  # fmt: skip
            return topic

        results: dict[str, Any] = {
            "run": {"stamp": stamp, "command": sys.argv, "master": args.master,
                    "cores": os.cpu_count(), "records": args.records,
                    "value_size": args.value_size, "partitions": args.partitions},
        }  # fmt: skip
        if "batch" not in args.skip:
            results["batch"] = batch_phases(spark, bootstrap, args, create)
        if "clients" not in args.skip:
            topic = results.get("batch", {}).get("topic")
            if topic is None:
                topic = create("bench-clients", 1)
                from confluent_kafka import Producer

                producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS})
                for _i in range(args.client_records):
                    while True:
                        try:
                            producer.produce(topic, b"x" * args.value_size, partition=0)
                            break
                        except BufferError:
                            producer.poll(0.05)
                producer.flush(60)
            results["executor_client"] = client_phase(bootstrap, topic, args.client_records)
        if "stream" not in args.skip:
            results["stream"] = stream_phase(spark, bootstrap, args, create)
        args.results_dir.mkdir(parents=True, exist_ok=True)
        path = args.results_dir / f"spark_source-{stamp}.json"
        path.write_text(json.dumps(results, indent=2))
        print_summary(results)
        print(f"results: {path}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()


def print_summary(results: dict[str, Any]) -> None:
    batch = results.get("batch", {})
    for name in ("write_data_source", "write_hand", "read_data_source", "read_hand",
                 "read_hand_python_only"):  # fmt: skip
        if name in batch:
            f = batch[name]
            print(f"{name:28} {f['records_per_s']:>14,.0f} records/s ({f['seconds']} s)")
    for name, f in results.get("executor_client", {}).items():
        print(f"client {name:21} {f['records_per_s']:>14,.0f} records/s ({f['seconds']} s)")
    if "stream" in results:
        s = results["stream"]
        lat = s["latency_ms"]
        print(f"streaming {s['rate']} records/s, trigger {s['trigger_ms']} ms: p50 {lat['p50']} ms, "
              f"p99 {lat['p99']} ms, p99.9 {lat['p99.9']} ms, max {lat['max']} ms "
              f"({s['measured']} records; micro-batch p50 {s['micro_batch_ms_p50']} ms)")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
