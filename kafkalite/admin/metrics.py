"""Broker metrics in the Prometheus text format (Kafka's BrokerTopicMetrics, RequestMetrics,
ReplicaManager and KafkaController gauges, under `kafkalite_` names).

Two kinds of numbers:

- **Counted on the way** by their producers into the counters of kafkalite/observability/stats.py,
  which the composition root makes and passes to them (this module only reads them):
  `RequestStats` (count, latency bucket, bytes in and out per API key, recorded by the
  dispatcher) and `TopicStats` (messages and bytes in per topic, ISR shrinks/expands, recorded
  by the replica manager).
- **Read at scrape time** by `BrokerCollector.collect()` from the broker's own state:
  under-replicated partitions, offline partitions, active controller, log size per partition,
  groups per state, open connections (and those refused by `max.connections.per.ip`, time the
  acceptors waited for `max.connections`), leader count, and the event-loop lag
  (kafkalite/observability/loop_lag.py: the worst stall of the last 10-20 s as a gauge, every
  probe's lag as a histogram).

Latency is measured from the moment the dispatcher takes the request frame to the moment its
response is encoded (queueing in the socket buffers is not included). Histogram buckets are
`LATENCY_BUCKETS` seconds.

Each broker has its own `CollectorRegistry` (several brokers may share a process in tests).

A scrape does no per-partition work beyond reading a number and writing a line: a log keeps
its size (`Log.size_bytes`: the closed segments' sum, kept until its segment list changes,
plus the active segment), and the per-partition family (`PartitionGaugeFamily`) writes each
sample from a line prefix made once per partition, in prometheus_client's text format. The
route awaits `render_async`, which makes and writes those rows in slices that yield to the
event loop (`LoopSlices`); the rest of a scrape is read in one go.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from kafkalite.observability import (
    LAG_BUCKETS,
    LATENCY_BUCKETS,
    RequestStats,
    TopicStats,
    loop_lag_monitor,
    stall_reporter,
)
from kafkalite.observability.stats import BYTES_IN, BYTES_OUT, COUNT, FIRST_BUCKET, LATENCY_SUM
from kafkalite.protocol.api import ApiKey
from kafkalite.storage.loop_slices import LoopSlices


def api_name(api_key: int) -> str:
    """Kafka's request name (`Produce`, `FetchConsumer`-style names are not split)."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        return f"Unknown{api_key}"
    return "".join(part.capitalize() for part in name.split("_"))


class BrokerCollector(Collector):
    """Reads a running broker's state at scrape time. `server` is the KafkaServer (duck-typed:
    `services`, `socket_server`, `controller`, `replica_manager`, `log_manager`,
    `metadata_cache`)."""

    def __init__(self, server: Any, request_stats: RequestStats, topic_stats: TopicStats) -> None:
        self.server = server
        self.request_stats = request_stats
        self.topic_stats = topic_stats
        self._log_size_prefixes: dict[tuple[str, int], tuple[dict[str, str], str | None]] = {}
        """Per partition: its labels and the start of its sample line, made once."""

    def collect(self) -> Iterable[Any]:
        yield from self._request_metrics()
        yield from self._topic_metrics()
        yield from self._replica_metrics()
        yield from self._controller_metrics()
        yield from self._log_metrics()
        yield from storage_fault_metrics(self.server)
        yield from self._group_metrics()
        yield from self._lag_metrics()
        yield from self._network_metrics()
        yield from self._loop_metrics()

    def _request_metrics(self) -> Iterable[Any]:
        requests = CounterMetricFamily(
            "kafkalite_requests", "Requests handled, per API", labels=["api"]
        )
        latency = HistogramMetricFamily(
            "kafkalite_request_latency_seconds",
            "Time from reading a request to its encoded response, per API",
            labels=["api"],
        )
        bytes_in = CounterMetricFamily(
            "kafkalite_request_bytes", "Request bytes received, per API", labels=["api"]
        )
        bytes_out = CounterMetricFamily(
            "kafkalite_response_bytes", "Response bytes sent, per API", labels=["api"]
        )
        total_in = total_out = 0.0
        for api_key, row in sorted(self.request_stats.rows.items()):
            name = api_name(api_key)
            requests.add_metric([name], row[COUNT])
            bytes_in.add_metric([name], row[BYTES_IN])
            bytes_out.add_metric([name], row[BYTES_OUT])
            total_in += row[BYTES_IN]
            total_out += row[BYTES_OUT]
            cumulative = 0.0
            buckets = []
            for i, bound in enumerate((*LATENCY_BUCKETS, float("inf"))):
                cumulative += row[FIRST_BUCKET + i]
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            latency.add_metric([name], buckets, row[LATENCY_SUM])
        yield requests
        yield latency
        yield bytes_in
        yield bytes_out
        yield CounterMetricFamily(
            "kafkalite_network_bytes_in", "Bytes received in requests, all APIs", value=total_in
        )
        yield CounterMetricFamily(
            "kafkalite_network_bytes_out", "Bytes sent in responses, all APIs", value=total_out
        )

    def _topic_metrics(self) -> Iterable[Any]:
        stats = self.topic_stats
        messages = CounterMetricFamily(
            "kafkalite_topic_messages_in",
            "Messages appended as leader, per topic",
            labels=["topic"],
        )
        size = CounterMetricFamily(
            "kafkalite_topic_bytes_in",
            "Record bytes appended as leader, per topic",
            labels=["topic"],
        )
        for topic, count in sorted(stats.messages_in.items()):
            messages.add_metric([topic], count)
            size.add_metric([topic], stats.bytes_in.get(topic, 0))
        yield messages
        yield size
        yield CounterMetricFamily(
            "kafkalite_isr_shrinks", "ISR shrinks committed by this leader", value=stats.isr_shrinks
        )
        yield CounterMetricFamily(
            "kafkalite_isr_expands", "ISR expands committed by this leader", value=stats.isr_expands
        )

    def _replica_metrics(self) -> Iterable[Any]:
        rm = self.server.replica_manager
        under = leaders = partitions = under_min_isr = 0
        if rm is not None:
            under = rm.under_replicated_partition_count
            under_min_isr = rm.under_min_isr_partition_count
            leaders = rm.leader_count
            partitions = len(rm.partitions)
        yield GaugeMetricFamily(
            "kafkalite_under_replicated_partitions",
            "Partitions led here whose ISR is smaller than their replica set",
            value=under,
        )
        yield GaugeMetricFamily(
            "kafkalite_under_min_isr_partitions",
            "Partitions led here whose ISR is below min.insync.replicas",
            value=under_min_isr,
        )
        yield GaugeMetricFamily(
            "kafkalite_leader_partitions", "Partitions this broker leads", value=leaders
        )
        yield GaugeMetricFamily(
            "kafkalite_partitions", "Partitions hosted on this broker", value=partitions
        )

    def _controller_metrics(self) -> Iterable[Any]:
        controller = self.server.controller
        active = 1 if controller is not None and getattr(controller, "is_active", False) else 0
        yield GaugeMetricFamily(
            "kafkalite_active_controller",
            "1 when this broker is the active controller",
            value=active,
        )
        yield GaugeMetricFamily(
            "kafkalite_offline_partitions",
            "Partitions without a live leader, as this broker's metadata cache knows them",
            value=offline_partition_count(self.server.metadata_cache),
        )

    def _log_metrics(self) -> Iterable[Any]:
        lm = self.server.log_manager
        offline_dirs = 0
        logs: list[Any] = []
        if lm is not None:
            offline_dirs = len(getattr(lm, "offline_dirs", ()))
            logs = lm.all_logs()
            if len(self._log_size_prefixes) > 2 * len(logs) + 100:
                self._log_size_prefixes.clear()  # forget deleted partitions now and then
        # The rows are made when the family is written (in slices by render_async, which
        # asks for the next family only after this one's text), so the total after them.
        family = PartitionGaugeFamily(
            "kafkalite_log_size_bytes",
            "Bytes on disk per partition log",
            pending=logs,
            row_of=lambda log_: self._log_size_row(lm, log_),
        )
        yield family
        yield GaugeMetricFamily(
            "kafkalite_log_size_bytes_total", "Bytes on disk, all logs", value=family.total()
        )
        yield GaugeMetricFamily(
            "kafkalite_offline_log_dirs",
            "Log directories taken offline after a failure",
            value=offline_dirs,
        )
        yield from log_dir_metrics(lm)

    def _log_size_row(self, lm: Any, log_: Any) -> tuple[dict[str, str], str | None, float] | None:
        """A log's sample: its labels, its line prefix (made once) and its size, a number the
        log keeps; None for a log removed since the scrape began or failing."""
        key = (log_.topic, log_.partition)
        if lm.get_log(*key) is not log_:
            return None
        try:
            value = log_.size_bytes
        except (OSError, ValueError):  # a log being deleted or in a failed dir
            return None
        made = self._log_size_prefixes.get(key)
        if made is None:
            made = self._log_size_prefixes[key] = _log_size_line_prefix(*key)
        return made[0], made[1], value

    def _group_metrics(self) -> Iterable[Any]:
        groups = GaugeMetricFamily(
            "kafkalite_groups", "Consumer groups coordinated here, per state", labels=["state"]
        )
        coordinator = self.server.services.group_coordinator
        if coordinator is not None:
            _, overviews = coordinator.list_groups()
            counts: dict[str, int] = {}
            for overview in overviews:
                counts[overview.state] = counts.get(overview.state, 0) + 1
            for state, count in sorted(counts.items()):
                groups.add_metric([state], count)
        yield groups

    def _lag_metrics(self) -> Iterable[Any]:
        """Committed offset and lag of every partition of every group coordinated here, where
        this broker leads the partition (its high watermark is known here without a request:
        a scrape sends nothing)."""
        yield from consumer_lag_metrics(
            self.server.services.group_coordinator, self.server.replica_manager
        )

    def _network_metrics(self) -> Iterable[Any]:
        socket_server = self.server.socket_server
        yield GaugeMetricFamily(
            "kafkalite_connections",
            "Open Kafka-protocol client connections",
            value=socket_server.connection_count if socket_server is not None else 0,
        )
        quotas = getattr(socket_server, "quotas", None)
        rejected = CounterMetricFamily(
            "kafkalite_connections_rejected",
            "Connections closed at once because a limit was reached (max.connections.per.ip)",
            labels=["reason"],
        )
        rejected.add_metric(
            ["max_connections_per_ip"], quotas.rejected_per_ip if quotas is not None else 0
        )
        yield rejected
        yield CounterMetricFamily(
            "kafkalite_acceptor_blocked_seconds",
            "Time the acceptors waited for a free slot under max.connections "
            "(Kafka's AcceptorBlockedPercent: its rate is the blocked fraction)",
            value=quotas.blocked_seconds() if quotas is not None else 0.0,
        )

    def _loop_metrics(self) -> Iterable[Any]:
        monitor = loop_lag_monitor()
        if monitor is None:
            return
        yield GaugeMetricFamily(
            "kafkalite_event_loop_lag_max_seconds",
            "Longest delay of the event loop's periodic probe over the last 10-20 s "
            "(how long a callback held the loop)",
            value=monitor.max_lag(),
        )
        lag = HistogramMetricFamily(
            "kafkalite_event_loop_lag_seconds",
            "Delay of each run of the event loop's periodic probe",
        )
        cumulative = 0
        buckets = []
        for bound, count in zip((*LAG_BUCKETS, float("inf")), monitor.bucket_counts, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        lag.add_metric([], buckets, monitor.sum)
        yield lag
        reporter = stall_reporter()
        if reporter is not None:
            stalls = CounterMetricFamily(
                "kafkalite_loop_stalls",
                "Event-loop stalls over loop.stall.report.ms, by what held the loop "
                "(gc, held: the loop's own code, gil: another thread, starved: no CPU)",
                labels=["cause"],
            )
            for cause, count in reporter.counts.items():
                stalls.add_metric([cause], count)
            yield stalls


def storage_fault_metrics(server: Any) -> Iterable[Any]:
    """Storage faults this broker knows of (see ``storage_status``): partitions offline
    because of storage, and what the segment verifier found."""
    from kafkalite.admin.storage_status import offline_storage_partitions
    from kafkalite.storage.verifier import FETCH_STATS

    yield GaugeMetricFamily(
        "kafkalite_offline_storage_partitions",
        "Hosted partitions offline because their log directory failed or vanished",
        value=len(offline_storage_partitions(server)),
    )
    verifier = getattr(getattr(server, "log_manager", None), "verifier", None)
    stats = getattr(verifier, "stats", None)
    if stats is not None:
        for name, value, text in (
            ("segments_verified", stats.segments_verified, "Closed segments verified"),
            ("bytes_verified", stats.bytes_verified, "Bytes of closed segments verified"),
            ("corrupt_batches", stats.corrupt_batches, "Corrupt batches found in segments"),
            ("index_findings", stats.index_findings, "Wrong index entries found"),
            ("indexes_rebuilt", stats.indexes_rebuilt, "Indexes rebuilt from their segment"),
        ):
            yield CounterMetricFamily(f"kafkalite_storage_verifier_{name}", text, value=value)
    yield CounterMetricFamily(
        "kafkalite_fetch_corrupt_batches_refused",
        "Fetches refused because a batch failed its CRC (every broker of this process)",
        value=FETCH_STATS.corrupt_batches_refused,
    )


def consumer_lag_metrics(coordinator: Any, replica_manager: Any) -> Iterable[Any]:
    """kafka_exporter's consumer-group series under kafkalite_ names: lag (high watermark -
    committed offset) and committed offset per group and partition, and members per group."""
    lag = GaugeMetricFamily(
        "kafkalite_consumergroup_lag",
        "High watermark minus committed offset, per group and partition (partitions led here)",
        labels=["group", "topic", "partition"],
    )
    committed = GaugeMetricFamily(
        "kafkalite_consumergroup_current_offset",
        "Committed offset per group and partition",
        labels=["group", "topic", "partition"],
    )
    members = GaugeMetricFamily(
        "kafkalite_consumergroup_members",
        "Members per group coordinated here",
        labels=["group"],
    )
    if coordinator is not None:

        def high_watermark(tp: Any) -> int | None:
            status = replica_manager.partition_status(tp) if replica_manager is not None else None
            return status.high_watermark if status is not None and status.is_leader else None

        _, overviews = coordinator.list_groups()
        for overview in sorted(overviews, key=lambda o: o.group_id):
            group = overview.group_id
            _, summary = coordinator.describe_group(group)
            members.add_metric([group], len(getattr(summary, "members", ()) or ()))
            _, lags = coordinator.consumer_lag(group, high_watermark)
            for tp, (offset, behind) in sorted(lags.items()):
                labels = [group, tp.topic, str(tp.partition)]
                committed.add_metric(labels, offset)
                if behind is not None:
                    lag.add_metric(labels, behind)
    yield lag
    yield committed
    yield members


def log_dir_metrics(log_manager: Any) -> Iterable[Any]:
    """Kafka's LogManager LogDirectoryOffline per directory (1 offline, 0 online)."""
    offline = GaugeMetricFamily(
        "kafkalite_log_dir_offline",
        "1 when the log directory is offline after a failure, else 0 (Kafka's LogDirectoryOffline)",
        labels=["log_dir"],
    )
    if log_manager is not None:
        failed = set(getattr(log_manager, "offline_dirs", ()))
        for path in getattr(log_manager, "log_dirs", ()):
            offline.add_metric([path], 1 if path in failed else 0)
    yield offline


def offline_partition_count(metadata_cache: Any) -> int:
    """Partitions whose leader is -1 or not a live broker (Kafka's OfflinePartitionsCount)."""
    if metadata_cache is None:
        return 0
    alive = {b.id for b in metadata_cache.get_alive_brokers()}
    return sum(
        1
        for states in metadata_cache.partition_states.values()
        for info in states.values()
        if info.leader < 0 or info.leader not in alive
    )


def new_registry(
    server: Any, request_stats: RequestStats, topic_stats: TopicStats
) -> CollectorRegistry:
    """A registry with the broker collector and the process collector (CPU, memory, fds)."""
    from prometheus_client import PROCESS_COLLECTOR  # noqa: F401 - the default one is global
    from prometheus_client.process_collector import ProcessCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(server, request_stats, topic_stats))
    ProcessCollector(registry=registry)
    return registry


_PLAIN_LABEL_VALUE = re.compile(r"[A-Za-z0-9._-]*")
"""Label values that need no escaping in the text format (every legal topic name)."""


def _log_size_line_prefix(topic: str, partition: int) -> tuple[dict[str, str], str | None]:
    """The labels of a partition's sample and, when its topic needs no escaping, the start of
    its line as prometheus_client writes it (labels sorted by name); None otherwise (that
    sample is then rendered by prometheus_client)."""
    labels = {"topic": topic, "partition": str(partition)}
    if _PLAIN_LABEL_VALUE.fullmatch(topic) is None:
        return labels, None
    return labels, f'kafkalite_log_size_bytes{{partition="{partition}",topic="{topic}"}} '


class PartitionGaugeFamily(Metric):
    """A gauge with one sample per partition, made cheaply: rows of (labels, line prefix,
    value), given or made from ``pending`` items by ``row_of`` (None skips an item) when first
    needed, and ``render`` writes each sample as its prefix and value instead of formatting
    its labels again on every scrape (at 10,000 partitions prometheus_client's per-sample
    formatting was most of a scrape); ``render_async`` makes and writes them in slices. The
    text is the same as prometheus_client's; ``samples`` are made on demand for any other
    reader."""

    def __init__(
        self,
        name: str,
        documentation: str,
        rows: list[tuple[dict[str, str], str | None, float]] | None = None,
        *,
        pending: list[Any] | None = None,
        row_of: Callable[[Any], tuple[dict[str, str], str | None, float] | None] | None = None,
    ) -> None:
        super().__init__(name, documentation, "gauge")
        self._rows = list(rows or ())  # after Metric's own (empty) samples
        self._pending = list(pending or ())
        self._row_of = row_of

    def _take(self, items: list[Any]) -> list[tuple[dict[str, str], str | None, float]]:
        row_of = self._row_of
        assert row_of is not None
        made = [row for row in map(row_of, items) if row is not None]
        self._rows += made
        return made

    @property
    def rows(self) -> list[tuple[dict[str, str], str | None, float]]:
        if self._pending:
            pending, self._pending = self._pending, []
            self._take(pending)
        return self._rows

    def total(self) -> float:
        """The sum of the values (the rows made now if nothing wrote them yet)."""
        return sum(value for _, _, value in self.rows)

    @property  # type: ignore[override]
    def samples(self) -> list[Sample]:
        return [Sample(self.name, labels, value, None, None) for labels, _, value in self.rows]

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        # Metric.__init__ sets an empty list; a filtered copy sets the samples it keeps.
        self._pending = []
        self._rows = [(s.labels, None, s.value) for s in value]

    def text(self, visible: Callable[[Mapping[str, str]], bool] | None) -> bytes:
        """The family in the Prometheus text format, only the samples ``visible`` accepts."""
        lines = [self._head()]
        slow: list[Sample] = []
        self._write(self.rows, visible, lines, slow)
        return self._finish(lines, slow)

    async def text_async(self, visible: Callable[[Mapping[str, str]], bool] | None) -> bytes:
        """``text``, the rows made and written in slices that yield to the event loop."""
        lines = [self._head()]
        slow: list[Sample] = []
        slices = LoopSlices()
        rows = list(self._rows)  # given ones
        pending, self._pending = self._pending, []
        for start in range(0, len(rows), _ROWS_PER_CHECK):
            self._write(rows[start : start + _ROWS_PER_CHECK], visible, lines, slow)
            if slices.due():
                await slices.pause()
        for start in range(0, len(pending), _ROWS_PER_CHECK):
            made = self._take(pending[start : start + _ROWS_PER_CHECK])
            self._write(made, visible, lines, slow)
            if slices.due():
                await slices.pause()
        return self._finish(lines, slow)

    def _head(self) -> bytes:
        return f"# HELP {self.name} {self.documentation}\n# TYPE {self.name} gauge\n".encode()

    def _write(
        self,
        rows: list[tuple[dict[str, str], str | None, float]],
        visible: Callable[[Mapping[str, str]], bool] | None,
        lines: list[bytes],
        slow: list[Sample],
    ) -> None:
        to_go = floatToGoString
        for labels, prefix, value in rows:
            if visible is not None and not visible(labels):
                continue
            if prefix is None:
                slow.append(Sample(self.name, labels, value, None, None))
            else:
                lines.append(f"{prefix}{to_go(value)}\n".encode())

    def _finish(self, lines: list[bytes], slow: list[Sample]) -> bytes:
        if len(lines) == 1 and not slow and self._rows:
            return b""  # every sample hidden: no family, as for the other families
        if slow:
            family = Metric(self.name, self.documentation, "gauge")
            family.samples = slow
            text = generate_latest(_OneFamily(family))  # type: ignore[arg-type]
            lines.append(text[text.index(b"\n", text.index(b"# TYPE")) + 1 :])
        return b"".join(lines)


_ROWS_PER_CHECK = 250
"""Samples written between two looks at the slice's clock (about half a millisecond)."""


class _OneFamily:
    def __init__(self, family: Any) -> None:
        self.family = family

    def collect(self) -> Iterable[Any]:
        yield self.family


def render(
    registry: CollectorRegistry, visible: Callable[[Mapping[str, str]], bool] | None = None
) -> bytes:
    """The Prometheus text of `registry`; with `visible`, only the samples whose labels it
    accepts (admin/access.py: the topics and groups the principal may see). The text of each
    family is prometheus_client's (``generate_latest``), but for the per-partition families
    (``PartitionGaugeFamily``), which write their own lines in the same format."""
    parts: list[bytes] = []
    for family in registry.collect():
        if isinstance(family, PartitionGaugeFamily):
            parts.append(family.text(visible))
            continue
        parts.append(_family_text(family, visible))
    return b"".join(parts)


async def render_async(
    registry: CollectorRegistry, visible: Callable[[Mapping[str, str]], bool] | None = None
) -> bytes:
    """``render`` for the event loop: the same text, with the per-partition families written
    in slices that yield to the loop (the collection itself reads numbers the broker keeps,
    in one go)."""
    parts: list[bytes] = []
    for family in registry.collect():
        if isinstance(family, PartitionGaugeFamily):
            parts.append(await family.text_async(visible))
            continue
        parts.append(_family_text(family, visible))
    return b"".join(parts)


def _family_text(family: Any, visible: Callable[[Mapping[str, str]], bool] | None) -> bytes:
    if visible is not None:
        kept = [s for s in family.samples if visible(s.labels)]
        if not kept and family.samples:
            return b""
        family = copy.copy(family)
        family.samples = kept
    return generate_latest(_OneFamily(family))  # type: ignore[arg-type]


Clock = Callable[[], float]
