"""The asyncio shell: futures completed by the core's decisions, appends through the writer,
timers through an injected manual clock, loading on election and unloading on resignation."""

from __future__ import annotations

import asyncio

import pytest

from kafkalite.group.config import GroupConfig, OffsetConfig
from kafkalite.group.coordinator import GroupCoordinator
from kafkalite.group.core import MemberIdentity
from kafkalite.group.metadata import GroupState, OffsetAndMetadata
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

from .support import (
    PARTITIONS,
    ManualTime,
    MemoryWriter,
    form_group,
    join,
    start,
    until,
)

TP = TopicPartition("t", 0)


async def test_group_forms_through_the_shell_with_a_manual_clock():
    c, writer, time = await start()
    ids, generation, leader = await form_group(c, time, "g", 3)
    assert generation == 1 and leader in ids
    assert c.core.groups["g"].state is GroupState.STABLE
    assert await c.heartbeat("g", ids[0], None, generation) is ErrorCode.NONE
    result = await c.commit_offsets(
        "g", ids[0], None, generation, {TP: OffsetAndMetadata(42, metadata="m")}
    )
    assert result == {TP: ErrorCode.NONE}
    err, offsets = c.fetch_offsets("g", [TP])
    assert err is ErrorCode.NONE and (offsets[TP].offset, offsets[TP].metadata) == (42, "m")
    assert writer.partitions[c.partition_for("g")]  # group and offset records written
    await c.shutdown()


async def test_session_timeout_through_timer_facility():
    c, _, time = await start()
    (a, b), generation, _ = await form_group(c, time, "g", 2)
    time.advance(6_000)
    assert await c.heartbeat("g", a, None, generation) is ErrorCode.NONE
    time.advance(6_000)  # b is silent past its 10 s session
    assert not c.core.groups["g"].has(b)
    assert await c.heartbeat("g", a, None, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    await c.shutdown()


async def test_commit_waits_for_the_write():
    c, writer, time = await start()
    writer.append_gate.clear()
    task = asyncio.ensure_future(c.commit_offsets("g", "", None, -1, {TP: OffsetAndMetadata(1)}))
    await until(lambda: writer.partitions.get(c.partition_for("g")))
    assert not task.done()
    assert c.fetch_offsets("g", [TP])[1][TP].offset == -1
    writer.append_gate.set()
    assert await task == {TP: ErrorCode.NONE}
    assert c.fetch_offsets("g", [TP])[1][TP].offset == 1
    await c.shutdown()


async def test_writer_exception_becomes_an_error_code():
    c, writer, _ = await start()
    writer.fail_with = RuntimeError("disk on fire")
    assert await c.commit_offsets("g", "", None, -1, {TP: OffsetAndMetadata(1)}) == {
        TP: ErrorCode.UNKNOWN_SERVER_ERROR
    }
    await c.shutdown()


async def test_restart_rebuilds_groups_and_offsets_from_the_log():
    c, writer, time = await start()
    ids, generation, leader = await form_group(c, time, "g", 2)
    await c.commit_offsets("g", ids[1], None, generation, {TP: OffsetAndMetadata(7, 0, "meta")})
    await c.commit_offsets("simple", "", None, -1, {TP: OffsetAndMetadata(3)})
    await c.shutdown()

    writer.read_gate.clear()
    c2 = GroupCoordinator(
        1, writer, GroupConfig(), OffsetConfig(offsets_topic_num_partitions=PARTITIONS), time
    )
    c2.startup()
    loads = [c2.on_election(p, 1) for p in range(PARTITIONS)]
    # while loading: clients are told to wait
    assert c2.fetch_offsets("g", [TP])[0] is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert (await join(c2, "g")).error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    writer.read_gate.set()
    await asyncio.gather(*loads)
    group = c2.core.groups["g"]
    assert (
        group.state is GroupState.STABLE
        and group.generation_id == generation
        and set(group.members) == set(ids)
    )
    offsets = c2.fetch_offsets("g", [TP])[1]
    assert (offsets[TP].offset, offsets[TP].metadata) == (7, "meta")
    assert c2.fetch_offsets("simple", [TP])[1][TP].offset == 3
    assert await c2.heartbeat("g", ids[0], None, generation) is ErrorCode.NONE
    await c2.shutdown()


async def test_resignation_answers_waiting_joins_and_refuses_requests():
    c, _, time = await start()
    (a, b), generation, leader = await form_group(c, time, "g", 2)
    waiting = join(c, "g", leader)
    await until(lambda: c.core.groups["g"].state is GroupState.PREPARING_REBALANCE)
    c.on_resignation(c.partition_for("g"), 0)
    assert (await waiting).error is ErrorCode.NOT_COORDINATOR
    assert await c.heartbeat("g", a, None, generation) is ErrorCode.NOT_COORDINATOR
    assert (await c.leave_group("g", [MemberIdentity(a)])).error is ErrorCode.NOT_COORDINATOR
    await c.shutdown()


async def test_admin_calls():
    c, _, time = await start()
    await form_group(c, time, "live", 1)
    await c.commit_offsets("idle", "", None, -1, {TP: OffsetAndMetadata(1)})
    err, groups = c.list_groups()
    assert err is ErrorCode.NONE and {g.group_id for g in groups} == {"live", "idle"}
    assert c.describe_group("live")[1].state == "Stable"
    err, lag = c.consumer_lag("idle", {TP: 10}.get)
    assert err is ErrorCode.NONE and lag == {TP: (1, 9)}
    assert c.consumer_lag("idle", lambda tp: None)[1] == {TP: (1, None)}
    assert await c.delete_groups(["idle", "live"]) == {
        "idle": ErrorCode.NONE,
        "live": ErrorCode.NON_EMPTY_GROUP,
    }
    result = await c.delete_offsets("live", [TopicPartition("other", 0)])
    assert result.error is ErrorCode.NONE
    await c.shutdown()


async def test_shutdown_cancels_waiting_requests():
    c, _, _ = await start()
    r = await join(c, "g")
    waiting = join(c, "g", r.member_id)
    await until(lambda: c.core.groups["g"].num_members_awaiting_join == 1)
    await c.shutdown()
    result = await asyncio.gather(waiting, return_exceptions=True)
    # answered NOT_COORDINATOR on unload (or cancelled): never left hanging
    assert (
        isinstance(result[0], asyncio.CancelledError)
        or result[0].error is ErrorCode.NOT_COORDINATOR
    )


@pytest.mark.parametrize("n", [1, 10])
async def test_rebalance_sizes(n):
    c, _, time = await start()
    ids, generation, _ = await form_group(c, time, f"g{n}", n)
    assert len(ids) == n and generation == 1
    await c.shutdown()


async def test_leadership_change_loads_led_partitions_and_unloads_the_rest():
    from kafkalite.broker.types import LeaderAndIsrPartitionState

    writer = MemoryWriter()
    c = GroupCoordinator(
        1,
        writer,
        GroupConfig(),
        OffsetConfig(offsets_topic_num_partitions=PARTITIONS),
        ManualTime(),
    )
    c.startup()

    def state(topic, p, leader, epoch):
        return LeaderAndIsrPartitionState(topic, p, 1, leader, epoch, (1, 2), 0, (1, 2))

    loads = c.on_leadership_change(
        1,
        [
            state("__consumer_offsets", 0, 1, 3),
            state("__consumer_offsets", 1, 2, 3),
            state("other", 0, 1, 3),
            state("__consumer_offsets", 2, 1, 3),
        ],
        {TopicPartition("__consumer_offsets", 2): ErrorCode.KAFKA_STORAGE_ERROR},
    )
    assert len(loads) == 1
    await asyncio.gather(*loads)
    assert set(c.core.owned_partitions()) == {0}
    # a repeated LeaderAndIsr at the same epoch changes nothing
    await asyncio.gather(*c.on_leadership_change(1, [state("__consumer_offsets", 0, 1, 3)]))
    assert set(c.core.owned_partitions()) == {0}
    # leadership of partition 0 moves to broker 2
    c.on_leadership_change(1, [state("__consumer_offsets", 0, 2, 4)])
    assert c.core.owned_partitions() == {}
    await c.shutdown()


async def test_a_new_epoch_of_a_partition_led_here_keeps_its_groups():
    """The controller bumps the leader epoch with the same leader when a follower of an offsets
    partition goes offline: the rebalance in progress, its waiting join and the members are
    kept (the partition used to be unloaded and reloaded from the log)."""
    from kafkalite.broker.types import LeaderAndIsrPartitionState

    c, _, time = await start()
    (a,), generation, _ = await form_group(c, time, "g", 1)
    partition = c.partition_for("g")
    first = await join(c, "g")
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED
    newcomer = join(c, "g", first.member_id)
    await until(lambda: c.core.groups["g"].state is GroupState.PREPARING_REBALANCE)
    bumped = LeaderAndIsrPartitionState("__consumer_offsets", partition, 1, 1, 1, (1,), 0, (1, 2))
    await asyncio.gather(*c.on_leadership_change(1, [bumped]))
    assert c.core.owned_partitions()[partition].name == "LOADED"
    rejoin = join(c, "g", a)  # every member has joined: the rebalance completes
    results = await asyncio.gather(newcomer, rejoin)
    assert [r.error for r in results] == [ErrorCode.NONE, ErrorCode.NONE]
    assert {r.generation_id for r in results} == {generation + 1}
    # a resignation at the old epoch is stale now
    c.on_resignation(partition, 0)
    assert c.core.is_group_local("g")
    await c.shutdown()


async def test_load_skips_records_of_newer_coordinators():
    from kafkalite.group.records import (
        OffsetCommitValue,
        encode_offset_commit_key,
        encode_offset_commit_value,
    )

    writer = MemoryWriter()
    p = 0
    group = next(
        g
        for g in (f"grp{i}" for i in range(100))
        if GroupCoordinator(
            1, writer, offset_config=OffsetConfig(offsets_topic_num_partitions=PARTITIONS)
        ).partition_for(g)
        == p
    )
    writer.partitions[p] = [
        (0, b"\x00\x03\x00\x01x", b"\x00\x00"),  # a KIP-848 record type (key version 3)
        (
            1,
            encode_offset_commit_key(group, "t", 0),
            encode_offset_commit_value(OffsetCommitValue(9, "", 1)),
        ),
    ]
    c = GroupCoordinator(
        1,
        writer,
        GroupConfig(),
        OffsetConfig(offsets_topic_num_partitions=PARTITIONS),
        ManualTime(),
    )
    c.startup()
    await c.on_election(p, 0)
    assert c.fetch_offsets(group, [TP])[1][TP].offset == 9
    await c.shutdown()


async def test_stale_resignation_does_not_stop_a_newer_load():
    writer = MemoryWriter()
    writer.read_gate.clear()
    c = GroupCoordinator(
        1,
        writer,
        GroupConfig(),
        OffsetConfig(offsets_topic_num_partitions=PARTITIONS),
        ManualTime(),
    )
    c.startup()
    load = c.on_election(0, 5)
    c.on_resignation(0, 4)  # an old StopReplica/LeaderAndIsr arriving late
    writer.read_gate.set()
    await load
    assert c.core.owned_partitions()[0].value == "loaded"
    c.on_resignation(0, 5)
    assert 0 not in c.core.owned_partitions()
    await c.shutdown()
