"""A log made or loaded empty and without producer snapshots says so
(``Log.empty_without_snapshots``), and a partition attaching it rebuilds no producer state: no
listing of its directory for snapshots (a restarted broker's LeaderAndIsr did one per
partition, on its loop). A log holding a batch, or a snapshot file, is rebuilt as before."""

from __future__ import annotations

import os

from kafkalite.broker.partition import Partition
from kafkalite.broker.producer_state import ProducerStateManager
from kafkalite.protocol.records import Record, build_batch
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log
from tests.broker.conftest import MockTime


def _reopen(path: str) -> Log:
    return Log(path, LogConfig(), had_clean_shutdown=True, existing=True)


def _listings(monkeypatch) -> list[str]:
    listed: list[str] = []
    original = ProducerStateManager.list_snapshot_offsets

    def counted(self):
        listed.append(self.log_dir)
        return original(self)

    monkeypatch.setattr(ProducerStateManager, "list_snapshot_offsets", counted)
    return listed


def _attach(log: Log) -> None:
    Partition(TopicPartition("t", 0), 1, MockTime()).attach_log(log)


def test_an_empty_log_without_snapshots_rebuilds_no_producer_state(tmp_path, monkeypatch):
    path = str(tmp_path / "t-0")
    new = Log(path, LogConfig())
    assert new.empty_without_snapshots
    new.close()
    loaded = _reopen(path)
    assert loaded.empty_without_snapshots
    listed = _listings(monkeypatch)
    _attach(loaded)
    assert listed == []
    loaded.close()


def test_a_snapshot_file_or_a_batch_is_rebuilt_as_before(tmp_path, monkeypatch):
    path = str(tmp_path / "t-0")
    Log(path, LogConfig()).close()
    with open(os.path.join(path, f"{0:020d}.snapshot"), "wb"):
        pass  # a snapshot left at offset 0 (unreadable: deleted when the state is rebuilt)
    with_snapshot = _reopen(path)
    assert not with_snapshot.empty_without_snapshots
    listed = _listings(monkeypatch)
    _attach(with_snapshot)
    assert [os.fspath(p) for p in listed] == [os.fspath(with_snapshot.dir)]
    with_snapshot.close()

    other = str(tmp_path / "t-1")
    log = Log(other, LogConfig())
    batch = bytearray(build_batch([Record(0, 0, None, b"v")], base_timestamp=1000))
    log.append_as_leader(batch, 0)
    log.close()
    with_data = _reopen(other)
    assert not with_data.empty_without_snapshots
    _attach(with_data)
    assert os.fspath(listed[-1]) == os.fspath(with_data.dir)
    with_data.close()
