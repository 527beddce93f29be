"""Partition: HW/ISR arithmetic against a model, ISR proposals, KIP-101 truncation."""

from __future__ import annotations

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.partition import (
    OffsetTruncationState,
    Partition,
    ReplicaState,
    offset_truncation_state,
)
from kafkalite.broker.producer_state import AppendOrigin
from kafkalite.broker.types import EpochEndOffset
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import Record, build_batch
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log

from .conftest import MockTime, batch, leader_state

LAG_MS = 1_000


def new_partition(root, broker_id=1, time=None):
    time = time or MockTime()
    log = Log(os.path.join(root, "t-0"), LogConfig())
    return Partition(TopicPartition("t", 0), broker_id, time, LAG_MS), log, time


def epoch_batch(base_offset, epoch, n=1):
    return build_batch(
        [Record(offset_delta=i, value=b"x") for i in range(n)],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


event = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 3)),
    st.tuples(st.just("fetch"), st.sampled_from([2, 3]), st.floats(0, 1)),
    st.tuples(st.just("tick"), st.integers(1, 800)),
    st.tuples(st.just("shrink")),
    st.tuples(st.just("commit")),
)


@settings(max_examples=60, deadline=None)
@given(events=st.lists(event, max_size=30), initial_isr=st.sampled_from([(1,), (1, 2), (1, 2, 3)]))
def test_hw_is_min_leo_over_maximal_isr(events, initial_isr):
    """After every event: HW <= LEO, HW never decreases, and HW equals the largest value
    reached by min(LEO over the maximal ISR) so far (unknown follower LEO = -1)."""
    with tempfile.TemporaryDirectory() as root:
        partition, log, time = new_partition(root)
        partition.make_leader(leader_state(isr=initial_isr, replicas=(1, 2, 3)), log)
        follower_leo = {2: -1, 3: -1}
        expected_hw = 0
        for ev in events:
            kind = ev[0]
            if kind == "append":
                partition.append_records_to_leader(batch(ev[1]), AppendOrigin.CLIENT, 1)
            elif kind == "fetch":
                _, rid, frac = ev
                # Followers only move forward (a truncating follower is another test).
                offset = max(follower_leo[rid], int(frac * log.log_end_offset))
                follower_leo[rid] = offset
                partition.update_follower_fetch_state(
                    rid, offset, 0, time.milliseconds(), log.log_end_offset
                )
                proposal = partition.maybe_expand_isr(rid)
                if proposal is not None:
                    assert rid in proposal.isr and rid not in partition.isr
                partition.maybe_increment_leader_hw(time.milliseconds())
            elif kind == "tick":
                time.advance(ev[1])
            elif kind == "shrink":
                proposal = partition.maybe_shrink_isr()
                if proposal is not None:
                    assert 1 in proposal.isr and set(proposal.isr) < partition.isr
            elif kind == "commit" and partition.pending_isr_update is not None:
                proposal = partition.pending_isr_update
                partition.complete_isr_update(proposal, proposal.zk_version + 1)
                assert partition.isr == set(proposal.isr)
            leo = log.log_end_offset
            candidate = min([leo] + [follower_leo[r] for r in partition.maximal_isr if r != 1])
            expected_hw = max(expected_hw, candidate)
            assert log.high_watermark == expected_hw
            assert log.high_watermark <= leo
            assert 1 in partition.isr
        log.close()


def test_replica_caught_up_time_follows_kafka():
    r = ReplicaState(2)
    r.update_fetch_state(10, 0, fetch_time_ms=100, leader_end_offset=10)
    assert r.last_caught_up_time_ms == 100
    # Behind the current LEO but at the LEO of the previous fetch: caught up as of then.
    r.update_fetch_state(10, 0, fetch_time_ms=200, leader_end_offset=15)
    assert r.last_caught_up_time_ms == 100
    r.update_fetch_state(15, 0, fetch_time_ms=300, leader_end_offset=20)
    assert r.last_caught_up_time_ms == 200
    assert r.is_caught_up(20, now_ms=300 + 10**6, replica_lag_time_max_ms=5) is False
    assert r.is_caught_up(15, now_ms=300 + 10**6, replica_lag_time_max_ms=5) is True


def test_isr_shrink_and_expand_proposals(tmp_path):
    partition, log, time = new_partition(str(tmp_path))
    partition.make_leader(leader_state(isr=(1, 2), replicas=(1, 2, 3), zk_version=4), log)
    partition.append_records_to_leader(batch(5), AppendOrigin.CLIENT, 1)
    assert partition.maybe_shrink_isr() is None  # 2 is in sync as of the election
    time.advance(LAG_MS + 1)
    proposal = partition.maybe_shrink_isr()
    assert (proposal.isr, proposal.zk_version, proposal.leader) == ((1,), 4, 1)
    assert partition.maybe_shrink_isr() is None  # one change in flight at a time
    assert partition.complete_isr_update(proposal, 5) is True  # HW moves to the LEO
    assert log.high_watermark == 5 and partition.zk_version == 5
    # 3 catches up to the HW (and the epoch start): proposed for the ISR.
    partition.update_follower_fetch_state(3, 4, 0, time.milliseconds(), 5)
    assert partition.maybe_expand_isr(3) is None  # below the HW
    partition.update_follower_fetch_state(3, 5, 0, time.milliseconds(), 5)
    proposal = partition.maybe_expand_isr(3)
    assert proposal.isr == (1, 3)
    # While pending, the HW already waits for 3.
    partition.append_records_to_leader(batch(1), AppendOrigin.CLIENT, 1)
    assert log.high_watermark == 5
    # A stale result (LeaderAndIsr arrived meanwhile) is ignored.
    partition.make_leader(
        leader_state(leader_epoch=1, isr=(1, 3), replicas=(1, 2, 3), zk_version=9), log
    )
    assert partition.complete_isr_update(proposal, 6) is False
    assert partition.zk_version == 9
    log.close()


def test_failed_cas_stops_leadership_until_next_leader_and_isr(tmp_path):
    partition, log, time = new_partition(str(tmp_path))
    partition.make_leader(leader_state(isr=(1, 2)), log)
    time.advance(LAG_MS + 1)
    proposal = partition.maybe_shrink_isr()
    partition.complete_isr_update(proposal, None)
    assert not partition.is_leader
    done, error = partition.check_enough_replicas_reach_offset(0)
    assert done and error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (
        partition.make_leader(leader_state(leader_epoch=1, isr=(1,), replicas=(1, 2)), log) is True
    )
    assert partition.is_leader
    log.close()


def test_new_leader_hw_waits_for_unknown_follower_leo(tmp_path):
    partition, log, time = new_partition(str(tmp_path))
    partition.make_leader(leader_state(isr=(1,), replicas=(1, 2)), log)
    partition.append_records_to_leader(batch(3), AppendOrigin.CLIENT, 1)
    assert log.high_watermark == 3
    # Re-elected with 2 in the ISR: HW holds until 2 fetches.
    partition.make_leader(leader_state(leader_epoch=1, isr=(1, 2), replicas=(1, 2)), log)
    partition.append_records_to_leader(batch(2), AppendOrigin.CLIENT, 1)
    assert log.high_watermark == 3
    partition.update_follower_fetch_state(2, 4, 0, time.milliseconds(), 5)
    assert partition.maybe_increment_leader_hw(time.milliseconds()) is True
    assert log.high_watermark == 4
    log.close()


def test_offset_truncation_state_rules():
    def eo(epoch, offset):
        return EpochEndOffset(ErrorCode.NONE, epoch, offset)

    # No answer from the leader: fall back to the HW.
    assert offset_truncation_state(eo(-1, -1), None, 10, 7) == OffsetTruncationState(7, True)
    # Same epoch on both sides: the smaller end offset of that epoch.
    assert offset_truncation_state(eo(3, 8), eo(3, 9), 12, 5) == OffsetTruncationState(8, True)
    assert offset_truncation_state(eo(3, 20), eo(3, 12), 12, 5) == OffsetTruncationState(12, True)
    # KIP-279: the follower's epoch 3 ended at 9 (it led epoch 4 from there, records the
    # leader never had): it truncates to 9, not to its log end.
    assert offset_truncation_state(eo(3, 20), eo(3, 9), 12, 5) == OffsetTruncationState(9, True)
    # The follower does not know the leader's epoch: truncate to its own end for the epoch
    # below, and ask again.
    assert offset_truncation_state(eo(3, 8), eo(2, 6), 12, 5) == OffsetTruncationState(6, False)
    assert offset_truncation_state(eo(3, 4), eo(2, 6), 12, 5) == OffsetTruncationState(6, False)
    # No epoch of the follower's at or below the leader's answer: the leader's end.
    assert offset_truncation_state(eo(3, 8), None, 12, 5) == OffsetTruncationState(8, True)


def test_kip101_truncation_keeps_acknowledged_data(tmp_path):
    """The seed's scenario fixed by KIP-101: the follower's divergent tail (epoch 1, never
    acknowledged) is removed; everything below the divergence stays even above its HW."""
    leader_root, follower_root = tmp_path / "l", tmp_path / "f"
    leader, leader_log, _ = new_partition(str(leader_root), broker_id=1)
    follower, follower_log, _ = new_partition(str(follower_root), broker_id=2)
    leader.make_leader(
        leader_state(leader=1, leader_epoch=0, isr=(1,), replicas=(1, 2)), leader_log
    )
    leader.append_records_to_leader(batch(3), AppendOrigin.CLIENT, 1)  # epoch 0: 0..2
    leader.make_leader(
        leader_state(leader=1, leader_epoch=2, isr=(1,), replicas=(1, 2)), leader_log
    )
    leader.append_records_to_leader(batch(2), AppendOrigin.CLIENT, 1)  # epoch 2: 3..4

    follower.make_follower(
        leader_state(leader=1, leader_epoch=2, isr=(1, 2), replicas=(1, 2)), follower_log
    )
    follower.append_records_to_follower(epoch_batch(0, 0, 3))  # same as the leader
    follower.append_records_to_follower(epoch_batch(3, 1, 3))  # divergent epoch 1: 3..5
    assert follower_log.high_watermark == 0 and follower_log.log_end_offset == 6

    answer = leader.last_offset_for_leader_epoch(-1, follower_log.latest_epoch, True)
    assert (answer.leader_epoch, answer.end_offset) == (0, 3)
    state = follower.truncate_to_leader_epoch(answer)
    assert state == OffsetTruncationState(3, True)
    assert follower_log.log_end_offset == 3  # truncation to the HW would have lost 0..2
    assert follower_log.latest_epoch == 0
    leader_log.close()
    follower_log.close()


def test_producer_state_rebuild_scans_in_chunks(tmp_path):
    """Headers are read chunk by chunk; a chunk ending inside a batch must not break the scan."""
    from kafkalite.broker.partition import iter_log_batch_headers

    partition, log, _ = new_partition(str(tmp_path))
    partition.make_leader(leader_state(), log)
    for seq in range(0, 40, 4):
        partition.append_records_to_leader(
            batch(4, value=b"q" * 50, producer_id=3, producer_epoch=0, base_sequence=seq),
            AppendOrigin.CLIENT,
            1,
        )
    size = len(batch(4, value=b"q" * 50, producer_id=3, producer_epoch=0, base_sequence=0))
    headers = list(iter_log_batch_headers(log, 0, chunk_bytes=size + size // 2))
    assert [h.base_offset for h in headers] == list(range(0, 40, 4))
    assert [h.base_offset for h in iter_log_batch_headers(log, 13, chunk_bytes=7)] == list(
        range(12, 40, 4)
    )
    partition.reload_producer_state()
    assert partition.producer_state.last_entry(3).last_seq == 39
    assert partition.producer_state.map_end_offset == 40
    log.close()


def test_compacted_topic_refuses_records_without_key(tmp_path):
    import pytest

    from kafkalite.protocol.errors import InvalidRecordError

    time = MockTime()
    log = Log(os.path.join(str(tmp_path), "t-0"), LogConfig(cleanup_policy="compact,delete"))
    partition = Partition(TopicPartition("t", 0), 1, time, LAG_MS)
    partition.make_leader(leader_state(isr=(1,), replicas=(1,)), log)
    keyed = build_batch([Record(key=b"k", value=b"v")], compression=1)
    mixed = build_batch([Record(key=b"k", value=b"v"), Record(value=b"no key")], compression=1)
    partition.append_records_to_leader(bytearray(keyed), AppendOrigin.CLIENT, 1)
    with pytest.raises(
        InvalidRecordError, match="Compacted topic cannot accept message without key"
    ) as refused:
        partition.append_records_to_leader(bytearray(keyed + mixed), AppendOrigin.CLIENT, 1)
    # KIP-467: the keyless record is named by its index (third record of the request)
    assert [e.batch_index for e in refused.value.record_errors] == [2]
    assert log.log_end_offset == 1  # nothing of the refused request was appended
    log.update_config(LogConfig())
    partition.append_records_to_leader(bytearray(mixed), AppendOrigin.CLIENT, 1)
    assert log.log_end_offset == 3
    log.close()


def test_a_partition_names_its_log_directory_to_the_producer_state_as_a_str(tmp_path):
    # a loaded Log makes its Path only when asked for; a restart's LeaderAndIsr attaches
    # 10,000 of them on the loop, so the producer state takes the directory's str
    path = str(tmp_path / "t-0")
    log = Log(path, LogConfig())
    log.append_as_leader(epoch_batch(0, 0, n=2), 0)
    log.close()
    loaded = Log(path, LogConfig(), existing=True, topic_partition=("t", 0))
    partition = Partition(TopicPartition("t", 0), 1, MockTime(), LAG_MS)
    partition.make_leader(leader_state(leader_epoch=1), loaded)
    assert partition.producer_state.log_dir == path
    assert partition.log.log_end_offset == 2


def test_remote_replicas_follow_the_assignment_across_roles(tmp_path):
    """A leader has one ReplicaState per other assigned replica, kept (with what it knows of
    the follower) when only the ISR or epoch changes, rebuilt when the assignment changes; a
    follower has none, and one made leader again gets them back."""
    partition, log, time = new_partition(str(tmp_path))
    partition.make_leader(leader_state(isr=(1, 2, 3), replicas=(1, 2, 3)), log)
    partition.append_records_to_leader(batch(2), AppendOrigin.CLIENT, 1)
    partition.update_follower_fetch_state(2, 2, 0, time.milliseconds(), 2)
    follower_two = partition.remote_replicas[2]
    # An ISR shrink at a new epoch, the same replicas: the same states, the follower's LEO kept.
    partition.make_leader(leader_state(leader_epoch=1, isr=(1, 2), replicas=(1, 2, 3)), log)
    assert set(partition.remote_replicas) == {2, 3}
    assert partition.remote_replicas[2] is follower_two
    assert follower_two.log_end_offset == 2
    # A reassignment: 3 replaced by 4.
    partition.make_leader(leader_state(leader_epoch=2, isr=(1, 2), replicas=(1, 2, 4)), log)
    assert set(partition.remote_replicas) == {2, 4}
    assert partition.remote_replicas[2] is follower_two
    # Made follower: no remote replica; leader again of the same replicas: all of them back.
    partition.make_follower(
        leader_state(leader=2, leader_epoch=3, isr=(1, 2), replicas=(1, 2, 4)), log
    )
    assert partition.remote_replicas == {}
    partition.make_leader(leader_state(leader_epoch=4, isr=(1, 2), replicas=(1, 2, 4)), log)
    assert set(partition.remote_replicas) == {2, 4}
    assert all(isinstance(r, ReplicaState) for r in partition.remote_replicas.values())
    log.close()
