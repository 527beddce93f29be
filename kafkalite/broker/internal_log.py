"""Reading a coordinator's internal partition from its leader log (``__consumer_offsets``,
``__transaction_state``): what a coordinator does when it becomes the partition's leader.

Batch by batch from the log start up to the log end offset seen when the load began,
``buffer_size`` bytes at a time. Records appended after that are the coordinator's own and are
already in its memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kafkalite.broker.partition import records_bytes
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
