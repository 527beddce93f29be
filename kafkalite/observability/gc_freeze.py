"""CPython's full garbage collections kept short on a broker whose heap is mostly long-lived.

A full (generation 2) collection walks every tracked object that is not frozen, and runs
inside whatever callback allocated last: with 10,000 hosted partitions (about 40 tracked
objects each: the partition, its log, segment, indexes, epoch cache, producer state) a pass
holds the event loop for hundreds of milliseconds. Kafka's JVM collects concurrently;
CPython's remedy for a big long-lived heap is ``gc.freeze()``: the objects move to a
permanent generation that no collection walks again.

`GcFreezer` (one per process, `install_gc_freezer`; the ``kafkalite serve`` process
installs it with ``gc.freeze.min.objects``) watches the collector: at the end of a full
collection that left at least ``min_objects`` tracked objects unfrozen, it freezes them. It
also logs each full pass that is the longest so far and takes 50 ms or more
(``gc_full_pass``), so a loop stall can be told from the collector's.

Invariants:

- A freeze happens at the end of a full collection, which has just freed every object that
  was unreachable and emptied the younger generations, so what is frozen is reachable:
  nothing already garbage is kept. One exception, `freeze_now` at the end of a broker's
  start-up (run with the collector paused): what the start made is frozen without the
  collection that would walk all of it on the loop; the start's cyclic garbage, measured at
  none for 10,000 partitions, is kept.
- Only when ``min_objects`` objects survived unfrozen: a broker whose heap does not grow
  freezes nothing more; a growing one (partitions created or loaded) freezes once per
  ``min_objects`` new long-lived objects. The full passes then walk what came since the last
  freeze, not the whole heap.
- A frozen object is still freed by reference counting when its last reference goes; one
  that later becomes part of a reference cycle is never freed. So what the broker drops must
  not be cyclic: a removed partition's Partition, Log, segments, indexes and producer state
  are freed by reference counting (tests/broker/test_gc_freeze.py).
- Counting the unfrozen objects (``gc.get_objects(2)``) costs a fraction of the pass it
  follows and happens only after full passes.
- While the freezer is installed with a bound above 0, a full collection comes after every
  ``FULL_PASS_AFTER_MIDDLE`` (2) collections of the middle generation instead of CPython's 10
  (the collector's third threshold). A full pass walks what the younger generations promoted
  since the last freeze, up to about 700 x 10 x that threshold objects when the broker keeps
  most of what it makes (a bulk role change): with 2, about 14,000 rather than 70,000, and a
  freeze after each pass that leaves ``min_objects``. Passes are five times as frequent and a
  fifth as long; each object is still walked about once before it is frozen. Freezing this often is
  safe only because what a broker drops holds no cycle (decisions 0052 and 0072); an object
  live at a freeze and dropped in a cycle later is kept for the process's life.

Process-wide, as the collector is: in-process test brokers do not install it (a test process
freezing its own objects would keep every cycle a later test drops).
"""

from __future__ import annotations

import gc
import time
from typing import Any

import structlog

log = structlog.get_logger(__name__)

DEFAULT_MIN_OBJECTS = 10_000
FULL_PASS_AFTER_MIDDLE = 2
"""The collector's third threshold while the freezer is installed (module docstring)."""
SLOW_FULL_PASS_S = 0.05
"""A full pass at least this long that is the longest so far is logged (``gc_full_pass``)."""


class GcFreezer:
    """Freezes the survivors of a full collection when they are many (module docstring)."""

    def __init__(self, min_objects: int = DEFAULT_MIN_OBJECTS) -> None:
        self.min_objects = min_objects
        self.freezes = 0
        self.frozen_objects = 0
        """Objects frozen so far, as counted when each was frozen (the ``frozen_total`` that
        ``gc_freeze`` logs). ``gc.get_freeze_count()`` would count those still frozen, but it
        walks the whole frozen list: at 500,000 objects, 20 ms on the loop at each freeze."""
        self.last_freeze_seconds = 0.0
        self.longest_full_pass_seconds = 0.0
        """The longest full collection seen (its wall time, the count and freeze included):
        the loop stall the collector caused at most."""
        self._installed = False
        self._thresholds_before: tuple[int, int, int] | None = None
        self._pass_start = 0.0
        self._at: str | None = None

    def on_collection(self, phase: str, info: dict[str, Any]) -> None:
        """A ``gc.callbacks`` entry: after a full collection, freeze if it left many."""
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._pass_start = time.perf_counter()
            return
        if self.min_objects > 0:
            start = time.perf_counter()
            unfrozen = len(gc.get_objects(generation=2))
            if unfrozen >= self.min_objects:
                gc.freeze()
                self.freezes += 1
                self.frozen_objects += unfrozen
                self.last_freeze_seconds = time.perf_counter() - start
                log.info(
                    "gc_freeze",
                    at=self._at,
                    objects=unfrozen,
                    frozen_total=self.frozen_objects,
                    ms=round(1000 * self.last_freeze_seconds, 1),
                )
        took = time.perf_counter() - self._pass_start
        if took > self.longest_full_pass_seconds:
            self.longest_full_pass_seconds = took
            if took >= SLOW_FULL_PASS_S:
                log.info("gc_full_pass", ms=round(1000 * took, 1), longest=True)

    def freeze_now(self, at: str) -> None:
        """At the end of a broker's start-up, which makes its partitions' objects with the
        collector paused: freeze what it made without a full collection, when it is at least
        ``min_objects`` (else a full collection, which is then short). A full collection
        there walked every object the start made: 0.24-0.28 s of the loop at 10,000
        partitions. What the start made that is already cyclic garbage is kept frozen: none
        at the end of a start with 10,000 partitions, 869 objects for an empty broker's
        first start (measured with ``gc.collect()`` at that point; decision 0056)."""
        if self.min_objects <= 0:
            return
        made = gc.get_count()[0]  # tracked objects made since the last collection
        if made < self.min_objects:
            self._at = at
            try:
                gc.collect()
            finally:
                self._at = None
            return
        start = time.perf_counter()
        gc.freeze()  # O(1): the generations' lists are moved, not walked
        self.freezes += 1
        self.frozen_objects += made
        self.last_freeze_seconds = time.perf_counter() - start
        log.info(
            "gc_freeze",
            at=at,
            objects=made,  # the young generation's count: what the start made and kept
            frozen_total=self.frozen_objects,
            collected=False,
            ms=round(1000 * self.last_freeze_seconds, 1),
        )

    def install(self) -> None:
        if not self._installed:
            gc.callbacks.append(self.on_collection)
            self._installed = True
        self._set_thresholds()

    def _set_thresholds(self) -> None:
        """Full passes after ``FULL_PASS_AFTER_MIDDLE`` middle ones while freezing, CPython's
        own thresholds otherwise (as they were at the install)."""
        if self.min_objects <= 0:
            self._restore_thresholds()
        elif self._thresholds_before is None:
            self._thresholds_before = gc.get_threshold()
            young, middle, _old = self._thresholds_before
            gc.set_threshold(young, middle, FULL_PASS_AFTER_MIDDLE)

    def _restore_thresholds(self) -> None:
        if self._thresholds_before is not None:
            gc.set_threshold(*self._thresholds_before)
            self._thresholds_before = None

    def uninstall(self) -> None:
        if self._installed:
            gc.callbacks.remove(self.on_collection)
            self._installed = False
        self._restore_thresholds()


_freezer: GcFreezer | None = None


def install_gc_freezer(min_objects: int = DEFAULT_MIN_OBJECTS) -> GcFreezer:
    """Install the process's freezer (idempotent; a later call sets ``min_objects``). With
    ``min_objects`` above 0 the first call also freezes what exists, after a full collection
    (at start-up: the modules); with 0 nothing is ever frozen and the collector keeps
    CPython's thresholds, the long passes are still logged."""
    global _freezer
    if _freezer is None:
        _freezer = GcFreezer(min_objects)
        if min_objects > 0:
            # What start-up has made so far (the modules, the configuration): one full pass
            # now, before anything is served, and no later pass walks it.
            gc.collect()
            gc.freeze()
            _freezer.frozen_objects = gc.get_freeze_count()  # small yet: the modules
            log.info("gc_freeze", objects=_freezer.frozen_objects, at="start-up")
    _freezer.min_objects = min_objects
    _freezer.install()
    return _freezer


def uninstall_gc_freezer() -> None:
    """Remove the process's freezer (what it froze stays frozen)."""
    global _freezer
    if _freezer is not None:
        _freezer.uninstall()
        _freezer = None


def gc_freezer() -> GcFreezer | None:
    """The installed freezer, if any."""
    return _freezer
