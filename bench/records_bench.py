"""Record-batch hot path figures (prints numbers; not a test).

For batches of a given size, compares ``validate_batches`` (header unpack + checks + CRC32C
pass) with a bare ``crc32c`` over the same bytes in the same run, which is the floor: the
difference is the per-batch Python overhead. Also times ``parse_batch_header``,
``assign_offsets`` and the full (non hot path) ``build_batch``/``decode_batch`` codec.

    .venv/bin/python bench/records_bench.py
"""

from __future__ import annotations

import functools
import os
import statistics
import time

from crc32c import crc32c

from kafkalite.protocol.records import (
    CompressionType,
    Record,
    assign_offsets,
    build_batch,
    decode_batch,
    parse_batch_header,
    validate_batches,
)


def timeit(fn, *, repeat: int = 7, min_time: float = 0.2) -> float:
    """Median seconds per call."""
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time / 5:
            break
        n *= 2
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - start) / n)
    return statistics.median(samples)


def crc_all(slices: list[memoryview]) -> None:
    for s in slices:
        crc32c(s)


def make_batch(batch_bytes: int, record_bytes: int = 1024) -> bytes:
    count = max(1, batch_bytes // (record_bytes + 10))
    records = [Record(value=os.urandom(record_bytes)) for _ in range(count)]
    return build_batch(records, base_timestamp=0)


def main() -> None:
    print("validate_batches vs bare crc32c (same bytes, same run)")
    print(f"{'batch':>10} {'batches':>8} {'crc32c GB/s':>12} {'validate GB/s':>14} "
          f"{'overhead/batch':>15} {'batches/s':>12}")  # fmt: skip
    for batch_size, batches in ((1024, 1000), (16 * 1024, 64), (1024 * 1024, 4)):
        batch = make_batch(batch_size)
        buf = batch * batches
        mv = memoryview(buf)
        slices = [mv[i * len(batch) + 21 : (i + 1) * len(batch)] for i in range(batches)]
        t_crc = timeit(functools.partial(crc_all, slices))
        t_val = timeit(functools.partial(validate_batches, mv))
        print(
            f"{len(batch):>10} {batches:>8} {len(buf) / t_crc / 1e9:>12.2f} "
            f"{len(buf) / t_val / 1e9:>14.2f} {(t_val - t_crc) / batches * 1e6:>12.2f} us "
            f"{batches / t_val:>12,.0f}"
        )
    batch = make_batch(16 * 1024)
    t = timeit(functools.partial(parse_batch_header, batch))
    print(f"parse_batch_header: {t * 1e9:,.0f} ns")
    buf = bytearray(batch * 100)
    t = timeit(functools.partial(assign_offsets, buf, 1000, 5))
    print(f"assign_offsets: {t / 100 * 1e9:,.0f} ns per batch")
    print("full codec (tools, compaction; not the hot path), 100 records x 100 bytes")
    records = [Record(key=b"k%d" % i, value=os.urandom(50) * 2) for i in range(100)]
    for codec in CompressionType:
        encoded = build_batch(records, compression=codec, base_timestamp=0)
        t_build = timeit(
            functools.partial(build_batch, records, compression=codec, base_timestamp=0)
        )
        t_decode = timeit(functools.partial(decode_batch, encoded))
        print(
            f"  {codec.name.lower():>6}: build {t_build * 1e6:8.1f} us, "
            f"decode {t_decode * 1e6:8.1f} us, {len(encoded)} bytes"
        )


if __name__ == "__main__":
    main()
