"""bench/scale_connections.py, small: it runs against a real broker, reports each figure next
to its target, reads the loop lag from /metrics, and checks the real client meanwhile."""

from __future__ import annotations

import json

import scale_connections


def test_a_small_run_reports_every_figure_with_its_target():
    lines = []
    result = scale_connections.run(connections=200, records=50, rounds=2, report=lines.append)
    assert result["connections"] == 200 and len(result["rounds"]) == 2
    assert result["kib_per_connection"]["target"] == "<= 16 KiB each"
    assert isinstance(result["kib_per_connection"]["met"], bool)
    assert result["memory_returned"]["target"].startswith("memory returned")
    assert result["client_meanwhile"]["met"] is True
    for round_ in result["rounds"]:
        assert round_["client_meanwhile"] == {"produced": 50, "consumed": 50, "ok": True}
        assert round_["rss_kib_with"]["VmRSS"] > 0 and round_["rss_kib_after"]["VmRSS"] > 0
        # the broker's loop-lag probes ran and were read from /metrics in every phase
        assert all(phase["probes"] > 0 for phase in round_["event_loop_lag_probes"].values())
        assert round_["event_loop_lag_max_seconds_last_10_20s"] >= 0
    assert any("after closing" in line for line in lines)
    rss = result["rss_kib"]
    assert rss["peak"] == result["rounds"][0]["rss_kib_with"]["VmRSS"]
    assert rss["before"] > 0 and rss["after_close"] > 0


def test_a_census_run_writes_what_the_burst_left_alive(tmp_path):
    out = tmp_path / "census.json"
    lines = []
    scale_connections.run(connections=50, records=10, rounds=1, report=lines.append, census=out)
    report = json.loads(out.read_text())
    # CPython's arena counts were read at both moments (with tracemalloc off, so they exist)
    for moment in ("arenas_before", "arenas_after"):
        assert report[moment]["arenas"] > 0 and report[moment]["free_pools"] >= 0
    # something the broker made after tracing began is still alive (its periodic timers, the
    # pending accept), and it is named by a place in the broker's code
    alive = report["objects_alive"]
    assert alive["count"] > 0 and report["traced_blocks_alive"]["count"] > 0
    assert any("/" in place["where"] for place in alive["by_place"])
    assert alive["by_mib_of_address"]
    # the hook's own work is not counted
    assert not any("sitecustomize" in p["where"] for p in alive["by_place"])
    assert any(str(out) in line for line in lines)


def test_a_pools_run_reads_cpythons_pools_at_three_moments():
    lines = []
    result = scale_connections.run(
        connections=50, records=10, rounds=1, report=lines.append, pools=True
    )
    seen = result["pools_census"]
    assert set(seen) == {"before", "with", "after"}
    for census in seen.values():
        # the broker's own extension answered (a tree without it says "available": false)
        assert census["arenas"] > 0 and census["page_size"] > 0
        assert census["resident_pages"] >= census["empty_pool_pages"] + census["used_pool_pages"]
        assert census["used_pools"] > 0
    assert any("CPython's pools" in line for line in lines)
