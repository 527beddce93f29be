"""What the coordinators on internal partitions (``__consumer_offsets``, ``__transaction_state``)
share: following the leadership of their partitions, and reading one from its leader log when
they become its leader.

Reading: batch by batch from the log start up to the log end offset seen when the load began,
``buffer_size`` bytes at a time. Records appended after that are the coordinator's own and are
already in its memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any

from kafkalite.broker.partition import records_bytes
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import iter_batches
from kafkalite.protocol.types import TopicPartition


def iter_leader_batches(
    replica_manager: Any, tp: TopicPartition, buffer_size: int
) -> Iterator[tuple[Any, list[Any]]]:
    """(batch header, its records) of ``tp``'s leader log, control batches included."""
    log = replica_manager.get_partition_or_raise(tp).leader_log_or_raise()
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        data = log.read(offset, buffer_size, max_offset=end, min_one_message=True)
        # a copy: the coordinator yields to the loop while loading, and the log may roll, clean
        # or truncate under a view of its segment meanwhile
        buf = bytes(records_bytes(data.records)) if data.records is not None else b""
        progressed = False
        for header, batch_records in iter_batches(buf):
            if header.next_offset <= offset:
                continue
            progressed = True
            offset = header.next_offset
            yield header, batch_records
        if not progressed:
            return


def apply_leadership_change(
    topic: str,
    broker_id: int,
    states: Iterable[Any],
    errors: dict[TopicPartition, ErrorCode] | None,
    on_election: Callable[[int, int], Any],
    on_resignation: Callable[[int, int], None],
) -> list[Any]:
    """The ``topic`` part of a LeaderAndIsr request the ReplicaManager accepted (Kafka's
    KafkaApis.onLeadershipChange): ``on_election(partition, leader_epoch)`` for the partitions
    this broker now leads, ``on_resignation`` for the others; a partition answered with an
    error is left alone. Returns what the elections returned (their load tasks)."""
    loads = []
    for state in states:
        if state.topic != topic:
            continue
        tp = TopicPartition(state.topic, state.partition)
        if errors is not None and errors.get(tp, ErrorCode.NONE) != ErrorCode.NONE:
            continue
        if state.leader == broker_id:
            loads.append(on_election(state.partition, state.leader_epoch))
        else:
            on_resignation(state.partition, state.leader_epoch)
    return loads


def current_load(loads: dict[int, asyncio.Task], partition: int) -> asyncio.Future:
    """The load of ``partition`` in progress, or a future already done when there is none."""
    current = loads.get(partition)
    if current is not None:
        return current
    done = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


def start_load(
    loads: dict[int, asyncio.Task], partition: int, load: Coroutine[Any, Any, None]
) -> asyncio.Task:
    """Run ``load`` as the load of ``partition``, cancelling one in progress; the task leaves
    ``loads`` when it ends (unless a newer load took its place)."""
    previous = loads.pop(partition, None)
    if previous is not None:
        previous.cancel()
    task = asyncio.get_running_loop().create_task(load)
    loads[partition] = task
    task.add_done_callback(lambda t: loads.get(partition) is t and loads.pop(partition))
    return task
