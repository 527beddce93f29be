"""/metrics' per-partition log sizes: the scraped `kafkalite_log_size_bytes` of every partition
(and `kafkalite_log_size_bytes_total`) equal the bytes of its `.log` files on disk after appends,
rolls, retention deletions and truncations; the text of the family is prometheus_client's
(the same lines as its own rendering of the same samples), and a principal sees only the
partitions of the topics it may see.

The admin API's collector and renderer on a real LogManager (no broker process)."""

from __future__ import annotations

import dataclasses
import os

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

import kafkalite.admin.metrics as metrics_module
from kafkalite.admin.metrics import new_registry, render, render_async
from kafkalite.observability import RequestStats, TopicStats
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log_manager import LogManager
from kafkalite.storage.loop_slices import LoopSlices
from tests.loop_turns import LoopTurns
from tests.storage.conftest import make_batch

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=200)


class Server:
    """What the collector reads of a KafkaServer, with only a LogManager."""

    def __init__(self, log_manager: LogManager) -> None:
        self.log_manager = log_manager
        self.replica_manager = None
        self.metadata_cache = None
        self.controller = None
        self.socket_server = None
        self.broker_id = 1
        self.services = type("Services", (), {"group_coordinator": None, "extra": {}})()


def scraped(registry, visible=None) -> tuple[dict[tuple[str, str], float], float]:
    sizes: dict[tuple[str, str], float] = {}
    total = None
    for family in text_string_to_metric_families(render(registry, visible).decode()):
        for sample in family.samples:
            if sample.name == "kafkalite_log_size_bytes":
                key = (sample.labels["topic"], sample.labels["partition"])
                assert key not in sizes
                sizes[key] = sample.value
            elif sample.name == "kafkalite_log_size_bytes_total":
                total = sample.value
    assert total is not None
    return sizes, total


def on_disk(lm: LogManager) -> dict[tuple[str, str], float]:
    return {
        (log.topic, str(log.partition)): float(
            sum(e.stat().st_size for e in os.scandir(log.dir) if e.name.endswith(".log"))
        )
        for log in lm.all_logs()
    }


def check(lm: LogManager, registry) -> None:
    sizes, total = scraped(registry)
    expected = on_disk(lm)
    assert sizes == expected
    assert total == sum(expected.values())


def test_scraped_log_sizes_are_the_bytes_on_disk(tmp_path):
    lm = LogManager([str(tmp_path)], CONFIG)
    lm.startup()
    try:
        registry = new_registry(Server(lm), RequestStats(), TopicStats())
        logs = [
            lm.get_or_create_log(topic, p, CONFIG, True)
            for topic in ("a", "b.c-d_e")
            for p in range(3)
        ]
        check(lm, registry)  # empty logs
        for round_ in range(6):  # appends that roll segments (1 KiB each)
            for i, log in enumerate(logs):
                log.append_as_leader(make_batch(1 + i % 3, 100 + 40 * round_), 0)
                log.high_watermark = log.log_end_offset
            check(lm, registry)
        assert all(log.number_of_segments > 1 for log in logs)
        logs[0].roll()
        check(lm, registry)
        # retention by size deletes whole segments
        logs[1].update_config(dataclasses.replace(CONFIG, retention_bytes=600))
        assert logs[1].delete_old_segments() > 0
        check(lm, registry)
        # retention by log start offset (DeleteRecords)
        logs[2].maybe_increment_log_start_offset(logs[2].log_end_offset - 1)
        assert logs[2].delete_old_segments() > 0
        check(lm, registry)
        # truncation into an earlier segment (a follower's), and a full one
        logs[3].truncate_to(2)
        check(lm, registry)
        logs[4].truncate_fully_and_start_at(logs[4].log_end_offset + 10)
        check(lm, registry)
        logs[5].append_as_leader(make_batch(2, 50), 0)
        check(lm, registry)
        # a deleted partition disappears from the scrape
        lm.delete_log("a", 1)
        sizes, _ = scraped(registry)
        assert ("a", "1") not in sizes
        check(lm, registry)
    finally:
        lm.shutdown()


def test_the_family_text_is_prometheus_clients_and_filtered_per_topic(tmp_path):
    lm = LogManager([str(tmp_path)], CONFIG)
    lm.startup()
    try:
        for topic in ("seen", "hidden"):
            for p in range(2):
                lm.get_or_create_log(topic, p, CONFIG, True).append_as_leader(
                    make_batch(1, 10 + p), 0
                )
        registry = new_registry(Server(lm), RequestStats(), TopicStats())
        family = GaugeMetricFamily(
            "kafkalite_log_size_bytes",
            "Bytes on disk per partition log",
            labels=["topic", "partition"],
        )
        for log in lm.all_logs():
            family.add_metric([log.topic, str(log.partition)], log.size_bytes)

        class One:
            def collect(self):
                yield family

        expected = generate_latest(One())  # type: ignore[arg-type]
        assert expected in render(registry)
        text = render(registry, lambda labels: labels.get("topic") != "hidden").decode()
        assert 'topic="seen"' in text and 'topic="hidden"' not in text
        assert scraped(registry, lambda labels: labels.get("topic") != "hidden")[0] == {
            k: v for k, v in on_disk(lm).items() if k[0] == "seen"
        }
        nothing = render(registry, lambda labels: labels.get("topic") is None).decode()
        assert "kafkalite_log_size_bytes{" not in nothing
        assert "kafkalite_log_size_bytes_total" in nothing
        # other readers of the registry still get the samples
        assert registry.get_sample_value(
            "kafkalite_log_size_bytes", {"topic": "seen", "partition": "1"}
        ) == float(lm.get_log("seen", 1).size_bytes)
    finally:
        lm.shutdown()


async def test_the_route_writes_the_same_text_in_slices(tmp_path, monkeypatch):
    """What the /metrics route awaits: the same text as ``render``, the per-partition lines
    written in slices (a zero budget here: a yield after every look at the clock)."""
    monkeypatch.setattr(metrics_module, "LoopSlices", lambda: LoopSlices(1, 0.0))
    lm = LogManager([str(tmp_path)], CONFIG)
    lm.startup()
    try:
        for p in range(1200):
            lm.get_or_create_log("many", p, CONFIG, True)
        registry = new_registry(Server(lm), RequestStats(), TopicStats())
        with LoopTurns() as ticker:
            text = await render_async(registry, lambda labels: labels.get("partition") != "7")
        assert ticker.turns >= 4  # 1,200 lines, a look at the clock every 250
        expected = render(registry, lambda labels: labels.get("partition") != "7")
        strip = lambda t: [line for line in t.decode().splitlines() if "process_" not in line]  # noqa: E731
        assert strip(text) == strip(expected)
        assert (
            'partition="7"' not in text.decode() and 'partition="8",topic="many"' in text.decode()
        )
    finally:
        lm.shutdown()
