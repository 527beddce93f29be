"""Coordination sessions served by an event loop of their own, in a dedicated thread.

Why: a coordination session lives only as long as its client keeps telling the server so
(ZooKeeper's pings, every third of the session timeout). On the broker's event loop those pings
wait behind whatever holds the loop: creating a 1,000-partition topic once held it past the
session timeout, and three brokers lost their sessions (and their registrations, and the
controller) at once. Slicing bulk work is the first defence; this module is the guarantee: the
client's pings, reconnects and session bookkeeping run on a loop of their own in a thread, so a
busy broker loop cannot starve them. The GIL still lets that thread run within the interpreter's
switch interval (5 ms) while the broker's thread computes, and not at all only while a single C
call holds the GIL for longer than the session timeout.

Shape: ``ThreadedStore`` builds an ordinary single-loop ``CoordStore`` (``_make_inner``) inside
its ``CoordinationThread`` and hands out ``ThreadedSession`` proxies. A proxy implements the whole
``CoordSession`` interface by running each call as a task on the thread's loop
(``CoordinationThread.run``: one ``call_soon_threadsafe`` there, one back with the outcome) and
awaiting the answer on the caller's loop. Guarantees across the thread boundary:

- **Same answers, same exceptions.** The result or exception object raised on the thread's loop
  is the one the caller gets (``SessionExpired``, ``ConnectionLoss``, ``NoNode``, ... keep their
  types and attributes such as ``failed_op_index``).
- **Order.** Everything the thread relays to the caller's loop (an answer, a watch event, a
  failed watch, a state change) goes through one FIFO: a callback scheduled on the thread's loop
  in the order it happened there, which calls ``call_soon_threadsafe`` on the caller's loop. A
  watch event that the server sent before the answer to a later read is therefore delivered
  before that answer, and one session's events keep their order.
- **Cancellation.** A caller cancelled while it waits cancels the task on the thread's loop; an
  answer that raced the cancellation and holds a resource (a watch, a session) is released.
  Watches cancelled with ``Watch.cancel()`` are cancelled on the thread's loop too.
- **Shutdown.** ``close()`` closes the sessions (ZooKeeper's closeSession), then cancels what
  is left on the thread's loop and waits for it, shuts down its async generators and executor,
  closes the loop and joins the thread: no stray task, no "never awaited" warning. A call made
  after that fails with ``SessionClosed``. The store starts a new thread if it is used again.

The thread is a daemon: a process that forgets ``close()`` can still exit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from .base import CoordSession, CoordStore, Op, OpResult, SessionState, Stat, Watch
from .errors import SessionClosed, SessionExpired

_T = TypeVar("_T")

_DRAIN_ROUNDS = 10  # cancelling tasks can start others (aiozk closes connections in new tasks)


class CoordinationThread:
    """One daemon thread running one event loop, to which coroutines are submitted.

    ``submit`` may be called from any thread; ``stop`` from any event loop but this one.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._on_exit: Callable[[], None] | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    @property
    def running(self) -> bool:
        return self._loop is not None and not self._stopping

    def start(self) -> None:
        """Start the thread and its loop; returns once the loop accepts work."""
        with self._lock:
            if self._thread is not None:
                return
            loop = asyncio.new_event_loop()  # the process's policy: uvloop when installed
            thread = threading.Thread(target=self._run, args=(loop,), name=self.name, daemon=True)
            self._loop, self._thread = loop, thread
        thread.start()

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()
                if self._on_exit is not None:
                    self._on_exit()

    def submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        """Run ``coro`` as a task on the thread's loop. Raises SessionClosed (and closes the
        coroutine, so it is not reported as never awaited) once the thread is stopping."""
        with self._lock:
            if self._loop is None or self._stopping:
                coro.close()
                raise SessionClosed(f"the coordination thread {self.name} is stopped")
            return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(
        self,
        coro: Coroutine[Any, Any, _T],
        caller: asyncio.AbstractEventLoop,
        *,
        release: Callable[[_T], None] | None = None,
    ) -> asyncio.Future[_T]:
        """Run ``coro`` as a task on the thread's loop; its outcome lands in the returned future
        of ``caller`` (the running loop), relayed behind everything the task's loop scheduled
        before it ended. Cancelling that future cancels the task; if the task had produced a
        result by then, ``release(result)`` is called on ``caller``. Raises SessionClosed once
        the thread is stopping. (``run_coroutine_threadsafe`` and ``wrap_future`` do the same
        through a ``concurrent.futures.Future``, at half as much again per call.)"""
        outer: asyncio.Future[_T] = caller.create_future()
        started: list[asyncio.Task] = []

        def start() -> None:
            if outer.done():  # the caller gave up before the task started
                coro.close()
                return
            task = asyncio.ensure_future(coro)
            started.append(task)
            task.add_done_callback(lambda done: _relay(caller, _copy_outcome, done, outer, release))

        def cancel_started() -> None:
            for task in started:
                task.cancel()

        with self._lock:
            if self._loop is None or self._stopping:
                coro.close()
                raise SessionClosed(f"the coordination thread {self.name} is stopped")
            self._loop.call_soon_threadsafe(start)
        outer.add_done_callback(lambda done: done.cancelled() and self.call_soon(cancel_started))
        return outer

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        """Schedule ``callback(*args)`` on the thread's loop; nothing once it is stopped."""
        with self._lock:
            if self._loop is None or self._stopping:
                return
            self._loop.call_soon_threadsafe(callback, *args)

    async def stop(self) -> None:
        """Cancel every task left on the thread's loop, wait for them, stop the loop, join."""
        with self._lock:
            loop, thread = self._loop, self._thread
            if loop is None or thread is None or self._stopping:
                return
            self._stopping = True
            # Queued after every coroutine submitted so far: their tasks exist when it runs.
            drained = asyncio.run_coroutine_threadsafe(_cancel_other_tasks(), loop)
        caller = asyncio.get_running_loop()
        exited = caller.create_future()
        self._on_exit = lambda: _relay(caller, _set_result_unless_done, exited)
        try:
            await asyncio.wrap_future(drained)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            await exited
            thread.join()  # returns at once: the thread is past its last statement
            with self._lock:
                self._loop, self._thread, self._stopping = None, None, False
                self._on_exit = None


async def _cancel_other_tasks() -> None:
    current = asyncio.current_task()
    for _round in range(_DRAIN_ROUNDS):
        tasks = [task for task in asyncio.all_tasks() if task is not current]
        if not tasks:
            return
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        for task in tasks:
            if not task.cancelled():
                task.exception()  # retrieved: a loop stopped mid-connection fails, expectedly


def _relay(loop: asyncio.AbstractEventLoop, callback: Callable[..., object], *args) -> None:
    """``loop.call_soon_threadsafe`` that does nothing once the caller's loop is closed."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, *args)


def _set_result_unless_done(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


def _copy_outcome(
    source: asyncio.Future,
    destination: asyncio.Future,
    release: Callable[[Any], None] | None = None,
) -> None:
    if destination.done():
        if release is not None and not source.cancelled() and source.exception() is None:
            release(source.result())
        return
    if source.cancelled():
        destination.cancel()
    elif source.exception() is not None:
        destination.set_exception(source.exception())
        destination.exception()  # an event nobody awaits is not an error worth a log line
    else:
        destination.set_result(source.result())


def _with_bytes(op: Op) -> Op:
    data = getattr(op, "data", None)
    if data is None or type(data) is bytes:
        return op
    return dataclasses.replace(op, data=bytes(data))


class ThreadedSession(CoordSession):
    """The caller-side proxy of a session that lives on a ``CoordinationThread`` (see the
    module docstring). Use it from the loop that opened it, like any session."""

    def __init__(
        self,
        thread: CoordinationThread,
        loop: asyncio.AbstractEventLoop,
        timeout_ms: int,
        connection_timeout_ms: int | None = None,
    ) -> None:
        super().__init__(timeout_ms, connection_timeout_ms)
        self._thread = thread
        self._loop = loop
        self._inner: CoordSession | None = None  # used on the thread's loop only
        self._watches: set[asyncio.Future] = set()

    @property
    def session_id(self) -> int:
        return self._inner.session_id if self._inner is not None else 0

    # -- the bridge --

    async def for_running_loop(self) -> ThreadedSession:
        """Another proxy of the same session for the running loop (a component that runs on a
        loop of its own in another thread, like the controller): the same session, its answers,
        watches and state changes relayed to that loop instead, with the same guarantees.
        The owner of this proxy stays the owner of the session: the view is not closed (its
        ``close`` closes the session for everyone)."""
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return self
        inner = self._inner
        if inner is None:
            raise SessionClosed("the session is not open")
        view = type(self)(self._thread, loop, self.timeout_ms, self.connection_timeout_ms)

        async def attach() -> SessionState:
            return view._attach(inner)

        state = await self._thread.run(attach(), loop)
        if state.is_terminal:
            view._end(state)
        else:
            view._set_state(state)
        return view

    def _attach(self, inner: CoordSession) -> SessionState:
        """On the thread's loop: relay ``inner``'s state changes from now on; returns its state.

        Each state goes through the thread's ready queue first, behind the watch callbacks the
        same change scheduled (a session that ends fails its watches before it changes state).
        """
        self._inner = inner
        thread_loop = asyncio.get_running_loop()

        def relay_state(state: SessionState) -> None:
            thread_loop.call_soon(_relay, self._loop, self._on_state, state)

        inner.add_state_callback(relay_state)
        self.timeout_ms = inner.timeout_ms
        return inner.state

    def _on_state(self, state: SessionState) -> None:
        if state.is_terminal:
            self._end(state)
        else:
            self._set_state(state)

    def _end(self, state: SessionState) -> None:
        error = SessionExpired if state is SessionState.EXPIRED else SessionClosed
        for future in list(self._watches):
            if not future.done():
                future.set_exception(error(f"session 0x{self.session_id:x} {state.value}"))
                future.exception()
        self._watches.clear()
        self._set_state(state)

    async def _call(
        self,
        coro: Coroutine[Any, Any, _T],
        *,
        release: Callable[[_T], None] | None = None,
    ) -> _T:
        """Run ``coro`` on the thread's loop and return its outcome here. When the caller is
        cancelled after the thread's task produced its result, ``release(result)`` undoes it."""
        try:
            outcome = self._thread.run(coro, self._loop, release=release)
        except SessionClosed:
            self._raise_if_terminal(self.state)
            raise
        try:
            return await outcome
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # Not our caller's cancellation: the thread stopped under the call.
            self._raise_if_terminal(self.state)
            raise SessionClosed("the coordination thread stopped before answering") from None
        finally:
            # A failure is kept by the future and its traceback holds this frame: without the
            # name, not a reference cycle, which a frozen heap would keep (decision 0072).
            del outcome

    def _linked_watch(self, path: str, inner: Watch, outer: asyncio.Future) -> Watch:
        """The caller-side ``Watch`` for ``inner`` (already relaying into ``outer``)."""

        def done(future: asyncio.Future) -> None:
            self._watches.discard(future)
            if future.cancelled():
                self._thread.call_soon(inner.cancel)

        self._watches.add(outer)
        outer.add_done_callback(done)
        return Watch(path, outer)

    def _relay_watch(self, inner: Watch, outer: asyncio.Future) -> None:
        """On the thread's loop, right after the read that set ``inner``: its outcome goes to
        ``outer`` through the ordered relay."""
        inner._future.add_done_callback(
            lambda fired: _relay(self._loop, _copy_outcome, fired, outer)
        )

    def _release_watch(self, answer: tuple) -> None:
        self._thread.call_soon(answer[-1].cancel)

    # -- operations --

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        return await self._call(
            self._inner.create(
                path, bytes(data), ephemeral=ephemeral, sequential=sequential, makepath=makepath
            )
        )

    async def _create(self, path: str, data: bytes, *, ephemeral: bool, sequential: bool) -> str:
        return await self._call(
            self._inner._create(path, bytes(data), ephemeral=ephemeral, sequential=sequential)
        )

    async def get_data(self, path: str) -> tuple[bytes, Stat]:
        return await self._call(self._inner.get_data(path))

    async def set_data(self, path: str, data: bytes, version: int) -> Stat:
        return await self._call(self._inner.set_data(path, bytes(data), version))

    async def delete(self, path: str, version: int) -> None:
        await self._call(self._inner.delete(path, version))

    async def exists(self, path: str) -> Stat | None:
        return await self._call(self._inner.exists(path))

    async def get_children(self, path: str) -> list[str]:
        return await self._call(self._inner.get_children(path))

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        return await self._call(self._inner.multi([_with_bytes(op) for op in ops]))

    async def get_data_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        return await self._call(self._inner.get_data_many(list(paths)))

    async def get_data_versions_many(self, paths: Sequence[str]) -> list[tuple[bytes, int] | None]:
        return await self._call(self._inner.get_data_versions_many(list(paths)))

    async def ensure_path(self, path: str) -> None:
        await self._call(self._inner.ensure_path(path))

    async def delete_recursive(self, path: str) -> None:
        await self._call(self._inner.delete_recursive(path))

    async def exists_and_watch(self, path: str) -> tuple[Stat | None, Watch]:
        outer = self._loop.create_future()

        async def read() -> tuple[Stat | None, Watch]:
            stat, watch = await self._inner.exists_and_watch(path)
            self._relay_watch(watch, outer)
            return stat, watch

        stat, inner = await self._call(read(), release=self._release_watch)
        return stat, self._linked_watch(path, inner, outer)

    async def get_data_and_watch(self, path: str) -> tuple[bytes, Stat, Watch]:
        outer = self._loop.create_future()

        async def read() -> tuple[bytes, Stat, Watch]:
            data, stat, watch = await self._inner.get_data_and_watch(path)
            self._relay_watch(watch, outer)
            return data, stat, watch

        data, stat, inner = await self._call(read(), release=self._release_watch)
        return data, stat, self._linked_watch(path, inner, outer)

    async def get_children_and_watch(self, path: str) -> tuple[list[str], Watch]:
        outer = self._loop.create_future()

        async def read() -> tuple[list[str], Watch]:
            children, watch = await self._inner.get_children_and_watch(path)
            self._relay_watch(watch, outer)
            return children, watch

        children, inner = await self._call(read(), release=self._release_watch)
        return children, self._linked_watch(path, inner, outer)

    async def close(self) -> None:
        if self.state.is_terminal:
            return
        if self._inner is not None:
            with contextlib.suppress(SessionClosed):  # the thread is already stopped
                await self._call(self._inner.close())
        self._end(SessionState.CLOSED)


def _close_in_background(session: CoordSession) -> None:
    asyncio.ensure_future(session.close())  # noqa: RUF006 - the thread's stop() drains it


class ThreadedStore(CoordStore):
    """A store whose sessions live on a ``CoordinationThread``. Which store runs there is
    ``make_inner()`` (or a subclass's ``_make_inner``), called on the thread's loop; a subclass
    may also choose the proxy class (``session_class``)."""

    session_class: type[ThreadedSession] = ThreadedSession

    def __init__(
        self, *, thread_name: str, make_inner: Callable[[], CoordStore] | None = None
    ) -> None:
        self.thread_name = thread_name
        self._make_inner_store = make_inner
        self._thread: CoordinationThread | None = None
        self._inner: CoordStore | None = None  # built, used and closed on the thread's loop
        self._sessions: set[ThreadedSession] = set()

    def _make_inner(self) -> CoordStore:
        if self._make_inner_store is None:
            raise NotImplementedError("pass make_inner or override _make_inner")
        return self._make_inner_store()

    @property
    def thread(self) -> CoordinationThread | None:
        return self._thread

    async def open_session(
        self, timeout_ms: int | None = None, *, connection_timeout_ms: int | None = None
    ) -> ThreadedSession:
        if self._thread is None:
            self._thread = CoordinationThread(self.thread_name)
            self._thread.start()
        thread = self._thread
        session = self.session_class(
            thread, asyncio.get_running_loop(), timeout_ms or 0, connection_timeout_ms
        )

        async def open_inner() -> SessionState:
            if self._inner is None:
                self._inner = self._make_inner()
            inner = await self._inner.open_session(
                timeout_ms, connection_timeout_ms=connection_timeout_ms
            )
            return session._attach(inner)

        def release(_state: SessionState) -> None:
            thread.call_soon(_close_in_background, session._inner)

        try:
            opened = thread.run(open_inner(), session._loop, release=release)
        except SessionClosed:
            raise SessionClosed("the store is closed") from None
        state = await opened
        session.connection_timeout_ms = session._inner.connection_timeout_ms
        if state.is_terminal:
            session._end(state)
        else:
            session._set_state(state)
        self._sessions = {s for s in self._sessions if not s.state.is_terminal}
        self._sessions.add(session)
        return session

    async def close(self) -> None:
        """Close every open session (on the thread's loop), then stop the thread."""
        thread, inner, sessions = self._thread, self._inner, self._sessions
        self._thread, self._inner, self._sessions = None, None, set()
        if thread is None:
            return
        try:
            if inner is not None:
                with contextlib.suppress(SessionClosed):
                    await asyncio.wrap_future(thread.submit(inner.close()))
        finally:
            await thread.stop()
            for session in sessions:  # their CLOSED came through the relay; make sure
                session._end(SessionState.CLOSED)
