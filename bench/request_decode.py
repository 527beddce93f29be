"""The cost of decoding a controller's LeaderAndIsr (prints figures; not a test).

A LeaderAndIsr v7 of 10,000 partitions (as 10,000 topics of one, or one topic of 10,000) and of
fewer is encoded, then decoded as the broker's dispatcher does (`frames.decode_request`: the
length-checking walk of `protocol/validator.py`, then kio's native reader), best of five; then
the walk and the native reader apart. Run it with PYTHONPATH set to the tree to measure, in
turns with the base tree's copy:

    PYTHONPATH=. .venv/bin/python bench/request_decode.py
"""

from __future__ import annotations

import functools
import time
import uuid

from kafkalite.client.messages import build_message
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.frames import (
    _reader,
    _readonly,
    decode_request,
    encode_request,
    parse_request_header,
)
from kafkalite.protocol.validator import validator_for

REPEATS = 5
SHAPES = ((10_000, 1), (1, 10_000), (3_333, 1), (500, 1))


def leader_and_isr(topics: int, partitions: int):
    return build_message(
        request_class(ApiKey.LEADER_AND_ISR, 7),
        controller_id=1,
        is_kraft_controller=False,
        controller_epoch=5,
        broker_epoch=77,
        type=0,
        topic_states=[
            {
                "topic_name": f"topic-{t:05d}",
                "topic_id": uuid.uuid4(),
                "partition_states": [
                    {
                        "partition_index": p,
                        "controller_epoch": 5,
                        "leader": 1,
                        "leader_epoch": 3,
                        "isr": [1, 2, 3],
                        "zk_version": 9,
                        "replicas": [1, 2, 3],
                        "is_new": False,
                        "leader_recovery_state": 0,
                    }
                    for p in range(partitions)
                ],
            }
            for t in range(topics)
        ],
        live_leaders=[{"broker_id": 1, "host_name": "h", "port": 9092}],
    )


def best_ms(call) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best * 1000


def main() -> None:
    cls = request_class(ApiKey.LEADER_AND_ISR, 7)
    for topics, partitions in SHAPES:
        message = leader_and_isr(topics, partitions)
        frame = bytearray(encode_request(ApiKey.LEADER_AND_ISR, 7, 1, "c", message)[4:])
        header, offset = parse_request_header(frame)
        body = _readonly(frame)
        whole = best_ms(functools.partial(decode_request, header, frame, offset))
        walk = best_ms(functools.partial(validator_for(cls), body, offset, None))
        native = best_ms(functools.partial(_reader(cls), body, offset))
        count = topics * partitions
        print(
            f"{topics} topics x {partitions}: {len(frame)} bytes; decoded in {whole:.1f} ms "
            f"({whole * 1000 / count:.1f} us a partition): the walk {walk:.1f} ms, "
            f"the native reader {native:.1f} ms"
        )


if __name__ == "__main__":
    main()
