"""LogManager.startup pauses the cyclic garbage collector while the logs load (everything it
makes lives on: full collections over the growing heap only cost time) and puts it back as it
was afterwards, also when the start-up fails."""

from __future__ import annotations

import asyncio
import gc

import pytest

from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import StorageError
from kafkalite.storage.log_manager import LogManager


def _logs(tmp_path, count: int = 5) -> str:
    dir = str(tmp_path / "logs")
    manager = LogManager([dir], LogConfig())
    manager.startup()
    asyncio.run(manager.create_logs([("t", p, None, True) for p in range(count)]))
    manager.shutdown()
    return dir


def test_the_collector_is_paused_while_loading_and_restored_after(tmp_path, monkeypatch):
    dir = _logs(tmp_path)
    seen: list[bool] = []
    manager = LogManager([dir], LogConfig())
    original = manager._plan_dir

    def plan(d):
        seen.append(gc.isenabled())
        return original(d)

    monkeypatch.setattr(manager, "_plan_dir", plan)
    assert gc.isenabled()
    manager.startup()
    try:
        assert seen == [False]
        assert gc.isenabled()
        assert len(manager.all_logs()) == 5
    finally:
        manager.shutdown()


def test_a_disabled_collector_stays_disabled(tmp_path):
    dir = _logs(tmp_path)
    manager = LogManager([dir], LogConfig())
    gc.disable()
    try:
        manager.startup()
        assert not gc.isenabled()
    finally:
        gc.enable()
        manager.shutdown()


def test_the_collector_is_restored_when_the_start_up_fails(tmp_path, monkeypatch):
    manager = LogManager([str(tmp_path / "logs")], LogConfig())

    def failing(dirs):
        raise StorageError("boom")

    monkeypatch.setattr(manager, "_load_dirs", failing)
    with pytest.raises(StorageError):
        manager.startup()
    assert gc.isenabled()
