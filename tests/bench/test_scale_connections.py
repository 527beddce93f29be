"""bench/scale_connections.py, small: it runs against a real broker, reports each figure next
to its target, reads the loop lag from /metrics, and checks the real client meanwhile."""

from __future__ import annotations

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
