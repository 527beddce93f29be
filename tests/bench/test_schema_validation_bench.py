"""bench/schema_validation_bench.py run small: both topics take every record (figures are
printed by the script, never asserted)."""

from __future__ import annotations

from schema_validation_bench import run


def test_the_bench_runs_and_every_record_is_accepted():
    best = run(records=2000, rounds=1)
    assert best["plain"] > 0 and best["validated"] > 0
