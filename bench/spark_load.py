"""Spark-driven load benchmark for kafkalite (and, side by side, Redis Streams).

    .venv/bin/python bench/spark_load.py                 # own broker, Redis peer (minutes)
    .venv/bin/python bench/spark_load.py --bootstrap host:9092 --topic t --records 1000000
    make bench ARGS="--no-peer --compression lz4"

What a run does:

1. Checks the setup in seconds, before Spark starts: Java 17+, pyspark, the broker (started here
   on the embedded store unless --bootstrap names one), the topic (created unless --topic names
   one that must exist, or --create-topic), redis-server for the peer.
2. Runs one barrier stage of `producers + consumers` Spark tasks (spark_tasks.py): each producer
   task runs a confluent-kafka producer over its slice of the generated data set, each consumer
   task reads a contiguous partition range back with manual assignment, live (consumers read
   while producers write, so receive - send is the end-to-end latency) or, with --sequential,
   after every producer finished.
3. Verifies in Spark (spark_verify.py): nothing acknowledged is missing, nothing is duplicated
   per offset, per-key order is preserved, every record is what the data set says; for kafkalite
   the same checks run again over the topic read back through Spark's `format("kafkalite")`
   data source (kafkalite.spark).
4. Computes in Spark: records/s and MB/s of both phases and of every task, latency percentiles
   (p50/p95/p99/p99.9) of end to end (receive - send) and of produce acknowledgements,
   throughput over time and a latency histogram.
5. Repeats 2-4 against a Redis Streams server started here (XADD/XREAD), unless --no-peer.
6. Writes bench/results/spark_load-<stamp>.json (+ -throughput.png, -latency.png) and prints a
   one-screen summary. Exit status: 0 verified, 1 verification failed, 2 bad setup.

Both systems are driven from Python tasks (confluent-kafka over librdkafka; redis-py, which
encodes every command in Python), on the same machine as the servers, so every figure is client
plus server, and the ratio compares the two stacks as a Python application sees them.

Spark runs quietly and reproducibly: PYSPARK_PYTHON is the project venv's python,
SPARK_LOCAL_IP=127.0.0.1, no UI, log level ERROR (bench/log4j2.properties), `local[N]` with one
slot per task unless --master says otherwise (the barrier stage needs all tasks at once).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from local_broker import LocalBroker, SetupError  # noqa: E402
from spark_tasks import (  # noqa: E402
    KEY_PREFIX,
    KIND_DATA,
    MAGIC,
    TAG_ACK,
    TAG_RECEIVED,
    TAG_TASK,
    VALUE_HEADER,
    LoadSpec,
    is_tag,
    key_of,
    run_task,
    spec_dict,
    untagged,
)

RESULTS_DIR = BENCH_DIR / "results"
LOG4J_FILE = BENCH_DIR / "log4j2.properties"
JAVA_MIN_MAJOR = 17
BROKER_CHECK_TIMEOUT_S = 5.0
PERCENTILES = (0.5, 0.95, 0.99, 0.999)
PERCENTILE_NAMES = ("p50", "p95", "p99", "p99.9")

# `make bench` size: several minutes on a 2-core machine with the Redis peer (7.5 measured on a
# loaded machine), most of it Spark's verification jobs, which print each phase as it starts.
DEFAULTS = {
    "records": 150_000,
    "value_size": 256,
    "keys": 1000,
    "partitions": 4,
    "producers": 2,
    "consumers": 2,
}


# ------------------------------------------------------------------------------ setup checks


def venv_python() -> str:
    candidate = REPO_DIR / ".venv" / "bin" / "python"
    return str(candidate) if candidate.exists() else sys.executable


def java_major_version(java: str) -> int:
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=20)
    text = out.stderr + out.stdout
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not match:
        raise SetupError(f"cannot read the Java version from `{java} -version`: {text.strip()}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java(env: dict[str, str] | None = None) -> str:
    """Path of a Java 17+ binary, or SetupError saying how to get one."""
    env = dict(os.environ if env is None else env)
    hint = (
        "PySpark 4 needs Java 17 or newer: apt-get install default-jre-headless (Debian 12: "
        "Java 17; or `make debs`), or point JAVA_HOME at a Java 17+ installation"
    )
    java_home = env.get("JAVA_HOME")
    if java_home:
        java = str(Path(java_home) / "bin" / "java")
        if not os.access(java, os.X_OK):
            raise SetupError(f"JAVA_HOME={java_home} has no bin/java. {hint}")
    else:
        found = shutil.which("java", path=env.get("PATH", ""))
        if found is None:
            raise SetupError(f"Java is not installed (no `java` on PATH). {hint}")
        java = found
    major = java_major_version(java)
    if major < JAVA_MIN_MAJOR:
        raise SetupError(f"{java} is Java {major}. {hint}")
    return java


def check_pyspark() -> str:
    try:
        import pyarrow  # noqa: F401
        import pyspark
    except ImportError as e:
        raise SetupError(
            f"{e.name} is not installed: `make bench` installs it, or "
            f"{venv_python()} -m pip install -e '.[bench]'"
        ) from e
    return pyspark.__version__


def admin_client(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": int(BROKER_CHECK_TIMEOUT_S * 1000),
            "log_level": 0,  # unreachable brokers are reported below, not logged by librdkafka
        }
    )


def check_broker(bootstrap: str, timeout: float = BROKER_CHECK_TIMEOUT_S) -> Any:
    """Cluster metadata, or SetupError if nothing answers at `bootstrap` within `timeout`."""
    from confluent_kafka import KafkaException

    try:
        return admin_client(bootstrap).list_topics(timeout=timeout)
    except KafkaException as e:
        raise SetupError(
            f"cannot reach a Kafka broker at {bootstrap} within {timeout:.0f}s ({e.args[0]}): "
            "start one (`make serve`) or leave out --bootstrap and the bench starts its own"
        ) from e


def resolve_topic(
    bootstrap: str,
    topic: str,
    *,
    partitions: int,
    replication_factor: int,
    create: bool,
    timeout: float = 15.0,
) -> int:
    """Partition count of `topic`, creating it if `create`; SetupError if it is missing."""
    from confluent_kafka.admin import NewTopic

    admin = admin_client(bootstrap)
    metadata = check_broker(bootstrap)
    existing = metadata.topics.get(topic)
    if existing is not None and existing.error is None:
        return len(existing.partitions)
    if not create:
        raise SetupError(
            f"topic {topic} does not exist on {bootstrap}: create it (`kafkalite topics create "
            f"{topic} --partitions {partitions} -b {bootstrap}`) or add --create-topic"
        )
    futures = admin.create_topics(
        [NewTopic(topic, partitions, replication_factor)], operation_timeout=timeout
    )
    try:
        futures[topic].result(timeout)
    except Exception as e:
        raise SetupError(f"creating topic {topic} on {bootstrap} failed: {e}") from e
    deadline = time.monotonic() + timeout
    while True:
        found = admin.list_topics(timeout=timeout).topics.get(topic)
        if found is not None and found.error is None and len(found.partitions) == partitions:
            if all(p.leader >= 0 for p in found.partitions.values()):
                return partitions
        if time.monotonic() > deadline:
            raise SetupError(f"topic {topic} created but its partitions have no leader yet")
        time.sleep(0.1)  # metadata propagation polling interval


class KafkaProgress:
    """Records written so far: the sum of high watermarks above the start offsets."""

    def __init__(self, bootstrap: str, topic: str, start_offsets: tuple[int, ...]) -> None:
        from confluent_kafka import Consumer

        self.topic = topic
        self.start_offsets = start_offsets
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "spark-load-progress", "log_level": 0}
        )

    def high_watermarks(self, timeout: float = 5.0) -> tuple[int, ...]:
        from confluent_kafka import TopicPartition

        return tuple(
            self.consumer.get_watermark_offsets(
                TopicPartition(self.topic, p), timeout=timeout, cached=False
            )[1]
            for p in range(len(self.start_offsets))
        )

    def __call__(self) -> int:
        marks = self.high_watermarks(timeout=1.0)
        return sum(hw - start for hw, start in zip(marks, self.start_offsets, strict=True))

    def close(self) -> None:
        self.consumer.close()


def start_offsets_of(bootstrap: str, topic: str, partitions: int) -> tuple[int, ...]:
    probe = KafkaProgress(bootstrap, topic, (0,) * partitions)
    try:
        return probe.high_watermarks()
    finally:
        probe.close()


# ------------------------------------------------------------------------------ spark


def build_spark(master: str, app_name: str = "kafkalite-spark-load") -> Any:
    """A quiet SparkSession: venv python, loopback, no UI, log4j at ERROR."""
    python = venv_python()
    os.environ["PYSPARK_PYTHON"] = python
    os.environ["PYSPARK_DRIVER_PYTHON"] = python
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    java_options = f"-Dlog4j2.configurationFile={LOG4J_FILE.as_uri()}"
    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.executor.extraJavaOptions", java_options)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        # a Python worker that starts slowly on a loaded machine (imports take seconds) is not
        # "failed to connect back" after the default 15 s
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.executorEnv.PYSPARK_PYTHON", python)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.sparkContext.addPyFile(str(BENCH_DIR / "spark_tasks.py"))
    return spark


@dataclass
class LoadRun:
    """What one run of the barrier stage produced, before the report is assembled."""

    spec: LoadSpec
    tasks: list[dict[str, Any]]
    acked: Any  # DataFrame of spark_verify.ACKED_SCHEMA
    received: Any  # DataFrame of spark_verify.RECEIVED_SCHEMA
    wall_s: float

    def release(self) -> None:
        self.acked.unpersist()
        self.received.unpersist()


def run_stage(spark: Any, spec: LoadSpec, progress: Callable[[int], None] | None = None,
              probe: Callable[[], int] | None = None) -> LoadRun:  # fmt: skip
    """Run the producers and consumers of `spec` as one barrier stage; rows stay in Spark."""
    from pyspark import StorageLevel
    from spark_verify import ACKED_SCHEMA, RECEIVED_SCHEMA

    sc = spark.sparkContext
    slots = sc.defaultParallelism
    if slots < spec.tasks:
        raise SetupError(
            f"the barrier stage runs {spec.tasks} tasks at once but the master offers {slots} "
            f"slots: use --master local[{spec.tasks}] or fewer --producers/--consumers"
        )
    rdd = (
        sc.parallelize(range(spec.tasks), spec.tasks)
        .barrier()
        .mapPartitionsWithIndex(functools.partial(run_task, spec))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    outcome: dict[str, Any] = {}

    def execute() -> None:
        try:
            outcome["tasks"] = rdd.filter(functools.partial(is_tag, TAG_TASK)).collect()
        except BaseException as e:  # re-raised in the caller's thread
            outcome["error"] = e

    started = time.monotonic()
    worker = threading.Thread(target=execute, name="spark-load-stage", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.5)
        if progress is not None and probe is not None and worker.is_alive():
            try:
                progress(probe())
            except Exception:
                pass  # progress is cosmetic; the stage reports real failures
    wall_s = time.monotonic() - started
    if "error" in outcome:
        rdd.unpersist()
        raise outcome["error"]
    tasks = sorted(
        (json.loads(row[1]) for row in outcome["tasks"]), key=lambda t: (t["role"], t["task"])
    )
    if len(tasks) != spec.tasks:
        rdd.unpersist()
        raise RuntimeError(f"expected {spec.tasks} task reports, got {len(tasks)} (stage re-run?)")
    # Rows move from Python to the JVM once; every later check and figure reads these local
    # checkpoints. Checkpointing (not just caching) cuts the lineage back to the barrier stage:
    # the stage never runs twice, and Spark refuses limit/take over a barrier RDD chain.
    acked = spark.createDataFrame(
        rdd.filter(functools.partial(is_tag, TAG_ACK)).map(untagged), ACKED_SCHEMA
    ).localCheckpoint(eager=True)
    received = spark.createDataFrame(
        rdd.filter(functools.partial(is_tag, TAG_RECEIVED)).map(untagged), RECEIVED_SCHEMA
    ).localCheckpoint(eager=True)
    rdd.unpersist()
    return LoadRun(spec, tasks, acked, received, wall_s)


def drop_received(received: Any, count: int) -> Any:
    """Test hook: lose the `count` lowest-seq received records between consume and verify."""
    from pyspark.sql import functions as F

    dropped = received.filter(F.col("seq") >= 0).orderBy("seq").limit(count)
    return received.join(
        dropped.select("partition", "offset"), ["partition", "offset"], "left_anti"
    )


def read_back(spark: Any, spec: LoadSpec) -> Any:
    """Everything the run wrote to its topic, read again through Spark's
    `format("kafkalite")` data source (kafkalite.spark), as rows of spark_verify.RECEIVED_SCHEMA
    decoded in Spark SQL from each value's header (spark_tasks.VALUE_HEADER, ">IBhqq"); the end
    markers are left out, foreign values kept with seq -1 (they count as corrupt)."""
    from pyspark.sql import functions as F

    from kafkalite.spark import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
    start = {spec.topic: {str(p): spec.start_offset(p) for p in range(spec.partitions)}}
    df = (
        spark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", spec.address)
        .option("subscribe", spec.topic)
        .option("startingOffsets", json.dumps(start))
        .load()
    )

    def field(pos: int, size: int) -> Any:  # big-endian bytes at 1-based `pos`, as a long
        return F.conv(F.hex(F.substring("value", pos, size)), 16, 10).cast("decimal(20,0)")

    def signed(value: Any, bits: int) -> Any:  # two's complement (constants past a long)
        def big(n: int) -> Any:
            return F.lit(str(n)).cast("decimal(20,0)")

        return (
            F.when(value >= big(2 ** (bits - 1)), value - big(2**bits))
            .otherwise(value)
            .cast("long")
        )

    ours = (F.length("value") >= VALUE_HEADER.size) & (field(1, 4) == MAGIC)
    key_text = F.col("key").cast("string")
    key_index = F.when(
        key_text.startswith(KEY_PREFIX.decode()),
        F.substring(key_text, len(KEY_PREFIX) + 1, 100).cast("long"),
    )
    return (
        df.filter(~ours | (field(5, 1) == KIND_DATA))
        .select(
            F.lit(-1).cast("int").alias("consumer"),
            F.col("partition"),
            F.col("offset"),
            F.coalesce(key_index, F.lit(-1)).cast("long").alias("key_index"),
            F.when(ours, signed(field(8, 8), 64)).otherwise(-1).cast("long").alias("seq"),
            F.when(ours, signed(field(6, 2), 16)).otherwise(-1).cast("int").alias("producer"),
            F.when(ours, signed(field(16, 8), 64)).otherwise(0).cast("long").alias("send_ns"),
            F.lit(0).cast("long").alias("recv_ns"),
            F.length("value").cast("int").alias("value_len"),
        )
        .localCheckpoint(eager=True)
    )


# ------------------------------------------------------------------------------ figures


def phase_figures(tasks: list[dict[str, Any]], role: str) -> dict[str, Any]:
    mine = [t for t in tasks if t["role"] == role and t["records"]]
    records = sum(t["records"] for t in mine)
    nbytes = sum(t["bytes"] for t in mine)
    if not mine:
        return {"records": 0, "bytes": 0, "seconds": 0.0, "records_per_s": 0.0, "mb_per_s": 0.0}
    seconds = max(1e-9, (max(t["last_ns"] for t in mine) - min(t["first_ns"] for t in mine)) / 1e9)
    return {
        "records": records,
        "bytes": nbytes,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds, 1),
        "mb_per_s": round(nbytes / seconds / 1e6, 3),
    }


def task_figures(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for t in tasks:
        seconds = (t["last_ns"] - t["first_ns"]) / 1e9 if t["records"] else 0.0
        row = {
            "role": t["role"],
            "task": t["task"],
            "records": t["records"],
            "bytes": t["bytes"],
            "seconds": round(seconds, 3),
            "records_per_s": round(t["records"] / seconds, 1) if seconds > 0 else 0.0,
            "mb_per_s": round(t["bytes"] / seconds / 1e6, 3) if seconds > 0 else 0.0,
            "errors": t["errors"],
        }
        for extra in ("attempted", "failed", "partitions", "timed_out", "foreign"):
            if extra in t:
                row[extra] = t[extra]
        out.append(row)
    return out


def latency_percentiles(df: Any, column: Any) -> dict[str, float]:
    """Exact percentiles (ms) of a latency column expression, computed in Spark."""
    from pyspark.sql import functions as F

    row = (
        df.select(column.alias("ms"))
        .agg(
            F.percentile("ms", list(PERCENTILES)).alias("p"),
            F.max("ms").alias("max"),
            F.avg("ms").alias("mean"),
            F.count("ms").alias("count"),
        )
        .first()
    )
    if not row["count"]:
        return {"count": 0}
    out = {name: round(value, 3) for name, value in zip(PERCENTILE_NAMES, row["p"], strict=True)}
    out.update(max=round(row["max"], 3), mean=round(row["mean"], 3), count=row["count"])
    return out


def timeline(df: Any, column: str, origin_ns: int, bucket_s: float, value_bytes: int) -> list:
    """[seconds since origin, records/s, MB/s] per bucket, from a timestamp column."""
    from pyspark.sql import functions as F

    bucket_ns = int(bucket_s * 1e9)
    rows = (
        df.select(F.floor((F.col(column) - F.lit(origin_ns)) / F.lit(bucket_ns)).alias("b"))
        .groupBy("b")
        .count()
        .orderBy("b")
        .collect()
    )
    return [
        [round(r["b"] * bucket_s, 3), round(r["count"] / bucket_s, 1),
         round(r["count"] * value_bytes / bucket_s / 1e6, 3)]
        for r in rows
    ]  # fmt: skip


def latency_histogram(df: Any, column: Any, bins_per_decade: int = 10) -> dict[str, list]:
    """Counts in log-spaced bins: bin b holds latencies in [10^(b/n), 10^((b+1)/n)) ms."""
    from pyspark.sql import functions as F

    rows = (
        df.select(column.alias("ms"))
        .filter(F.col("ms") > 0)
        .select(F.floor(F.log10("ms") * bins_per_decade).alias("b"))
        .groupBy("b")
        .count()
        .orderBy("b")
        .collect()
    )
    counts = {r["b"]: r["count"] for r in rows}
    bins = range(min(counts), max(counts) + 1) if counts else range(0)  # empty bins included
    return {
        "lower_ms": [round(10 ** (b / bins_per_decade), 4) for b in bins],
        "upper_ms": [round(10 ** ((b + 1) / bins_per_decade), 4) for b in bins],
        "counts": [counts.get(b, 0) for b in bins],
    }


def analyse(run: LoadRun, *, drop_for_test: int = 0,
            step: Callable[[str], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """Verification and figures of one stage, as the results file's per-system section.
    ``step`` is told the name of each Spark phase as it starts (they take minutes on a big
    run, so the command line shows them)."""
    from pyspark.sql import functions as F
    from spark_verify import verify

    step = step or (lambda _name: None)
    spec = run.spec
    received = run.received
    if drop_for_test:
        received = drop_received(received, drop_for_test)
    step("verifying: every acknowledged record received once, in order, intact")
    verification = verify(
        run.acked,
        received,
        keys=spec.keys,
        partitions=spec.partitions,
        producers=spec.producers,
        value_size=spec.value_size,
        duplicates_allowed=not (spec.transport == "kafka" and spec.idempotence),
    )
    data_source_check = None
    if spec.transport == "kafka":
        step('verifying again: the topic read back through format("kafkalite")')
        again = read_back(run.received.sparkSession, spec)
        data_source_check = verify(
            run.acked,
            again,
            keys=spec.keys,
            partitions=spec.partitions,
            producers=spec.producers,
            value_size=spec.value_size,
            duplicates_allowed=not spec.idempotence,
        )
        again.unpersist()
    produce = phase_figures(run.tasks, "producer")
    consume = phase_figures(run.tasks, "consumer")
    data = received.filter(F.col("seq") >= 0)
    end_to_end = (F.col("recv_ns") - F.col("send_ns")) / F.lit(1e6)
    ack = (F.col("ack_ns") - F.col("send_ns")) / F.lit(1e6)
    starts = [t["first_ns"] for t in run.tasks if t["role"] == "producer" and t["first_ns"]]
    origin = min(starts) if starts else 0
    span = max(produce["seconds"], consume["seconds"], 1.0)
    bucket_s = max(0.1, round(span / 60, 1))
    record_bytes = spec.value_size + len(key_of(0))
    step("latency percentiles")
    latency = {
        "end_to_end": latency_percentiles(data, end_to_end),
        "produce_ack": latency_percentiles(run.acked, ack),
    }
    step("throughput timeline and latency histogram")
    return {
        "transport": spec.transport,
        "mode": "sequential" if spec.sequential else "live",
        "wall_s": round(run.wall_s, 3),
        "produce": produce,
        "consume": consume,
        "latency_ms": latency,
        "tasks": task_figures(run.tasks),
        "verification": verification.to_dict(),
        "verification_data_source": None
        if data_source_check is None
        else data_source_check.to_dict(),
        "timeline": {
            "bucket_s": bucket_s,
            "produce": timeline(run.acked, "ack_ns", origin, bucket_s, record_bytes),
            "consume": timeline(data, "recv_ns", origin, bucket_s, record_bytes),
        },
        "histogram": {"end_to_end": latency_histogram(data, end_to_end)},
    }


def run_load(spark: Any, spec: LoadSpec, *, drop_for_test: int = 0,
             progress: Callable[[int], None] | None = None,
             probe: Callable[[], int] | None = None,
             step: Callable[[str], None] | None = None) -> dict[str, Any]:  # fmt: skip
    run = run_stage(spark, spec, progress, probe)
    try:
        return analyse(run, drop_for_test=drop_for_test, step=step)
    finally:
        run.release()


def ratios(kafkalite: dict[str, Any], redis: dict[str, Any]) -> dict[str, float | None]:
    """kafkalite / redis for throughput (higher is better) and latency (lower is better)."""

    def div(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a is not None and b else None

    k_lat, r_lat = kafkalite["latency_ms"]["end_to_end"], redis["latency_ms"]["end_to_end"]
    return {
        "produce_records_per_s": div(kafkalite["produce"]["records_per_s"], redis["produce"]["records_per_s"]),
        "consume_records_per_s": div(kafkalite["consume"]["records_per_s"], redis["consume"]["records_per_s"]),
        "end_to_end_p50": div(k_lat.get("p50"), r_lat.get("p50")),
        "end_to_end_p99": div(k_lat.get("p99"), r_lat.get("p99")),
    }  # fmt: skip


# ------------------------------------------------------------------------------ command line


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="spark_load.py",
        description="Spark-driven load benchmark: produce, consume back, verify, report.",
    )
    g = p.add_argument_group("cluster")
    g.add_argument("--bootstrap", help="existing cluster's host:port (default: start a broker)")
    g.add_argument("--topic", help="topic to use (must exist unless --create-topic; default: "
                   "a fresh spark-load-<stamp> topic)")  # fmt: skip
    g.add_argument("--create-topic", action="store_true", help="create --topic if missing")
    g.add_argument("--replication-factor", type=int, default=1, help="for created topics")
    g = p.add_argument_group("data set")
    g.add_argument("--records", type=int, default=DEFAULTS["records"])
    g.add_argument("--value-size", type=int, default=DEFAULTS["value_size"], help="bytes")
    g.add_argument("--keys", type=int, default=DEFAULTS["keys"], help="key cardinality")
    g.add_argument("--partitions", type=int, default=DEFAULTS["partitions"])
    g.add_argument("--seed", type=int, default=1, help="payload bytes seed")
    g = p.add_argument_group("producers and consumers")
    g.add_argument("--producers", type=int, default=DEFAULTS["producers"], help="producer tasks")
    g.add_argument("--consumers", type=int, default=DEFAULTS["consumers"], help="consumer tasks")
    g.add_argument("--acks", default="all", choices=["0", "1", "all", "-1"])
    g.add_argument("--compression", default="none",
                   choices=["none", "gzip", "snappy", "lz4", "zstd"])  # fmt: skip
    g.add_argument("--linger-ms", type=float, default=5.0)
    g.add_argument("--batch-size", type=int, default=1_000_000, help="producer batch bytes")
    g.add_argument("--rate", type=float, default=0.0,
                   help="target records/s over all producers (default: unthrottled)")  # fmt: skip
    g.add_argument("--no-idempotence", action="store_true",
                   help="plain producer (duplicates from retries are then allowed)")  # fmt: skip
    g.add_argument("--producer-config", action="append", default=[], metavar="KEY=VALUE",
                   help="extra librdkafka producer setting (repeatable)")  # fmt: skip
    g.add_argument("--sequential", action="store_true",
                   help="consume after producing (full-speed reads; latency then measures the wait)")  # fmt: skip
    g.add_argument("--idle-timeout", type=float, default=30.0,
                   help="seconds a consumer waits without records before giving up")  # fmt: skip
    g = p.add_argument_group("run")
    g.add_argument("--master", help="Spark master (default local[producers+consumers])")
    g.add_argument("--no-peer", action="store_true", help="skip the Redis Streams comparison")
    g.add_argument("--redis-pipeline", type=int, default=500, help="XADDs per pipeline")
    g.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    g.add_argument("--no-plots", action="store_true")
    g.add_argument("--no-progress", action="store_true")
    g.add_argument("--drop-for-test", type=int, default=0, metavar="N",
                   help=argparse.SUPPRESS)  # fmt: skip
    args = p.parse_args(argv)
    if args.acks == "-1":
        args.acks = "all"
    for name in ("records", "value_size", "keys", "partitions", "producers", "consumers"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    return args


def git_revision() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO_DIR), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    args = parse_args(argv)
    console = Console()
    err = Console(stderr=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    broker: LocalBroker | None = None
    spark = None
    timings: dict[str, float] = {}
    clock = time.monotonic()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        timings[name] = round(now - clock, 2)
        clock = now

    try:
        spark_version = check_pyspark()
        check_java()
        extra = []
        for item in args.producer_config:
            key, sep, value = item.partition("=")
            if not sep:
                raise SetupError(f"--producer-config expects KEY=VALUE, got {item!r}")
            extra.append((key, value))
        if not args.no_peer:
            from redis_peer import redis_server_path

            redis_server_path()
        if args.bootstrap:
            bootstrap = args.bootstrap
            check_broker(bootstrap)
            broker_desc = f"existing cluster at {bootstrap}"
        else:
            console.print("[dim]starting kafkalite (embedded store) ...[/dim]")
            broker = LocalBroker(python=venv_python()).start()
            bootstrap = broker.bootstrap
            lap("broker_start")
            broker_desc = f"kafkalite started by the bench at {bootstrap} (embedded store)"
        topic = args.topic or f"spark-load-{stamp.lower()}"
        partitions = resolve_topic(
            bootstrap,
            topic,
            partitions=args.partitions,
            replication_factor=args.replication_factor,
            create=args.create_topic or not args.topic,
        )
        if partitions != args.partitions:
            console.print(f"[yellow]topic {topic} has {partitions} partitions; using them[/yellow]")
        start_offsets = start_offsets_of(bootstrap, topic, partitions)
        spec = LoadSpec(
            transport="kafka",
            address=bootstrap,
            topic=topic,
            records=args.records,
            value_size=args.value_size,
            keys=args.keys,
            partitions=partitions,
            producers=args.producers,
            consumers=args.consumers,
            acks=args.acks,
            compression=args.compression,
            linger_ms=args.linger_ms,
            batch_size=args.batch_size,
            idempotence=not args.no_idempotence and args.acks == "all",
            sequential=args.sequential,
            start_offsets=start_offsets,
            idle_timeout_s=args.idle_timeout,
            seed=args.seed,
            redis_pipeline=args.redis_pipeline,
            rate=args.rate,
            run_id=stamp.lower(),
            extra_producer_config=tuple(extra),
        )
    except (SetupError, ValueError) as e:
        err.print(f"[red]setup:[/red] {e}")
        if broker is not None:
            broker.stop()
        return 2

    try:
        console.print("[dim]starting Spark ...[/dim]")
        master = args.master or f"local[{spec.tasks}]"
        lap("setup")
        spark = build_spark(master)
        lap("spark_start")
        results: dict[str, Any] = {
            "run": {
                "stamp": stamp,
                "command": [sys.argv[0], *(argv if argv is not None else sys.argv[1:])],
                "master": master,
                "spark": spark_version,
                "git": git_revision(),
                "cores": os.cpu_count(),
                "broker": broker_desc,
                "timings_s": timings,
            },
            "config": spec_dict(spec),
            "systems": {},
        }
        probe = KafkaProgress(bootstrap, topic, start_offsets)
        try:
            results["systems"]["kafkalite"] = with_progress(
                console, "kafkalite", spec, probe, args, spark
            )
        finally:
            probe.close()
        lap("kafkalite_run")
        if broker is not None:
            broker.stop()
            broker = None
        if not args.no_peer:
            from redis_peer import RedisServer

            with RedisServer() as redis_server:
                peer_spec = replace(spec, transport="redis", address=redis_server.address,
                                    topic="spark-load", start_offsets=())  # fmt: skip
                results["config"]["redis_pipeline"] = spec.redis_pipeline
                results["systems"]["redis"] = with_progress(
                    console, "redis streams", peer_spec,
                    functools.partial(redis_server.stream_lengths, "spark-load", spec.partitions),
                    args, spark,
                )  # fmt: skip
            lap("redis_run")
            results["ratio_kafkalite_to_redis"] = ratios(
                results["systems"]["kafkalite"], results["systems"]["redis"]
            )
        results["ok"] = all(
            s["verification"]["ok"] and (s.get("verification_data_source") or {"ok": True})["ok"]
            for s in results["systems"].values()
        )
        from spark_report import print_summary, write_plots, write_results

        args.results_dir.mkdir(parents=True, exist_ok=True)
        if not args.no_plots:
            results["plots"] = [str(p) for p in write_plots(results, args.results_dir, stamp)]
        lap("report")
        path = write_results(results, args.results_dir, stamp)
        print_summary(results, console, path)
        return 0 if results["ok"] else 1
    except SetupError as e:
        err.print(f"[red]setup:[/red] {e}")
        return 2
    finally:
        if spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()


def with_progress(console: Any, label: str, spec: LoadSpec, probe: Callable[[], int],
                  args: argparse.Namespace, spark: Any) -> dict[str, Any]:  # fmt: skip
    """run_load with a rich progress bar of records written (when stdout is a terminal), and a
    line with the elapsed time as each verification phase starts."""
    started = time.monotonic()

    def step(name: str) -> None:
        console.print(f"[dim]{label}: {name} ... ({time.monotonic() - started:.0f} s)[/dim]")

    if args.no_progress or not console.is_terminal:
        console.print(f"[dim]{label}: {spec.records} records ...[/dim]")
        return run_load(spark, spec, drop_for_test=args.drop_for_test, step=step)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(f"{label} written", total=spec.records)

        def update(done: int) -> None:
            bar.update(task, completed=min(done, spec.records))

        result = run_load(spark, spec, drop_for_test=args.drop_for_test, progress=update,
                          probe=probe, step=step)  # fmt: skip
    return result


if __name__ == "__main__":
    sys.exit(main())
