"""DelayedOperationPurgatory: completion on events, expiry on the clock, exactly once."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.purgatory import DelayedOperation, DelayedOperationPurgatory

from .conftest import MockTime


class Countdown(DelayedOperation):
    """Completes once ``needed`` events were seen on any of its keys."""

    def __init__(self, delay_ms, needed, counter):
        super().__init__(delay_ms)
        self.needed = needed
        self.counter = counter
        self.completions = 0
        self.expired = False

    def try_complete(self):
        if self.counter["events"] >= self.needed:
            return self.force_complete()
        return False

    def on_complete(self):
        self.completions += 1
        self.future.set_result(self.counter["events"])

    def on_expiration(self):
        self.expired = True


async def test_completes_on_event_and_cleans_up():
    time = MockTime()
    purgatory = DelayedOperationPurgatory("test", time)
    counter = {"events": 0}
    op = Countdown(1000, 2, counter)
    assert purgatory.try_complete_else_watch(op, ["a", "b"]) is False
    assert (purgatory.delayed, purgatory.watched("a"), purgatory.watched("b")) == (1, 1, 1)
    counter["events"] = 1
    assert purgatory.check_and_complete("a") == 0
    counter["events"] = 2
    assert purgatory.check_and_complete("b") == 1
    assert await asyncio.wait_for(op.future, 1) == 2
    assert (purgatory.delayed, purgatory.watched("a"), time.pending_timers) == (0, 0, 0)
    assert purgatory.check_and_complete("a") == 0 and op.completions == 1


async def test_expires_on_the_clock_once():
    time = MockTime()
    purgatory = DelayedOperationPurgatory("test", time)
    op = Countdown(500, 10, {"events": 0})
    purgatory.try_complete_else_watch(op, ["a"])
    time.advance(499)
    assert not op.future.done()
    time.advance(1)
    assert op.future.done() and op.expired and op.completions == 1
    assert op.force_complete() is False and purgatory.watched("a") == 0


async def test_cancel_stops_watching():
    time = MockTime()
    purgatory = DelayedOperationPurgatory("test", time)
    op = Countdown(500, 10, {"events": 0})
    purgatory.try_complete_else_watch(op, ["a"])
    op.cancel()
    assert op.future.cancelled() and purgatory.delayed == 0 and time.pending_timers == 0


@settings(max_examples=50, deadline=None)
@given(
    ops=st.lists(st.tuples(st.integers(1, 5), st.integers(1, 100)), min_size=1, max_size=10),
    steps=st.lists(st.one_of(st.just("event"), st.integers(1, 60)), max_size=20),
)
def test_every_operation_completes_exactly_once(ops, steps):
    async def run():
        time = MockTime()
        purgatory = DelayedOperationPurgatory("test", time)
        counter = {"events": 0}
        operations = [Countdown(delay, needed, counter) for needed, delay in ops]
        for op in operations:
            purgatory.try_complete_else_watch(op, ["k"])
        for step in steps:
            if step == "event":
                counter["events"] += 1
                purgatory.check_and_complete("k")
            else:
                time.advance(step)
            for op in operations:
                done = counter["events"] >= op.needed or op.expired
                assert op.future.done() == done
        time.advance(1000)
        assert all(op.completions == 1 for op in operations)
        assert purgatory.delayed == 0 and purgatory.watched("k") == 0

    asyncio.run(run())
