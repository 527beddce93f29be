"""ControllerEventManager: one consumer, events in order, answers, failures at the boundary."""

import asyncio

import pytest

from kafkalite.controller.event_manager import ControllerEventManager
from kafkalite.protocol.errors import NotControllerError
from tests.controller.shell_support import eventually
from tests.loop_turns import next_turn


async def test_events_are_processed_one_at_a_time_in_order():
    seen, running = [], []

    async def process(event):
        running.append(event)
        assert len(running) == 1, "two events processed at once"
        # give the loop back mid-event: a second consumer (or a consumer not waiting for this
        # event to end) would start the next queued event here and trip the assertion above
        await next_turn()
        seen.append(event)
        running.remove(event)
        return event * 10

    manager = ControllerEventManager(process)
    manager.start()
    for i in range(20):
        manager.put(i)
    assert await manager.put_and_wait(99) == 990
    assert seen == [*range(20), 99]
    await manager.close()
    assert not manager.is_running


async def test_a_failing_event_is_answered_with_its_error_and_the_loop_goes_on():
    async def process(event):
        if event == "bad":
            raise ValueError("broken")
        return event

    manager = ControllerEventManager(process)
    manager.start()
    with pytest.raises(ValueError):
        await manager.put_and_wait("bad")
    assert await manager.put_and_wait("good") == "good"
    assert manager.errors == []  # answered to its caller
    manager.put("bad")
    await manager.wait_idle()
    assert [type(e) for _, e in manager.errors] == [ValueError]  # nobody waited: recorded
    await manager.close()


async def test_clear_and_put_drops_queued_events():
    gate, blocking = asyncio.Event(), asyncio.Event()
    seen = []

    async def process(event):
        if event == "block":
            blocking.set()
            await gate.wait()
        seen.append(event)

    manager = ControllerEventManager(process)
    manager.start()
    manager.put("block")
    await asyncio.wait_for(blocking.wait(), 5)  # "block" is being processed
    waiting = asyncio.ensure_future(manager.put_and_wait("dropped"))
    await eventually(lambda: manager.queue_size == 1, message="'dropped' queued")
    manager.clear_and_put("expire")
    gate.set()
    with pytest.raises(NotControllerError):  # Kafka's preempt(): the caller can answer
        await waiting
    await manager.wait_idle()
    assert seen == ["block", "expire"]
    await manager.close()
    with pytest.raises(RuntimeError):
        await manager.put_and_wait("late")
