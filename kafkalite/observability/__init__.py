"""What the broker measures and how it logs (layer 0: the standard library and structlog only).

- `loop_lag`: the event-loop lag monitor (one per loop);
- `loop_stall`: the watchdog that names what held a loop while it stalls (one per loop);
- `gc_freeze`: the process's garbage-collector freezer (installed by ``kafkalite serve``);
- `stats`: the request and topic counters (Kafka's RequestMetrics and BrokerTopicStats), made
  by the composition root and passed to the dispatcher and the replica manager, which record
  into them; the admin API only reads them (its /metrics exposition is kafkalite/admin/metrics.py);
- `logs`: the logging set-up and the log-line rate limiter.

Nothing here patches another component: producers are handed their counters.
"""

from kafkalite.observability.gc_freeze import (
    GcFreezer,
    gc_freezer,
    install_gc_freezer,
    uninstall_gc_freezer,
)
from kafkalite.observability.logs import (
    LogRateLimiter,
    configure_logging,
    loop_exception_handler,
)
from kafkalite.observability.loop_lag import (
    LAG_BUCKETS,
    LAG_PROBE_INTERVAL_S,
    LAG_WINDOW_S,
    LoopLagMonitor,
    event_loop_lag_max,
    loop_lag_monitor,
    start_loop_lag_monitor,
)
from kafkalite.observability.loop_stall import (
    StallReporter,
    stall_reporter,
    start_stall_reporter,
)
from kafkalite.observability.stats import (
    LATENCY_BUCKETS,
    RequestStats,
    TopicStats,
    response_size,
)

__all__ = [
    "GcFreezer",
    "LAG_BUCKETS",
    "LAG_PROBE_INTERVAL_S",
    "LAG_WINDOW_S",
    "LATENCY_BUCKETS",
    "LogRateLimiter",
    "LoopLagMonitor",
    "RequestStats",
    "StallReporter",
    "TopicStats",
    "configure_logging",
    "event_loop_lag_max",
    "gc_freezer",
    "install_gc_freezer",
    "loop_exception_handler",
    "loop_lag_monitor",
    "response_size",
    "stall_reporter",
    "start_loop_lag_monitor",
    "start_stall_reporter",
    "uninstall_gc_freezer",
]
