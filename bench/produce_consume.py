"""Produce/consume throughput, broker CPU per record, RSS and end-to-end latency of kafkalite.

    .venv/bin/python bench/produce_consume.py [--records 2000000] [--latency-seconds 5]
                                              [--restart-before-consume]

One run, everything measured on this machine (client and broker share it):

1. a `kafkalite serve` subprocess on a free port and a temp data dir, one topic, one partition;
2. produce: confluent-kafka, 100-byte values, linger.ms=5, batch.size=1 MiB, acks=1, no
   per-message callback -> records/s, MB/s, broker CPU µs per record (from the broker's
   /proc/<pid>/stat user+system time over the produce phase);
3. consume: everything back from offset 0 -> records/s, MB/s, with confluent-kafka (a Python
   loop over the records) and with kcat (C; shows what the broker serves, and its CPU per
   consumed record);
4. two ceilings in the same run: a raw sequential file write of the same bytes, and the client's
   own limit (the same produce loop into a producer whose broker is unreachable);
5. end-to-end latency at 1,000 records/s with linger.ms=0: p50 / p99 / p99.9 (a consumer
   long-polls with fetch.wait.max.ms=500; a broker that answers waiting fetches only when
   max_wait expires shows ~250 ms here);
6. broker peak RSS (VmHWM).

With ``--restart-before-consume`` the broker is restarted (cleanly) between produce and consume,
so the consumers read batches this broker process never wrote: each is CRC-checked on its first
read (``storage/verifier.py``); without it they were checked in memory when appended.

Targets: produce >= 800,000 rec/s, consume >= 1,500,000 rec/s, broker CPU <= 0.3 µs
per produced record, latency p99 <= 5 ms, broker RSS < 150 MB. Figures are printed, never
asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkalite.testing import Broker  # noqa: E402

VALUE_SIZE = 100
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def memory_mb(pid: int) -> dict[str, float]:
    """VmHWM (peak RSS, file-backed pages of mmap'd segments included), and the current
    anonymous / file-backed split (RssAnon is the broker's own heap)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) / 1024
    return out


def produce_loop(producer: Producer, topic: str, count: int) -> None:
    value = b"v" * VALUE_SIZE
    produce = producer.produce
    poll = producer.poll
    for i in range(count):
        try:
            produce(topic, value, partition=0)
        except BufferError:
            poll(0.001)
            produce(topic, value, partition=0)
        if i & 0x3FFF == 0:
            poll(0)


def bench_produce(bootstrap: str, topic: str, count: int, broker_pid: int) -> dict:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1024 * 1024,
            "acks": 1,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "enable.idempotence": False,
        }
    )
    producer.list_topics(topic, timeout=30)
    cpu0 = cpu_seconds(broker_pid)
    t0 = time.perf_counter()
    produce_loop(producer, topic, count)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds(broker_pid) - cpu0
    assert remaining == 0, f"{remaining} records not delivered"
    return {
        "records_s": count / elapsed,
        "mb_s": count * VALUE_SIZE / elapsed / 1e6,
        "broker_cpu_us_per_record": cpu / count * 1e6,
        "seconds": elapsed,
    }


def bench_consume(bootstrap: str, topic: str, count: int, broker_pid: int) -> dict:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-unused",
            "enable.auto.commit": False,
            # librdkafka backs off fetch.queue.backoff.ms (1 s) whenever its prefetch queue
            # holds queued.min.messages (100k): one 1 MiB fetch of 100-byte records does.
            "queued.min.messages": 1_000_000,
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    cpu0 = cpu_seconds(broker_pid)
    t0 = time.perf_counter()
    deadline = t0 + 300
    while got < count and time.perf_counter() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds(broker_pid) - cpu0
    consumer.close()
    return {
        "records_s": got / elapsed,
        "mb_s": got * VALUE_SIZE / elapsed / 1e6,
        "records": got,
        "seconds": elapsed,
        "broker_cpu_us_per_record": cpu / max(got, 1) * 1e6,
    }


def bench_consume_kcat(bootstrap: str, topic: str, count: int, broker_pid: int) -> dict:
    """The same read with kcat (librdkafka in C, no Python per record): the broker's side."""
    cpu0 = cpu_seconds(broker_pid)
    t0 = time.perf_counter()
    done = subprocess.run(
        [
            "kcat",
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o\\n",
            "-X",
            "queued.min.messages=1000000",
        ],
        check=True,
        capture_output=True,
    )
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds(broker_pid) - cpu0
    got = done.stdout.count(b"\n")
    return {
        "records_s": got / elapsed,
        "mb_s": got * VALUE_SIZE / elapsed / 1e6,
        "records": got,
        "broker_cpu_us_per_record": cpu / max(got, 1) * 1e6,
    }


def bench_raw_write(count: int) -> dict:
    # ~ the bytes a log holds for `count` 100-byte records in 1 MiB batches (record overhead ~8 B)
    total = count * (VALUE_SIZE + 8)
    chunk = b"\0" * (1024 * 1024)
    with tempfile.NamedTemporaryFile(dir=".", prefix="bench-raw-") as f:
        t0 = time.perf_counter()
        written = 0
        while written < total:
            written += os.write(f.fileno(), chunk)
        elapsed = time.perf_counter() - t0
    return {"records_s": count / elapsed, "mb_s": written / elapsed / 1e6}


def bench_client_limit(topic: str, count: int) -> dict:
    producer = Producer(
        {
            "bootstrap.servers": "127.0.0.1:1",  # nothing listens there
            "linger.ms": 5,
            "batch.size": 1024 * 1024,
            "acks": 1,
            "queue.buffering.max.messages": count + 1,
            "queue.buffering.max.kbytes": 2_000_000,
            "message.timeout.ms": 300_000,
            "log_level": 0,
        }
    )
    t0 = time.perf_counter()
    produce_loop(producer, topic, count)
    elapsed = time.perf_counter() - t0
    producer.purge()
    return {"calls_s": count / elapsed}


def bench_latency(bootstrap: str, topic: str, seconds: float, rate: int = 1000) -> dict:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 500,
            "fetch.min.bytes": 1,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    latencies: list[float] = []
    expected = int(seconds * rate)
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set() and len(latencies) < expected:
            msg = consumer.poll(0.2)  # returns as soon as one record is there
            if msg is not None and msg.error() is None:
                sent = int.from_bytes(msg.value()[:8], "big")
                latencies.append((time.perf_counter_ns() - sent) / 1e6)

    reader = threading.Thread(target=consume)
    reader.start()
    consumer_ready = time.perf_counter() + 1.0  # let the consumer resolve OFFSET_END first
    while time.perf_counter() < consumer_ready:
        time.sleep(0.01)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    interval = 1.0 / rate
    next_send = time.perf_counter()
    for _ in range(expected):
        now = time.perf_counter()
        if now < next_send:
            time.sleep(next_send - now)
        producer.produce(topic, time.perf_counter_ns().to_bytes(8, "big") + b"x" * 92, partition=0)
        producer.poll(0)
        next_send += interval
    producer.flush(30)
    reader.join(30)
    stop.set()
    consumer.close()
    latencies.sort()

    def pct(p: float) -> float:
        return (
            latencies[min(len(latencies) - 1, int(len(latencies) * p))]
            if latencies
            else float("nan")
        )

    return {
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "p999_ms": pct(0.999),
        "mean_ms": statistics.fmean(latencies) if latencies else float("nan"),
        "received": len(latencies),
        "sent": expected,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument("--restart-before-consume", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="kafkalite-bench-") as tmp:
        broker = Broker(
            data_dir=Path(tmp) / "broker",
            config={"log.level": "WARNING"},
            subprocess=True,
            admin=False,
        )
        broker.start()
        try:
            pid = broker.proc.pid
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for name in ("bench", "latency"):
                admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
            produced = bench_produce(broker.bootstrap, "bench", args.records, pid)
            if args.restart_before_consume:
                broker.stop()
                broker.start()
                pid = broker.proc.pid
            consumed = bench_consume(broker.bootstrap, "bench", args.records, pid)
            consumed_kcat = bench_consume_kcat(broker.bootstrap, "bench", args.records, pid)
            latency = bench_latency(broker.bootstrap, "latency", args.latency_seconds)
            memory = memory_mb(pid)
        finally:
            broker.stop()
        raw = bench_raw_write(args.records)
        client = bench_client_limit("bench", min(args.records, 1_000_000))

    print(
        f"\nkafkalite produce/consume benchmark ({args.records:,} records of {VALUE_SIZE} B, "
        f"1 partition, client and broker on this machine)\n"
    )
    rows = [
        (
            "produce (confluent, linger 5 ms, 1 MiB batches, acks=1)",
            f"{produced['records_s']:>12,.0f} rec/s",
            f"{produced['mb_s']:>8.1f} MB/s",
            ">= 800,000",
        ),
        (
            "consume (confluent-kafka, from offset 0)",
            f"{consumed['records_s']:>12,.0f} rec/s",
            f"{consumed['mb_s']:>8.1f} MB/s",
            ">= 1,500,000",
        ),
        (
            "consume (kcat, the same records)",
            f"{consumed_kcat['records_s']:>12,.0f} rec/s",
            f"{consumed_kcat['mb_s']:>8.1f} MB/s",
            "",
        ),
        (
            "ceiling: raw sequential file write of the same bytes",
            f"{raw['records_s']:>12,.0f} rec/s",
            f"{raw['mb_s']:>8.1f} MB/s",
            "",
        ),
        (
            "ceiling: client produce loop, broker unreachable",
            f"{client['calls_s']:>12,.0f} call/s",
            "",
            "",
        ),
    ]
    for name, a, b, target in rows:
        print(f"  {name:<56} {a}  {b:>13}  {('target ' + target) if target else ''}")
    print(
        f"\n  broker CPU per produced record   {produced['broker_cpu_us_per_record']:8.3f} µs"
        "   (target <= 0.3)"
    )
    print(
        f"  broker CPU per consumed record   "
        f"{consumed['broker_cpu_us_per_record']:8.3f} µs   (confluent-kafka, the first read)"
    )
    print(
        f"  broker CPU per consumed record   "
        f"{consumed_kcat['broker_cpu_us_per_record']:8.3f} µs   (kcat read)"
    )
    print(
        f"  broker peak RSS                  {memory['VmHWM']:8.1f} MB   (target < 150; now "
        f"{memory['RssAnon']:.1f} MB anonymous + {memory['RssFile']:.1f} MB mapped log files)"
    )
    print(
        f"  end-to-end latency @1000 rec/s, linger 0: p50 {latency['p50_ms']:.2f} ms, "
        f"p99 {latency['p99_ms']:.2f} ms, p99.9 {latency['p999_ms']:.2f} ms "
        f"({latency['received']}/{latency['sent']} received)   (target p99 <= 5 ms)"
    )


if __name__ == "__main__":
    main()
