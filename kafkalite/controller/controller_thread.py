"""The controller on a thread and event loop of its own (docs/decisions/0029).

Why: a controller event on thousands of partitions (a broker's failure, a failover, an
election) is tens to hundreds of milliseconds of Python per slice, and on the broker's loop
every slice holds Produce, Fetch, the replica fetchers and heartbeats for as long. On a thread
of its own, the broker's loop gets the interpreter back at every switch interval (5 ms) while the
controller computes, and at once while the controller waits on the store or a broker.

Shape: ``ControllerThread`` has the public interface of ``KafkaController`` (what the
composition root, the API handlers and the metrics use) and runs a ``KafkaController`` on a
``CoordinationThread`` (the same thread-and-loop runner the coordination client uses). Every
public call is a task on the controller's loop whose outcome is relayed to the caller's loop;
the caller's cancellation cancels that task. Invariants:

- **Everything of the controller lives on its loop**: its event task, watches and timers; its
  view of the session (``ThreadedSession.for_running_loop``: the broker's own session, its
  answers and watch events delivered to the controller's loop); its channel manager's
  connections, to the other brokers and to its own broker over the listener, like to any other
  (nothing in the controller calls into its broker's objects in-process).
- **Reads across the boundary are of single attributes** (``is_active``,
  ``active_controller_id``, ``epoch``, ``context``): each is one atomic read under the GIL; the
  context's collections are only copied (a C-level copy, not interleaved), never iterated in
  Python from the broker's thread.
- **Shutdown**: ``shutdown`` resigns on the controller's loop (as ``KafkaController.shutdown``),
  then cancels what is left there, closes the loop and joins the thread.
- Exception objects cross unchanged (``NotControllerError`` and the core's errors).

Only a session that is already a ``ThreadedSession`` (ZooKeeper) can be shared with another
loop; with the embedded store (in-process, on the broker's loop) the controller stays on the
broker's loop (``new_controller``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from kafkalite.coord.base import CoordSession
from kafkalite.coord.errors import SessionClosed
from kafkalite.coord.threaded import CoordinationThread, ThreadedSession
from kafkalite.protocol.errors import ErrorCode, NotControllerError
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import ReplicaAssignment

from .context import ControllerContext
from .kafka_controller import ElectionOutcome, KafkaController

_T = TypeVar("_T")


class ControllerThread:
    """A ``KafkaController`` on its own thread and loop; see the module docstring."""

    def __init__(self, broker_id: int, session: Any, config: Any = None, **kwargs: Any) -> None:
        self.broker_id = broker_id
        self.session = session
        self.config = config
        self._kwargs = kwargs  # KafkaController's keyword arguments (a transport in benches)
        self.thread = CoordinationThread(f"controller-{broker_id}")
        self.controller: KafkaController | None = None

    # -- reads (single attributes, see the module docstring) --

    @property
    def is_active(self) -> bool:
        controller = self.controller
        return controller is not None and controller.is_active

    @property
    def active_controller_id(self) -> int:
        controller = self.controller
        return controller.active_controller_id if controller is not None else -1

    @property
    def epoch(self) -> int:
        controller = self.controller
        return controller.epoch if controller is not None else -1

    @property
    def context(self) -> ControllerContext | None:
        controller = self.controller
        return controller.context if controller is not None else None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The controller's loop while it runs (tests)."""
        return self.thread.loop

    # -- calls --

    async def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the controller's loop. A thread stopped before or while it runs
        (the broker is shutting down) answers NotControllerError, which callers retry or
        report as Kafka does, not a coordination error or a cancellation they did not ask for."""
        try:
            outcome = self.thread.run(coro, asyncio.get_running_loop())
        except SessionClosed:
            raise NotControllerError(f"broker {self.broker_id}'s controller stopped") from None
        try:
            return await outcome
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            raise NotControllerError(f"broker {self.broker_id}'s controller stopped") from None

    async def startup(self) -> None:
        if not self.thread.running:
            self.thread.start()
            self.controller = None  # a controller of a stopped loop is not used again
        session = _threaded(self.session)

        async def start() -> None:
            view = await session.for_running_loop()
            if self.controller is None:
                self.controller = KafkaController(self.broker_id, view, self.config, **self._kwargs)
                await self.controller.startup()
            else:
                await self.controller.reinitialize(view)

        await self._run(start())

    async def reinitialize(self, session: Any) -> None:
        """The broker opened a new session after the old one expired."""
        self.session = session
        if self.controller is None or not self.thread.running:
            await self.startup()
            return
        controller = self.controller
        current = _threaded(session)

        async def renew() -> None:
            await controller.reinitialize(await current.for_running_loop())

        await self._run(renew())

    async def shutdown(self) -> None:
        controller = self.controller
        if not self.thread.running:
            return
        try:
            if controller is not None:
                await self._run(controller.shutdown())
        finally:
            await self.thread.stop()

    def _require(self) -> KafkaController:
        controller = self.controller
        if controller is None or not self.thread.running:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        return controller

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int = -1
    ) -> list[TopicPartition]:
        return await self._run(self._require().controlled_shutdown(broker_id, broker_epoch))

    async def elect_preferred_leaders(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, ErrorCode]:
        chosen = tuple(partitions) if partitions is not None else None
        return await self._run(self._require().elect_preferred_leaders(chosen))

    async def elect_unclean_leaders(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, ErrorCode]:
        chosen = tuple(partitions) if partitions is not None else None
        return await self._run(self._require().elect_unclean_leaders(chosen))

    async def elect_leaders(
        self, partitions: Iterable[TopicPartition] | None = None, *, unclean: bool = False
    ) -> dict[TopicPartition, ElectionOutcome]:
        chosen = tuple(partitions) if partitions is not None else None
        return await self._run(self._require().elect_leaders(chosen, unclean=unclean))

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Iterable[int] | None]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        copied = {tp: (tuple(r) if r is not None else None) for tp, r in reassignments.items()}
        return await self._run(self._require().alter_partition_reassignments(copied))

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        chosen = tuple(partitions) if partitions is not None else None
        return await self._run(self._require().list_partition_reassignments(chosen))


def _threaded(session: Any) -> ThreadedSession:
    """The session itself, or the current one of a ``RenewableSession`` (the broker's)."""
    current = getattr(session, "current", None) if not isinstance(session, CoordSession) else None
    found = current if current is not None else session
    if not isinstance(found, ThreadedSession):
        raise TypeError(f"{type(found).__name__} cannot be shared with another loop")
    return found


def new_controller(
    broker_id: int, session: Any, config: Any = None
) -> KafkaController | ControllerThread:
    """The broker's controller: on a thread of its own when the session can be shared with
    another loop (ZooKeeper's, already on the coordination thread), else on the caller's loop.
    ``session`` is a ``CoordSession`` or a ``RenewableSession`` (its current one decides)."""
    try:
        _threaded(session)
    except TypeError:
        return KafkaController(broker_id, session, config)
    return ControllerThread(broker_id, session, config)


__all__ = ["ControllerThread", "new_controller"]
