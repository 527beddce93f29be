"""A log's size is a number it keeps (the closed segments' sum, kept until the segment list
changes, plus the active segment): after any sequence of appends, rolls, retention by size and
by log start offset, truncations (to an offset, fully), index rebuilds and a reload it equals
the bytes of its ``.log`` files on disk and the walk over its segments."""

from __future__ import annotations

import dataclasses
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log
from tests.storage.conftest import make_batch

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=200, segment_index_bytes=8 * 64)

_steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3), st.integers(0, 300)),
        st.just(("roll",)),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("truncate_fully"), st.integers(0, 5)),
        st.tuples(st.just("retain_bytes"), st.integers(0, 3000)),
        st.tuples(st.just("start_offset"), st.floats(0, 1)),
        st.just(("recover_indexes",)),
        st.just(("reload",)),
    ),
    max_size=25,
)


def on_disk(log: Log) -> int:
    return sum(entry.stat().st_size for entry in os.scandir(log.dir) if entry.name.endswith(".log"))


def check(log: Log) -> None:
    assert log.size_bytes == on_disk(log) == sum(segment.size for segment in log.segments)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_steps)
def test_the_size_a_log_keeps_is_its_bytes_on_disk(tmp_path_factory, steps):
    root = tmp_path_factory.mktemp("size")
    config = CONFIG
    log = Log(root / "t-0", config)
    check(log)
    for step in steps:
        kind = step[0]
        if kind == "append":
            log.append_as_leader(make_batch(step[1], step[2]), 0)
            log.high_watermark = log.log_end_offset
        elif kind == "roll":
            log.roll()
        elif kind == "truncate":
            log.truncate_to(int(step[1] * log.log_end_offset))
        elif kind == "truncate_fully":
            log.truncate_fully_and_start_at(log.log_end_offset + step[1])
        elif kind == "retain_bytes":
            log.update_config(dataclasses.replace(config, retention_bytes=step[1]))
            log.delete_old_segments()
            log.update_config(config)
        elif kind == "start_offset":
            target = log.log_start_offset + int(
                step[1] * (log.high_watermark - log.log_start_offset)
            )
            log.maybe_increment_log_start_offset(target)
            log.delete_old_segments()
        elif kind == "recover_indexes":
            # what the segment verifier does when an index is wrong and the log whole
            log.segments[0].recover()
            log.segment_size_changed()
        else:
            end = log.log_end_offset
            log.close()
            log = Log(root / "t-0", config, had_clean_shutdown=True, recovery_point=end)
        check(log)
    log.close()
