"""An in-memory Log and LogManager with the storage contract's names, for broker unit tests.

It keeps batches as bytes in a list; validation, offset assignment and the leader epoch cache
use the real protocol / storage code, so only the segment files are faked.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass

from kafkalite.protocol.errors import OffsetOutOfRangeError
from kafkalite.protocol.records import (
    assign_offsets,
    iter_batch_headers,
    validate_batches,
)
from kafkalite.storage.config import LogConfig
from kafkalite.storage.leader_epoch import LeaderEpochFileCache


@dataclass
class LogAppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int
    record_count: int
    batch_count: int
    valid_bytes: int


@dataclass
class FetchDataInfo:
    records: bytes


class FakeLog:
    def __init__(self, topic: str, partition: int, dir: str, config: LogConfig | None = None):
        self.topic = topic
        self.partition = partition
        self.dir = dir
        os.makedirs(dir, exist_ok=True)
        self.config = config or LogConfig()
        self.log_start_offset = 0
        self._hw = 0
        self.recovery_point = 0
        self._batches: list[bytes] = []
        self._base_offsets: list[int] = []
        self._next_offsets: list[int] = []
        self.leader_epoch_cache = LeaderEpochFileCache(
            os.path.join(dir, "leader-epoch-checkpoint"), lambda: self.log_end_offset
        )
        self.appends = 0

    @property
    def log_end_offset(self) -> int:
        return self._next_offsets[-1] if self._next_offsets else self.log_start_offset

    @property
    def high_watermark(self) -> int:
        return self._hw

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        self._hw = min(max(value, self.log_start_offset), self.log_end_offset)

    @property
    def size_bytes(self) -> int:
        return sum(len(b) for b in self._batches)

    def append_as_leader(self, records, leader_epoch: int) -> LogAppendInfo:
        headers = validate_batches(
            records, origin_client=True, max_batch_size=self.config.max_message_bytes
        )
        buf = bytearray(records)
        first = self.log_end_offset
        self.leader_epoch_cache.assign(leader_epoch, first)
        assign_offsets(buf, first, leader_epoch)
        return self._append(buf, headers)

    def append_as_follower(self, records) -> LogAppendInfo:
        headers = validate_batches(records)
        for h in headers:
            if h.partition_leader_epoch >= 0:
                self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        return self._append(bytearray(records), headers)

    def _append(self, buf: bytearray, headers) -> LogAppendInfo:
        first = None
        last = -1
        for pos, h in iter_batch_headers(buf):
            first = h.base_offset if first is None else first
            last = h.last_offset
            self._batches.append(bytes(buf[pos : pos + h.size]))
            self._base_offsets.append(h.base_offset)
            self._next_offsets.append(h.next_offset)
        self.appends += 1
        return LogAppendInfo(
            first if first is not None else -1,
            last,
            max((h.max_timestamp for h in headers), default=-1),
            -1,
            sum(h.record_count for h in headers),
            len(headers),
            len(buf),
        )

    def read(self, start_offset, max_bytes, max_offset=None, min_one_message=True) -> FetchDataInfo:
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(f"offset {start_offset} out of range")
        i = bisect.bisect_right(self._next_offsets, start_offset)
        out = bytearray()
        while i < len(self._batches):
            if max_offset is not None and self._base_offsets[i] >= max_offset:
                break
            batch = self._batches[i]
            if len(out) + len(batch) > max_bytes and not (min_one_message and not out):
                break
            out += batch
            i += 1
        return FetchDataInfo(bytes(out))

    def offset_for_timestamp(self, ts: int):
        for batch in self._batches:
            for _, h in iter_batch_headers(batch):
                if h.max_timestamp >= ts and h.last_offset >= self.log_start_offset:
                    return max(h.base_offset, self.log_start_offset), h.max_timestamp
        return None

    def truncate_to(self, offset: int) -> None:
        while self._next_offsets and self._base_offsets[-1] >= offset:
            self._batches.pop()
            self._base_offsets.pop()
            self._next_offsets.pop()
        self._hw = min(self._hw, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._batches.clear()
        self._base_offsets.clear()
        self._next_offsets.clear()
        self.log_start_offset = offset
        self._hw = offset

    def delete_records_before(self, offset: int) -> int:
        self.log_start_offset = max(self.log_start_offset, offset)
        deleted = 0
        while self._next_offsets and self._next_offsets[0] <= self.log_start_offset:
            self._batches.pop(0)
            self._base_offsets.pop(0)
            self._next_offsets.pop(0)
            deleted += 1
        return deleted


class FakeLogManager:
    def __init__(self, root: str, default_config: LogConfig | None = None):
        self.root = root
        self.default_config = default_config or LogConfig()
        self.logs: dict[tuple[str, int], FakeLog] = {}
        self.deleted: list[tuple[str, int]] = []

    def get_log(self, topic, partition):
        return self.logs.get((topic, partition))

    def get_or_create_log(self, topic, partition, config=None):
        log = self.logs.get((topic, partition))
        if log is None:
            log = FakeLog(
                topic,
                partition,
                os.path.join(self.root, f"{topic}-{partition}"),
                config or self.default_config,
            )
            self.logs[(topic, partition)] = log
        return log

    def delete_log(self, topic, partition):
        self.logs.pop((topic, partition))
        self.deleted.append((topic, partition))
