"""bench/metadata_bench.py run small: both shapes answer every version asked with a response of
the same size before and after the updates (figures are printed by the script, never
asserted)."""

from __future__ import annotations

import asyncio

from metadata_bench import run_once


def test_the_bench_runs_every_shape_and_version():
    out = asyncio.run(run_once(30, 2, [0, 9, 12]))
    for shape in ("one_topic", "many_topics"):
        assert set(out[shape]) == {"v0", "v9", "v12"}
        for figures in out[shape].values():
            assert figures["response_bytes"] > 30 * 20
            assert figures["kept_bytes_per_partition"] > 0
