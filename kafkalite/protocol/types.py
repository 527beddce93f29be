"""Small value types shared by every layer."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic; hashable, ordered by (topic, partition), printed as Kafka does
    (``orders-3``, the partition's log directory name)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
