"""bench/spark_load.py end to end: a small Spark load run against a real kafkalite broker (and the
Redis Streams peer) verifies clean, records dropped between consume and verify fail it, and a bad
setup fails fast with a message saying what to do."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
import spark_load
from local_broker import SetupError, free_port
from rich.console import Console
from spark_report import print_summary, write_plots, write_results
from spark_tasks import LoadSpec

RECORDS = 3000


def kafka_spec(broker, topic: str, **overrides) -> LoadSpec:
    partitions = spark_load.resolve_topic(
        broker.bootstrap, topic, partitions=4, replication_factor=1, create=True
    )
    fields = dict(
        transport="kafka",
        address=broker.bootstrap,
        topic=topic,
        records=RECORDS,
        value_size=100,
        keys=50,
        partitions=partitions,
        producers=2,
        consumers=2,
        linger_ms=2,
        idle_timeout_s=30,
        start_offsets=spark_load.start_offsets_of(broker.bootstrap, topic, partitions),
        run_id=topic,
    )
    fields.update(overrides)
    return LoadSpec(**fields)


@pytest.fixture(scope="module")
def small_run(spark_holder, shared_broker):
    """One small kafkalite run, shared: analysed clean and with records dropped."""
    spec = kafka_spec(shared_broker, "bench-small")
    return spec, spark_load.run_stage(spark_holder.get(), spec)


def test_small_run_verifies_and_reports(small_run, shared_broker, tmp_path):
    spec, run = small_run
    phases = []
    result = spark_load.analyse(run, step=phases.append)
    assert [p.split(":")[0] for p in phases] == [
        "verifying", "verifying again", "latency percentiles",
        "throughput timeline and latency histogram",
    ]  # fmt: skip
    v = result["verification"]
    assert v["ok"], v
    assert v["acknowledged"] == v["received"] == RECORDS
    # the same checks over the topic read back through format("kafkalite")
    again = result["verification_data_source"]
    assert again["ok"], again
    assert again["acknowledged"] == again["received"] == RECORDS
    assert (v["missing"], v["duplicate_offsets"], v["reordered"], v["corrupt"]) == (0, 0, 0, 0)
    assert result["produce"]["records"] == result["consume"]["records"] == RECORDS
    assert result["latency_ms"]["end_to_end"]["count"] == RECORDS
    assert set(result["latency_ms"]["end_to_end"]) >= {"p50", "p95", "p99", "p99.9"}
    hist = result["histogram"]["end_to_end"]
    assert sum(hist["counts"]) <= RECORDS
    assert len(hist["lower_ms"]) == len(hist["upper_ms"]) == len(hist["counts"])
    assert hist["upper_ms"][:-1] == hist["lower_ms"][1:]  # contiguous bins, empty ones kept
    tasks = result["tasks"]
    assert sorted((t["role"], t["task"]) for t in tasks) == [
        ("consumer", 0), ("consumer", 1), ("producer", 0), ("producer", 1),
    ]  # fmt: skip
    assert all(not t["errors"] for t in tasks), tasks

    results = {
        "run": {"master": "local[4]", "broker": shared_broker.bootstrap},
        "config": spark_load.spec_dict(spec),
        "systems": {"kafkalite": result},
        "ok": True,
    }
    plots = write_plots(results, tmp_path, "t")
    path = write_results(results, tmp_path, "t")
    assert json.loads(path.read_text())["systems"]["kafkalite"]["verification"]["ok"] is True
    assert all(p.stat().st_size > 0 and p.suffix == ".png" for p in plots)
    console = Console(record=True, width=120)
    print_summary(results, console, path)
    text = console.export_text()
    assert "verified kafkalite" in text and "p99.9" in text
    assert f'kafkalite read back through format("kafkalite"): {RECORDS:,} records' in text


def test_records_dropped_before_verification_fail_it(small_run):
    _, run = small_run
    result = spark_load.analyse(run, drop_for_test=7)
    v = result["verification"]
    assert not v["ok"]
    assert v["missing"] == 7
    assert v["failures"] == ["7 missing"]
    assert len(v["samples"]["missing"]) == 5


def test_redis_peer_run_verifies(spark, redis_server):
    spec = LoadSpec(transport="redis", address=redis_server.address, topic="peer",
                    records=RECORDS, value_size=100, keys=50, partitions=4, producers=2,
                    consumers=2, redis_pipeline=200, idle_timeout_s=30)  # fmt: skip
    result = spark_load.run_load(spark, spec)
    assert result["verification"]["ok"], result["verification"]
    assert result["consume"]["records"] == RECORDS
    assert redis_server.stream_lengths("peer", 4) == RECORDS + 4 * 2  # records + end markers


def test_barrier_stage_needs_a_slot_per_task(spark, shared_broker):
    spec = kafka_spec(shared_broker, "bench-slots", producers=3, consumers=2)
    with pytest.raises(SetupError, match=r"--master local\[5\]"):
        spark_load.run_stage(spark, spec)


def test_missing_topic_fails_with_a_hint(shared_broker):
    with pytest.raises(SetupError, match="kafkalite topics create no-such-topic"):
        spark_load.resolve_topic(
            shared_broker.bootstrap, "no-such-topic", partitions=2, replication_factor=1,
            create=False,
        )  # fmt: skip


def test_unreachable_broker_fails_with_a_hint():
    with pytest.raises(SetupError, match="cannot reach a Kafka broker.*make serve"):
        spark_load.check_broker(f"127.0.0.1:{free_port()}", timeout=1.0)


def test_command_line_exits_2_on_bad_setup():
    out = subprocess.run(
        [sys.executable, str(spark_load.BENCH_DIR / "spark_load.py"),
         "--bootstrap", f"127.0.0.1:{free_port()}", "--no-peer"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "cannot reach a Kafka broker" in out.stderr


def test_java_absent_or_too_old_is_reported(tmp_path):
    with pytest.raises(SetupError, match="Java is not installed.*apt-get install"):
        spark_load.check_java({"PATH": str(tmp_path)})
    with pytest.raises(SetupError, match="JAVA_HOME=/nonexistent has no bin/java"):
        spark_load.check_java({"PATH": "", "JAVA_HOME": "/nonexistent"})
    old = tmp_path / "java"
    old.write_text("#!/bin/sh\necho 'openjdk version \"11.0.22\" 2024-01-16' >&2\n")
    old.chmod(old.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(SetupError, match="is Java 11"):
        spark_load.check_java({"PATH": str(tmp_path)})
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "java").write_text("#!/bin/sh\necho 'java version \"1.8.0_392\"' >&2\n")
    (legacy / "java").chmod(0o755)
    with pytest.raises(SetupError, match="is Java 8"):
        spark_load.check_java({"PATH": str(legacy)})
    assert os.access(spark_load.check_java(), os.X_OK)


def test_phase_figures_span_first_send_to_last_ack():
    s = 1_000_000_000
    tasks = [
        {"role": "producer", "task": 0, "records": 100, "bytes": 1_000_000, "first_ns": 0,
         "last_ns": 2 * s, "errors": []},
        {"role": "producer", "task": 1, "records": 300, "bytes": 3_000_000, "first_ns": s,
         "last_ns": 4 * s, "errors": []},
        {"role": "consumer", "task": 0, "records": 0, "bytes": 0, "first_ns": 0, "last_ns": 0,
         "errors": ["idle"], "timed_out": True},
    ]  # fmt: skip
    produce = spark_load.phase_figures(tasks, "producer")
    assert produce == {"records": 400, "bytes": 4_000_000, "seconds": 4.0,
                       "records_per_s": 100.0, "mb_per_s": 1.0}  # fmt: skip
    assert spark_load.phase_figures(tasks, "consumer")["records"] == 0
    per_task = spark_load.task_figures(tasks)
    assert [t["records_per_s"] for t in per_task] == [50.0, 100.0, 0.0]
    assert per_task[2]["timed_out"] is True


def test_ratios_divide_kafkalite_by_redis():
    def system(rate, p50, p99):
        return {"produce": {"records_per_s": rate}, "consume": {"records_per_s": rate / 2},
                "latency_ms": {"end_to_end": {"p50": p50, "p99": p99}}}  # fmt: skip

    ratio = spark_load.ratios(system(300.0, 5.0, 50.0), system(100.0, 10.0, 0.0))
    assert ratio == {"produce_records_per_s": 3.0, "consume_records_per_s": 3.0,
                     "end_to_end_p50": 0.5, "end_to_end_p99": None}  # fmt: skip


def test_a_broken_spark_session_is_replaced_for_the_next_test(spark_holder):
    """A session broken by a failed test (here: stopped behind the holder's back, so every call
    fails) is thrown away with its JVM, and the next test gets a new one that works."""
    broken = spark_holder.get()
    builds = spark_holder.builds
    broken.stop()
    fresh = spark_holder.get()
    assert spark_holder.builds == builds + 1
    assert fresh is not broken
    assert fresh.sparkContext.parallelize(range(100), 4).sum() == 4950
