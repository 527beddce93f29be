"""Counting the event loop's turns, for tests that check a long pass yields to the loop.

A callback that schedules itself again with ``call_soon`` runs once per turn of the loop, so
the count grows only when the code under test gives the loop back; no sleep, no clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class LoopTurns:
    """Counts the loop's turns between ``start`` and ``stop`` (or inside ``with``), and runs
    ``action`` at turn ``at_turn`` (counted from 1)."""

    def __init__(self, at_turn: int = -1, action: Callable[[], object] | None = None) -> None:
        self.turns = 0
        self.at_turn, self.action = at_turn, action
        self._handle: asyncio.Handle | None = None

    def start(self) -> LoopTurns:
        self._handle = asyncio.get_running_loop().call_soon(self._turn)
        return self

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _turn(self) -> None:
        self.turns += 1
        if self.turns == self.at_turn and self.action is not None:
            self.action()
        self._handle = asyncio.get_running_loop().call_soon(self._turn)

    def __enter__(self) -> LoopTurns:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def next_turn() -> asyncio.Future[None]:
    """A future done at the loop's next turn: awaiting it gives the loop back once."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    loop.call_soon(future.set_result, None)
    return future
