"""The producer's ``acks`` as Kafka's clients take it, normalized once to the wire's int16.

Kafka's ProducerConfig accepts ``all``, ``-1``, ``0`` and ``1`` (``all`` and ``-1`` are the
same: the full ISR); librdkafka accepts the same strings and any integer, and the broker answers
INVALID_REQUIRED_ACKS for an integer other than -1, 0 and 1. So a string is one of Kafka's four
spellings, an integer passes as it is (the broker judges it), and anything else is a ValueError
naming the value, here rather than as a struct.error in the encoder.
"""

from __future__ import annotations

ACKS_NAMES = {"all": -1, "-1": -1, "0": 0, "1": 1}


def normalize_acks(acks: int | str) -> int:
    """``acks`` as the int16 a ProduceRequest carries."""
    if isinstance(acks, bool):
        raise ValueError(f"acks must be all, -1, 0 or 1, not {acks!r}")
    if isinstance(acks, int):
        if not -(2**15) <= acks < 2**15:
            raise ValueError(f"acks {acks} does not fit a ProduceRequest's int16")
        return acks
    if isinstance(acks, str) and acks.strip().lower() in ACKS_NAMES:
        return ACKS_NAMES[acks.strip().lower()]
    raise ValueError(f"acks must be all, -1, 0 or 1, not {acks!r}")
