"""ControllerEventManager: one queue, one task, every controller event processed in turn.

Kafka's ``ControllerEventManager``: store watches, broker responses, API calls (controlled
shutdown) and timers only *enqueue* events; a single consumer task takes them one at a time and
hands each to the processor (``KafkaController.process``). The controller's state (context,
state machines, channel bookkeeping) is touched only from that task, so there are no locks
(CONTRIBUTING.md, convention 3). An event may carry a future that the processor completes with its
answer (``put_and_wait``).

Events dropped from the queue (``clear_and_put`` on session expiry, ``close``) are answered
with ``NotControllerError``, as Kafka's events ``preempt()`` with NOT_CONTROLLER: the API
request waiting for one gets an answer its client retries, never a cancellation that would leave
the request unanswered.

The processor's failures are caught at this boundary only: an event someone waits for is
answered with the error; any other failure is recorded in ``errors`` (tests assert it stays
empty) and logged. Either way the next event is processed (Kafka's ControllerEventThread does
the same; a dead event thread is a dead cluster).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from kafkalite.protocol.errors import NotControllerError

log = structlog.get_logger("kafkalite.controller.events")

SLOW_EVENT_SECONDS = 0.1
"""Events that waited and ran longer than this are logged with both durations (Kafka's
EventQueueTimeMs and per-state rate-and-time metrics), so a slow cluster shows where."""


@dataclass
class QueuedEvent:
    event: Any
    future: asyncio.Future | None = None
    enqueued_at: float = field(default_factory=time.monotonic)
    """``time.monotonic()``: the host's clock, comparable across processes (benchmarks)."""


class ControllerEventManager:
    def __init__(
        self, process: Callable[[Any], Awaitable[Any]], name: str = "controller-event-thread"
    ) -> None:
        self._process = process
        self._name = name
        self._queue: asyncio.Queue[QueuedEvent | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.errors: list[tuple[Any, BaseException]] = []
        self.processed = 0
        self.current_event: Any = None

    @property
    def is_running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)

    async def close(self) -> None:
        """Stop after the event in progress; events still queued are answered with
        NotControllerError."""
        task, self._task = self._task, None
        if task is None:
            return
        self._queue.put_nowait(None)
        await asyncio.wait([task])
        self._drain()

    def put(self, event: Any) -> QueuedEvent:
        queued = QueuedEvent(event)
        self._queue.put_nowait(queued)
        return queued

    async def put_and_wait(self, event: Any) -> Any:
        """Enqueue ``event`` and wait for the processor's answer (its exception is raised)."""
        if not self.is_running:
            raise RuntimeError("controller event manager is not running")
        queued = QueuedEvent(event, asyncio.get_running_loop().create_future())
        self._queue.put_nowait(queued)
        return await queued.future  # type: ignore[misc]

    def clear_and_put(self, event: Any) -> QueuedEvent:
        """Drop every queued event (answered with NotControllerError), then enqueue ``event``
        (Kafka uses it for session expiry: nothing queued before it matters any more)."""
        self._drain()
        return self.put(event)

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    def _drain(self) -> None:
        while not self._queue.empty():
            queued = self._queue.get_nowait()
            if queued is None or queued.future is None or queued.future.done():
                continue
            if isinstance(queued.event, _Idle):
                queued.future.set_result(None)  # wait_idle: nothing is queued any more
            else:
                queued.future.set_exception(
                    NotControllerError(f"{type(queued.event).__name__} was preempted")
                )

    async def _run(self) -> None:
        while True:
            queued = await self._queue.get()
            if queued is None:
                return
            if isinstance(queued.event, _Idle):
                if queued.future is not None and not queued.future.done():
                    queued.future.set_result(None)
                continue
            self.current_event = queued.event
            started = time.monotonic()
            try:
                answer = await self._process(queued.event)
            except asyncio.CancelledError:
                if queued.future is not None and not queued.future.done():
                    queued.future.cancel()
                raise
            except Exception as error:  # the event loop boundary: see the module docstring
                if queued.future is not None and not queued.future.done():
                    queued.future.set_exception(error)  # the caller gets it (an API answer)
                else:
                    self.errors.append((queued.event, error))
                    log.exception("controller event failed", event_type=type(queued.event).__name__)
            else:
                if queued.future is not None and not queued.future.done():
                    queued.future.set_result(answer)
            finally:
                self.current_event = None
                self.processed += 1
                now = time.monotonic()
                if now - queued.enqueued_at > SLOW_EVENT_SECONDS:
                    log.info(
                        "controller event processed",
                        event_type=type(queued.event).__name__,
                        queued_s=round(started - queued.enqueued_at, 3),
                        processing_s=round(now - started, 3),
                        enqueued_at=round(queued.enqueued_at, 4),
                    )

    async def wait_idle(self) -> None:
        """Wait until every event enqueued so far has been processed (for tests and shutdown)."""
        if not self.is_running:
            return
        marker = QueuedEvent(_Idle(), asyncio.get_running_loop().create_future())
        self._queue.put_nowait(marker)
        await marker.future  # type: ignore[misc]


class _Idle:
    """A no-op event that answers once everything before it was processed."""
