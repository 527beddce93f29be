"""Bulk work on the event loop in bounded slices (docs/architecture.md: no callback holds the
loop for long).

A pass over thousands of partitions or logs calls ``slices.due()`` after each item and, when it
says so, ``await slices.pause()``: a yield to the loop (``asyncio.sleep(0)``), after which the
loop runs whatever became ready (a Produce, a fetch answer, the loop-lag probe) before the pass
goes on. A slice ends after ``max_items`` items or ``budget`` seconds of wall time, whichever
comes first, so on a loaded machine (where the same items take longer) the slices get shorter
rather than the holds longer. The budget is wall time measured from the end of the previous
pause: time the loop spent elsewhere is not charged to the next slice.

A pass that pauses must re-check what another callback may have changed meanwhile (a log
removed, a partition deleted): the callers say what they re-check.
"""

from __future__ import annotations

import asyncio
from time import perf_counter

SLICE_SECONDS = 0.005
"""Wall time of work between two yields of a sliced pass (a 5 ms hold stays well under the
loop-lag targets even when the machine is loaded several times over)."""

SLICE_ITEMS = 500
"""Items between two yields at most, whatever their cost."""


class LoopSlices:
    """When a sliced pass should yield (see the module docstring). One per pass; loop-only."""

    __slots__ = ("max_items", "budget", "pauses", "_items", "_deadline")

    def __init__(self, max_items: int = SLICE_ITEMS, budget: float = SLICE_SECONDS) -> None:
        self.max_items = max(1, max_items)
        self.budget = budget
        self.pauses = 0
        """How many times the pass yielded (tests, benchmarks)."""
        self._items = 0
        self._deadline = perf_counter() + budget

    def due(self) -> bool:
        """One more item done: True when the slice is over and the caller should ``pause``."""
        self._items += 1
        return self._items >= self.max_items or perf_counter() >= self._deadline

    async def pause(self) -> None:
        """Yield to the loop once; a new slice starts when the pass resumes."""
        await asyncio.sleep(0)
        self.pauses += 1
        self._items = 0
        self._deadline = perf_counter() + self.budget
