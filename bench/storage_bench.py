"""Storage engine benchmark: prints figures, asserts nothing (run: .venv/bin/python bench/storage_bench.py).

Figures (each with a same-run baseline where one makes sense):

* append throughput (MB/s, batches/s) of ``Log.append_as_leader`` for 16 KiB and 1 MiB batches,
  against a raw sequential ``os.write`` of the same buffers to a file in the same directory
  (target: >= 70% of raw);
* sequential read throughput (``Log.read`` of 1 MiB fetches, one pass over each returned view
  with crc32c, as a consumer socket copy would) against ``os.pread`` of the same file range;
* ``OffsetIndex.lookup`` latency, median and p99 (target: median < 5 us), cold (anywhere) and
  warm (the last 8 KiB of entries);
* ``LogManager`` start-up time with ~1 GiB of log after a clean shutdown (target < 0.5 s), and
  after a crash with the recovery point at the last rolled segment and at offset 0.

Options: ``--dir`` (default: a temp dir), ``--append-mib`` (volume per append run, default 256),
``--log-gib`` (recovery log size, default 1).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from crc32c import crc32c

from kafkalite.protocol.records import Record, build_batch, iter_batch_headers, validate_batches
from kafkalite.storage.config import LogConfig
from kafkalite.storage.index import OffsetIndex
from kafkalite.storage.log import Log
from kafkalite.storage.log_manager import LogManager

MIB = 1024 * 1024


def make_batches(batch_size: int, count: int) -> list[bytearray]:
    """``count`` distinct batches of ~``batch_size`` bytes (10 records each, random values)."""
    records = 10
    value = max(1, (batch_size - 61) // records - 16)
    out = []
    for i in range(count):
        rnd = random.Random(i)
        batch = build_batch(
            [Record(value=rnd.randbytes(value)) for _ in range(records)],
            base_timestamp=1_700_000_000_000 + i,
        )
        out.append(bytearray(batch))
    return out


def raw_write(path: Path, pool: list[bytearray], n: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    write = os.write
    start = time.perf_counter()
    for i in range(n):
        write(fd, pool[i % len(pool)])
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


def log_append(dir: Path, pool: list[bytearray], n: int) -> float:
    log = Log(dir, LogConfig(segment_bytes=256 * MIB))
    append = log.append_as_leader
    start = time.perf_counter()
    for i in range(n):
        append(pool[i % len(pool)], 1)
    elapsed = time.perf_counter() - start
    log.close()
    return elapsed


def bench_append(base: Path, volume_mib: int) -> None:
    print("== append (Log.append_as_leader vs raw os.write of the same buffers) ==")
    for batch_size in (16 * 1024, 1 * MIB):
        pool = make_batches(batch_size, 64)
        size = len(pool[0])
        n = max(1, volume_mib * MIB // size)
        best_raw = best_log = float("inf")
        for _ in range(3):
            raw_path = base / "raw.bin"
            best_raw = min(best_raw, raw_write(raw_path, pool, n))
            raw_path.unlink()
            log_dir = base / "bench-0"
            best_log = min(best_log, log_append(log_dir, pool, n))
            shutil.rmtree(log_dir)
        total = size * n / MIB
        print(
            f"batch {size / 1024:7.0f} KiB x {n:6d}: raw {total / best_raw:8.0f} MB/s {n / best_raw:9.0f} batches/s | "
            f"log {total / best_log:8.0f} MB/s {n / best_log:9.0f} batches/s | "
            f"log/raw {100 * best_raw / best_log:5.1f}%"
        )
        if batch_size < MIB:
            # Where the time goes: the header/CRC validation (protocol/records.py) alone.
            start = time.perf_counter()
            for i in range(n):
                validate_batches(pool[i % len(pool)], origin_client=True, max_batch_size=2 * MIB)
            per_batch = (time.perf_counter() - start) / n
            print(
                f"  per batch: log {1e6 * best_log / n:6.1f} us = raw write {1e6 * best_raw / n:6.1f} us"
                f" + validate_batches {1e6 * per_batch:6.1f} us + the rest {1e6 * (best_log - best_raw) / n - 1e6 * per_batch:6.1f} us"
            )
            # The same batches, 16 per append (a produce request carrying several batches for
            # one partition): per-call costs are shared, per-batch checks (CRC) are not.
            group = 16
            grouped = [bytearray(b"".join(pool[i : i + group])) for i in range(0, len(pool), group)]
            best_raw = best_log = float("inf")
            for _ in range(3):
                raw_path = base / "raw.bin"
                best_raw = min(best_raw, raw_write(raw_path, grouped, n // group))
                raw_path.unlink()
                log_dir = base / "bench-0"
                best_log = min(best_log, log_append(log_dir, grouped, n // group))
                shutil.rmtree(log_dir)
            calls = n // group
            total = size * group * calls / MIB
            print(
                f"  same, {group} batches per append: raw {total / best_raw:8.0f} MB/s | log {total / best_log:8.0f} MB/s "
                f"{calls * group / best_log:9.0f} batches/s | log/raw {100 * best_raw / best_log:5.1f}%"
            )


def bench_read(base: Path) -> None:
    print("== sequential read (1 MiB fetches; one crc32c pass over each view) ==")
    dir = base / "read-0"
    log = Log(dir, LogConfig(segment_bytes=128 * MIB))
    pool = make_batches(16 * 1024, 64)
    while log.size_bytes < 512 * MIB:
        log.append_as_leader(pool[log.log_end_offset // 10 % 64], 1)
    end = log.log_end_offset
    total = log.size_bytes
    # warm the page cache the same way for both
    for segment in log.segments:
        with open(segment.log.file, "rb") as f:
            while f.read(64 * MIB):
                pass
    fetches = 0
    start = time.perf_counter()
    offset = 0
    read_bytes = 0
    while offset < end:
        info = log.read(offset, MIB)
        view = info.records.view()
        crc32c(view)
        read_bytes += len(view)
        last = None
        for _, last in iter_batch_headers(view[: _complete(view)]):  # noqa: B007
            pass
        offset = last.next_offset
        view.release()
        fetches += 1
    elapsed = time.perf_counter() - start
    raw_start = time.perf_counter()
    for segment in log.segments:
        fd = os.open(segment.log.file, os.O_RDONLY)
        pos = 0
        while True:
            chunk = os.pread(fd, MIB, pos)
            if not chunk:
                break
            crc32c(chunk)
            pos += len(chunk)
        os.close(fd)
    raw_elapsed = time.perf_counter() - raw_start
    print(
        f"log.read: {read_bytes / MIB / elapsed:8.0f} MB/s ({fetches / elapsed:7.0f} fetches/s, {total / MIB:.0f} MiB) | "
        f"raw pread: {total / MIB / raw_elapsed:8.0f} MB/s"
    )
    log.close()
    shutil.rmtree(dir)


def _complete(view: memoryview) -> int:
    pos = 0
    end = len(view)
    while end - pos >= 12:
        size = int.from_bytes(view[pos + 8 : pos + 12], "big") + 12
        if size > end - pos:
            break
        pos += size
    return pos


def bench_index(base: Path) -> None:
    print("== OffsetIndex.lookup latency ==")
    entries = 1_000_000
    index = OffsetIndex(base / "00000000000000000000.index", 0, max_index_size=entries * 8)
    for i in range(entries):
        index.append(i * 10, i * 1024)
    rnd = random.Random(1)
    perf = time.perf_counter_ns
    lookup = index.lookup
    for name, targets in (
        ("cold (uniform over 1M entries)", [rnd.randrange(entries * 10) for _ in range(200_000)]),
        (
            "warm (last 8 KiB of entries)",
            [entries * 10 - rnd.randrange(10_000) for _ in range(200_000)],
        ),
    ):
        samples = []
        for target in targets:
            t0 = perf()
            lookup(target)
            samples.append(perf() - t0)
        samples.sort()
        overhead = statistics.median([-(perf() - perf()) for _ in range(10_000)])
        print(
            f"{name:32s}: median {(samples[len(samples) // 2]) / 1000:5.2f} us, p99 {samples[int(len(samples) * 0.99)] / 1000:5.2f} us"
            f" (timer overhead ~{overhead / 1000:.2f} us included)"
        )
    index.close()


def bench_recovery(base: Path, gib: float) -> None:
    print(f"== start-up with {gib:g} GiB of log ==")
    dir = base / "recovery"
    config = LogConfig(segment_bytes=128 * MIB)
    manager = LogManager([dir], config)
    manager.startup()
    log = manager.get_or_create_log("bench", 0)
    pool = make_batches(MIB, 16)
    while log.size_bytes < gib * 1024 * MIB:
        log.append_as_leader(pool[log.log_end_offset // 10 % 16], 1)
    log.high_watermark = log.log_end_offset
    size = log.size_bytes
    segments = log.number_of_segments
    manager.flush_rolled_segments()
    manager.checkpoint_recovery_points()
    manager.shutdown()

    start = time.perf_counter()
    manager = LogManager([dir], config)
    manager.startup()
    clean = time.perf_counter() - start
    log = manager.get_log("bench", 0)
    print(
        f"clean shutdown: {clean * 1000:7.1f} ms ({size / MIB:.0f} MiB in {segments} segments, {log.recovered_segments} re-read)"
    )
    manager.flush_rolled_segments()
    manager.checkpoint_recovery_points()
    # Crash: forget the manager without shutdown (no marker); the lock dies with the "process".
    for fd in manager._locks.values():
        os.close(fd)
    manager._locks.clear()
    start = time.perf_counter()
    manager = LogManager([dir], config)
    manager.startup()
    crash = time.perf_counter() - start
    log = manager.get_log("bench", 0)
    print(
        f"crash, recovery point at the active segment: {crash * 1000:7.1f} ms ({log.recovered_segments} segment(s) scanned)"
    )
    for fd in manager._locks.values():
        os.close(fd)
    manager._locks.clear()
    (dir / "recovery-point-offset-checkpoint").unlink()
    start = time.perf_counter()
    manager = LogManager([dir], config)
    manager.startup()
    crash_full = time.perf_counter() - start
    log = manager.get_log("bench", 0)
    print(
        f"crash, no recovery point (scan all):        {crash_full * 1000:7.1f} ms ({log.recovered_segments} segments scanned, "
        f"{size / MIB / crash_full:.0f} MB/s)"
    )
    manager.shutdown()
    shutil.rmtree(dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--append-mib", type=int, default=256)
    parser.add_argument("--log-gib", type=float, default=1.0)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="kafkalite-bench-", dir=args.dir))
    try:
        bench_append(base, args.append_mib)
        bench_read(base)
        bench_index(base)
        bench_recovery(base, args.log_gib)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
