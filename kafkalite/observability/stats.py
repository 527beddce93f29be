"""Counters filled on the request path (Kafka's RequestMetrics and BrokerTopicStats).

The composition root (kafkalite/server/) makes one `RequestStats` and one `TopicStats` per
broker and passes them to their producers: the dispatcher records every request, the replica
manager every append as leader and every ISR change it commits. Readers (the admin API's
/metrics and /metrics/history, kafkalite/admin/metrics.py) only read them. Nothing here does
per-record work: a few list or dict increments per request or per partition appended.

Not thread-safe: each broker's counters are touched on its own event loop only.
"""

from __future__ import annotations

import bisect
import time
from typing import Any

LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""Request latency histogram bounds, in seconds."""

# Layout of one API key's row in RequestStats.rows.
COUNT, LATENCY_SUM, BYTES_IN, BYTES_OUT, FIRST_BUCKET = 0, 1, 2, 3, 4


class RequestStats:
    """Per-API request counters, filled by the dispatcher.

    `rows[api_key]` = [count, latency seconds sum, bytes in, bytes out, bucket counts...] with
    one non-cumulative count per `LATENCY_BUCKETS` entry plus one for +Inf (see COUNT,
    LATENCY_SUM, BYTES_IN, BYTES_OUT, FIRST_BUCKET). Latency is measured from the moment the
    dispatcher takes the request frame to the moment its response is encoded.
    """

    __slots__ = ("rows", "started")

    def __init__(self) -> None:
        self.rows: dict[int, list[float]] = {}
        self.started = time.time()

    def record(self, api_key: int, seconds: float, bytes_in: int, bytes_out: int) -> None:
        row = self.rows.get(api_key)
        if row is None:
            row = self.rows[api_key] = [0.0] * (FIRST_BUCKET + len(LATENCY_BUCKETS) + 1)
        row[COUNT] += 1
        row[LATENCY_SUM] += seconds
        row[BYTES_IN] += bytes_in
        row[BYTES_OUT] += bytes_out
        row[FIRST_BUCKET + bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1

    def count(self, api_key: int) -> int:
        row = self.rows.get(api_key)
        return int(row[COUNT]) if row else 0


def response_size(result: Any) -> int:
    """Bytes of an encoded response: one buffer, or a list of buffers (Fetch's zero-copy parts)."""
    if isinstance(result, list):
        return sum(len(part) for part in result)
    try:
        return len(result)
    except TypeError:
        return 0


class TopicStats:
    """Messages and bytes appended as leader, per topic (Kafka's BrokerTopicStats
    MessagesInPerSec/BytesInPerSec), and ISR changes committed by this broker as leader
    (IsrShrinksPerSec/IsrExpandsPerSec). Filled by the replica manager."""

    __slots__ = ("messages_in", "bytes_in", "isr_shrinks", "isr_expands")

    def __init__(self) -> None:
        self.messages_in: dict[str, int] = {}
        self.bytes_in: dict[str, int] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0

    def record_append(self, topic: str, messages: int, size: int) -> None:
        self.messages_in[topic] = self.messages_in.get(topic, 0) + messages
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + size

    def record_isr_change(self, before: int, after: int) -> None:
        """A committed ISR change from `before` to `after` replicas."""
        if after < before:
            self.isr_shrinks += 1
        elif after > before:
            self.isr_expands += 1
