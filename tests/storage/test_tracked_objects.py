"""What an idle log leaves for the cyclic garbage collector to walk: its hooks are shared by
every log of a manager (told which log), its empty structures are the shared empty tuple, and
the numbers it keeps are atomic data the collector stops tracking; the hooks still work."""

from __future__ import annotations

import asyncio
import gc

from kafkalite.protocol.records import Record, build_batch
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log
from kafkalite.storage.log_manager import LogManager
from kafkalite.storage.verifier import VerifiedRanges


def _batch(count: int = 1) -> bytearray:
    records = [
        Record(offset_delta=i, timestamp_delta=0, key=None, value=b"v") for i in range(count)
    ]
    return bytearray(build_batch(records, base_timestamp=1_000))


def _loaded(tmp_path, count: int) -> tuple[str, LogManager]:
    dir = str(tmp_path / "logs")
    manager = LogManager([dir], LogConfig())
    manager.startup()
    asyncio.run(manager.create_logs([("t", p, None, True) for p in range(count)]))
    for p in range(count):  # epoch p from offset 0, and a record (an empty log keeps no epoch)
        log = manager.get_log("t", p)
        log.append_as_leader(_batch(), leader_epoch=p)
    manager.shutdown()
    manager = LogManager([dir], LogConfig())
    manager.startup()
    return dir, manager


def test_every_log_of_a_manager_shares_its_hooks(tmp_path):
    _, manager = _loaded(tmp_path, 3)
    try:
        created = manager.get_or_create_log("u", 0, None, True)
        logs = [*manager.all_logs()]
        assert created in logs
        assert len({id(log.on_truncation) for log in logs}) == 1
        assert len({id(log.on_log_dir_failure) for log in logs}) == 1
        assert all(log.on_truncation is not None for log in logs)
    finally:
        manager.shutdown()


def test_the_shared_truncation_hook_moves_the_cleaners_checkpoint_of_its_own_log(tmp_path):
    _, manager = _loaded(tmp_path, 2)
    try:
        told: list[tuple[Log, int]] = []
        manager.cleaner.maybe_truncate_checkpoint = lambda log, offset: told.append((log, offset))
        log = manager.get_log("t", 1)
        log.append_as_leader(_batch(5), leader_epoch=1)
        log.truncate_to(1)  # the first record and the batch after it
        assert log.log_end_offset == 1 and told == [(log, 1)]
    finally:
        manager.shutdown()


def test_a_created_log_keeps_its_directory_as_a_str(tmp_path):
    manager = LogManager([str(tmp_path / "logs")], LogConfig())
    manager.startup()
    try:
        log = manager.get_or_create_log("t", 0, None, True)
        assert log._dir is None  # no Path until asked for
        assert log.dir_str == str(tmp_path / "logs" / "t-0")
        assert log.dir == tmp_path / "logs" / "t-0"
    finally:
        manager.shutdown()


def test_an_idle_log_shares_its_empty_structures_and_keeps_untracked_numbers(tmp_path):
    _, manager = _loaded(tmp_path, 2)
    try:
        gc.collect()
        gc.collect()  # a tuple of tuples is untracked inside out, one level a collection
        for p in range(2):
            log = manager.get_log("t", p)
            segment = log.active_segment
            assert segment.verified._starts is segment.verified._ends == ()
            assert segment.log._maps == ()
            cache = log.leader_epoch_cache
            assert cache.epoch_entries == [(p, 0)]
            for numbers in (
                cache._epochs,
                cache._start_offsets,
                cache._persisted,
                log._base_offsets,
            ):
                assert numbers and not gc.is_tracked(numbers)
            assert isinstance(cache.checkpoint_path, str)
    finally:
        manager.shutdown()


def test_verified_ranges_go_back_to_the_shared_empty_tuple_when_their_runs_go():
    ranges = VerifiedRanges(10)
    ranges.mark(20, 30)
    assert ranges.covered(20, 30) and isinstance(ranges._starts, list)
    ranges.mark(5, 25)  # reaches the run: it joins the prefix
    assert ranges.prefix == 30 and ranges._starts is ranges._ends == ()
    ranges.mark(40, 50)
    ranges.forget_from(35)  # before the only run
    assert ranges._starts is ranges._ends == () and not ranges.covered(40, 50)
    assert ranges.unverified_start(10) == 30


def test_a_loaded_idle_log_leaves_few_objects_for_the_collector(tmp_path):
    dir, manager = _loaded(tmp_path, 1)
    manager.shutdown()
    count = 200
    asyncio.run(_make(dir, count))
    gc.collect()
    before = len(gc.get_objects())
    manager = LogManager([dir], LogConfig())
    manager.startup()
    try:
        gc.collect()
        gc.collect()
        per_log = (len(gc.get_objects()) - before) / count
        # A Log, its segment list and segment, the segment's records, indexes and verified
        # ranges, the epoch cache: 8 (25 before the hooks were shared and the empty lists,
        # paths and holder objects went).
        assert per_log < 9, per_log
    finally:
        manager.shutdown()


async def _make(dir: str, count: int) -> None:
    manager = LogManager([dir], LogConfig())
    manager.startup()
    await manager.create_logs([("many", p, None, True) for p in range(count)])
    for p in range(count):
        manager.get_log("many", p).append_as_leader(_batch(), leader_epoch=0)
    manager.shutdown()
