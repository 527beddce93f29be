"""An event loop running in a daemon thread of its own, for brokers embedded in any test style.

A synchronous test, a pytest-asyncio test and a unittest case all reach the broker the same way:
``LoopThread.run(coro, timeout)`` schedules the coroutine on the thread's loop and blocks the
caller until it finishes (``run_coroutine_threadsafe``). The caller's own loop, if any, is never
used by the broker, so a test that blocks its loop (a synchronous client inside an async test)
cannot starve the broker.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed (as `kafkalite serve` uses), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """``start()`` the thread, ``run(coro)`` on it, ``stop()`` cancels what is left and joins."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> LoopThread:
        ready = threading.Event()

        def main() -> None:
            self.loop = new_event_loop()
            asyncio.set_event_loop(self.loop)
            ready.set()
            try:
                self.loop.run_forever()
            finally:
                self._close_loop()

        self._thread = threading.Thread(target=main, name=self.name, daemon=True)
        self._thread.start()
        ready.wait()
        return self

    def _close_loop(self) -> None:
        loop = self.loop
        assert loop is not None
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the thread's loop; its result (or exception) here. On ``timeout`` the
        coroutine is cancelled and TimeoutError raised."""
        if self.loop is None or not self.running:
            coro.close()
            raise RuntimeError(f"{self.name}: the event loop thread is not running")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(f"{self.name}: run() called from the loop's own thread")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def call_soon(self, callback: Any, *args: Any) -> None:
        assert self.loop is not None
        self.loop.call_soon_threadsafe(callback, *args)

    def stop(self, timeout: float = 30.0) -> None:
        if self.loop is None or not self.running:
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        assert self._thread is not None
        self._thread.join(timeout)
