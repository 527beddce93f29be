"""The cyclic garbage collector in tests of what a broker drops.

A `kafkalite serve` process freezes what survives its full collections
(kafkalite/observability/gc_freeze.py), and an object frozen while alive and dropped later
inside a reference cycle is never freed. So what a broker drops must be freed by reference
counting alone: these tests run with the collector off (``collector_off``), then look for what
a collection would have had to free (``cyclic_garbage``) or check a weak reference.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_off(*, collect_first: bool = False) -> Iterator[None]:
    """The cyclic collector paused, and on again after if it was. ``collect_first``: what
    earlier tests left is collected before, so that ``cyclic_garbage`` finds only what the
    block made."""
    was = gc.isenabled()
    if collect_first:
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def cyclic_garbage(*types: type) -> list[object]:
    """The objects of ``types`` that a full collection finds unreachable now: what reference
    counting did not free."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return [o for o in gc.garbage if isinstance(o, types)]
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
