"""Fetch reads against an oracle: whole batches from the one holding the fetch offset, within
the partition and request byte limits (the first non-empty partition may exceed them by one
batch), never past the high watermark for consumers or the log end for followers. Followers
fetch from batch boundaries (their log ends), so the high watermark is always one, as in a
real cluster (Kafka answers nothing from a batch the HW cuts)."""

from __future__ import annotations

import asyncio
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.types import FetchInfo, FetchParams
from kafkalite.protocol.records import iter_batch_headers
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log_manager import LogManager

from .conftest import MockTime, batch, leader_state

TP = TopicPartition("t", 0)


def expected(batches, fetch_offset, limit, end, min_one):
    """Oracle: batches are (base, next, size) in order."""
    out, used = [], 0
    for base, nxt, size in batches:
        if nxt <= fetch_offset:
            continue
        if base >= end:
            break
        if used + size > limit and not (min_one and not out):
            break
        out.append(base)
        used += size
    return out


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 300)), min_size=1, max_size=12),
    follower_at=st.integers(0, 60),
    queries=st.lists(
        st.tuples(st.integers(0, 60), st.integers(0, 2000), st.integers(0, 3000), st.booleans()),
        min_size=1,
        max_size=8,
    ),
)
def test_fetch_matches_oracle(sizes, follower_at, queries):
    async def run():
        with tempfile.TemporaryDirectory() as root:
            lm = LogManager([root], LogConfig())
            lm.startup()
            rm = ReplicaManager(1, lm, None, MockTime())
            await rm.become_leader_or_follower_async(
                0, 1, [leader_state(isr=(1, 2), replicas=(1, 2))]
            )
            batches = []
            for count, value_size in sizes:
                data = batch(count, value=b"v" * value_size)
                result = (await rm.append_records(1000, 1, {TP: data}))[TP]
                batches.append((result.base_offset, result.last_offset + 1, len(data)))
            leo = batches[-1][1]
            # A follower fetches from its log end, a batch boundary: so is the HW it makes.
            boundaries = [0] + [nxt for _, nxt, _ in batches]

            def boundary_at_or_below(offset: int) -> int:
                return max(b for b in boundaries if b <= offset)

            hw_target = boundary_at_or_below(follower_at)
            await rm.fetch_messages(
                FetchParams(replica_id=2), {TP: FetchInfo(hw_target, 1 << 20, 0)}
            )
            log = lm.get_log("t", 0)
            assert log.high_watermark == hw_target
            for offset, part_max, req_max, follower in queries:
                if follower and offset <= leo:
                    offset = boundary_at_or_below(offset)
                hw = log.high_watermark  # a follower query may move it, after its read
                params = FetchParams(replica_id=2 if follower else -1, max_bytes=req_max)
                res = (await rm.fetch_messages(params, {TP: FetchInfo(offset, part_max, 0)}))[TP]
                if offset > leo:
                    assert res.error_code.name == "OFFSET_OUT_OF_RANGE"
                    continue
                end = leo if follower else hw
                want = expected(batches, offset, min(part_max, req_max), end, True)
                data = res.records.view() if hasattr(res.records, "view") else res.records
                got = [h.base_offset for _, h in iter_batch_headers(data)]
                assert got == want, (offset, part_max, req_max, follower)
                assert res.high_watermark == hw
            await rm.shutdown()
            lm.shutdown()

    asyncio.run(run())
