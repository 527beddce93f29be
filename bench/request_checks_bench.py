"""What the request checks (protocol/request_checks.py) cost on the Fetch path (prints numbers;
not a test).

For Fetch v12 requests of 1 and 100 partitions, compares ``frames.decode_request`` (structural
walk noting forbidden nulls, kio's native decode, range checks) with the same body decoded
without the checks (structural walk and native decode only) in the same run, and times the
range checks alone. Best of 5 repeats.

    PYTHONPATH=. .venv/bin/python bench/request_checks_bench.py
"""

from __future__ import annotations

import datetime
import inspect
import timeit

from kafkalite.protocol import frames
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.request_checks import check_request


def fetch_request(partitions: int):
    cls = request_class(ApiKey.FETCH, 12)
    m = inspect.getmodule(cls)
    return cls(
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            m.FetchTopic(
                topic="t",
                partitions=tuple(
                    m.FetchPartition(
                        partition=i,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                    for i in range(partitions)
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def best_us(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def measure(partitions: int) -> None:
    cls = request_class(ApiKey.FETCH, 12)
    request = fetch_request(partitions)
    frame = bytearray(frames.encode_request(ApiKey.FETCH, 12, 1, "bench", request)[4:])
    header, offset = frames.parse_request_header(frame)
    number = 20_000 if partitions == 1 else 2_000
    checked = best_us(lambda: frames.decode_request(header, frame, offset), number)
    bare = best_us(lambda: frames._decode_body(cls, frame, offset, "bench", False), number)
    ranges = best_us(lambda: check_request(ApiKey.FETCH, request, []), number)
    print(
        f"Fetch v12, {partitions:>3} partition(s): decode_request {checked:6.1f} us, "
        f"without the checks {bare:6.1f} us (same run), range checks alone {ranges:4.1f} us"
    )


def main() -> None:
    for partitions in (1, 100):
        measure(partitions)


if __name__ == "__main__":
    main()
