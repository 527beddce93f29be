"""bench/schema_validation_bench.py run small: both topics of a subprocess broker take every
record of both workloads, and the validator alone passes a batch of each (figures are printed
by the script, never asserted); its callgrind part's requests (run here without valgrind)
are all accepted."""

from __future__ import annotations

from schema_validation_bench import callgrind_inner, run, validator_us


def test_the_bench_runs_and_every_record_is_accepted():
    for kind in ("mixed", "uniform"):
        out = run(records=2000, rounds=1, kind=kind)
        assert out["this/plain"]["rate"] > 0 and out["this/validated"]["rate"] > 0
        assert validator_us(kind, batch_records=500) > 0
        assert validator_us(kind, batch_records=500, native=False) > 0


def test_the_callgrind_requests_are_accepted():
    """What --callgrind counts under valgrind: Produce requests handed to an in-process
    broker's dispatcher, each answered without error (the function asserts it)."""
    callgrind_inner("mixed", 200)
