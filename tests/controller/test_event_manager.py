"""ControllerEventManager: one consumer, events in order, answers, failures at the boundary."""

import asyncio

import pytest

from kafkalite.controller.event_manager import ControllerEventManager
from kafkalite.protocol.errors import NotControllerError


async def test_events_are_processed_one_at_a_time_in_order():
    seen, running = [], []

    async def process(event):
        running.append(event)
        assert len(running) == 1, "two events processed at once"
        await asyncio.sleep(0)  # yield: another event must still wait
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
    gate = asyncio.Event()
    seen = []

    async def process(event):
        if event == "block":
            await gate.wait()
        seen.append(event)

    manager = ControllerEventManager(process)
    manager.start()
    manager.put("block")
    await asyncio.sleep(0)
    waiting = asyncio.ensure_future(manager.put_and_wait("dropped"))
    await asyncio.sleep(0)
    manager.clear_and_put("expire")
    gate.set()
    with pytest.raises(NotControllerError):  # Kafka's preempt(): the caller can answer
        await waiting
    await manager.wait_idle()
    assert seen == ["block", "expire"]
    await manager.close()
    with pytest.raises(RuntimeError):
        await manager.put_and_wait("late")
