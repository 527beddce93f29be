"""Helpers for the storage tests: record batches built with the project's own codec."""

from __future__ import annotations

import pytest

from kafkalite.protocol.records import Record, build_batch


def make_batch(
    records: int = 1,
    value_size: int = 10,
    timestamp: int = 1_700_000_000_000,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    fill: int = 0x61,
) -> bytearray:
    """A valid v2 batch of ``records`` records; record i has timestamp ``timestamp + i``."""
    return bytearray(
        build_batch(
            [Record(timestamp_delta=i, value=bytes([fill]) * value_size) for i in range(records)],
            base_offset=base_offset,
            base_timestamp=timestamp,
            partition_leader_epoch=partition_leader_epoch,
        )
    )


class FakeClock:
    """Milliseconds, advanced by hand."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
