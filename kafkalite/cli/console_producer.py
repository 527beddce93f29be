"""`kafkalite produce`: records to a topic as Kafka's producers send them (kafka-console-producer).

- The topic is looked up with a Metadata request that allows auto-creation, as producers ask, so
  a broker with ``auto.create.topics.enable`` creates it on first use; the tool waits (bounded)
  until every partition has a leader.
- A record with a key goes to Kafka's murmur2 partition for that key (client/partitioner.py: the
  partition Kafka's DefaultPartitioner and librdkafka's murmur2_random pick); records without a
  key are sticky: one batch to one partition, the next batch to the next one. ``--partition``
  sends everything to one partition.
- One produce request per partition and batch, the partitions' requests sent concurrently; a
  batch is complete before the next one is sent, so the records of one partition keep their
  order. A retriable error (leader moved, leader not yet elected) is retried a few times after a
  metadata refresh; anything else ends the tool with Kafka's error name.

What the tool cannot do for a reason it can name (a missing topic, an illegal name, a missing
partition) raises ``TopicProblem`` with a one-line explanation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from kafkalite.cli.common import TopicProblem
from kafkalite.client.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.client.errors import KafkaConnectionError
from kafkalite.client.partitioner import StickyPartitioner, partition_for_key
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import Record, build_batch
from kafkalite.protocol.types import TopicPartition

TOPIC_WAIT_S = 30.0
"""How long a topic may take to have a leader for every partition (auto-creation included)."""
SEND_ATTEMPTS = 5
RETRY_BACKOFF_S = 0.2


def explain(code: ErrorCode, message: str | None = None) -> str:
    """Kafka's error name with the broker's message, else Kafka's own description."""
    return f"{code.name}: {message or code.message}"


async def partitions_of(client: KafkaClient, topic: str, *, create: bool) -> int:
    """The partition count of ``topic`` once every partition has a leader; with ``create``, a
    missing topic is auto-created if the broker allows it. Raises TopicProblem."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TOPIC_WAIT_S
    while True:
        response = await client.send(
            ApiKey.METADATA,
            request_builder(
                ApiKey.METADATA, topics=[{"name": topic}], allow_auto_topic_creation=create
            ),
        )
        found = [t for t in response.topics if t.name == topic]
        code = ErrorCode.of(int(found[0].error_code)) if found else ErrorCode.UNKNOWN_SERVER_ERROR
        partitions = list(found[0].partitions) if found else []
        if code == ErrorCode.INVALID_TOPIC_EXCEPTION:
            raise TopicProblem(
                f"{topic!r} is not a legal topic name (at most 249 characters from "
                "[a-zA-Z0-9._-], not '.' or '..')"
            )
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            why = " and the broker does not create topics on first use" if create else ""
            raise TopicProblem(f"topic {topic!r} does not exist{why}")
        if code == ErrorCode.NONE and partitions and all(p.leader_id >= 0 for p in partitions):
            await client.refresh_metadata([topic])  # the client's cache of leaders
            return len(partitions)
        if code != ErrorCode.NONE and not code.retriable:
            raise TopicProblem(f"topic {topic!r}: {explain(code)}")
        if loop.time() > deadline:
            why = f" ({code.name})" if code != ErrorCode.NONE else ""
            raise TopicProblem(
                f"topic {topic!r} still has a partition without a leader after "
                f"{TOPIC_WAIT_S:.0f} s{why}"
            )
        await asyncio.sleep(0.1)


def check_partition(topic: str, partition: int, count: int) -> None:
    if not 0 <= partition < count:
        raise TopicProblem(
            f"partition {partition} of topic {topic!r} does not exist: it has {count} "
            f"partition{'s' if count != 1 else ''} (0 to {count - 1})"
        )


class ConsoleProducer:
    """Sends batches of (key, value) records to ``topic`` (see the module docstring)."""

    def __init__(
        self,
        client: KafkaClient,
        topic: str,
        partitions: int,
        *,
        partition: int | None = None,
        acks: int = -1,
        sticky: StickyPartitioner | None = None,
    ) -> None:
        if partition is not None:
            check_partition(topic, partition, partitions)
        self.client = client
        self.topic = topic
        self.partitions = partitions
        self.partition = partition
        self.acks = acks
        self.sticky = sticky or StickyPartitioner()
        self.sent_per_partition: dict[int, int] = {}

    def partition_records(
        self, records: Sequence[tuple[bytes | None, bytes]]
    ) -> dict[int, list[tuple[bytes | None, bytes]]]:
        """Which partition each record goes to, keeping their order within a partition."""
        out: dict[int, list[tuple[bytes | None, bytes]]] = {}
        unkeyed: int | None = None
        for key, value in records:
            if self.partition is not None:
                p = self.partition
            elif key is not None:
                p = partition_for_key(key, self.partitions)
            else:
                if unkeyed is None:
                    unkeyed = self.sticky.partition_for_batch(self.partitions)
                p = unkeyed
            out.setdefault(p, []).append((key, value))
        return out

    async def send(self, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        """Send one batch of records, every partition's share acknowledged (per ``acks``)."""
        by_partition = self.partition_records(records)
        await asyncio.gather(*(self._send_partition(p, rs) for p, rs in by_partition.items()))
        for p, rs in by_partition.items():
            self.sent_per_partition[p] = self.sent_per_partition.get(p, 0) + len(rs)

    async def _send_partition(self, partition: int, records: list[tuple[bytes | None, bytes]]):
        tp = TopicPartition(self.topic, partition)
        now = int(time.time() * 1000)
        batch = build_batch(
            [Record(i, 0, key, value) for i, (key, value) in enumerate(records)],
            base_timestamp=now,
        )
        for attempt in range(1, SEND_ATTEMPTS + 1):
            last = attempt == SEND_ATTEMPTS
            try:
                response = await self.client.produce(tp, batch, acks=self.acks)
            except KafkaConnectionError:
                if last:
                    raise
                await asyncio.sleep(RETRY_BACKOFF_S * attempt)
                continue
            if response is None:  # acks=0
                return
            answer: Any = response.responses[0].partition_responses[0]
            code = ErrorCode.of(int(answer.error_code))
            if code == ErrorCode.NONE:
                return
            if not code.retriable or last:
                raise TopicProblem(f"{tp}: {explain(code, getattr(answer, 'error_message', None))}")
            await asyncio.sleep(RETRY_BACKOFF_S * attempt)
