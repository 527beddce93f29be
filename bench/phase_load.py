"""A steady producer (acks=all, idempotent) and a consumer running through a benchmark's phases.

Used by bench/scale_cluster.py: while brokers are killed, restarted, re-elected and stopped,
a Kafka user's producer keeps writing and a consumer keeps reading, and the benchmark prints
per phase how the two fared. Each record's value is ``"<sequence> <send time>"`` (the send time
on ``time.monotonic()``, one clock for every thread of the bench). A record belongs to the phase
that was current when it was sent, whenever it is acknowledged or read.

Figures per phase: records sent, acknowledged and failed (by error name), the produce latency
(send -> delivery report) and the end-to-end latency (send -> consumed) at p50, p99 and max,
and the slowest sends with the second of the phase they were sent in (which event of the
phase they waited for).
Overall: ``acknowledged_lost``, the acknowledged sequences the consumer never read once the
producer has flushed and the consumer has caught up (a deadline), whose target is 0. The
pacing is a schedule of send times, not a sleep between sends, so a stalled producer catches up
rather than drifting.

The statistics are pure functions of recorded samples (`LoadRecorder`), tested without
brokers in tests/bench/test_phase_load.py.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

SLOWEST = 5
"""The slowest acknowledged sends kept per phase, with when in the phase they were sent."""


def percentile(samples: list[float], fraction: float) -> float | None:
    """The nearest-rank percentile (``fraction`` in 0..1) of ``samples``, or None if empty."""
    if not samples:
        return None
    ordered = sorted(samples)
    rank = min(len(ordered), max(1, math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


def _summary_ms(samples: list[float]) -> dict[str, float | None]:
    def ms(value: float | None) -> float | None:
        return None if value is None else round(value * 1000, 1)

    return {
        "p50_ms": ms(percentile(samples, 0.50)),
        "p99_ms": ms(percentile(samples, 0.99)),
        "max_ms": ms(max(samples) if samples else None),
    }


class LoadRecorder:
    """What was sent, acknowledged, failed and consumed, by sequence number. Thread-safe: the
    producer's delivery callbacks and the consumer run on different threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent_phase: dict[int, str] = {}
        self.sent_at: dict[int, float] = {}
        self.phases: list[str] = []
        self.phase_began: dict[str, float] = {}
        """The first send of each phase (within one send interval of the phase's start)."""
        self.slowest: dict[str, list[tuple[float, float]]] = {}
        self.produce_latency: dict[str, list[float]] = {}
        self.end_to_end: dict[str, list[float]] = {}
        self.failed: dict[str, dict[str, int]] = {}
        self.acknowledged: set[int] = set()
        self.consumed: set[int] = set()
        self.duplicates = 0

    def sent(self, sequence: int, phase: str, at: float) -> None:
        with self._lock:
            if phase not in self.phases:
                self.phases.append(phase)
                self.phase_began[phase] = at
            self.sent_phase[sequence] = phase
            self.sent_at[sequence] = at

    def delivered(self, sequence: int, error_name: str | None, at: float) -> None:
        with self._lock:
            phase = self.sent_phase[sequence]
            if error_name is not None:
                by_error = self.failed.setdefault(phase, {})
                by_error[error_name] = by_error.get(error_name, 0) + 1
                return
            self.acknowledged.add(sequence)
            latency = at - self.sent_at[sequence]
            self.produce_latency.setdefault(phase, []).append(latency)
            worst = self.slowest.setdefault(phase, [])
            worst.append((latency, self.sent_at[sequence] - self.phase_began[phase]))
            if len(worst) > 2 * SLOWEST:
                worst.sort(reverse=True)
                del worst[SLOWEST:]

    def received(self, sequence: int, sent_at: float, at: float) -> None:
        with self._lock:
            if sequence in self.consumed:
                self.duplicates += 1
                return
            self.consumed.add(sequence)
            phase = self.sent_phase.get(sequence)
            if phase is not None:
                self.end_to_end.setdefault(phase, []).append(at - sent_at)

    def missing(self) -> set[int]:
        """Acknowledged and not (yet) consumed."""
        with self._lock:
            return self.acknowledged - self.consumed

    def report(self) -> dict[str, Any]:
        with self._lock:
            by_phase: dict[str, Any] = {}
            for phase in self.phases:
                sent = sum(1 for p in self.sent_phase.values() if p == phase)
                produce = self.produce_latency.get(phase, [])
                by_phase[phase] = {
                    "sent": sent,
                    "acknowledged": len(produce),
                    "failed": dict(self.failed.get(phase, {})),
                    "produce": _summary_ms(produce),
                    "end_to_end": _summary_ms(self.end_to_end.get(phase, [])),
                    # [seconds into the phase when sent, produce latency in ms]
                    "slowest_sends": [
                        [round(into, 2), round(latency * 1000, 1)]
                        for latency, into in sorted(self.slowest.get(phase, []), reverse=True)[
                            :SLOWEST
                        ]
                    ],
                }
            lost = sorted(self.acknowledged - self.consumed)
            return {
                "by_phase": by_phase,
                "sent": len(self.sent_phase),
                "acknowledged": len(self.acknowledged),
                "consumed": len(self.consumed),
                "duplicates_consumed": self.duplicates,
                "acknowledged_lost": len(lost),
                "lost_sample": lost[:10],
                "target": "acknowledged_lost 0; per-phase p99 printed",
            }


def poll_timeout_s(until_next_send_s: float, interval_s: float) -> float:
    """How long the producer's ``poll`` may wait before the next send is due: at most one
    interval, in whole milliseconds rounded up (0 only when a send is due). confluent-kafka
    truncates a poll's timeout to whole milliseconds, so a wait under 1 ms was a poll that
    returned at once: the loop spun until the send was due, about a fifth of every interval,
    18% of a core at 200 records/s taken from the brokers being measured. The half
    millisecond added keeps the truncation from losing one to a float's rounding."""
    if until_next_send_s <= 0:
        return 0.0
    return (math.ceil(min(interval_s, until_next_send_s) * 1000) + 0.5) / 1000


def encode(sequence: int, sent_at: float) -> bytes:
    return f"{sequence} {sent_at:.6f}".encode()


def decode(value: bytes) -> tuple[int, float]:
    sequence, sent_at = value.decode().split(" ")
    return int(sequence), float(sent_at)


class PhaseLoad:
    """A producer and a consumer thread on ``topic`` (which must exist), the phase of each
    sent record read from ``phase_of``. ``start()``, then ``finish(deadline_s)`` returns the
    report once everything acknowledged was consumed or the deadline passed."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        phase_of: Callable[[], str],
        rate: float = 200.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.phase_of = phase_of
        self.rate = rate
        self.recorder = LoadRecorder()
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._producer_thread = threading.Thread(target=self._produce, daemon=True)
        self._consumer_thread = threading.Thread(target=self._consume, daemon=True)
        self.errors: list[str] = []

    def start(self) -> PhaseLoad:
        self._consumer_thread.start()
        self._producer_thread.start()
        return self

    def _produce(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 300_000,
            }
        )
        recorder = self.recorder

        def report(error: Any, message: Any) -> None:
            sequence, _ = decode(message.value())
            name = None if error is None else error.name()
            recorder.delivered(sequence, name, time.monotonic())

        interval = 1.0 / self.rate
        sequence = 0
        next_send = time.monotonic()
        try:
            while not self._stop_producing.is_set():
                now = time.monotonic()
                while next_send <= now:  # the schedule: late sends go out at once
                    sent_at = time.monotonic()
                    recorder.sent(sequence, self.phase_of(), sent_at)
                    producer.produce(
                        self.topic,
                        encode(sequence, sent_at),
                        key=str(sequence).encode(),
                        on_delivery=report,
                    )
                    sequence += 1
                    next_send += interval
                producer.poll(poll_timeout_s(next_send - time.monotonic(), interval))
            remaining = producer.flush(120)
            if remaining:
                self.errors.append(f"{remaining} records still unacknowledged after 120 s")
        except Exception as error:  # reported, not raised: the phases' figures still print
            self.errors.append(f"producer: {type(error).__name__}: {error}")

    def _consume(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "scale-bench-load",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self._stop_consuming.is_set():
                for message in consumer.consume(500, 0.2):
                    if message.error() is not None:
                        seen = f"consumer: {message.error().name()}"
                        if seen not in self.errors and len(self.errors) < 20:
                            self.errors.append(seen)
                        continue
                    sequence, sent_at = decode(message.value())
                    self.recorder.received(sequence, sent_at, time.monotonic())
        except Exception as error:
            self.errors.append(f"consumer: {type(error).__name__}: {error}")
        finally:
            consumer.close()

    def finish(self, deadline_s: float = 180.0) -> dict[str, Any]:
        self._stop_producing.set()
        self._producer_thread.join(deadline_s)
        deadline = time.monotonic() + deadline_s
        while self.recorder.missing() and time.monotonic() < deadline:
            self._consumer_thread.join(0.5)  # polling interval of the catch-up check
        self._stop_consuming.set()
        self._consumer_thread.join(30)
        out = self.recorder.report()
        out["rate_per_s"] = self.rate
        out["errors"] = list(self.errors)
        return out
