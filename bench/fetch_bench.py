"""The fetch path per request and per partition: broker CPU, fetch counts, and a profile.

    PYTHONPATH=. .venv/bin/python bench/fetch_bench.py [--records 1000000] [--partitions 1]
                                                       [--profile py-spy|cprofile|none]
                                                       [--baseline DIR --rounds N]

One broker subprocess (kafkalite.testing.Broker) with its admin listener (for the request counters in
``/metrics``), one topic, ``--records`` 100-byte records produced by confluent-kafka (linger 5 ms,
1 MiB batches, acks=1) spread over ``--partitions`` partitions, then read back twice:

1. confluent-kafka with its default consumer settings (only ``group.id`` set; assigned from the
   beginning, no commits), a Python loop over the records;
2. kcat with its defaults (``-C -o beginning -e``).

Per reader: records/s, broker CPU µs per consumed record (``/proc/<pid>/stat`` over the read),
Fetch requests answered, records and µs of broker CPU per Fetch request, and the broker's
request-handling time per Fetch (dispatch to encoded answer, from ``/metrics``).

``--profile py-spy`` runs the broker under ``py-spy record --nonblocking`` (samples, not
tracing: the proportions are those of the real run) and prints, for each read phase separately
the share of the broker's CPU samples
spent in each stage of a fetch: decoding the request, the fetch session, the log read (index
lookup, batch scan, slice), the response encoding, the write to the transport, and the rest of
the event loop (a sample is charged to the innermost stage on its stack). The records are
written by a broker without a profiler, which stops; the profiled broker serves the reads from
the same data dir, so the profile holds the fetch path alone. An unmeasured kcat read comes first
(each batch's CRC is checked on its first read after a start: a stage of its own in the
profile), so the measured read is the steady state. ``--profile cprofile`` runs it under cProfile (exact call counts,
higher overhead) and prints the top functions by their own time.

``--first-read`` measures instead the first read of closed segments on the broker that wrote
them (no restart; ``--segment-bytes``, default 16 MiB, so that the records fill several
segments): a closed segment's batches are CRC-checked on their first read after the close,
whoever wrote them (``kafkalite/storage/segment.py``). Each reader reads the records twice on
the writing broker; the first read pays the checks, the second is the steady state. Besides the
figures above it prints how often the broker's event loop stalled during each read (its lag
probe ran more than 5 / 10 / 25 ms late: ``kafkalite_event_loop_lag_seconds``). ``--batch-bytes`` sets the producer's
``batch.size`` (1 MiB by default; small batches cost the check most per byte).

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import collections
import cProfile  # noqa: F401  (documented alternative, run as `python -m cProfile`)
import datetime
import os
import pstats
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkalite.client.messages import build_message  # noqa: E402
from kafkalite.protocol.api import ApiKey, request_class  # noqa: E402
from kafkalite.protocol.frames import encode_request  # noqa: E402
from kafkalite.testing import (  # noqa: E402
    Broker,  # noqa: E402
    free_port,
    recv_exactly,
)

VALUE_SIZE = 100
CLK_TCK = os.sysconf("SC_CLK_TCK")
PY_SPY = Path(sys.executable).with_name("py-spy")

# Stages of the fetch path: the first frame (innermost wins when nested, see stage_of) that
# matches names the stage a sample is charged to.
STAGES = [
    ("write to the transport", re.compile(r"\b(_write|writelines|write) \(.*connection\.py")),
    ("response encoding", re.compile(r"encode_fetch_response|_records_buffer|\bview \(")),
    ("fetch session", re.compile(r"fetch_session\.py")),
    ("first-read CRC check", re.compile(r"_checked_end|check_batches")),
    ("log read: index lookup", re.compile(r"index\.py")),
    ("log read: batch scan", re.compile(r"search_for_offset_with_size|batches_from|batch_at")),
    ("log read: the rest", re.compile(r"\((log|segment|file_records|partition)\.py")),
    ("purgatory / delayed fetch", re.compile(r"purgatory\.py|DelayedFetch|_anything_new")),
    ("replica manager: the rest", re.compile(r"replica_manager\.py")),
    ("request decoding", re.compile(r"decode_request|decoder\.py|frames\.py|request_checks")),
    ("fetch handler: the rest", re.compile(r"apis/fetch\.py|handle_fetch")),
    ("dispatcher and metrics", re.compile(r"dispatcher\.py|metrics\.py")),
    ("connection: framing", re.compile(r"connection\.py")),
]


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


def system_seconds(pid: int) -> float:
    """The kernel's share (stime): socket writes, page faults of mapped segments."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[12]) / CLK_TCK


def loop_lag_buckets(admin_port: int) -> dict[str, float]:
    """The broker's event-loop lag histogram (cumulative counts by upper bound), /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=10).read()
    found = {}
    for line in text.decode().splitlines():
        match = re.match(r'kafkalite_event_loop_lag_seconds_bucket\{le="([^"]+)"\} (\S+)', line)
        if match:
            found[match.group(1)] = float(match.group(2))
    return found


def stalls(before: dict[str, float], after: dict[str, float]) -> str:
    """Probes of a phase that ran more than 5 / 10 / 25 ms late, and the worst bucket hit."""
    new = {bound: after[bound] - before.get(bound, 0.0) for bound in after}
    total = new.get("+Inf", 0.0)

    def over(bound: str) -> int:
        return int(total - new.get(bound, total))

    worst = next((b for b in sorted(new, key=_bound) if new[b] == total), "+Inf")
    return (
        f"loop stalls >5 ms: {over('0.005')}, >10 ms: {over('0.01')}, >25 ms: {over('0.025')}"
        f" (worst <= {worst} s)"
    )


def _bound(bound: str) -> float:
    return float("inf") if bound == "+Inf" else float(bound)


def fetch_stats(admin_port: int) -> tuple[float, float]:
    """(Fetch requests answered, seconds spent handling them) from the broker's /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=10).read()
    count = seconds = 0.0
    for line in text.decode().splitlines():
        if 'api="Fetch"' not in line:
            continue
        if line.startswith("kafkalite_requests_total"):
            count = float(line.rsplit(" ", 1)[1])
        elif line.startswith("kafkalite_request_latency_seconds_sum"):
            seconds = float(line.rsplit(" ", 1)[1])
    return count, seconds


class ProfiledBroker(Broker):
    """A Broker whose command runs under a profiler; ``pid`` is the Python process."""

    def __init__(self, *args, profile: str, output: Path, native: bool, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.native = native
        self.profile = profile
        self.output = output

    def command(self) -> list[str]:
        cmd = super().command()
        if self.profile == "py-spy":
            return [
                str(PY_SPY),
                "record",
                # native stacks need the process paused per sample (more overhead)
                *(["--native"] if self.native else ["--nonblocking"]),
                "--rate",
                "250",
                "--format",
                "raw",
                "--output",
                str(self.output),
                "--",
                *cmd,
            ]
        if self.profile == "cprofile":
            return [cmd[0], "-m", "cProfile", "-o", str(self.output), *cmd[1:]]
        return cmd

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM to the broker itself; py-spy writes its profile when the broker has exited."""
        if self.profile == "py-spy" and self.running:
            os.kill(self.pid, signal.SIGTERM)
            assert self.proc is not None
            return self.proc.wait(timeout)
        return super().stop(timeout)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        if self.profile != "py-spy":
            return self.proc.pid
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        return int(children.split()[0])


def produce(
    bootstrap: str, topic: str, count: int, partitions: int, batch_bytes: int = 1024 * 1024
) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": batch_bytes,
            "acks": 1,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "enable.idempotence": False,
        }
    )
    value = b"v" * VALUE_SIZE
    for i in range(count):
        try:
            producer.produce(topic, value, partition=i % partitions)
        except BufferError:
            producer.poll(0.001)
            producer.produce(topic, value, partition=i % partitions)
        if i & 0x3FFF == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def read_confluent(bootstrap: str, topic: str, count: int, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fetch-bench"})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    deadline = time.monotonic() + 300
    while got < count and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
    consumer.close()
    return got


def read_kcat(bootstrap: str, topic: str, count: int, partitions: int) -> int:
    done = subprocess.run(
        ["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%o\\n"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return done.stdout.count(b"\n")


FETCH_VERSION = 12


def fetch_frame(correlation_id: int, session_id: int, epoch: int, partitions, max_bytes=1 << 20):
    """A Fetch v12 request frame: ``partitions`` is [(topic, partition, offset, max_bytes)]."""
    topics: dict[str, list[dict]] = {}
    for topic, partition, offset, partition_max in partitions:
        topics.setdefault(topic, []).append(
            {
                "partition": partition,
                "current_leader_epoch": -1,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": partition_max,
            }
        )
    message = build_message(
        request_class(ApiKey.FETCH, FETCH_VERSION),
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()],
        forgotten_topics_data=[],
        rack_id="",
    )
    return encode_request(ApiKey.FETCH, FETCH_VERSION, correlation_id, "fetch-bench", message)


def round_trip(sock: socket.socket, frame: bytes) -> bytes:
    sock.sendall(frame)
    size = int.from_bytes(recv_exactly(sock, 4), "big")
    return recv_exactly(sock, size)


def session_of(response: bytes) -> int:
    # correlation id, header tags (1 byte, empty), throttle time, error code, session id
    error = int.from_bytes(response[9:11], "big", signed=True)
    assert error == 0, f"fetch error {error}"
    return int.from_bytes(response[11:15], "big")


def micro_phase(broker: Broker, pid: int, topic: str, partitions: int, mode: str, n: int):
    """Broker CPU per Fetch request over ``n`` requests of one session on one connection:
    ``empty`` (incremental fetches with nothing new: the per-request cost) or ``batch`` (each
    fetch names partition 0 at the next offset with partition_max_bytes 1, so it returns one
    10-record batch: KIP-74)."""
    with socket.create_connection((broker.host, broker.port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if mode == "empty":
            ends = [(topic, p, RECORDS_PER_PARTITION, 1 << 20) for p in range(partitions)]
            session = session_of(round_trip(sock, fetch_frame(1, 0, 0, ends)))
            frames = [fetch_frame(i + 2, session, i + 1, []) for i in range(n)]
        else:
            session = session_of(round_trip(sock, fetch_frame(1, 0, 0, [(topic, 0, 0, 1)])))
            frames = [
                fetch_frame(i + 2, session, i + 1, [(topic, 0, (i + 1) * BATCH_RECORDS, 1)])
                for i in range(n)
            ]
        cpu0 = cpu_seconds(pid)
        t0 = time.perf_counter()
        sizes = 0
        for frame in frames:
            sizes += len(round_trip(sock, frame))
        elapsed = time.perf_counter() - t0
        cpu = cpu_seconds(pid) - cpu0
    return {
        "cpu_us_per_fetch": cpu / n * 1e6,
        "wall_us_per_fetch": elapsed / n * 1e6,
        "response_bytes": sizes / n,
    }


RECORDS_PER_PARTITION = 2_000
BATCH_RECORDS = 10


def produce_small_batches(bootstrap: str, topic: str, partitions: int) -> None:
    """RECORDS_PER_PARTITION records per partition in batches of BATCH_RECORDS (a flush after
    each batch's worth)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "acks": 1})
    value = b"v" * VALUE_SIZE
    for _ in range(RECORDS_PER_PARTITION // BATCH_RECORDS):
        for p in range(partitions):
            for _ in range(BATCH_RECORDS):
                producer.produce(topic, value, partition=p)
        assert producer.flush(30) == 0


def run_micro(args, tmp: Path, env: dict[str, str] | None = None) -> dict:
    output = tmp / ("profile-micro." + ("prof" if args.profile == "cprofile" else "txt"))
    data_dir = tmp / f"broker-micro-{len(list(tmp.iterdir()))}"
    writer = Broker(
        data_dir=data_dir, config={"log.level": "WARNING"}, env=env, subprocess=True, admin=False
    )
    writer.start()
    try:
        admin = AdminClient({"bootstrap.servers": writer.bootstrap})
        for name, count in (("small1", 1), ("small100", 100)):
            admin.create_topics([NewTopic(name, count, 1)])[name].result(30)
            produce_small_batches(writer.bootstrap, name, count)
    finally:
        writer.stop(timeout=60)
    broker = ProfiledBroker(
        data_dir=data_dir,
        subprocess=True,
        admin=False,
        port=writer.port,
        config={"log.level": "WARNING"},
        profile=args.profile,
        output=output,
        native=args.native,
        env=env,
    )
    broker.start()
    figures = {}
    try:
        pid = broker.pid
        n = args.micro_requests
        # a first pass warms what is read once (CRC checks of the batches, index maps)
        micro_phase(broker, pid, "small1", 1, "batch", RECORDS_PER_PARTITION // BATCH_RECORDS - 1)
        figures["1 partition, nothing new"] = micro_phase(broker, pid, "small1", 1, "empty", n)
        figures["100 partitions, nothing new"] = micro_phase(
            broker, pid, "small100", 100, "empty", n
        )
        batches = RECORDS_PER_PARTITION // BATCH_RECORDS - 1
        rounds = max(1, n // batches)
        runs = [micro_phase(broker, pid, "small1", 1, "batch", batches) for _ in range(rounds)]
        figures["1 partition, one 10-record batch"] = {
            k: statistics.fmean(r[k] for r in runs) for k in runs[0]
        }
    finally:
        broker.stop(timeout=60)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(output, args.keep / output.name)
    if args.profile == "py-spy":
        figures["profile"] = summarise_py_spy(output)
    elif args.profile == "cprofile":
        figures["cprofile"] = pstats.Stats(str(output))
    return figures


READERS = {"confluent-kafka (defaults)": read_confluent, "kcat (defaults)": read_kcat}


IDLE = ("epoll_wait (libc.so.6)", "epoll_pwait (libc.so.6)")
STARTUP = re.compile(r"importlib|_find_and_load|load_logs|_create_fn")


def stage_of(stack: str) -> str:
    """The stage a collapsed py-spy stack is charged to: the innermost matching frame."""
    if STARTUP.search(stack):
        return "start-up (imports, loading)"
    frames = stack.split(";")
    for frame in reversed(frames):
        for name, pattern in STAGES:
            if pattern.search(frame):
                return name
    return "event loop and the rest"


def summarise_py_spy(path: Path) -> dict[str, float]:
    shares: dict[str, float] = collections.Counter()
    leaves: dict[str, int] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        if "(threading.py" in stack or stack.endswith(IDLE):
            continue  # other threads (workers, the coordination thread), or the loop idle
        stage = stage_of(stack)
        if stage.startswith("start-up"):
            continue  # not the fetch path: the broker's start is in the same profile
        total += n
        shares[stage] += n
        leaves[stack.split(";")[-1]] += n
    top = [(frame, n / max(total, 1)) for frame, n in leaves.most_common(8)]
    return {name: n / max(total, 1) for name, n in shares.items()} | {
        "samples": total,
        "leaves": top,
    }


def run_phase(args, reader_name: str, tmp: Path, env: dict[str, str] | None = None) -> dict:
    admin_port = free_port()
    suffix = "prof" if args.profile == "cprofile" else "txt"
    output = tmp / f"profile-{reader_name.split()[0]}.{suffix}"
    data_dir = tmp / f"broker-{reader_name.split()[0]}-{len(list(tmp.iterdir()))}"
    overrides = {"log.level": "WARNING", "admin.listener": f"http://127.0.0.1:{admin_port}"}
    # The records are written by a broker without a profiler, which then stops: the profiled
    # broker (same data dir) serves the read only, so its profile is the fetch path's alone.
    # It checks each batch's CRC on its first read (a stage of its own in the summary).
    writer = Broker(data_dir=data_dir, config=overrides, env=env, subprocess=True)
    writer.start()
    try:
        admin = AdminClient({"bootstrap.servers": writer.bootstrap})
        admin.create_topics([NewTopic("fetch", args.partitions, 1)])["fetch"].result(30)
        produce(writer.bootstrap, "fetch", args.records, args.partitions)
    finally:
        writer.stop(timeout=60)
    broker = ProfiledBroker(
        data_dir=data_dir,
        subprocess=True,
        port=writer.port,
        config=overrides,
        profile=args.profile,
        output=output,
        native=args.native,
        env=env,
    )
    broker.start()
    try:
        pid = broker.pid
        # One unmeasured read first (kcat, fast): each batch's CRC is checked on its first read
        # after a start, and the page cache is warm; the measured read is the steady state.
        read_kcat(broker.bootstrap, "fetch", args.records, args.partitions)
        fetches0, seconds0 = fetch_stats(admin_port)
        cpu0 = cpu_seconds(pid)
        sys0 = system_seconds(pid)
        t0 = time.perf_counter()
        got = READERS[reader_name](broker.bootstrap, "fetch", args.records, args.partitions)
        elapsed = time.perf_counter() - t0
        cpu = cpu_seconds(pid) - cpu0
        system = system_seconds(pid) - sys0
        fetches1, seconds1 = fetch_stats(admin_port)
    finally:
        broker.stop(timeout=60)
    fetches = max(fetches1 - fetches0, 1)
    figures = {
        "records": got,
        "records_s": got / elapsed,
        "cpu_us_per_record": cpu / max(got, 1) * 1e6,
        "system_share": system / cpu if cpu else 0.0,
        "fetches": fetches,
        "records_per_fetch": got / fetches,
        "cpu_us_per_fetch": cpu / fetches * 1e6,
        "handling_us_per_fetch": (seconds1 - seconds0) / fetches * 1e6,
    }
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(output, args.keep / output.name)
    if args.profile == "py-spy":
        figures["profile"] = summarise_py_spy(output)
    elif args.profile == "cprofile":
        stats = pstats.Stats(str(output))
        figures["cprofile"] = stats
    return figures


def measured_read(broker, pid: int, admin_port: int, reader_name: str, args) -> dict:
    fetches0, seconds0 = fetch_stats(admin_port)
    lag0 = loop_lag_buckets(admin_port)
    cpu0 = cpu_seconds(pid)
    sys0 = system_seconds(pid)
    t0 = time.perf_counter()
    got = READERS[reader_name](broker.bootstrap, "fetch", args.records, args.partitions)
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds(pid) - cpu0
    system = system_seconds(pid) - sys0
    fetches1, seconds1 = fetch_stats(admin_port)
    lag1 = loop_lag_buckets(admin_port)
    fetches = max(fetches1 - fetches0, 1)
    return {
        "records": got,
        "records_s": got / elapsed,
        "cpu_us_per_record": cpu / max(got, 1) * 1e6,
        "system_share": system / cpu if cpu else 0.0,
        "fetches": fetches,
        "records_per_fetch": got / fetches,
        "cpu_us_per_fetch": cpu / fetches * 1e6,
        "handling_us_per_fetch": (seconds1 - seconds0) / fetches * 1e6,
        "stalls": stalls(lag0, lag1),
    }


def run_first_read(args, reader_name: str, tmp: Path, env: dict[str, str] | None = None) -> dict:
    """Two reads of the records on the broker that wrote them (see ``--first-read``)."""
    admin_port = free_port()
    data_dir = tmp / f"broker-first-{reader_name.split()[0]}-{len(list(tmp.iterdir()))}"
    overrides = {
        "log.level": "WARNING",
        "admin.listener": f"http://127.0.0.1:{admin_port}",
        "log.segment.bytes": str(args.segment_bytes),
    }
    broker = Broker(data_dir=data_dir, config=overrides, env=env, subprocess=True)
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("fetch", args.partitions, 1)])["fetch"].result(30)
        produce(broker.bootstrap, "fetch", args.records, args.partitions, args.batch_bytes)
        segments = len(list((data_dir / "logs" / "fetch-0").glob("*.log")))
        first = measured_read(broker, broker.proc.pid, admin_port, reader_name, args)
        second = measured_read(broker, broker.proc.pid, admin_port, reader_name, args)
    finally:
        broker.stop(timeout=60)
    first["segments"] = second["segments"] = segments
    return {f"{reader_name}, 1st read": first, f"{reader_name}, 2nd read": second}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--profile", choices=("py-spy", "cprofile", "none"), default="none")
    parser.add_argument(
        "--native", action="store_true", help="py-spy: C frames too (uvloop, the kernel calls)"
    )
    parser.add_argument("--keep", type=Path, default=None, help="copy the raw profiles here")
    parser.add_argument("--only", choices=("confluent", "kcat", "micro"), default=None)
    parser.add_argument("--micro-requests", type=int, default=20_000)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a kafkalite source tree (e.g. `git archive` of the base commit) measured in the "
        "same run, alternating with this one",
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--first-read", action="store_true", help="see the module docstring")
    parser.add_argument("--segment-bytes", type=int, default=16 << 20)
    parser.add_argument("--batch-bytes", type=int, default=1 << 20)
    args = parser.parse_args()
    if args.profile == "py-spy" and not PY_SPY.exists():
        raise SystemExit(f"{PY_SPY} not found: pip install py-spy")
    readers = [r for r in READERS if args.only is None or r.startswith(args.only)]
    variants: list[tuple[str, dict[str, str] | None]] = [("this tree", None)]
    if args.baseline is not None:
        # the baseline's brokers import kafkalite from that tree (PYTHONPATH)
        variants.insert(0, ("baseline", {"PYTHONPATH": str(args.baseline.resolve())}))
    runs = {}
    with tempfile.TemporaryDirectory(prefix="kafkalite-fetch-bench-") as tmp:
        for _ in range(args.rounds):  # alternating, so drifts of the machine hit both alike
            for variant, env in variants:
                if args.first_read:
                    micro, results = None, {}
                    for name in readers:
                        results |= run_first_read(args, name, Path(tmp), env)
                    runs.setdefault(variant, []).append((micro, results))
                    continue
                micro = run_micro(args, Path(tmp), env) if args.only in (None, "micro") else None
                results = {name: run_phase(args, name, Path(tmp), env) for name in readers}
                runs.setdefault(variant, []).append((micro, results))
    print(
        f"\nkafkalite fetch path ({args.records:,} records of {VALUE_SIZE} B, "
        f"{args.partitions} partition(s), profile: {args.profile})"
    )
    for variant, rounds in runs.items():
        for micro, results in rounds:
            print(f"\n {variant}{f' ({args.baseline})' if variant == 'baseline' else ''}:")
            print_run(micro, results)


def print_run(micro: dict | None, results: dict) -> None:
    if micro is not None:
        print(f"  per request (raw Fetch v{FETCH_VERSION} in one session, max_wait 0, sequential):")
        for name, r in micro.items():
            if isinstance(r, dict) and "cpu_us_per_fetch" in r:
                print(
                    f"    {name:<36} broker CPU {r['cpu_us_per_fetch']:7.1f} µs/fetch   "
                    f"round trip {r['wall_us_per_fetch']:7.1f} µs   "
                    f"response {r['response_bytes']:,.0f} B"
                )
        print_profile(micro)
    for name, r in results.items():
        print(
            f"  {name:<28} {r['records_s']:>11,.0f} rec/s  "
            f"broker CPU {r['cpu_us_per_record']:.3f} µs/record "
            f"({r['system_share'] * 100:.0f}% in the kernel)  "
            f"{r['fetches']:,.0f} fetches ({r['records_per_fetch']:,.0f} records each)  "
            f"{r['cpu_us_per_fetch']:,.0f} µs CPU/fetch  "
            f"handled in {r['handling_us_per_fetch']:,.0f} µs/fetch"
            + (f"\n    {r['segments']} segments; {r['stalls']}" if "stalls" in r else "")
        )
        print_profile(r)


def print_profile(r: dict) -> None:
    profile = r.get("profile")
    if profile:
        print(f"    py-spy: {profile['samples']} samples of the broker after its start, by stage:")
        for stage, share in sorted(
            ((k, v) for k, v in profile.items() if k not in ("samples", "leaves")),
            key=lambda kv: -kv[1],
        ):
            print(f"      {share * 100:5.1f}%  {stage}")
        print("    innermost frames (own time):")
        for frame, share in profile["leaves"]:
            print(f"      {share * 100:5.1f}%  {frame}")
    stats = r.get("cprofile")
    if stats is not None:
        print("    cProfile, top 25 by own time:")
        stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
