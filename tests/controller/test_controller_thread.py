"""The controller on a thread and loop of its own (``controller_thread.py``), on a real ZooKeeper.

A broker whose controller's loop is held keeps serving (the data plane is not behind a
controller event); the controller still acts through its own loop (a topic is created and
led, a preferred election is answered); stopping the broker ends the controller's thread.

The hold blocks the controller's loop on purpose (a controller event computing for a long
time): that blocking call is the thing under test, not a way to wait for something.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.controller.controller_thread import ControllerThread
from kafkalite.protocol.errors import ErrorCode, NotControllerError
from kafkalite.testing import Broker, ZooKeeperMissing, ZooKeeperServer, api_versions_ok, wait_for


@pytest.fixture(scope="module")
def zookeeper_server():
    try:
        server = ZooKeeperServer()
    except ZooKeeperMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    server.start()
    yield server
    server.cleanup()


def controller_threads(broker_id: int) -> list[threading.Thread]:
    return [
        t for t in threading.enumerate() if t.name == f"controller-{broker_id}" and t.is_alive()
    ]


def test_the_broker_serves_while_its_controllers_loop_is_held(zookeeper_server):
    broker = Broker({"zookeeper.connect": zookeeper_server.connect_string("/held")}, broker_id=7)
    with broker:
        controller = broker.server.controller
        wait_for(lambda: controller.is_active, "broker 7 is the controller")
        assert isinstance(controller, ControllerThread)
        # The loop the controller's events run on (the broker's own when it has none).
        loop = getattr(controller, "loop", None) or broker._thread.loop
        held, release = threading.Event(), threading.Event()
        loop.call_soon_threadsafe(lambda: (held.set(), release.wait(120)))
        assert held.wait(30)
        try:
            # Answered while the controller's loop is still held: on the broker's loop this
            # request would wait for the release.
            assert api_versions_ok(broker.host, broker.port, timeout=30)
            assert not release.is_set()
        finally:
            release.set()

        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("t", 3, 1)])["t"].result(30)

        def led() -> bool:
            parts = admin.list_topics("t", timeout=10).topics["t"].partitions
            return len(parts) == 3 and all(p.leader == 7 for p in parts.values())

        wait_for(led, "the topic's partitions led")
        outcomes = asyncio.run_coroutine_threadsafe(
            controller.elect_preferred_leaders(None), broker._thread.loop
        ).result(30)
        assert {(tp.topic, tp.partition) for tp in outcomes} == {("t", p) for p in range(3)}
        assert set(outcomes.values()) == {ErrorCode.ELECTION_NOT_NEEDED}
        assert controller_threads(7)
    assert controller_threads(7) == []
    with pytest.raises(NotControllerError):  # a stopped controller answers as Kafka's would
        asyncio.run(controller.elect_preferred_leaders(None))
