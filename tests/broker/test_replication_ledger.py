"""Three in-process brokers, repeated leader changes decided like the controller does (a new
leader from the ISR, epoch bumped), acks=all and acks=1 writes in between: every write
acknowledged with acks=all is in the final log at its offset, and all replicas end identical
(the acknowledged-writes ledger of CONTRIBUTING.md, convention 15, without processes). With
``sessions`` the followers fetch in incremental fetch sessions (KIP-227) that the leaders'
caches sometimes lose (FETCH_SESSION_ID_NOT_FOUND), across the same leader and epoch changes."""

from __future__ import annotations

import asyncio
import random

import pytest

from kafkalite.broker.fetch_session import FetchSessionCache
from kafkalite.broker.replica_fetcher import (
    LocalLeaderEndPoint,
    ReplicaFetcherConfig,
    ReplicaFetcherManager,
)
from kafkalite.broker.replica_manager import ReplicaManager, ReplicaManagerConfig
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import iter_batch_headers
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log_manager import LogManager

from .conftest import MockTime, batch, leader_state, wait_until

TP = TopicPartition("t", 0)
BROKERS = (1, 2, 3)


def batches(log):
    info = log.read(log.log_start_offset, 1 << 30)
    return [(h.base_offset, h.crc) for _, h in iter_batch_headers(info.records.view())]


def epochs(log):
    info = log.read(log.log_start_offset, 1 << 30)
    return [h.partition_leader_epoch for _, h in iter_batch_headers(info.records.view())]


@pytest.mark.parametrize(
    "sessions", [False, True, "parked"], ids=["sessionless", "sessions", "parked"]
)
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_acknowledged_writes_survive_leader_changes(tmp_path, seed, sessions):
    rng = random.Random(seed)
    time = MockTime()
    managers, brokers = {}, {}
    # "parked": the leaders' sessions stop reading the partitions with no news (the park
    # hook), so every HW, LEO and leadership move must wake the waiting follower fetch.
    caches = {
        b: FetchSessionCache(
            10,
            time=time,
            park=(
                (lambda s, tp, d, b=b: brokers[b].park_idle_partition(s, tp, d))
                if sessions == "parked"
                else None
            ),
            forget_parked=(
                (lambda s, tp, b=b: brokers[b].forget_parked_partition(s, tp))
                if sessions == "parked"
                else None
            ),
        )
        for b in BROKERS
    }
    for b in BROKERS:
        lm = LogManager([str(tmp_path / f"b{b}")], LogConfig(min_insync_replicas=2))
        lm.startup()
        managers[b] = lm
        rm = ReplicaManager(b, lm, ReplicaManagerConfig(replica_lag_time_max_ms=10_000), time)
        rm.replica_fetcher_manager = ReplicaFetcherManager(
            rm,
            lambda leader, me=b: LocalLeaderEndPoint(
                brokers[leader], me, caches[leader] if sessions else None
            ),
            time,
            ReplicaFetcherConfig(replica_fetch_wait_max_ms=600_000, replica_fetch_backoff_ms=10),
        )
        brokers[b] = rm

    def logs():
        return {b: managers[b].get_log("t", 0) for b in BROKERS}

    epoch, controller_epoch, leader, isr = 0, 1, 1, BROKERS
    acked: dict[int, int] = {}  # offset -> crc of batches acknowledged with acks=all

    async def elect():
        # The new leader first: the requests yield to the loop, and a follower fetching from a
        # broker that is not leader yet would back off on the mock clock, which never moves.
        for b in sorted(BROKERS, key=lambda b: b != leader):
            await brokers[b].become_leader_or_follower_async(
                0,
                controller_epoch,
                [leader_state(leader=leader, leader_epoch=epoch, isr=isr, replicas=BROKERS)],
            )

    try:
        await elect()
        for _ in range(8):
            rm = brokers[leader]
            for _ in range(rng.randint(1, 4)):
                data = batch(rng.randint(1, 3), value=rng.randbytes(8))
                result = (await asyncio.wait_for(rm.append_records(60_000, -1, {TP: data}), 10))[TP]
                assert result.error_code is ErrorCode.NONE
                crc = dict(batches(logs()[leader]))[result.base_offset]
                acked[result.base_offset] = crc
            if sessions and rng.random() < 0.5:
                # The leader forgets its sessions (as after a restart or an eviction).
                for session_id in list(caches[leader].sessions):
                    caches[leader].remove(session_id)
            if rng.random() < 0.5:
                # An unreplicated tail: followers stop, the leader takes acks=1 writes that the
                # next leader will not have (they were never acknowledged to acks=all).
                for b in BROKERS:
                    brokers[b].replica_fetcher_manager.remove_fetcher_for_partitions([TP])
                await rm.append_records(1000, 1, {TP: batch(2)})
            # The controller: new leader from the current ISR, epoch bumped, ISR kept.
            isr = tuple(sorted(rm.partitions[TP].isr))
            leader = rng.choice(isr)
            epoch += 1
            controller_epoch += 1
            await elect()
            new_leader = brokers[leader]
            await wait_until(lambda rm=new_leader: set(rm.partitions[TP].isr) == set(BROKERS))

        final = logs()
        await wait_until(lambda: all(batches(final[b]) == batches(final[leader]) for b in BROKERS))
        present = dict(batches(final[leader]))
        for offset, crc in acked.items():
            assert present.get(offset) == crc, f"acknowledged batch at {offset} lost"
        if sessions:
            fetchers = [
                f for rm in brokers.values() for f in rm.replica_fetcher_manager.fetchers.values()
            ]
            assert any(f.session is not None and f.session.incremental_requests for f in fetchers)
        # Same leader epochs stamped everywhere (not covered by the CRC), never decreasing.
        stamped = epochs(final[leader])
        assert all(epochs(final[b]) == stamped for b in BROKERS)
        assert stamped == sorted(stamped)
    finally:
        for rm in brokers.values():
            await rm.shutdown()
        for lm in managers.values():
            lm.shutdown()
