"""LeaderEpochFileCache: Kafka's assign / end_offset_for / truncation semantics, persisted."""

from __future__ import annotations

import bisect

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.storage.leader_epoch import UNDEFINED_EPOCH, LeaderEpochFileCache


def test_end_offset_for_follows_kafka(tmp_path):
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint", lambda: 100)
    cache.assign(2, 10)
    cache.assign(4, 30)
    cache.assign(7, 60)
    assert cache.end_offset_for(7) == (7, 100)  # latest epoch: the log end offset
    assert cache.end_offset_for(4) == (4, 60)
    assert cache.end_offset_for(5) == (4, 60)  # unknown epoch between: largest epoch <= it
    assert cache.end_offset_for(1) == (1, 10)  # before every epoch: first start offset
    assert cache.end_offset_for(8) == (UNDEFINED_EPOCH, -1)
    assert cache.end_offset_for(UNDEFINED_EPOCH) == (UNDEFINED_EPOCH, -1)
    assert cache.epoch_for_offset(45) == 4 and cache.epoch_for_offset(5) is None


def test_assign_keeps_both_columns_increasing_and_persists(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache(path)
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5), "same epoch at a later offset changes nothing"
    cache.assign(3, 20)
    cache.assign(5, 15)  # offset goes backwards: epoch 3 (start 20) is dropped
    assert cache.epoch_entries == [(1, 0), (5, 15)]
    cache.assign(4, 30)  # epoch goes backwards: epoch 5 dropped
    assert cache.epoch_entries == [(1, 0), (4, 30)]
    assert LeaderEpochFileCache(path).epoch_entries == [(1, 0), (4, 30)]
    assert path.read_text() == "0\n2\n1 0\n4 30\n"


def test_truncate_from_start_and_end(tmp_path):
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, offset in [(0, 0), (1, 10), (2, 20), (3, 30)]:
        cache.assign(epoch, offset)
    cache.truncate_from_end(25)
    assert cache.epoch_entries == [(0, 0), (1, 10), (2, 20)]
    cache.truncate_from_end(20)
    assert cache.epoch_entries == [(0, 0), (1, 10)]
    cache.truncate_from_start(15)
    assert cache.epoch_entries == [(1, 15)]
    cache.truncate_from_start(10)  # below the first entry: nothing
    assert cache.epoch_entries == [(1, 15)]


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 200)), max_size=30))
def test_entries_stay_strictly_increasing(tmp_path_factory, ops):
    cache = LeaderEpochFileCache(tmp_path_factory.mktemp("epochs") / "leader-epoch-checkpoint")
    for epoch, offset in ops:
        cache.assign(epoch, offset)
        entries = cache.epoch_entries
        assert entries[-1] == (epoch, offset) or (
            entries[-1].epoch == epoch and entries[-1].start_offset <= offset
        )
        epochs = [e.epoch for e in entries]
        starts = [e.start_offset for e in entries]
        assert epochs == sorted(set(epochs)) and starts == sorted(set(starts))
        # end_offset_for agrees with a bisect over the entries
        for requested in range(0, 22):
            got = cache.end_offset_for(requested, 1000)
            if requested == epochs[-1]:
                assert got == (requested, 1000)
                continue
            higher = bisect.bisect_right(epochs, requested)
            if higher == len(epochs):
                assert got == (UNDEFINED_EPOCH, -1)
            elif higher == 0:
                assert got == (requested, starts[0])
            else:
                assert got == (epochs[higher - 1], starts[higher])
