"""What a test does to a broker before and after its own client code runs: create a topic,
produce a few records, read a topic back, wait until every partition has a leader.

Written on kafkalite's own Kafka-protocol client (``kafkalite.client``), so they need no other
package and speak the wire protocol like any client. Every call takes the bootstrap string and
a deadline; retriable errors (no leader yet, a leader moving, a connection refused by a broker
that is going away) are retried until the deadline, anything else is raised with Kafka's error
name.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from kafkalite.client import (
    KafkaClient,
    KafkaConnectionError,
    KafkaTimeoutError,
    request_builder,
)
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.records import Header, Record, build_batch, iter_batches, record_timestamp
from kafkalite.protocol.types import TopicPartition

RETRY_BACKOFF_S = 0.05


class Message(NamedTuple):
    """One record read back by ``consume_all``."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


class PartitionState(NamedTuple):
    """A partition as the cluster's metadata describes it."""

    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def _as_bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _client(bootstrap: str) -> KafkaClient:
    return KafkaClient(
        bootstrap, client_id="kafkalite-testing", request_timeout=5.0, connect_timeout=2.0
    )


async def _retrying(bootstrap: str, timeout: float, what: str, attempt: Any) -> Any:
    """Call ``attempt(client)`` until it returns something other than None; retriable Kafka
    errors and lost connections are retried with a fresh client until ``timeout``."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        client = _client(bootstrap)
        try:
            await client.start()
            while True:
                result = await attempt(client)
                if result is not None:
                    return result
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(RETRY_BACKOFF_S)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
            last = e
        except KafkaError as e:
            if not e.retriable:
                raise
            last = e
        finally:
            await client.close()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not done within {timeout} s (last error: {last!r})")
        await asyncio.sleep(RETRY_BACKOFF_S)


def _raise_for(code: Any, message: str | None, what: str) -> None:
    error = ErrorCode.of(int(code))
    if error is not ErrorCode.NONE:
        raise KafkaError(f"{what}: {error.name}: {message or error.message}", error_code=error)


async def partitions(
    bootstrap: str, topic: str, timeout: float = 30.0
) -> dict[int, PartitionState]:
    """Each partition of ``topic`` (leader -1 when it has none)."""

    async def attempt(client: KafkaClient) -> dict[int, PartitionState] | None:
        await client.refresh_metadata([topic])
        found = {
            tp.partition: PartitionState(info.leader, info.replicas, info.isr)
            for tp, info in client.partitions.items()
            if tp.topic == topic
        }
        return found or None

    return await _retrying(bootstrap, timeout, f"metadata of {topic}", attempt)


async def broker_ready(bootstrap: str, broker_id: int, timeout: float = 30.0) -> None:
    """Wait until the broker's Metadata lists ``broker_id`` and a controller (it has its
    cluster's metadata: before that a client's requests can fail with a retriable error)."""

    async def attempt(client: KafkaClient) -> bool | None:
        await client.refresh_metadata([])
        return True if broker_id in client.brokers and client.controller_id >= 0 else None

    await _retrying(bootstrap, timeout, f"readiness of broker {broker_id}", attempt)


async def create_topic(
    bootstrap: str,
    name: str,
    *,
    partitions: int = 1,
    replication_factor: int = -1,
    config: Mapping[str, Any] | None = None,
    timeout: float = 30.0,
) -> str:
    """CreateTopics (``replication_factor=-1``: the broker's default), then wait until every
    partition has a leader. Returns the name."""

    tries = 0

    async def attempt(client: KafkaClient) -> bool | None:
        nonlocal tries
        tries += 1
        response = await client.create_topics(
            [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "configs": [{"name": k, "value": str(v)} for k, v in (config or {}).items()],
                }
            ],
            timeout_ms=int(timeout * 1000),
        )
        result = response.topics[0]
        error = ErrorCode.of(int(result.error_code))
        if error.retriable:
            return None
        if error is ErrorCode.TOPIC_ALREADY_EXISTS and tries > 1:
            # an earlier try of ours was applied though its answer was lost or timed out
            return True
        _raise_for(result.error_code, result.error_message, f"create topic {name}")
        return True

    await _retrying(bootstrap, timeout, f"create topic {name}", attempt)
    await wait_for_leaders(bootstrap, [name], timeout=timeout)
    return name


async def wait_for_leaders(
    bootstrap: str,
    topics: Iterable[str],
    *,
    timeout: float = 30.0,
    full_isr: bool = False,
    not_on: Iterable[int] = (),
) -> dict[TopicPartition, PartitionState]:
    """Wait until every partition of ``topics`` has a leader (not one of ``not_on``), and with
    ``full_isr`` every assigned replica in its ISR. Returns the partitions' states."""
    names = list(topics)
    excluded = set(not_on)

    async def attempt(client: KafkaClient) -> dict[TopicPartition, PartitionState] | None:
        await client.refresh_metadata(names)
        found = {
            tp: PartitionState(info.leader, info.replicas, info.isr)
            for tp, info in client.partitions.items()
            if tp.topic in names
        }
        if {tp.topic for tp in found} != set(names):
            return None
        for state in found.values():
            if state.leader < 0 or state.leader in excluded:
                return None
            if full_isr and set(state.isr) != set(state.replicas):
                return None
        return found

    return await _retrying(bootstrap, timeout, f"leaders of {names}", attempt)


def _records(values: Iterable[Any]) -> list[Record]:
    records = []
    for i, item in enumerate(values):
        if isinstance(item, tuple):
            key, value = item[0], item[1]
            headers = tuple(
                Header(k, _as_bytes(v)) for k, v in (item[2] if len(item) > 2 else {}).items()
            )
        else:
            key, value, headers = None, item, ()
        records.append(Record(i, 0, _as_bytes(key), _as_bytes(value), headers))
    return records


async def produce(
    bootstrap: str,
    topic: str,
    values: Iterable[Any],
    *,
    partition: int = 0,
    acks: int | str = -1,
    timeout: float = 30.0,
) -> int:
    """Append ``values`` to one partition as one batch (each a value, or ``(key, value)``, or
    ``(key, value, {header: value})``; str is UTF-8 encoded). Returns the first record's
    offset. A missing topic is auto-created when the broker allows it."""
    batch = build_batch(_records(values))
    tp = TopicPartition(topic, partition)

    async def attempt(client: KafkaClient) -> int | None:
        if client.leader_for(tp) < 0:
            # as producers do: a Metadata request that may auto-create the topic
            await client.send(
                ApiKey.METADATA,
                request_builder(
                    ApiKey.METADATA, topics=[{"name": topic}], allow_auto_topic_creation=True
                ),
            )
            await client.refresh_metadata([topic])
            if client.leader_for(tp) < 0:
                return None
        response = await client.produce(tp, batch, acks=acks, timeout_ms=int(timeout * 1000))
        if response is None:  # acks=0
            return -1
        result = response.responses[0].partition_responses[0]
        error = ErrorCode.of(int(result.error_code))
        if error.retriable:
            return None
        _raise_for(result.error_code, getattr(result, "error_message", None), f"produce {tp}")
        return int(result.base_offset)

    return await _retrying(bootstrap, timeout, f"produce to {topic}-{partition}", attempt)


async def consume_all(bootstrap: str, topic: str, *, timeout: float = 30.0) -> list[Message]:
    """Every record of every partition of ``topic`` up to its high watermark now, in
    partition then offset order."""
    states = await partitions(bootstrap, topic, timeout=timeout)
    found: list[Message] = []
    for partition in sorted(states):
        found.extend(await _consume_partition(bootstrap, topic, partition, timeout))
    return found


async def _consume_partition(
    bootstrap: str, topic: str, partition: int, timeout: float
) -> list[Message]:
    tp = TopicPartition(topic, partition)
    messages: list[Message] = []

    async def attempt(client: KafkaClient) -> list[Message] | None:
        messages.clear()
        end = await _offset(client, tp, -1)
        offset = await _offset(client, tp, -2)
        if end is None or offset is None:
            return None
        while offset < end:
            response = await client.fetch(tp, offset, max_wait_ms=100)
            result = response.responses[0].partitions[0]
            error = ErrorCode.of(int(result.error_code))
            if error.retriable:
                return None
            _raise_for(result.error_code, None, f"fetch {tp}")
            before = offset
            for header, records in iter_batches(result.records or b""):
                if header.is_control:
                    offset = header.base_offset + header.last_offset_delta + 1
                    continue
                for record in records:
                    at = header.base_offset + record.offset_delta
                    if offset <= at < end:
                        messages.append(
                            Message(
                                topic,
                                partition,
                                at,
                                record.key,
                                record.value,
                                tuple(record.headers),
                                record_timestamp(header, record),
                            )
                        )
                offset = max(offset, header.base_offset + header.last_offset_delta + 1)
            if offset == before:
                return None  # nothing came back (a leader moving): ask again
        return list(messages)

    return await _retrying(bootstrap, timeout, f"consume {tp}", attempt)


async def _offset(client: KafkaClient, tp: TopicPartition, timestamp: int) -> int | None:
    response = await client.list_offsets(tp, timestamp)
    result = response.topics[0].partitions[0]
    error = ErrorCode.of(int(result.error_code))
    if error.retriable:
        return None
    _raise_for(result.error_code, None, f"list offsets {tp}")
    return int(result.offset)
