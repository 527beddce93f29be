"""The C extension that gives back the empty pools of CPython's arenas (kafkalite.network._pools,
decision 0074), in this very process: it rewrites the allocator's pool headers and drops pages,
so what these tests check is that every object alive before a release keeps its value, that
the allocator goes on handing out memory that holds what is written to it, and that something
is given back at all. The extension must be built (`pip install -e .` builds it): a missing one
fails here rather than skipping."""

import gc
import random
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.network import _pools, server


def made(seed: int, n: int, tuples: bool = True) -> list[bytes | tuple[int, str]]:
    """Small objects of many size classes (bytes of 0-480 bytes, and tuples holding a str)."""
    rng = random.Random(seed)
    out: list[bytes | tuple[int, str]] = []
    for i in range(n):
        if i % 3 or not tuples:
            out.append(bytes([i % 251]) * rng.randrange(0, 480))
        else:
            out.append((i, str(i) * rng.randrange(1, 12)))
    return out


def made_in_new_arenas(
    seed: int, arenas: int, tuples: bool = True
) -> list[bytes | tuple[int, str]]:
    """Objects made in batches until CPython has taken `arenas` new ones for them (a process
    that ran other tests first has room in the arenas it has: the first batches fill that)."""
    start = _pools.tracked_arenas()
    out: list[bytes | tuple[int, str]] = []
    for batch in range(400):
        out += made(seed + batch, 20_000, tuples)
        if _pools.tracked_arenas() >= start + arenas:
            return out
    raise AssertionError(f"{len(out)} objects took {_pools.tracked_arenas() - start} new arenas")


def intact(objects: list[bytes | tuple[int, str]]) -> bool:
    for o in objects:
        if isinstance(o, tuple):
            i, s = o
            if s != str(i) * (len(s) // len(str(i))) or len(s) % len(str(i)):
                return False
        elif o and o != o[:1] * len(o):
            return False
    return True


def test_empty_pools_in_pinned_arenas_are_given_back_and_used_again():
    gc.collect()
    objects = made_in_new_arenas(1, arenas=12)
    survivors = objects[::300]  # one object in 300 keeps most arenas alive
    del objects
    gc.collect()

    gc.disable()  # nothing freed between the census, the release and the census after it
    try:
        held = _pools.census()
        arenas, pools, given_back = _pools.release()
        after = _pools.census()
    finally:
        gc.enable()
    assert held["empty_pools"] > 0
    assert held["empty_pool_pages"] > held["empty_pools"]  # more than the header page of each
    assert arenas > 0
    assert pools > 0
    page = held["page_size"]
    assert given_back >= pools * page  # at least one page of each pool given back
    # every empty pool keeps only its first page (its header and the free-pool list's link),
    # and what was given back is no longer resident (give or take the few pages the censuses'
    # own results may have touched)
    assert after["empty_pool_pages"] == after["empty_pools"]
    assert after["resident_pages"] <= held["resident_pages"] - given_back // page + 8
    assert intact(survivors)

    # nothing freed since: nothing more to give back
    assert _pools.release()[1:] == (0, 0)

    # the pools given back serve new objects, which hold what was written
    again = made(2, len(survivors) * 300)
    assert intact(again)
    assert intact(survivors)
    del again
    gc.collect()
    assert _pools.release()[1] > 0
    assert intact(survivors)


def test_arenas_freed_whole_are_forgotten():
    # nothing else may leave a long-lived object in the new arenas meanwhile (it would keep one
    # of them): no other thread of this process (an earlier test's broker, say) takes the GIL,
    # and no collection runs, nor the callbacks an earlier in-process broker's freezer left
    # (which keep figures of each pass)
    interval, callbacks = sys.getswitchinterval(), gc.callbacks[:]
    sys.setswitchinterval(60.0)
    gc.callbacks.clear()
    gc.collect()
    gc.disable()
    try:
        before = _pools.tracked_arenas()
        # bytes alone: CPython keeps up to 2,000 freed tuples of each small size for reuse, and
        # those would keep an arena of their own; bytes have no such list, nor any cycle
        objects = made_in_new_arenas(3, arenas=6, tuples=False)
        peak = _pools.tracked_arenas()
        del objects
        after = _pools.tracked_arenas()
    finally:
        gc.enable()
        gc.callbacks[:] = callbacks
        sys.setswitchinterval(interval)
    # every arena emptied was returned by CPython itself, through the wrapper, which forgot it
    assert peak >= before + 6
    assert after <= before + 1
    _pools.release()  # visits only the arenas still mapped: one unmapped would crash it


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["make", "drop", "release"]), st.integers(0, 2**16)),
        min_size=1,
        max_size=12,
    )
)
def test_objects_keep_their_values_across_any_mix_of_allocation_and_release(steps):
    live: list[list[bytes | tuple[int, str]]] = []
    for action, n in steps:
        if action == "make":
            live.append(made(n, 2_000 + n % 20_000))
        elif action == "drop" and live:
            batch = live.pop(n % len(live))
            del batch[:: 1 + n % 7]  # leave some behind, in the middle of their pools
            live.append(batch)
        else:
            gc.collect()
            _pools.release()
        assert all(intact(batch) for batch in live)


def test_the_servers_release_goes_through_the_extension():
    assert server.release_empty_pools() is not None


def test_once_the_extension_stops_the_server_stops_asking(monkeypatch):
    calls = []

    def stopped():
        calls.append(1)
        raise RuntimeError("pool 0x1 does not fit CPython's pool header")

    monkeypatch.setattr(server, "_release_empty_pools", stopped)
    assert server.release_empty_pools() is None
    assert server.release_empty_pools() is None
    assert calls == [1]  # asked once; the second call had nothing to ask
