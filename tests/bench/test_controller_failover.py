"""bench/controller_failover.py run small: every phase of both shapes reaches its outcome
(a failover, a broker's failure, a controller's failure) on the embedded store; figures are
printed by the script, never asserted."""

from __future__ import annotations

import asyncio

from controller_failover import one_round


def test_the_bench_runs_every_phase_of_both_shapes():
    cluster = asyncio.run(one_round("cluster", 30, None))
    # the queued marks come from the log records a child round collects (none here)
    assert isinstance(cluster.pop("broker_failure_queued"), list)
    assert set(cluster) == {
        "failover",
        "broker_failure",
        "controller_failure",
        "controlled_shutdown",
    }
    # the controller's own broker asked to stop: nothing is left led by it
    assert cluster["controlled_shutdown"]["remaining"] == 0
    single = asyncio.run(one_round("single", 20, None))
    assert set(single) == {"failover"}
    for figures in (*cluster.values(), *single.values()):
        assert figures["cpu_s"] >= 0 and figures["wall_s"] >= 0
