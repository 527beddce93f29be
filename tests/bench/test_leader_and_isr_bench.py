"""bench/leader_and_isr_bench.py run small: every phase applies without a partition error, the
failover's requests name the failed broker's partitions and then the others (figures are
printed by the script, never asserted)."""

from __future__ import annotations

import asyncio

from leader_and_isr_bench import run_once


def test_the_bench_applies_every_phase_without_errors():
    out = asyncio.run(run_once(30))
    assert out["leader_and_isr"]["result"] == {"errors": 0, "logs": 30}
    failover = out["failover"]
    assert failover["elections"]["partitions"] == 10
    assert failover["isr_shrinks"]["partitions"] == 20
    assert failover["elections"]["errors"] == failover["isr_shrinks"]["errors"] == 0
    assert out["stop_replica_delete"]["result"] == {"errors": 0, "logs": 0}


def test_the_failovers_shrinks_at_the_same_leader_epoch_are_taken():
    # a tree that ignored them would answer each with STALE_CONTROLLER_EPOCH, an error here
    out = asyncio.run(run_once(30, keep_epoch=True))
    shrinks = out["failover"]["isr_shrinks"]
    assert (shrinks["partitions"], shrinks["errors"]) == (20, 0)
