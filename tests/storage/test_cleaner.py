"""The log cleaner against a model: every appended record, per key the latest one."""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.protocol.records import NO_TIMESTAMP, Record, build_batch, iter_batches
from kafkalite.storage.cleaner import (
    CLEANER_CHECKPOINT_FILE,
    Cleaner,
    CleanerConfig,
    LogCleaner,
    OffsetMap,
    filthiest_log,
    log_to_clean,
)
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log
from kafkalite.storage.segment import CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX, SWAP_FILE_SUFFIX
from kafkalite.storage.throttler import Throttler
from tests.storage.conftest import FakeClock

KEYS = [b"k%d" % i for i in range(6)]
T0 = 1_700_000_000_000

append_op = st.tuples(
    st.just("append"),
    st.lists(
        st.tuples(st.integers(0, len(KEYS) - 1), st.one_of(st.none(), st.binary(max_size=30))),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([0, 0, 1, 2, 3, 4]),  # compression codec
    st.sampled_from([None, None, 7, 8]),  # idempotent producer id
)
clean_op = st.tuples(st.just("clean"), st.sampled_from([0, 30, 60]))  # ms since the last
ops = st.lists(st.one_of(append_op, st.just(("roll",)), clean_op), min_size=1, max_size=40)


def _config(**changes) -> LogConfig:
    return dataclasses.replace(
        LogConfig(cleanup_policy="compact", segment_bytes=600, index_interval_bytes=100), **changes
    )


class Model:
    """What was appended: offset -> (key, value); per producer its last batch's last offset."""

    def __init__(self) -> None:
        self.records: dict[int, tuple[bytes, bytes | None]] = {}
        self.sequences: dict[int, int] = {}
        self.producer_last: dict[int, tuple[int, int]] = {}  # pid -> (last offset, base seq)

    def append(self, log: Log, records, compression: int, pid: int | None) -> None:
        built = [Record(offset_delta=i, key=KEYS[k], value=v) for i, (k, v) in enumerate(records)]
        extra = {}
        if pid is not None:
            seq = self.sequences.get(pid, 0)
            extra = dict(producer_id=pid, producer_epoch=0, base_sequence=seq)
            self.sequences[pid] = seq + len(built)
        batch = bytearray(build_batch(built, compression=compression, base_timestamp=T0, **extra))
        info = log.append_as_leader(batch, leader_epoch=3)
        for i, (k, v) in enumerate(records):
            self.records[info.first_offset + i] = (KEYS[k], v)
        if pid is not None:
            self.producer_last[pid] = (info.last_offset, extra["base_sequence"])


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20)
        data = bytes(info.records)
        if not data:
            break
        for header, records in iter_batches(data):
            for r in records:
                if header.base_offset + r.offset_delta >= offset:
                    out.append((header.base_offset + r.offset_delta, r.key, r.value))
            offset = header.next_offset
    return out


def batch_headers(log: Log):
    headers = []
    for segment in log.segments:
        data = bytes(segment.log.slice(0, segment.size))
        headers.extend(h for h, _ in iter_batches(data))
    return headers


def stamp_mtimes(log: Log) -> None:
    """Segment mtimes grow with base offsets (as when written in order)."""
    for segment in log.segments[:-1]:
        segment.set_last_modified(T0 + segment.base_offset * 10)


def check_cleaned(
    log: Log,
    model: Model,
    end: int,
    now: int,
    retention: int,
    horizons_before: dict[int, int],
    present_before: set[int],
):
    got = read_all(log)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)), "offsets must stay increasing and unique"
    for offset, key, value in got:
        assert model.records[offset] == (key, value), f"record at {offset} changed"
    present = {o for o, _, _ in got}
    # Nothing at or past the end of the cleaned range goes.
    for offset in present_before:
        if offset >= end:
            assert offset in present, f"record {offset} past the cleaned range is gone"
    by_key_latest: dict[bytes, int] = {}
    for offset, (key, _) in sorted(model.records.items()):
        by_key_latest[key] = offset
    # No record survives with a later one of its key in the cleaned range.
    for offset, key, _ in got:
        if offset >= end:
            continue
        later = [o for o, (k, _) in model.records.items() if k == key and offset < o < end]
        assert not later, f"{key!r} at {offset} survived its update at {later}"
    # Every key's latest value is readable at its original offset. A tombstone (KIP-534) is
    # kept by the first cleaning, which stamps its batch's delete horizon (now + retention),
    # and goes at the first cleaning at or past that horizon.
    for key, offset in by_key_latest.items():
        value = model.records[offset][1]
        if value is not None or offset >= end:
            assert offset in present, f"latest {key!r} at {offset} is gone"
        elif offset in present_before:
            before = horizons_before[offset]
            if before == NO_TIMESTAMP or now < before:
                assert offset in present, f"tombstone {key!r} at {offset} went before its horizon"
            else:
                assert offset not in present, f"tombstone at {offset} outlived its horizon"
    horizons_after = record_horizons(log)
    for offset, _, value in got:
        if value is None and offset < end:
            before = horizons_before[offset]
            stamped = now + retention if before == NO_TIMESTAMP else before
            assert horizons_after[offset] == stamped, f"delete horizon of {offset}"
    # Each idempotent producer's last batch is still there (its sequence survives).
    headers = {h.last_offset: h for h in batch_headers(log)}
    for pid, (last_offset, base_seq) in model.producer_last.items():
        assert last_offset in headers, f"last batch of producer {pid} was dropped"
        assert headers[last_offset].producer_id == pid
        assert headers[last_offset].base_sequence == base_seq


def record_horizons(log: Log) -> dict[int, int]:
    """offset -> delete horizon of the batch holding it (NO_TIMESTAMP: none yet); also checks
    that every record kept its timestamp through the rebasing."""
    out = {}
    for segment in log.segments:
        data = bytes(segment.log.slice(0, segment.size))
        for header, records in iter_batches(data):
            for r in records:
                out[header.base_offset + r.offset_delta] = header.delete_horizon_ms
                assert header.base_timestamp + r.timestamp_delta == T0, "a timestamp changed"
    return out


def run_clean(log: Log, checkpoint: int | None, capacity: int, now: int):
    """One cleaning at ``now``; returns (result or None, record horizons before)."""
    stamp_mtimes(log)
    to_clean = log_to_clean(log, checkpoint, now)
    if to_clean.first_uncleanable_offset <= to_clean.first_dirty_offset:
        return None, {}
    horizons = record_horizons(log)
    result = Cleaner(capacity, lambda: now).clean_now(to_clean)
    return result, horizons


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=ops,
    capacity=st.sampled_from([2, 4, 1000]),
    retention=st.sampled_from([0, 50, 10**12]),  # delete.retention.ms
    hw_lag=st.integers(0, 3),
)
def test_cleaning_matches_the_model(ops, capacity, retention, hw_lag):
    tmp = Path(tempfile.mkdtemp())
    try:
        config = _config(delete_retention_ms=retention)
        log = Log(tmp / "t-0", config, time_ms=FakeClock())
        model = Model()
        checkpoint = None
        now = T0
        for op in ops + [("roll",), ("clean", 0), ("clean", 60)]:
            if op[0] == "append":
                model.append(log, op[1], op[2], op[3])
            elif op[0] == "roll":
                log.roll()
            else:
                log.high_watermark = max(log.log_start_offset, log.log_end_offset - hw_lag)
                active = log.active_segment
                active_bytes = bytes(active.log.slice(0, active.size))
                present_before = {o for o, _, _ in read_all(log)}
                now += op[1]
                result, horizons = run_clean(log, checkpoint, capacity, now)
                if result is None:
                    continue
                assert not result.aborted
                assert log.active_segment is active
                assert bytes(active.log.slice(0, active.size)) == active_bytes
                assert result.end_offset <= log.high_watermark
                checkpoint = result.end_offset
                check_cleaned(
                    log, model, result.end_offset, now, retention, horizons, present_before
                )
                expected = read_all(log)
                assert not [p for p in os.listdir(log.dir) if not p[0].isdigit() and "." in p]
                # Reopened after a crash (full recovery) and after a clean shutdown: the same.
                log._close_quietly()
                log = Log(tmp / "t-0", config, time_ms=FakeClock(), recovery_point=0)
                log.high_watermark = log.log_end_offset
                assert read_all(log) == expected
                log.close()
                log = Log(tmp / "t-0", config, time_ms=FakeClock(), had_clean_shutdown=True)
                log.high_watermark = max(log.log_start_offset, log.log_end_offset - hw_lag)
                assert read_all(log) == expected
        log.close()
    finally:
        shutil.rmtree(tmp)


class Crash(Exception):
    pass


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, step=st.sampled_from(["cleaned", "swap", "deleted", "renamed"]))
def test_crash_at_each_swap_step(ops, step):
    """A crash while swapping: a ``.cleaned`` leftover is discarded (the log is as before); once
    the ``.log.swap`` exists the swap is committed and loading completes it."""
    tmp = Path(tempfile.mkdtemp())
    try:
        config = _config()
        log = Log(tmp / "t-0", config, time_ms=FakeClock())
        model = Model()
        for op in ops:
            if op[0] == "append":
                model.append(log, op[1], op[2], op[3])
            elif op[0] == "roll":
                log.roll()
        log.roll()
        log.high_watermark = log.log_end_offset
        before = read_all(log)
        stamp_mtimes(log)
        to_clean = log_to_clean(log, None, T0)
        if to_clean.first_uncleanable_offset <= to_clean.first_dirty_offset:
            return
        seen = {}

        def crashing_replace(new, old, truncations):
            seen["cleaned"] = [
                (h.base_offset + r.offset_delta, r.key, r.value)
                for h, recs in iter_batches(bytes(new.log.slice(0, new.size)))
                for r in recs
            ]
            seen["range"] = (old[0].base_offset, log.segments[log.segments.index(old[-1]) + 1])
            seen["old_bases"] = [segment.base_offset for segment in old]
            seen["cleaned_next"] = new.read_next_offset()
            if step != "cleaned":
                new.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
            if step in ("deleted", "renamed"):
                for segment in old:
                    os.replace(segment.log.file, str(segment.log.file) + DELETED_FILE_SUFFIX)
            if step == "renamed":
                new.log.rename_to(str(new.log.file)[: -len(SWAP_FILE_SUFFIX)])
            new.close_handlers()
            raise Crash

        log.replace_segments = crashing_replace
        with pytest.raises(Crash):
            Cleaner(1000, lambda: T0).clean_now(to_clean)
        low, next_segment = seen["range"]
        high = next_segment.base_offset
        log._close_quietly()
        log = Log(tmp / "t-0", config, time_ms=FakeClock(), recovery_point=0)
        log.high_watermark = log.log_end_offset
        if step == "cleaned":
            expected = before
        else:
            # Kafka's recovery deletes the old segments based in [swap base, swap next offset):
            # an old segment whose records all went (so it lies past the cleaned segment's last
            # offset) survives a crash before the old files were renamed; it is cleaned again.
            survivors = [
                base
                for base in seen["old_bases"]
                if step == "swap" and base != low and base >= seen["cleaned_next"]
            ]
            kept_from = min(survivors) if survivors else high
            expected = (
                [r for r in before if r[0] < low]
                + seen["cleaned"]
                + [r for r in before if r[0] >= kept_from]
            )
        assert read_all(log) == expected
        leftovers = [
            p for p in os.listdir(log.dir) if p.endswith((CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX))
        ]
        assert leftovers == []
        log.close()
    finally:
        shutil.rmtree(tmp)


# ----------------------------------------------------------------------------- unit tests


def _fill(log: Log, updates: int, keys: int = 3) -> None:
    for i in range(updates):
        batch = bytearray(
            build_batch([Record(key=b"k%d" % (i % keys), value=b"v%d" % i)], base_timestamp=T0)
        )
        log.append_as_leader(batch, leader_epoch=0)


def test_offset_map_keeps_the_latest_offset():
    offset_map = OffsetMap(10)
    offset_map.put(b"a", 1)
    offset_map.put(b"a", 5)
    assert offset_map.get(b"a") == 5
    assert offset_map.get(b"b") == -1
    assert len(offset_map) == 1
    assert CleanerConfig().max_map_entries() == int(128 * 1024 * 1024 // 24 * 0.9)


def test_never_cleans_past_the_high_watermark_or_the_active_segment(tmp_path):
    log = Log(tmp_path / "t-0", _config(), time_ms=FakeClock())
    _fill(log, 60)
    log.high_watermark = 10
    to_clean = log_to_clean(log, None, T0)
    assert to_clean.first_uncleanable_offset == 10
    log.high_watermark = log.log_end_offset
    to_clean = log_to_clean(log, None, T0)
    assert to_clean.first_uncleanable_offset == log.active_segment.base_offset
    log.close()


def test_min_compaction_lag_holds_young_segments_back(tmp_path):
    log = Log(tmp_path / "t-0", _config(min_compaction_lag_ms=1000), time_ms=FakeClock())
    _fill(log, 60)
    log.high_watermark = log.log_end_offset
    # Records are stamped T0: at T0 + 500 every segment is too young, at T0 + 2000 none is.
    assert log_to_clean(log, None, T0 + 500).first_uncleanable_offset == 0
    assert log_to_clean(log, None, T0 + 2000).first_uncleanable_offset > 0
    log.close()


def test_dirty_ratio_and_max_compaction_lag_choose_the_log(tmp_path):
    log = Log(tmp_path / "t-0", _config(min_cleanable_dirty_ratio=0.99), time_ms=FakeClock())
    _fill(log, 60)
    log.high_watermark = log.log_end_offset
    checkpoint = log.segments[-2].base_offset  # almost everything clean
    candidate = log_to_clean(log, checkpoint, T0)
    assert candidate.cleanable_ratio < 0.99
    assert filthiest_log([candidate]) is None
    log.update_config(_config(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=1000))
    overdue = log_to_clean(log, checkpoint, T0 + 5000)
    assert overdue.max_compaction_delay_ms > 0
    assert filthiest_log([overdue]) is overdue
    log.close()


def test_swap_is_skipped_when_the_log_is_truncated_meanwhile(tmp_path):
    log = Log(tmp_path / "t-0", _config(), time_ms=FakeClock())
    _fill(log, 60)
    log.high_watermark = log.log_end_offset
    to_clean = log_to_clean(log, None, T0)
    before = read_all(log)

    async def truncating_offload(fn, *args):
        result = fn(*args)
        if fn.__name__ == "clean_into_segment":
            log.truncate_to(log.log_end_offset - 1)
        return result

    coro = Cleaner(1000, lambda: T0).clean(to_clean, truncating_offload)
    try:
        coro.send(None)
    except StopIteration as done:
        result = done.value
    assert result.aborted
    assert read_all(log) == before[:-1]
    assert not [p for p in os.listdir(log.dir) if p.endswith(CLEANED_FILE_SUFFIX)]
    log.close()


def test_readers_of_replaced_segments_keep_reading(tmp_path):
    log = Log(tmp_path / "t-0", _config(), time_ms=FakeClock())
    _fill(log, 60)
    log.high_watermark = log.log_end_offset
    held = log.read(0, 1 << 20).records
    view = held.view()
    expected = bytes(held)
    Cleaner(1000, lambda: T0).clean_now(log_to_clean(log, None, T0))
    assert bytes(view) == expected and bytes(held) == expected
    del view
    log.close()


def test_checkpoint_file_survives_restart_and_forgets_deleted_logs(tmp_path):
    log = Log(tmp_path / "t-0", _config(min_cleanable_dirty_ratio=0.01), time_ms=FakeClock())
    _fill(log, 60)
    log.high_watermark = log.log_end_offset
    logs = [log]
    cleaner = LogCleaner(CleanerConfig(), lambda: logs, lambda: T0)
    cleaner.load_checkpoints([str(tmp_path)])

    async def inline(fn, *args):
        return fn(*args)

    coro = cleaner.clean_filthiest_log(inline)
    try:
        coro.send(None)
    except StopIteration as done:
        assert done.value is True
    end = log.active_segment.base_offset
    assert (tmp_path / CLEANER_CHECKPOINT_FILE).read_text() == f"0\n1\nt 0 {end}\n"
    again = LogCleaner(CleanerConfig(), lambda: logs, lambda: T0)
    again.load_checkpoints([str(tmp_path)])
    assert again.checkpoint_for(log) == end
    again.maybe_truncate_checkpoint(log, 5)
    assert again.checkpoint_for(log) == 5
    logs.clear()
    again.remove_log(str(tmp_path), ("t", 0))
    assert (tmp_path / CLEANER_CHECKPOINT_FILE).read_text() == "0\n0\n"
    log.close()


async def test_log_manager_cleans_compacted_logs_in_the_background(tmp_path):
    import asyncio
    import time

    from kafkalite.storage.log_manager import LogManager

    manager = LogManager(
        [tmp_path], LogConfig(), cleaner_config=CleanerConfig(backoff_ms=10, num_threads=2)
    )
    manager.startup()
    compacted = manager.get_or_create_log("c", 0, _config(min_cleanable_dirty_ratio=0.01))
    plain = manager.get_or_create_log("d", 0, _config(cleanup_policy="delete"))
    for log in (compacted, plain):
        _fill(log, 300)
        log.roll()
        log.high_watermark = log.log_end_offset
    before = compacted.size_bytes
    plain_before = read_all(plain)
    task = asyncio.create_task(manager.run_scheduler(0.01))
    deadline = time.monotonic() + 30
    while manager.cleaner.checkpoint_for(compacted) != compacted.log_end_offset:
        assert time.monotonic() < deadline, "the cleaner never caught up"
        await asyncio.sleep(0.01)
    assert compacted.size_bytes < before / 10
    assert [v for _, _, v in read_all(compacted)] == [b"v297", b"v298", b"v299"]
    assert read_all(plain) == plain_before  # cleanup.policy=delete: never compacted
    checkpoint = (tmp_path / CLEANER_CHECKPOINT_FILE).read_text()
    assert checkpoint == f"0\n1\nc 0 {compacted.log_end_offset}\n"
    # A truncation below the checkpoint moves it back; deleting the log forgets it.
    compacted.truncate_to(100)
    assert manager.cleaner.checkpoint_for(compacted) == compacted.log_end_offset
    task.cancel()
    manager.delete_log("c", 0)
    assert (tmp_path / CLEANER_CHECKPOINT_FILE).read_text() == "0\n0\n"
    manager.shutdown()


def test_cleaner_config_from_the_broker_config_whose_errors_name_the_key():
    config = CleanerConfig.from_broker_config(
        BrokerConfig.load(
            overrides={"log.cleaner.backoff.ms": "20", "log.cleaner.enable": "false"}, environ={}
        )
    )
    assert (config.backoff_ms, config.enable, config.num_threads) == (20, False, 1)
    with pytest.raises(ConfigError, match="log.cleaner.dedupe.buffer.size"):
        BrokerConfig.load(overrides={"log.cleaner.dedupe.buffer.size": "lots"}, environ={})


def test_a_stopped_cleaning_leaves_the_log_as_it_was(tmp_path):
    from kafkalite.storage.cleaner import CleaningStopped

    log = Log(tmp_path / "t-0", _config(), time_ms=FakeClock())
    _fill(log, 60)
    log.high_watermark = log.log_end_offset
    before = read_all(log)
    cleaner = Cleaner(1000, lambda: T0)
    to_clean = log_to_clean(log, None, T0)

    async def stop_before_recopy(fn, *args):
        if fn.__name__ == "clean_into_segment":
            cleaner.stop.set()  # what cancelling the cleaner task does
        return fn(*args)

    coro = cleaner.clean(to_clean, stop_before_recopy)
    with pytest.raises(CleaningStopped):
        coro.send(None)
    assert read_all(log) == before
    assert not [p for p in os.listdir(log.dir) if p.endswith(CLEANED_FILE_SUFFIX)]
    log.close()


def test_group_segments_by_size_like_kafka():
    from types import SimpleNamespace

    from kafkalite.storage.cleaner import group_segments_by_size

    def seg(base, size, index=8):
        return SimpleNamespace(
            base_offset=base,
            size=size,
            offset_index=SimpleNamespace(size_in_bytes=index),
            time_index=SimpleNamespace(size_in_bytes=index + 4),
        )

    a, b, c, d = seg(0, 400), seg(10, 500), seg(20, 200), seg(30, 100)
    sizes = [[s.base_offset for s in g] for g in group_segments_by_size([a, b, c, d], 1000, 64, 40)]
    assert sizes == [[0, 10], [20, 30]]  # 400 + 500 + 200 > 1000
    # Index bytes bound a group too; so does the int32 offset range (not for empty segments).
    assert len(group_segments_by_size([seg(0, 1, 40), seg(1, 1, 40)], 1000, 64, 2)) == 2
    far = [seg(0, 10), seg(2**31 + 5, 10)]
    assert len(group_segments_by_size(far, 1000, 64, 2**31 + 10)) == 2
    empty_far = [seg(0, 10), seg(10, 0), seg(2**31 + 5, 10)]
    groups = group_segments_by_size(empty_far, 1000, 64, 2**31 + 10)
    assert [len(g) for g in groups] == [2, 1]


def test_deleting_a_log_during_cleaning_is_no_log_dir_failure(tmp_path):
    log = Log(tmp_path / "t-0", _config(min_cleanable_dirty_ratio=0.01), time_ms=FakeClock())
    _fill(log, 60)
    log.high_watermark = log.log_end_offset
    logs = [log]
    failures = []
    cleaner = LogCleaner(
        CleanerConfig(), lambda: logs, lambda: T0, lambda d, e: failures.append((d, e))
    )
    cleaner.load_checkpoints([str(tmp_path)])

    async def delete_meanwhile(fn, *args):
        if fn.__name__ == "clean_into_segment":
            # LogManager.delete_log: renamed away, then removed; the recopy cannot open files.
            logs.clear()
            cleaner.remove_log(str(tmp_path), ("t", 0))
            log.rename_dir("t-0.0123456789abcdef0123456789abcdef-delete")
            log.delete()
        return fn(*args)

    coro = cleaner.clean_filthiest_log(delete_meanwhile)
    try:
        coro.send(None)
    except StopIteration as done:
        assert done.value is False
    assert failures == []
    assert not (tmp_path / "t-0").exists()


def test_recovery_of_a_swap_keeps_an_old_segment_past_the_cleaned_one_like_kafka(tmp_path):
    """Group [A, B] is cleaned into A' ending before B's base (B's only record is superseded in
    C); a crash once ``A'.log.swap`` exists: loading replaces A, keeps B (outside A's swap
    range, as in Kafka), and the next cleaning removes B's record."""
    log = Log(tmp_path / "t-0", _config(segment_bytes=1000), time_ms=FakeClock())

    def put(key: bytes, value: bytes) -> None:
        log.append_as_leader(
            bytearray(build_batch([Record(key=key, value=value)], base_timestamp=T0)), 0
        )
        log.roll()

    put(b"a", b"1")  # A: offset 0
    put(b"b", b"old")  # B: offset 1
    put(b"b", b"new" * 300)  # C: offset 2, too big to share a group with A and B
    put(b"c", b"1")  # offset 3, then an empty active segment
    log.high_watermark = log.log_end_offset

    def crash_after_swap_rename(new, old, truncations):
        assert [s.base_offset for s in old] == [0, 1]
        new.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
        new.close_handlers()
        raise Crash

    log.replace_segments = crash_after_swap_rename
    with pytest.raises(Crash):
        Cleaner(1000, lambda: T0).clean_now(log_to_clean(log, None, T0))
    log._close_quietly()
    log = Log(tmp_path / "t-0", _config(segment_bytes=1000), time_ms=FakeClock())
    log.high_watermark = log.log_end_offset
    assert [(o, k) for o, k, _ in read_all(log)] == [(0, b"a"), (1, b"b"), (2, b"b"), (3, b"c")]
    Cleaner(1000, lambda: T0).clean_now(log_to_clean(log, None, T0))
    assert [(o, k) for o, k, _ in read_all(log)] == [(0, b"a"), (2, b"b"), (3, b"c")]
    log.close()


class CountingThrottler(Throttler):
    """Counts what the cleaner reports; `delay` is what every call answers."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__(1.0)
        self.counted = 0
        self.delay = delay

    def maybe_throttle(self, observed: float) -> float:
        self.counted += int(observed)
        return self.delay


def test_the_throttle_counts_every_byte_the_cleaner_reads_and_writes(tmp_path):
    log = Log(tmp_path / "t-0", _config(), time_ms=FakeClock())
    _fill(log, 60)
    log.high_watermark = log.log_end_offset
    to_clean = log_to_clean(log, None, T0)
    inactive = log.segments[:-1]
    dirty_bytes = sum(s.size for s in inactive)  # nothing cleaned yet: all of it is dirty
    whole_bytes = sum(s.size for s in log.segments)
    throttler = CountingThrottler()
    result = Cleaner(1000, lambda: T0, throttler).clean_now(to_clean)
    assert result.groups_swapped > 0 and result.bytes_after < result.bytes_before
    # The offset map's scan, the producer scan of the whole log, the recopy's reads and writes.
    assert throttler.counted == dirty_bytes + whole_bytes + dirty_bytes + result.bytes_after
    log.close()


def test_a_stop_during_a_throttle_wait_ends_the_cleaning(tmp_path):
    from kafkalite.storage.cleaner import CleaningStopped

    log = Log(tmp_path / "t-0", _config(), time_ms=FakeClock())
    _fill(log, 60)
    log.high_watermark = log.log_end_offset
    before = read_all(log)
    throttler = CountingThrottler(delay=3600.0)
    cleaner = Cleaner(1000, lambda: T0, throttler)
    stop_at_first_wait = throttler.maybe_throttle

    def stopping(observed: float) -> float:
        cleaner.stop.set()  # a shutdown while the cleaner waits out an hour's delay
        return stop_at_first_wait(observed)

    throttler.maybe_throttle = stopping
    with pytest.raises(CleaningStopped):
        cleaner.clean_now(log_to_clean(log, None, T0))
    assert throttler.counted > 0  # it was waiting on the throttle, not stopped before reading
    assert read_all(log) == before
    log.close()


def test_cleaner_io_rate_is_read_and_must_be_positive():
    config = CleanerConfig.from_broker_config(
        BrokerConfig.load(overrides={"log.cleaner.io.max.bytes.per.second": "1e6"}, environ={})
    )
    assert config.io_max_bytes_per_second == 1e6
    assert LogCleaner(config, list, lambda: T0).throttler.desired_rate_per_second == 1e6
    with pytest.raises(ConfigError, match="log.cleaner.io.max.bytes.per.second"):
        BrokerConfig.load(overrides={"log.cleaner.io.max.bytes.per.second": "0"}, environ={})


def test_a_compacted_log_keeps_its_gaps_through_recovery_after_a_policy_change(tmp_path):
    """Compaction leaves segments ending before the next one starts; once the topic is switched
    to cleanup.policy=delete, a recovery scan from offset 0 must keep every segment (it used to
    take such a gap for damage and delete the rest of the log)."""
    config = _config(segment_bytes=400)
    log = Log(tmp_path / "t-0", config, time_ms=FakeClock())
    _fill(log, 30)
    log.high_watermark = log.log_end_offset
    Cleaner(1000, lambda: T0).clean_now(log_to_clean(log, None, T0))
    for i in range(30, 60):
        batch = build_batch([Record(key=b"x%d" % i, value=b"v%d" % i)], base_timestamp=T0)
        log.append_as_leader(bytearray(batch), leader_epoch=0)
    segments = log.segments
    assert any(
        s.read_next_offset() < after.base_offset
        for s, after in zip(segments[:-1], segments[1:], strict=True)
    ), "the cleaning left no gap between segments: the test proves nothing"
    before = read_all(log)
    log.close()
    reopened = Log(
        tmp_path / "t-0",
        dataclasses.replace(config, cleanup_policy="delete"),
        recovery_point=0,
        had_clean_shutdown=False,
        time_ms=FakeClock(),
    )
    assert reopened.log_end_offset == 60
    assert read_all(reopened) == before
    reopened.close()


def test_a_tombstone_stays_for_delete_retention_after_its_first_cleaning(tmp_path):
    """KIP-534: however old its segment, a tombstone survives the first cleaning, which stamps
    its batch's delete horizon, and goes at the first cleaning once that horizon has passed
    (the old segment-mtime rule dropped a 10-day-old tombstone a minute after it was first
    compacted, so a consumer that had read the key never saw its deletion)."""
    day = 86_400_000
    now = T0
    config = _config(segment_bytes=100, delete_retention_ms=day)
    log = Log(tmp_path / "t-0", config, time_ms=lambda: now)

    def segment(key, value, mtime):
        log.append_as_leader(
            bytearray(build_batch([Record(key=key, value=value)], base_timestamp=mtime)), 0
        )
        written = log.active_segment
        log.roll()
        written.set_last_modified(mtime)
        log.high_watermark = log.log_end_offset

    def clean(checkpoint):
        return Cleaner(1000, lambda: now).clean_now(log_to_clean(log, checkpoint, now))

    segment(b"k0", b"v", T0 - 30 * day)
    checkpoint = clean(None).end_offset
    segment(b"k1", b"v1", T0 - 10 * day)
    segment(b"k1", None, T0 - 10 * day)  # the tombstone, 10 days old
    segment(b"k2", b"v2", T0)
    checkpoint = clean(checkpoint).end_offset
    assert (2, b"k1", None) in read_all(log)
    [horizon] = {h.delete_horizon_ms for h in batch_headers(log) if h.base_offset == 2}
    assert horizon == T0 + day
    assert [h.max_timestamp for h in batch_headers(log) if h.base_offset == 2] == [T0 - 10 * day]
    for now, kept in ((T0 + 60_000, True), (T0 + day - 1, True), (T0 + day, False)):
        segment(b"k%d" % now, b"v", now)
        checkpoint = clean(0).end_offset  # the whole log is dirty again: the tombstone is seen
        assert ((2, b"k1", None) in read_all(log)) is kept, now - T0


def test_aborted_transactions_go_and_never_supersede_committed_values(tmp_path):
    """Kafka's cleaner with transactions: the aborted value goes (it must never replace the
    committed one: it used to win), the committed one stays; both markers stay in this pass
    (it saw records of both transactions)."""
    from kafkalite.protocol.records import build_end_txn_marker_batch

    log = Log(tmp_path / "t-0", _config(), time_ms=FakeClock())

    def transactional(value: bytes, sequence: int, commit: bool) -> None:
        batch = build_batch(
            [Record(key=b"k", value=value)],
            base_timestamp=T0,
            producer_id=5,
            producer_epoch=0,
            base_sequence=sequence,
            is_transactional=True,
        )
        log.append_as_leader(bytearray(batch), 0)
        marker = build_end_txn_marker_batch(
            producer_id=5, producer_epoch=0, commit=commit, coordinator_epoch=0, timestamp=T0
        )
        log.append_as_leader(bytearray(marker), 0, origin_client=False)

    _fill(log, 6)
    transactional(b"committed", 0, commit=True)
    transactional(b"aborted", 1, commit=False)
    _fill(log, 6)
    log.roll()
    log.high_watermark = log.log_end_offset
    result = Cleaner(1000, lambda: T0).clean_now(log_to_clean(log, None, T0))
    assert result.groups_swapped > 0 and result.bytes_after < result.bytes_before
    kept = read_all(log)
    assert (6, b"k", b"committed") in kept
    assert not [r for r in kept if r[2] == b"aborted"]
    assert len([h for h in batch_headers(log) if h.is_control]) == 2


def test_an_unexpected_failure_makes_only_that_partition_uncleanable(tmp_path):
    """Kafka's cleaner thread marks the partition uncleanable and goes on; the cleaner task
    used to end on any exception it did not list."""
    bad = Log(tmp_path / "bad-0", _config(min_cleanable_dirty_ratio=0.01), time_ms=FakeClock())
    good = Log(tmp_path / "good-0", _config(min_cleanable_dirty_ratio=0.01), time_ms=FakeClock())
    for log in (bad, good):
        _fill(log, 60 if log is bad else 30)  # the bad log is the dirtiest: cleaned first
        log.high_watermark = log.log_end_offset
    cleaner = LogCleaner(CleanerConfig(), lambda: [bad, good], lambda: T0)

    async def failing_for_bad(fn, *args):
        if fn.__name__ == "clean_into_segment" and args[0] == bad.dir:
            raise ValueError("a bug in the recopy")
        return fn(*args)

    def run_once() -> bool:
        coro = cleaner.clean_filthiest_log(failing_for_bad)
        with pytest.raises(StopIteration) as done:
            coro.send(None)
        return done.value.value

    assert run_once() is False
    assert cleaner.uncleanable == {("bad", 0)}
    assert run_once() is True  # the next pass cleans the other log
    assert cleaner.checkpoint_for(good) is not None and cleaner.checkpoint_for(bad) is None
