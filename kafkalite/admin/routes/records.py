"""The record browser and test records: GET and POST /topics/{name}/records.

Reading is a plain Fetch at each partition's leader, up to its high watermark, as a consumer
reads. All partitions are read side by side and merged by timestamp. A filter is applied on
the broker, over at most `SCAN_LIMIT` records per partition and request, so a search of a large
topic answers at once (the page says how many records it read; the next page goes on from
there). Producing goes through the broker's produce path (a Produce request with acks=all at
the leader); the route needs WRITE on the topic, as a producer does.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.errors import AdminError
from kafkalite.admin.routes.base import ApiBase, topic_name
from kafkalite.admin.routing import Reply, route

SCAN_LIMIT = 20_000
"""Records of one partition a filtered read looks at, at most, per request."""
FETCH_BYTES = 4 * 1024 * 1024
PARTITION_CONCURRENCY = 4
"""Partitions read at once for one request."""


def matches(record: dict[str, Any], needle: str) -> bool:
    """Whether the shown text of the record's key, value or a header contains `needle` (lower
    case)."""
    texts = [record["key"], record["value"]]
    texts += [h["value"] for h in record["headers"]]
    if any(t is not None and needle in t["text"].lower() for t in texts):
        return True
    return any(needle in h["key"].lower() for h in record["headers"])


class RecordRoutes(ApiBase):
    """Records of a topic from an offset or a time, filtered; a test record produced."""

    _decoders: dict[int, Any] | None = None

    async def _decode_framed(self, page: list[dict[str, Any]], topic: str) -> None:
        """Keys and values framed for the Schema Registry decoded with their schemas (before
        the filter, which then matches the decoded text); the raw bytes dropped."""
        from kafkalite.admin.schemas import SchemaDecoders, framed_id, registry_of

        registry = registry_of(self.server)
        if registry is not None:
            ids = {
                i
                for r in page
                for i in (framed_id(r["raw_key"]), framed_id(r["raw_value"]))
                if i is not None
            }
            if ids:
                if self._decoders is None:
                    self._decoders = {}
                decoders = SchemaDecoders(registry, self._decoders)
                await decoders.prepare(ids)
                for r in page:
                    for field, raw in (("key", r["raw_key"]), ("value", r["raw_value"])):
                        shown = decoders.shown(raw, topic, field == "key")
                        if shown is not None:
                            r[field] = shown
        for r in page:
            del r["raw_key"], r["raw_value"]

    async def _read(
        self, tp: Any, start: int, end: int, limit: int, needle: str | None, last: bool
    ) -> tuple[list[dict[str, Any]], int, int]:
        """(records, next offset, scanned) of `tp` from `start` to `end` (the high watermark):
        the first `limit` (matching `needle`), or with `last` the last `limit` of those read."""
        from kafkalite.admin.browse import records_of
        from kafkalite.protocol.errors import ErrorCode

        records: list[dict[str, Any]] = []
        position = start
        scanned = 0
        budget = SCAN_LIMIT if needle else limit
        while position < end and (last or len(records) < limit) and scanned < budget:
            client = await self.kafka_client()
            response = await client.fetch(tp, position, max_wait_ms=0, max_bytes=FETCH_BYTES)
            answer = response.responses[0].partitions[0]
            error = ErrorCode.of(int(answer.error_code))
            if error != ErrorCode.NONE:
                raise AdminError.kafka(error, f"{tp.topic}-{tp.partition}: {error.name}")
            page, after = records_of(
                answer.records or b"", position, budget - scanned, tp.partition, keep_raw=True
            )
            page = [r for r in page if r["offset"] < end]
            await self._decode_framed(page, tp.topic)
            scanned += len(page)
            records += [r for r in page if needle is None or matches(r, needle)]
            if not last:
                records = records[:limit]
            if after <= position:  # nothing more within the high watermark
                break
            position = after
        if last:
            records = records[-limit:]
            return records, position, scanned
        next_offset = records[-1]["offset"] + 1 if len(records) >= limit else position
        return records, max(next_offset, start), scanned

    async def _partition_page(
        self, tp: Any, query: m.RecordsQuery
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        from kafkalite.protocol.errors import ErrorCode

        (e1, earliest), (e2, latest) = await asyncio.gather(
            self.list_offset(tp, -2), self.list_offset(tp, -1)
        )
        for error in (e1, e2):
            if error != ErrorCode.NONE:
                raise AdminError.kafka(error, f"{tp.topic}-{tp.partition}: {error.name}")
        last = query.offset is None and query.timestamp is None
        if query.offset is None and query.timestamp is not None:
            error, start = await self.list_offset(tp, query.timestamp)
            if error != ErrorCode.NONE:
                raise AdminError.kafka(error, f"{tp.topic}-{tp.partition}: {error.name}")
            start = latest if start < 0 else start
        elif query.offset is not None:  # an offset wins over a timestamp
            start = query.offset
        elif query.filter:  # the last matches among the last SCAN_LIMIT records
            start = latest - SCAN_LIMIT
        else:
            start = latest - query.limit
        start = min(max(start, earliest), latest)
        needle = query.filter.lower() if query.filter else None
        records, next_offset, scanned = await self._read(
            tp, start, latest, query.limit, needle, last
        )
        cursor = {
            "partition": tp.partition,
            "log_start_offset": earliest,
            "high_watermark": latest,
            "start_offset": start,
            "next_offset": next_offset,
            "scanned": scanned,
        }
        return cursor, records

    @route(
        "GET",
        "/topics/{name}/records",
        summary="Browse records",
        tag="topics",
        answer=m.RecordsPage,
        query=m.RecordsQuery,
        params={"name": m.TopicName},
    )
    async def records(self, request: web.Request, query: m.RecordsQuery) -> Any:
        """Up to `limit` records as a consumer reads them (to the high watermark), of one
        partition or of all: from `offset` (of each partition), from the first at or after
        `timestamp`, or the last ones; with `filter`, only those whose key, value or headers
        contain it."""
        from kafkalite.protocol.types import TopicPartition

        name = topic_name(request)
        cache = self.server.metadata_cache
        if cache is None or not cache.contains_topic(name):
            raise AdminError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        if query.partition is not None:
            if not cache.contains_partition(name, query.partition):
                raise AdminError(
                    404,
                    "UNKNOWN_TOPIC_OR_PARTITION",
                    f"partition {query.partition} of {name!r} does not exist",
                    field="partition",
                )
            partitions = [query.partition]
        else:
            partitions = sorted(cache.partition_states.get(name, {}))
        gate = asyncio.Semaphore(PARTITION_CONCURRENCY)

        async def one(p: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
            async with gate:
                return await self._partition_page(TopicPartition(name, p), query)

        pages = await asyncio.gather(*(one(p) for p in partitions))
        cursors = [c for c, _ in pages]
        merged = [r for _, rs in pages for r in rs]
        merged.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
        if query.offset is None and query.timestamp is None:
            merged = merged[-query.limit :]  # the newest
        else:
            merged = merged[: query.limit]  # the first from the seek
            # each partition continues after its last record shown (or where it stopped)
            shown: dict[int, int] = {}
            for r in merged:
                shown[r["partition"]] = r["offset"] + 1
            for c in cursors:
                if c["partition"] in shown:
                    c["next_offset"] = shown[c["partition"]]
                elif any(r["partition"] == c["partition"] for _, rs in pages for r in rs):
                    c["next_offset"] = c["start_offset"]  # its records were all cut
        one_partition = cursors[0] if query.partition is not None else None
        return {
            "topic": name,
            "partition": query.partition,
            "log_start_offset": one_partition["log_start_offset"] if one_partition else None,
            "high_watermark": one_partition["high_watermark"] if one_partition else None,
            "start_offset": one_partition["start_offset"] if one_partition else None,
            "next_offset": one_partition["next_offset"] if one_partition else None,
            "partitions": cursors,
            "records": merged,
        }

    @route(
        "POST",
        "/topics/{name}/records",
        summary="Produce a record",
        tag="topics",
        answer=m.ProducedRecord,
        body=m.NewRecord,
        status=201,
        params={"name": m.TopicName},
    )
    async def produce_record(self, request: web.Request, record: m.NewRecord) -> Any:
        """Produce one record (UTF-8 key, value and headers) with acks=all at the partition's
        leader: to `partition`, else by the key's hash as Kafka's producers, else any."""
        import random

        from kafkalite.client.partitioner import partition_for_key
        from kafkalite.protocol.errors import ErrorCode
        from kafkalite.protocol.records import Header, Record, build_batch
        from kafkalite.protocol.types import TopicPartition

        name = topic_name(request)
        cache = self.server.metadata_cache
        if cache is None or not cache.contains_topic(name):
            raise AdminError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        if name.startswith("__"):  # as Kafka refuses a producer writing to an internal topic
            raise AdminError(
                403, "INVALID_TOPIC_EXCEPTION", f"{name!r} is an internal topic: not writable"
            )
        count = len(cache.partition_states.get(name, {}))
        key = record.key.encode() if record.key is not None else None
        if record.partition is not None:
            partition = record.partition
            if not cache.contains_partition(name, partition):
                raise AdminError(
                    404,
                    "UNKNOWN_TOPIC_OR_PARTITION",
                    f"partition {partition} of {name!r} does not exist",
                    field="partition",
                )
        elif key is not None:
            partition = partition_for_key(key, count)
        else:
            partition = random.randrange(count)
        now = int(time.time() * 1000)  # a CreateTime is wall-clock time
        batch = build_batch(
            [
                Record(
                    0,
                    0,
                    key,
                    record.value.encode() if record.value is not None else None,
                    tuple(
                        Header(h.key, h.value.encode() if h.value is not None else None)
                        for h in record.headers
                    ),
                )
            ],
            base_timestamp=now,
            max_timestamp=now,
        )
        tp = TopicPartition(name, partition)
        try:
            client = await self.kafka_client()
            response = await client.produce(tp, batch, acks=-1, timeout_ms=10_000)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the client's I/O and protocol failures, at the boundary
            raise AdminError(
                503, "LEADER_NOT_AVAILABLE", f"{name}-{partition}: the leader did not answer: {e}"
            ) from None
        answer = response.responses[0].partition_responses[0]
        error = ErrorCode.of(int(answer.error_code))
        if error != ErrorCode.NONE:
            raise AdminError.kafka(
                error, getattr(answer, "error_message", None) or f"{name}-{partition}: {error.name}"
            )
        appended = getattr(answer, "log_append_time", None)  # LogAppendTime topics only
        timestamp = int(appended.timestamp() * 1000) if appended is not None else now
        return Reply(
            {
                "topic": name,
                "partition": partition,
                "offset": int(answer.base_offset),
                "timestamp": timestamp,
            },
            201,
        )
