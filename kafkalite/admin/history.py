"""A few minutes of rates kept in memory for GET /metrics/history and the console's graphs.

Every `INTERVAL_S` the sampler copies the broker's cumulative counters (RequestStats and
TopicStats, kafkalite/observability/stats.py: nothing new is counted on the request path) into
a ring of `SAMPLES` entries; an answer turns consecutive samples into per-second rates, the
last one ending now.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkalite.observability.stats import BYTES_IN, BYTES_OUT, COUNT
from kafkalite.protocol.api import ApiKey

INTERVAL_S = 5.0
SAMPLES = 72
"""6 minutes of history at one sample every 5 s."""
BUSIEST_TOPICS = 20
"""Topics in an answer that names none: the busiest over the window."""


@dataclass(frozen=True, slots=True)
class Sample:
    time: float
    requests: float
    bytes_in: float
    bytes_out: float
    produce_requests: float
    fetch_bytes_out: float
    topic_messages: dict[str, int] = field(default_factory=dict)
    topic_bytes: dict[str, int] = field(default_factory=dict)


class History:
    def __init__(self, request_stats: Any, topic_stats: Any) -> None:
        self.request_stats = request_stats
        self.topic_stats = topic_stats
        self.samples: deque[Sample] = deque(maxlen=SAMPLES)
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> Sample:
        rows = self.request_stats.rows
        produce = rows.get(int(ApiKey.PRODUCE))
        fetch = rows.get(int(ApiKey.FETCH))
        return Sample(
            time=time.time(),
            requests=sum(r[COUNT] for r in rows.values()),
            bytes_in=sum(r[BYTES_IN] for r in rows.values()),
            bytes_out=sum(r[BYTES_OUT] for r in rows.values()),
            produce_requests=produce[COUNT] if produce else 0.0,
            fetch_bytes_out=fetch[BYTES_OUT] if fetch else 0.0,
            topic_messages=dict(self.topic_stats.messages_in),
            topic_bytes=dict(self.topic_stats.bytes_in),
        )

    async def start(self, app: Any = None) -> None:
        self.samples.append(self.sample())
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, app: Any = None) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(INTERVAL_S)  # the sampling period, not a synchronisation
            self.samples.append(self.sample())

    def answer(
        self, topic: str | None = None, visible: Callable[[str], bool] | None = None
    ) -> dict[str, Any]:
        """The rates; topics `visible` refuses are left out, and one asked for by name is
        answered as an unknown topic is (zero rates), so the answer tells nothing about it."""
        shown = visible or (lambda name: True)
        points = [*self.samples, self.sample()]
        broker = []
        topic_series: dict[str, list[dict[str, float]]] = {}
        totals: dict[str, int] = {}
        for before, after in zip(points, points[1:], strict=False):
            span = after.time - before.time
            if span <= 0:
                continue

            def rate(a: float, b: float, span: float = span) -> float:
                return round(max(b - a, 0) / span, 3)

            broker.append(
                {
                    "time": round(after.time, 3),
                    "requests_per_sec": rate(before.requests, after.requests),
                    "bytes_in_per_sec": rate(before.bytes_in, after.bytes_in),
                    "bytes_out_per_sec": rate(before.bytes_out, after.bytes_out),
                    "produce_requests_per_sec": rate(
                        before.produce_requests, after.produce_requests
                    ),
                    "fetch_bytes_per_sec": rate(before.fetch_bytes_out, after.fetch_bytes_out),
                    "messages_in_per_sec": rate(
                        sum(before.topic_messages.values()), sum(after.topic_messages.values())
                    ),
                }
            )
            names = [topic] if topic is not None else after.topic_messages
            for name in names:
                if shown(name):
                    m0, m1 = before.topic_messages.get(name, 0), after.topic_messages.get(name, 0)
                    b0, b1 = before.topic_bytes.get(name, 0), after.topic_bytes.get(name, 0)
                elif topic is None:
                    continue
                else:
                    m0 = m1 = b0 = b1 = 0
                totals[name] = totals.get(name, 0) + max(m1 - m0, 0)
                topic_series.setdefault(name, []).append(
                    {
                        "time": round(after.time, 3),
                        "messages_in_per_sec": rate(m0, m1),
                        "bytes_in_per_sec": rate(b0, b1),
                    }
                )
        if topic is None:
            busiest = sorted(totals, key=lambda n: (-totals[n], n))[:BUSIEST_TOPICS]
            topic_series = {n: topic_series[n] for n in sorted(busiest)}
        return {
            "interval_seconds": INTERVAL_S,
            "window_seconds": INTERVAL_S * SAMPLES,
            "broker": broker,
            "topics": topic_series,
        }
