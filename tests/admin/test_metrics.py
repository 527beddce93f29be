"""The Prometheus exposition (kafkalite/admin/metrics.py) of the broker's counters
(kafkalite/observability/stats.py) and state, with fake broker parts."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from kafkalite.admin.metrics import (
    api_name,
    new_registry,
    offline_partition_count,
    render,
)
from kafkalite.observability import LATENCY_BUCKETS, RequestStats, TopicStats, response_size
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.types import TopicPartition


def samples_of(registry) -> dict:
    out = {}
    for family in text_string_to_metric_families(render(registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_api_names_are_kafkas() -> None:
    assert api_name(ApiKey.PRODUCE) == "Produce"
    assert api_name(ApiKey.LEADER_AND_ISR) == "LeaderAndIsr"
    assert api_name(ApiKey.API_VERSIONS) == "ApiVersions"
    assert api_name(9999) == "Unknown9999"


def test_response_size() -> None:
    assert response_size(b"abcd") == 4
    assert response_size([b"ab", memoryview(b"cde")]) == 5
    assert response_size(object()) == 0  # NO_RESPONSE and other non-buffers


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=20, allow_nan=False), min_size=1, max_size=50))
def test_histogram_is_cumulative_and_counts_every_request(latencies) -> None:
    stats = RequestStats()
    for seconds in latencies:
        stats.record(ApiKey.FETCH, seconds, 10, 20)
    server = fake_server()
    samples = samples_of(new_registry(server, stats, TopicStats()))
    api = (("api", "Fetch"),)
    assert samples[("kafkalite_requests_total", api)] == len(latencies)
    assert samples[("kafkalite_request_bytes_total", api)] == 10 * len(latencies)
    assert samples[("kafkalite_response_bytes_total", api)] == 20 * len(latencies)
    assert abs(samples[("kafkalite_request_latency_seconds_sum", api)] - sum(latencies)) < 1e-6
    previous = 0
    for bound in LATENCY_BUCKETS:
        count = samples[
            ("kafkalite_request_latency_seconds_bucket", (("api", "Fetch"), ("le", str(bound))))
        ]
        assert count == sum(1 for x in latencies if x <= bound)
        assert count >= previous
        previous = count
    assert samples[
        ("kafkalite_request_latency_seconds_bucket", (("api", "Fetch"), ("le", "+Inf")))
    ] == len(latencies)


@dataclass
class FakeReplicaManager:
    partitions: dict = field(default_factory=dict)
    under_replicated_partition_count: int = 2
    under_min_isr_partition_count: int = 1
    leader_count: int = 3


def fake_server(rm=None, **kw):
    cache = SimpleNamespace(
        get_alive_brokers=lambda: [SimpleNamespace(id=0), SimpleNamespace(id=1)],
        partition_states={
            "a": {0: SimpleNamespace(leader=0), 1: SimpleNamespace(leader=-1)},
            "b": {0: SimpleNamespace(leader=5)},
        },
    )
    return SimpleNamespace(
        replica_manager=rm,
        controller=SimpleNamespace(is_active=True),
        metadata_cache=cache,
        log_manager=None,
        socket_server=SimpleNamespace(connection_count=4),
        services=SimpleNamespace(group_coordinator=None),
        **kw,
    )


def test_topic_counters_and_broker_state_are_exported() -> None:
    stats = TopicStats()
    stats.record_append("t", 5, 100)
    stats.record_append("u", 1, 10)
    stats.record_append("t", 2, 30)
    stats.record_isr_change(2, 1)
    stats.record_isr_change(1, 3)
    stats.record_isr_change(3, 3)  # the same size: neither

    samples = samples_of(new_registry(fake_server(FakeReplicaManager()), RequestStats(), stats))
    assert samples[("kafkalite_topic_messages_in_total", (("topic", "t"),))] == 7
    assert samples[("kafkalite_topic_bytes_in_total", (("topic", "t"),))] == 130
    assert samples[("kafkalite_topic_messages_in_total", (("topic", "u"),))] == 1
    assert samples[("kafkalite_isr_shrinks_total", ())] == 1
    assert samples[("kafkalite_isr_expands_total", ())] == 1
    assert samples[("kafkalite_under_replicated_partitions", ())] == 2
    assert samples[("kafkalite_active_controller", ())] == 1
    assert samples[("kafkalite_offline_partitions", ())] == 2
    assert samples[("kafkalite_connections", ())] == 4


def test_offline_partitions_without_metadata() -> None:
    assert offline_partition_count(None) == 0


def test_storage_faults_are_counted() -> None:
    from prometheus_client import CollectorRegistry

    from kafkalite.admin.metrics import storage_fault_metrics
    from kafkalite.storage.verifier import VerifierStats

    stats = VerifierStats(
        segments_verified=7, bytes_verified=7000, corrupt_batches=2, index_findings=3
    )
    stats.indexes_rebuilt = 1
    server = SimpleNamespace(
        broker_id=0,
        replica_manager=SimpleNamespace(offline_partitions={TopicPartition("t", 1)}),
        log_manager=SimpleNamespace(
            offline_dirs={"/d"},
            offline_log_keys=lambda: [("t", 1), ("u", 0)],
            verifier=SimpleNamespace(stats=stats),
        ),
    )

    class Collector:
        def collect(self):
            return storage_fault_metrics(server)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    samples = samples_of(registry)
    assert samples[("kafkalite_offline_storage_partitions", ())] == 2
    assert samples[("kafkalite_storage_verifier_segments_verified_total", ())] == 7
    assert samples[("kafkalite_storage_verifier_corrupt_batches_total", ())] == 2
    assert samples[("kafkalite_storage_verifier_index_findings_total", ())] == 3
    assert samples[("kafkalite_storage_verifier_indexes_rebuilt_total", ())] == 1
    assert ("kafkalite_fetch_corrupt_batches_refused_total", ()) in samples


def test_event_loop_lag_is_exported_once_monitored() -> None:
    from kafkalite.observability import start_loop_lag_monitor

    async def scrape(start: bool) -> dict:
        if start:
            monitor = start_loop_lag_monitor()
            monitor.record(0.2, monitor._window_start)  # as a probe 200 ms late would
            monitor.stop()
        return samples_of(new_registry(fake_server(), RequestStats(), TopicStats()))

    unmonitored = asyncio.run(scrape(False))
    assert ("kafkalite_event_loop_lag_max_seconds", ()) not in unmonitored
    samples = asyncio.run(scrape(True))
    assert samples[("kafkalite_event_loop_lag_max_seconds", ())] == 0.2
    assert samples[("kafkalite_event_loop_lag_seconds_count", ())] == 1
    assert samples[("kafkalite_event_loop_lag_seconds_bucket", (("le", "0.1"),))] == 0
    assert samples[("kafkalite_event_loop_lag_seconds_bucket", (("le", "0.25"),))] == 1


def test_connection_limit_counters_are_exported() -> None:
    from kafkalite.network.quotas import ConnectionQuotas

    quotas = ConnectionQuotas(max_connections_per_ip=1)
    assert quotas.inc("PLAINTEXT", "10.0.0.1")
    assert not quotas.inc("PLAINTEXT", "10.0.0.1")  # rejected: past the per-ip limit
    quotas.dec("PLAINTEXT", "10.0.0.1")
    quotas._blocked_total = 1.5  # as after acceptors waited 1.5 s at max.connections
    server = fake_server()
    server.socket_server = SimpleNamespace(connection_count=1, quotas=quotas)
    samples = samples_of(new_registry(server, RequestStats(), TopicStats()))
    key = ("kafkalite_connections_rejected_total", (("reason", "max_connections_per_ip"),))
    assert samples[key] == 1
    assert samples[("kafkalite_acceptor_blocked_seconds_total", ())] == 1.5
