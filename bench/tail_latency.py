"""End-to-end latency under load: 3 brokers, RF 3, acks=all, at 50% of the measured maximum.

    PYTHONPATH=. .venv/bin/python bench/tail_latency.py [--seconds 10] [--fraction 0.5]
                                                        [--baseline DIR] [--rounds 1]

For each variant (this tree; with ``--baseline DIR`` also the kafkalite tree in DIR, whose
brokers import kafkalite from there, alternating round by round):

1. one broker (kafkalite.testing.Broker, the embedded store), one partition: 1,000 records/s
   of 100 bytes with linger.ms=0 and acks=1 for ``--seconds`` (the target "e2e p99 at 1,000 rec/s");
2. a real ZooKeeper (Debian's package, kafkalite.testing.ZooKeeperServer) and three brokers;
   one topic, one partition, RF 3, min.insync.replicas=2;
3. the maximum: confluent-kafka produces ``--max-records`` 100-byte records as fast as it can
   with the latency phase's producer settings (linger.ms=1, default batch size, acks=all)
   -> records/s;
4. latency at ``--fraction`` of that rate for ``--seconds``: a producer thread (linger.ms=1,
   acks=all) sends paced bursts every millisecond, each record carrying its *scheduled* send
   time (so a stall delays the records behind it and is counted: no coordinated omission); a
   confluent-kafka consumer (default fetch settings: fetch.wait.max.ms=500, fetch.min.bytes=1)
   reads them and records now - scheduled time. A consumer fetch that waited for a timer
   instead of the high-watermark advance would show ~500 ms here.

5. with ``--also-rate`` (default 10,000 records/s) the same at that fixed rate: the
   distribution when the cluster is not saturated.

Printed: p50 / p99 / p99.9 / max per phase, with the targets (p99 <= 2 ms at 1,000
rec/s on one broker; p99 <= 10 ms and p99.9 <= 25 ms on 3 brokers). Written to bench/results/:
``tail_latency-<stamp>.json`` (every figure) and ``tail_latency-<stamp>.png`` (latency
histograms, log scale). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkalite.testing import (
    Broker,  # noqa: E402
    ZooKeeperServer,  # noqa: E402
)

VALUE_SIZE = 100
LATENCY_LINGER_MS = 1
RESULTS = Path(__file__).resolve().parent / "results"


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` in ns resolution (schedstat; /proc/<pid>/stat
    counts 10 ms ticks, too coarse for a kcat read of a few hundred ms)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that just ended
    return total / 1e9


def wait_until(condition, what: str, deadline_s: float = 60.0):
    deadline = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not done after {deadline_s}s")
        time.sleep(0.05)


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


def measure_max(bootstrap: str, topic: str, count: int) -> float:
    # The latency phase's own producer settings (linger 1 ms, default batch size, acks=all):
    # the maximum of 1 MiB batches would be a rate the paced producer's many smaller requests
    # cannot be served at.
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": LATENCY_LINGER_MS,
            "acks": "all",
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )
    producer.list_topics(topic, timeout=30)
    value = b"m" * VALUE_SIZE
    t0 = time.perf_counter()
    for i in range(count):
        try:
            producer.produce(topic, value, partition=0)
        except BufferError:
            producer.poll(0.001)
            producer.produce(topic, value, partition=0)
        if i & 0x3FFF == 0:
            producer.poll(0)
    assert producer.flush(300) == 0, "records not delivered"
    return count / (time.perf_counter() - t0)


def measure_latency(
    bootstrap: str, topic: str, rate: float, seconds: float, acks: str, linger_ms: int
) -> dict:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tail-latency"})
    # An explicit start offset (the log end now): nothing to resolve before the first fetch.
    _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    consumer.assign([TopicPartition(topic, 0, end)])
    expected = int(rate * seconds)
    latencies: list[float] = []
    stop = threading.Event()

    def consume() -> None:
        # poll(), not consume(n, timeout): consume waits for n records or the timeout, which
        # would add its own wait to every latency
        poll = consumer.poll
        while not stop.is_set() and len(latencies) < expected:
            msg = poll(0.2)
            if msg is not None and msg.error() is None:
                sent = int.from_bytes(msg.value()[:8], "big")
                latencies.append((time.perf_counter_ns() - sent) / 1e6)

    reader = threading.Thread(target=consume)
    reader.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "acks": acks})
    producer.list_topics(topic, timeout=30)
    filler = b"x" * (VALUE_SIZE - 8)
    start = time.perf_counter_ns()
    interval_ns = 1_000_000  # bursts every millisecond
    per_ns = rate / 1e9
    sent = 0
    while sent < expected:
        now = time.perf_counter_ns()
        due = min(expected, int((now - start) * per_ns) + 1)
        while sent < due:
            scheduled = start + int(sent / per_ns)
            try:
                producer.produce(topic, scheduled.to_bytes(8, "big") + filler, partition=0)
            except BufferError:
                producer.poll(0.001)
                continue
            sent += 1
        producer.poll(0)
        next_burst = now + interval_ns
        remaining = (next_burst - time.perf_counter_ns()) / 1e9
        if remaining > 0:
            time.sleep(remaining)
    producer.flush(60)
    reader.join(60)
    stop.set()
    consumer.close()
    latencies.sort()
    return {
        "rate": rate,
        "sent": expected,
        "received": len(latencies),
        "p50_ms": percentile(latencies, 0.50),
        "p99_ms": percentile(latencies, 0.99),
        "p999_ms": percentile(latencies, 0.999),
        "max_ms": latencies[-1] if latencies else float("nan"),
        "latencies_ms": latencies,
    }


def single_broker(tmp: Path, env, seconds: float) -> dict:
    broker = Broker(
        data_dir=tmp / "single",
        config={"log.level": "WARNING"},
        env=env,
        subprocess=True,
        admin=False,
    )
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("latency", 1, 1)])["latency"].result(30)
        pid = broker.proc.pid
        cpu0 = cpu_seconds(pid)
        result = measure_latency(broker.bootstrap, "latency", 1000, seconds, "1", 0)
        result["broker_cpu_us_per_record"] = (cpu_seconds(pid) - cpu0) / result["sent"] * 1e6
        return result
    finally:
        broker.stop(timeout=60)


def three_brokers(tmp: Path, env, args) -> dict:
    with ZooKeeperServer(tmp / "zk") as zk:
        brokers = [
            Broker(
                data_dir=tmp / f"broker{i}",
                broker_id=i,
                config={
                    "log.level": "WARNING",
                    "zookeeper.connect": zk.connect_string("/tail"),
                    "min.insync.replicas": "2",
                    "controlled.shutdown.enable": "false",
                },
                env=env,
                subprocess=True,
                admin=False,
            )
            for i in (1, 2, 3)
        ]
        try:
            for b in brokers:
                b.spawn()
            for b in brokers:
                b.wait_ready(120)
            bootstrap = ",".join(b.bootstrap for b in brokers)
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for name in ("max", "tail"):
                admin.create_topics([NewTopic(name, 1, 3)])[name].result(60)

                def full_isr(name=name):
                    p = admin.list_topics(name, timeout=10).topics[name].partitions.get(0)
                    return p is not None and p.leader >= 0 and len(p.isrs) == 3

                wait_until(full_isr, f"{name}: led with 3 in-sync replicas")
            max_rate = measure_max(bootstrap, "max", args.max_records)
            pids = [b.proc.pid for b in brokers]
            cpu0 = sum(cpu_seconds(p) for p in pids)
            result = measure_latency(
                bootstrap, "tail", max_rate * args.fraction, args.seconds, "all", LATENCY_LINGER_MS
            )
            cpu = sum(cpu_seconds(p) for p in pids) - cpu0
            result["max_rate"] = max_rate
            result["brokers_cpu_us_per_record"] = cpu / result["sent"] * 1e6
            if args.also_rate:
                # a fixed, lower rate too: the distribution when the cluster is not saturated
                result["also"] = measure_latency(
                    bootstrap, "tail", args.also_rate, args.seconds, "all", LATENCY_LINGER_MS
                )
            return result
        finally:
            for b in brokers:
                if b.running:
                    b.proc.send_signal(signal.SIGTERM)
            for b in brokers:
                try:
                    b.stop(timeout=60)
                except TimeoutError:
                    b.kill()


def plot(runs: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 3, figsize=(18, 4.5))
    for ax, phase, title in (
        (axes[0], "single", "1 broker, 1,000 rec/s, acks=1, linger 0"),
        (axes[1], "cluster", "3 brokers, RF 3, acks=all, linger 1 ms"),
        (axes[2], "also", "3 brokers, RF 3, acks=all, linger 1 ms"),
    ):
        for variant, rounds in runs.items():
            if phase == "also":
                values = [
                    v for r in rounds for v in r["cluster"].get("also", {}).get("latencies_ms", [])
                ]
            else:
                values = [v for r in rounds for v in r[phase]["latencies_ms"]]
            if not values:
                continue
            bins = np.logspace(np.log10(max(min(values), 0.05)), np.log10(max(values)), 80)
            p99 = percentile(sorted(values), 0.99)
            ax.hist(values, bins=bins, histtype="step", label=f"{variant} (p99 {p99:.2f} ms)")
        if phase == "cluster":
            rate = next(iter(runs.values()))[0]["cluster"]["rate"]
            title += f", {rate:,.0f} rec/s (half the maximum)"
        if phase == "also":
            also = next(iter(runs.values()))[0]["cluster"].get("also")
            if not also:
                ax.set_visible(False)
                continue
            title += f", {also['rate']:,.0f} rec/s (fixed)"
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("end-to-end latency (ms)")
        ax.set_ylabel("records")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--max-records", type=int, default=500_000)
    parser.add_argument(
        "--also-rate",
        type=float,
        default=10_000,
        help="records/s of a second 3-broker latency phase at a fixed rate (0: none)",
    )
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    variants: list[tuple[str, dict | None]] = [("this tree", None)]
    if args.baseline is not None:
        variants.insert(0, ("baseline", {"PYTHONPATH": str(args.baseline.resolve())}))
    runs: dict[str, list[dict]] = {}
    for _ in range(args.rounds):
        for variant, env in variants:
            with tempfile.TemporaryDirectory(prefix="kafkalite-tail-") as tmp:
                single = single_broker(Path(tmp), env, args.seconds)
                cluster = three_brokers(Path(tmp), env, args)
            runs.setdefault(variant, []).append({"single": single, "cluster": cluster})
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    png = RESULTS / f"tail_latency-{stamp}.png"
    plot(runs, png)

    def strip(figures: dict) -> dict:
        return {
            k: strip(v) if isinstance(v, dict) else v
            for k, v in figures.items()
            if k != "latencies_ms"
        }

    summary = {
        variant: [{phase: strip(r[phase]) for phase in r} for r in rounds]
        for variant, rounds in runs.items()
    }
    (RESULTS / f"tail_latency-{stamp}.json").write_text(json.dumps(summary, indent=2))
    print("\nend-to-end latency (ms; 100-byte records; client and brokers on this machine)\n")
    for variant, rounds in summary.items():
        for r in rounds:
            s, c = r["single"], r["cluster"]
            print(
                f"  {variant:<10} 1 broker @1,000 rec/s: p50 {s['p50_ms']:.2f} p99 "
                f"{s['p99_ms']:.2f} p99.9 {s['p999_ms']:.2f} max {s['max_ms']:.1f} "
                f"({s['received']}/{s['sent']}; broker CPU {s['broker_cpu_us_per_record']:.1f} "
                "µs/record)   target p99 <= 2"
            )
            print(
                f"  {'':<10} 3 brokers max {c['max_rate']:,.0f} rec/s (acks=all); at "
                f"{c['rate']:,.0f} rec/s: p50 {c['p50_ms']:.2f} p99 {c['p99_ms']:.2f} p99.9 "
                f"{c['p999_ms']:.2f} max {c['max_ms']:.1f} ({c['received']}/{c['sent']}; "
                f"brokers' CPU {c['brokers_cpu_us_per_record']:.1f} µs/record)   "
                "target p99 <= 10, p99.9 <= 25"
            )
            a = c.get("also")
            if a:
                print(
                    f"  {'':<10} 3 brokers at {a['rate']:,.0f} rec/s: p50 {a['p50_ms']:.2f} p99 "
                    f"{a['p99_ms']:.2f} p99.9 {a['p999_ms']:.2f} max {a['max_ms']:.1f} "
                    f"({a['received']}/{a['sent']})"
                )
    print(f"\n  {png}\n  {png.with_suffix('.json')}")


if __name__ == "__main__":
    main()
