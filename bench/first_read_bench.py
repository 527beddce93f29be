"""How long one read holds the event loop when it is the first read of a closed segment (the
CRC checks of ``LogSegment.read``, see ``kafkalite/storage/segment.py``): prints figures,
asserts nothing.

    PYTHONPATH=. .venv/bin/python bench/first_read_bench.py [--mib 256] [--fetch-bytes 1048576]

For each batch size (170 B: one 100-byte record; 1 KiB; 16 KiB; 1 MiB), a log of ``--mib`` MiB
of such batches is written, rolled, closed and opened again (its first segment is then closed:
nothing of it counts as verified, in this tree as in older ones, which checked only after a
restart), and read from its start to its end with ``Log.read`` of ``--fetch-bytes`` (a
consumer's ``max.partition.fetch.bytes``, 1 MiB by default) twice: the first pass checks every
batch once, a slice per read; the second is the steady state. Run it with ``PYTHONPATH`` set to
another tree (e.g. ``git archive`` of a base commit) to measure that tree's reads.
Per pass: the reads, MiB/s, and the time per read (median, p99, max): the max of the first
pass is the longest the loop is held by a read. The page cache is warm (the log was just
written): a cold read adds the disk's time, as it does to the sendfile of the same bytes.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import kafkalite.storage.segment as segment_module
from kafkalite.protocol.records import Record, build_batch
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log

MIB = 1024 * 1024


def batch_of(records: int, value_size: int) -> bytes:
    return bytes(build_batch([Record(i, 0, None, b"v" * value_size, ()) for i in range(records)]))


def one_pass(log: Log, fetch_bytes: int) -> tuple[list[float], int]:
    times = []
    offset = 0
    total = 0
    while offset < log.log_end_offset:
        t0 = time.perf_counter()
        records = log.read(offset, fetch_bytes).records
        times.append(time.perf_counter() - t0)
        # the next offset, after the last whole batch returned (not timed: the client's work)
        last = None
        for batch in log.segments[0].log.batches_from(records.position):
            if batch.position + batch.size > records.position + len(records):
                break
            last = batch
        assert last is not None
        offset = last.next_offset
        total += last.position + last.size - records.position
    return times, total


def run(dir: Path, batch: bytes, mib: int, fetch_bytes: int) -> None:
    log = Log(dir, LogConfig(segment_bytes=(mib + 1) * MIB))
    count = mib * MIB // len(batch)
    for _ in range(count):
        log.append_as_leader(bytearray(batch), 0)
    log.roll()
    log.close()
    log = Log(dir, LogConfig(segment_bytes=(mib + 1) * MIB), had_clean_shutdown=True)
    print(f"  batches of {len(batch):,} B ({count:,} batches, {mib} MiB):")
    for name in ("1st pass", "2nd pass"):
        times, total = one_pass(log, fetch_bytes)
        q = statistics.quantiles(times, n=100) if len(times) > 1 else times * 99
        print(
            f"    {name}: {len(times):5,} reads  {total / MIB / sum(times):8,.0f} MiB/s  "
            f"per read: median {statistics.median(times) * 1e3:6.3f} ms  "
            f"p99 {q[98] * 1e3:6.3f} ms  max {max(times) * 1e3:6.3f} ms"
        )
    log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--fetch-bytes", type=int, default=MIB)
    args = parser.parse_args()
    slice_bytes = getattr(segment_module, "VERIFY_SLICE_BYTES", None)
    slice_batches = getattr(segment_module, "VERIFY_SLICE_BATCHES", None)
    print(
        f"first read of a closed segment ({segment_module.__file__}): Log.read of "
        f"{args.fetch_bytes:,} B, VERIFY_SLICE_BYTES {slice_bytes}, "
        f"VERIFY_SLICE_BATCHES {slice_batches}"
    )
    with tempfile.TemporaryDirectory(prefix="kafkalite-first-read-") as tmp:
        for i, (records, value_size) in enumerate(((1, 100), (9, 100), (150, 100), (8, 130_000))):
            run(Path(tmp) / f"t-{i}", batch_of(records, value_size), args.mib, args.fetch_bytes)


if __name__ == "__main__":
    main()
