"""The `_schemas` topic as the registry's storage: each broker consumes partition 0 into its
own SchemaView and writes records to it, both through the project's Kafka client bootstrapped
at this broker's inter-broker listener (so a write lands on the partition's leader, wherever
that is, and is replicated like any record).

- Lazy: nothing happens until the registry is first used (a broker whose registry is never
  asked creates no topic and runs no consumer).
- `sync()` is read-your-writes: it asks for the partition's end offset and waits until the view
  has applied everything before it. A write returns once the view has applied the written
  records, so whatever a client did on any broker is seen by the next request it makes anywhere.
- The consumer survives leader changes and unreachable brokers: it retries with a short
  backoff and the client learns the new leader.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import structlog

from kafkalite.client.client import KafkaClient
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import Record, build_batch, iter_batches
from kafkalite.protocol.types import TopicPartition
from kafkalite.schema_registry.errors import OPERATION_TIMEOUT, STORE_ERROR, RegistryError
from kafkalite.schema_registry.view import SchemaView

log = structlog.get_logger("kafkalite.schema_registry")

TOPIC = "_schemas"
PARTITION = TopicPartition(TOPIC, 0)
TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.1
FETCH_WAIT_MS = 500


class SchemaStore:
    def __init__(self, bootstrap: str, client_id: str, replication_factor: int = 3) -> None:
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.replication_factor = replication_factor
        self.view = SchemaView()
        self.position = 0
        """The next offset to fetch: every record before it is in the view."""
        self._client: KafkaClient | None = None
        """Writes and end offsets."""
        self._fetcher: KafkaClient | None = None
        """The consumer's own: a broker answers a connection's requests in order, so a
        ListOffsets or Produce behind a long-polling Fetch would wait for it."""
        self._consumer: asyncio.Task[None] | None = None
        self._start_lock = asyncio.Lock()
        self._advanced = asyncio.Condition()
        self._closed = False

    # ------------------------------------------------------------------------ life cycle

    async def start(self) -> None:
        """Create the topic if needed and start consuming it (once)."""
        if self._consumer is not None:
            return
        async with self._start_lock:
            if self._consumer is not None:
                return
            if self._closed:
                raise RegistryError(STORE_ERROR, "the schema registry is shutting down")
            client, fetcher = self._new_client(), self._new_client()
            try:
                await client.start()
                await self._create_topic(client)
                await fetcher.start()
            except RegistryError:
                await client.close()
                await fetcher.close()
                raise
            except Exception as e:  # the client's I/O and protocol failures
                await client.close()
                await fetcher.close()
                raise RegistryError(STORE_ERROR, f"cannot reach {TOPIC}: {e}") from None
            self._client, self._fetcher = client, fetcher
            self._consumer = asyncio.get_running_loop().create_task(
                self._consume(), name="schema-registry-consumer"
            )

    def _new_client(self) -> KafkaClient:
        return KafkaClient(
            self.bootstrap,
            client_id=self.client_id,
            request_timeout=TIMEOUT_S,
            connect_timeout=TIMEOUT_S,
        )

    async def close(self) -> None:
        self._closed = True
        if self._consumer is not None:
            self._consumer.cancel()
            try:
                await self._consumer
            except (asyncio.CancelledError, Exception):
                pass
        for client in (self._client, self._fetcher):
            if client is not None:
                await client.close()

    async def _create_topic(self, client: KafkaClient) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            replication = max(1, min(self.replication_factor, len(client.brokers) or 1))
            response = await client.create_topics(
                [
                    {
                        "name": TOPIC,
                        "num_partitions": 1,
                        "replication_factor": replication,
                        "configs": [{"name": "cleanup.policy", "value": "compact"}],
                    }
                ]
            )
            error = ErrorCode.of(int(response.topics[0].error_code))
            if error in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                break
            if not error.retriable or time.monotonic() > deadline:
                raise RegistryError(STORE_ERROR, f"cannot create {TOPIC}: {error.name}")
            await asyncio.sleep(RETRY_BACKOFF_S)  # retry backoff, not synchronisation
            await client.refresh_metadata([])
        while client.leader_for(PARTITION) < 0:
            if time.monotonic() > deadline:
                raise RegistryError(OPERATION_TIMEOUT, f"{TOPIC} has no leader")
            await asyncio.sleep(RETRY_BACKOFF_S)
            await client.refresh_metadata([TOPIC])

    # -------------------------------------------------------------------------- reading

    async def _consume(self) -> None:
        assert self._fetcher is not None
        client = self._fetcher
        while not self._closed:
            try:
                response = await client.fetch(
                    PARTITION, self.position, max_wait_ms=FETCH_WAIT_MS, max_bytes=4 * 1024 * 1024
                )
                answer = response.responses[0].partitions[0]
                error = ErrorCode.of(int(answer.error_code))
                if error is ErrorCode.OFFSET_OUT_OF_RANGE:
                    # compaction moved the log start past us (cannot happen for a live view,
                    # which is never behind the cleaner's horizon), or the log was truncated
                    start = await client.list_offsets(PARTITION, -2)
                    self.position = int(start.topics[0].partitions[0].offset)
                    continue
                if error is not ErrorCode.NONE:
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                advanced = False
                for header, records in iter_batches(answer.records or b""):
                    if header.next_offset <= self.position:
                        continue
                    if not header.is_control:
                        for record in records:
                            offset = header.base_offset + record.offset_delta
                            if offset >= self.position:
                                self.view.apply(offset, record.key, record.value)
                    self.position = header.next_offset
                    advanced = True
                if advanced:
                    async with self._advanced:
                        self._advanced.notify_all()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a broker gone, a leader moved: retry
                log.debug("schemas consumer retrying", error=repr(e))
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def wait_for(self, offset: int, timeout: float = TIMEOUT_S) -> None:
        """Until every record before `offset` is in the view."""
        if self.position >= offset:
            return
        try:
            async with asyncio.timeout(timeout):
                async with self._advanced:
                    await self._advanced.wait_for(lambda: self.position >= offset)
        except TimeoutError:
            raise RegistryError(
                OPERATION_TIMEOUT, f"the registry did not catch up with {TOPIC} in time"
            ) from None

    async def end_offset(self) -> int:
        assert self._client is not None
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                response = await self._client.list_offsets(PARTITION, -1)
                answer = response.topics[0].partitions[0]
                error = ErrorCode.of(int(answer.error_code))
                if error is ErrorCode.NONE:
                    return int(answer.offset)
                problem = error.name
            except asyncio.CancelledError:
                raise
            except Exception as e:
                problem = repr(e)
            if time.monotonic() > deadline:
                raise RegistryError(OPERATION_TIMEOUT, f"{TOPIC}: {problem}")
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def sync(self) -> SchemaView:
        """The view, with everything written to the topic before this call applied."""
        await self.start()
        await self.wait_for(await self.end_offset())
        return self.view

    # -------------------------------------------------------------------------- writing

    async def write(self, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Append (key, value) records as one batch (acks=all) and wait until the view has
        applied them."""
        await self.start()
        assert self._client is not None
        batch = build_batch([Record(key=k, value=v) for k, v in records])
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                response = await self._client.produce(PARTITION, batch, acks=-1)
                answer = response.responses[0].partition_responses[0]
                error = ErrorCode.of(int(answer.error_code))
                if error is ErrorCode.NONE:
                    await self.wait_for(int(answer.base_offset) + len(records))
                    return
                if not error.retriable:
                    raise RegistryError(STORE_ERROR, f"writing {TOPIC}: {error.name}")
                problem = error.name
            except (asyncio.CancelledError, RegistryError):
                raise
            except Exception as e:
                problem = repr(e)
            if time.monotonic() > deadline:
                raise RegistryError(OPERATION_TIMEOUT, f"writing {TOPIC}: {problem}")
            await asyncio.sleep(RETRY_BACKOFF_S)
