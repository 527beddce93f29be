"""What every client test produces and how it checks what it consumed.

Message i (per test run): key `key-<i>`, value `<codec>-<i>-` + filler, one header
`seq=<i>`, explicit partition `i % partitions`, explicit timestamp `BASE_TS + i` where the client
allows it. The check: every partition holds exactly the messages sent to it, in send order, at
offsets 0, 1, 2, ... (per partition: contiguous, no gaps, no duplicates).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from kafkalite.testing import wait_for as shared_wait_for

BASE_TS = 1_700_000_000_000
MESSAGES = 10_000
PARTITIONS = 4
CODECS = ("gzip", "snappy", "lz4", "zstd")
DEADLINE_S = 60.0


@dataclass(frozen=True, slots=True)
class Sent:
    seq: int
    partition: int
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def messages(
    codec: str, count: int = MESSAGES, partitions: int = PARTITIONS, start: int = 0
) -> list[Sent]:
    out = []
    for i in range(start, start + count):
        out.append(
            Sent(
                seq=i,
                partition=i % partitions,
                key=f"key-{i}".encode(),
                value=f"{codec}-{i}-".encode() + b"x" * (i % 50),
                headers=(("seq", str(i).encode()),),
                timestamp=BASE_TS + i,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class Received:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int | None = None


def check_consumed(sent: list[Sent], received: list[Received], *, check_timestamps: bool = True):
    """Per partition: the sent messages in send order at offsets 0..n-1, nothing else."""
    expected: dict[int, list[Sent]] = defaultdict(list)
    for s in sent:
        expected[s.partition].append(s)
    got: dict[int, list[Received]] = defaultdict(list)
    for r in received:
        got[r.partition].append(r)
    assert sorted(got) == sorted(expected), (sorted(got), sorted(expected))
    for partition, want in expected.items():
        have = got[partition]
        assert [r.offset for r in have] == list(range(len(want))), f"offsets of {partition}"
        for s, r in zip(want, have, strict=True):
            assert (r.key, r.value) == (s.key, s.value), (partition, r.offset)
            assert tuple(r.headers) == s.headers, (partition, r.offset, r.headers)
            if check_timestamps and r.timestamp is not None:
                assert r.timestamp == s.timestamp, (partition, r.offset)


def expected_offset_for_time(sent: list[Sent], partition: int, timestamp: int) -> int:
    """ListOffsets by time: the first offset in `partition` whose timestamp >= `timestamp`."""
    for offset, s in enumerate(m for m in sent if m.partition == partition):
        if s.timestamp >= timestamp:
            return offset
    return -1


def wait_for(condition, what: str, timeout: float = DEADLINE_S, interval: float = 0.05):
    """Poll `condition` until it is truthy; fail with `what` after `timeout` seconds."""
    return shared_wait_for(condition, what, timeout=timeout, interval=interval)
