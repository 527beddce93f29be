"""A LeaderAndIsr of many partitions is applied in slices with other requests answered between
them, its answer unchanged, and the requests after it applied after it.

Through the broker's own dispatcher and handler on a real ReplicaManager and LogManager. The
slices' time budget is set to zero here so every item ends a slice (the order of events is
then deterministic; no timing is asserted: bench/broker_loop_bench.py measures the holds).
Observed in order: a concurrent task dispatches ApiVersions and produces to a partition the
request does not name, noting at each answer how far the LeaderAndIsr has got; a LeaderAndIsr
applied in one callback would show no answer between its start and its end."""

from __future__ import annotations

import asyncio
import inspect
import uuid

import pytest

import kafkalite.apis.leader_and_isr as leader_and_isr_handler
import kafkalite.broker.replica_manager as replica_manager_module
from kafkalite.apis import load_handlers
from kafkalite.apis.base import BrokerServices, build
from kafkalite.apis.dispatcher import ApiDispatcher
from kafkalite.broker.types import LeaderAndIsrPartitionState
from kafkalite.config import BrokerConfig
from kafkalite.network.connection import ConnectionInfo
from kafkalite.protocol import frames
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition
from tests.broker.conftest import batch
from tests.loop_turns import next_turn

load_handlers()

BROKER = 1
OTHER = TopicPartition("other", 0)


@pytest.fixture(autouse=True)
def every_item_ends_a_slice(monkeypatch):
    monkeypatch.setattr(leader_and_isr_handler, "LEADER_AND_ISR_SLICE_SECONDS", 0.0, raising=False)
    monkeypatch.setattr(replica_manager_module, "LEADER_AND_ISR_SLICE_SECONDS", 0.0, raising=False)


def partition(p: int, *, leader: int = BROKER, epoch: int = 0, replicas=(BROKER,)) -> dict:
    return {
        "partition_index": p,
        "controller_epoch": 1,
        "leader": leader,
        "leader_epoch": epoch,
        "isr": list(replicas),
        "zk_version": 0,
        "replicas": list(replicas),
        "is_new": True,
    }


def leader_and_isr_frame(
    topics: dict[str, list[dict]], *, version: int = 5, controller_epoch: int = 1
) -> bytearray:
    request = build(
        request_class(ApiKey.LEADER_AND_ISR, version),
        {
            "controller_id": 2,
            "controller_epoch": controller_epoch,
            "broker_epoch": -1,
            "type": 0,
            "topic_states": [
                {"topic_name": name, "topic_id": uuid.uuid4(), "partition_states": states}
                for name, states in topics.items()
            ],
            "live_leaders": [],
        },
    )
    return bytearray(frames.encode_request(ApiKey.LEADER_AND_ISR, version, 7, "ctl", request)[4:])


def stop_replica_frame(topic: str, partitions: list[int], *, epoch: int) -> bytearray:
    request = build(
        request_class(ApiKey.STOP_REPLICA, 3),
        {
            "controller_id": 2,
            "controller_epoch": 1,
            "broker_epoch": -1,
            "topic_states": [
                {
                    "topic_name": topic,
                    "partition_states": [
                        {"partition_index": p, "leader_epoch": epoch, "delete_partition": True}
                        for p in partitions
                    ],
                }
            ],
        },
    )
    return bytearray(frames.encode_request(ApiKey.STOP_REPLICA, 3, 8, "ctl", request)[4:])


API_VERSIONS = bytes(
    frames.encode_request(
        ApiKey.API_VERSIONS,
        3,
        9,
        "client",
        build(
            request_class(ApiKey.API_VERSIONS, 3),
            {"client_software_name": "kafkalite-test", "client_software_version": "1.0"},
        ),
    )[4:]
)


@pytest.fixture
def broker(make_rm):
    rm = make_rm(broker_id=BROKER)
    services = BrokerServices(
        config=BrokerConfig.load(environ={}),
        broker_id=BROKER,
        replica_manager=rm,
        log_manager=rm.log_manager,
    )
    dispatcher = ApiDispatcher(services)
    dispatcher.ready.set()
    return rm, dispatcher


async def dispatch(dispatcher, frame, api_key: int, version: int):
    result = dispatcher.dispatch(bytearray(frame), ConnectionInfo("127.0.0.1", 5555, "PLAINTEXT"))
    if inspect.isawaitable(result):
        result = await result
    data = b"".join(bytes(b) for b in result) if isinstance(result, list) else bytes(result)
    return frames.decode_response(api_key, version, data[4:])[1]


def answer_errors(response, topics: dict[str, list[dict]]) -> dict[TopicPartition, ErrorCode]:
    if hasattr(response, "topics"):
        # v5+: by topic id, in the request's order of topics
        return {
            TopicPartition(name, p.partition_index): p.error_code
            for name, answered in zip(topics, response.topics, strict=True)
            for p in answered.partition_errors
        }
    return {
        TopicPartition(p.topic_name, p.partition_index): p.error_code
        for p in response.partition_errors
    }


@pytest.mark.parametrize("version", [4, 5, 7])
async def test_other_requests_are_answered_between_the_slices_and_the_answer_is_unchanged(
    broker, version
):
    rm, dispatcher = broker
    await rm.become_leader_or_follower_async(
        2,
        1,
        [
            LeaderAndIsrPartitionState(
                "other", 0, 1, BROKER, 0, (BROKER,), 0, (BROKER,), is_new=True
            )
        ],
    )
    # already led at epoch 3: this request's epoch 3 is stale for them
    await rm.become_leader_or_follower_async(
        2,
        1,
        [
            LeaderAndIsrPartitionState(
                "bulk", p, 1, BROKER, 3, (BROKER,), 0, (BROKER,), is_new=True
            )
            for p in range(10)
        ],
    )
    n = 600
    topics = {
        "bulk": [
            partition(p, epoch=3)
            if p < 10
            else partition(p, replicas=(2, 3), leader=2)  # not a replica here
            if p % 50 == 0
            else partition(p, leader=2, replicas=(BROKER, 2))  # followed (leader elsewhere)
            if p % 3 == 0
            else partition(p)
            for p in range(n)
        ],
        "second": [partition(p) for p in range(5)],
    }
    expected = {
        **{
            TopicPartition("bulk", p): ErrorCode.STALE_CONTROLLER_EPOCH
            if p < 10
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if p % 50 == 0
            else ErrorCode.NONE
            for p in range(n)
        },
        **{TopicPartition("second", p): ErrorCode.NONE for p in range(5)},
    }

    def applied() -> int:
        return sum(
            1
            for tp, part in rm.partitions.items()
            if (tp.topic == "second" or (tp.topic == "bulk" and tp.partition >= 10))
            and part.log is not None
        )

    done = False
    seen: list[tuple[str, int, bool]] = []  # (what answered, partitions applied, L&I answered)

    async def client() -> None:
        while not done:
            answer = await dispatch(dispatcher, API_VERSIONS, ApiKey.API_VERSIONS, 3)
            assert answer.error_code == ErrorCode.NONE
            seen.append(("api_versions", applied(), done))
            result = (await rm.append_records(30_000, 1, {OTHER: batch()}))[OTHER]
            assert result.error_code is ErrorCode.NONE
            seen.append(("produce", applied(), done))
            await next_turn()

    other = asyncio.ensure_future(client())
    response = await dispatch(
        dispatcher, leader_and_isr_frame(topics, version=version), ApiKey.LEADER_AND_ISR, version
    )
    done = True
    await other

    assert response.error_code == ErrorCode.NONE
    assert answer_errors(response, topics) == expected
    total = sum(1 for e in expected.values() if e is ErrorCode.NONE)
    assert applied() == total
    during = [s for s in seen if not s[2]]
    # answered before any partition was applied (the states read and classified in slices),
    # while some were (made leader or follower in slices), and after all of them but before
    # the LeaderAndIsr's answer (the answer built in slices)
    assert any(count == 0 for _, count, _ in during)
    assert any(0 < count < total for _, count, _ in during)
    assert sum(1 for _, count, _ in during if count == total) >= 10
    # the slices are bounded: with a zero time budget a few partitions at most between answers
    counts = [count for _, count, _ in during]
    assert max(b - a for a, b in zip(counts, counts[1:], strict=False)) <= 5
    assert {what for what, _, _ in during} == {"api_versions", "produce"}
    assert rm.partitions[TopicPartition("bulk", 11)].is_leader
    assert not rm.partitions[TopicPartition("bulk", 12)].is_leader


async def test_requests_after_it_are_applied_after_it_in_their_order(broker):
    rm, dispatcher = broker
    n = 300
    first = asyncio.ensure_future(
        dispatch(
            dispatcher,
            leader_and_isr_frame({"t": [partition(p, epoch=1) for p in range(n)]}),
            ApiKey.LEADER_AND_ISR,
            5,
        )
    )
    second = asyncio.ensure_future(
        dispatch(
            dispatcher,
            leader_and_isr_frame(
                {"t": [partition(p, epoch=2, leader=2, replicas=(BROKER, 2)) for p in range(n)]}
            ),
            ApiKey.LEADER_AND_ISR,
            5,
        )
    )
    stale = asyncio.ensure_future(
        dispatch(
            dispatcher,
            leader_and_isr_frame(
                {"t": [partition(p, epoch=9) for p in range(n)]}, controller_epoch=0
            ),
            ApiKey.LEADER_AND_ISR,
            5,
        )
    )
    stop = asyncio.ensure_future(
        dispatch(
            dispatcher,
            stop_replica_frame("t", list(range(0, n, 2)), epoch=2),
            ApiKey.STOP_REPLICA,
            3,
        )
    )
    finished: list[str] = []
    for name, task in (("first", first), ("second", second), ("stale", stale), ("stop", stop)):
        task.add_done_callback(lambda _, name=name: finished.append(name))
    answers = await asyncio.gather(first, second, stale, stop)
    assert finished == ["first", "second", "stale", "stop"]
    for answer in answers[:2]:
        assert answer.error_code == ErrorCode.NONE
        assert {p.error_code for t in answer.topics for p in t.partition_errors} == {ErrorCode.NONE}
    # an older controller's request after them fails as a whole
    assert answers[2].error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert answers[3].error_code == ErrorCode.NONE
    assert {p.error_code for p in answers[3].partition_errors} == {ErrorCode.NONE}
    for p in range(n):
        tp = TopicPartition("t", p)
        if p % 2 == 0:
            assert tp not in rm.partitions
            assert rm.log_manager.get_log("t", p) is None
        else:
            assert rm.partitions[tp].leader_epoch == 2
            assert not rm.partitions[tp].is_leader
