"""Alter/ListPartitionReassignments through the dispatcher over a fake controller."""

import datetime
from dataclasses import dataclass, field

import pytest

from kafkalite.client.messages import build_message
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.errors import ErrorCode, NotControllerError
from kafkalite.protocol.types import TopicPartition as TP
from kafkalite.zk.types import ReplicaAssignment

NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."


@dataclass
class FakeController:
    is_active: bool = True
    altered: list = field(default_factory=list)
    listed: list = field(default_factory=list)
    fail: Exception | None = None

    async def alter_partition_reassignments(self, reassignments):
        self.altered.append(dict(reassignments))
        if self.fail is not None:
            raise self.fail
        return {
            tp: (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
            if r is None
            else (ErrorCode.NONE, None)
            for tp, r in reassignments.items()
        }

    async def list_partition_reassignments(self, partitions):
        self.listed.append(partitions)
        if self.fail is not None:
            raise self.fail
        ongoing = {
            TP("t", 0): ReplicaAssignment((2, 0), adding_replicas=(2,), removing_replicas=(0,)),
            TP("u", 3): ReplicaAssignment((1, 0), adding_replicas=(1,)),
        }
        return {tp: a for tp, a in ongoing.items() if partitions is None or tp in partitions}


@pytest.fixture
def controller(services):
    services.controller = FakeController()
    return services.controller


def alter(topics):
    return build_message(
        request_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0),
        timeout=datetime.timedelta(seconds=5),
        topics=[
            {
                "name": name,
                "partitions": [{"partition_index": p, "replicas": r} for p, r in parts],
            }
            for name, parts in topics
        ],
    )


def listing(topics):
    return build_message(
        request_class(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0),
        timeout=datetime.timedelta(seconds=5),
        topics=None
        if topics is None
        else [{"name": n, "partition_indexes": ps} for n, ps in topics],
    )


async def test_alter_passes_targets_and_cancellations(call, controller):
    response = await call(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        0,
        alter([("t", [(0, [2, 1]), (1, None)]), ("u", [(0, [0])])]),
    )
    assert controller.altered == [{TP("t", 0): (2, 1), TP("t", 1): None, TP("u", 0): (0,)}]
    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
    got = {
        (t.name, p.partition_index): (p.error_code, p.error_message)
        for t in response.responses
        for p in t.partitions
    }
    assert got == {
        ("t", 0): (ErrorCode.NONE, None),
        ("t", 1): (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None),
        ("u", 0): (ErrorCode.NONE, None),
    }
    assert [t.name for t in response.responses] == ["t", "u"]


async def test_list_all_or_named(call, controller):
    response = await call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing(None))
    assert controller.listed == [None]
    got = {
        (t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
        for t in response.topics
        for p in t.partitions
    }
    assert got == {("t", 0): ((2, 0), (2,), (0,)), ("u", 3): ((1, 0), (1,), ())}
    response = await call(
        ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing([("u", [3, 4]), ("x", [0])])
    )
    assert controller.listed[1] == [TP("u", 3), TP("u", 4), TP("x", 0)]
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics] == [
        ("u", [3])
    ]


async def test_not_controller_answers(call, controller):
    controller.is_active = False  # no controller in the (absent) metadata to forward to
    response = await call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, alter([("t", [(0, [1])])]))
    assert (response.error_code, response.error_message, response.responses) == (
        ErrorCode.NOT_CONTROLLER,
        NOT_CONTROLLER_MESSAGE,
        (),
    )
    response = await call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing(None))
    assert (response.error_code, response.topics) == (ErrorCode.NOT_CONTROLLER, ())
    controller.is_active = True
    controller.fail = NotControllerError("moved")
    response = await call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, alter([("t", [(0, [1])])]))
    assert response.error_code == ErrorCode.NOT_CONTROLLER
    response = await call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing(None))
    assert response.error_code == ErrorCode.NOT_CONTROLLER
    assert controller.altered and controller.listed
