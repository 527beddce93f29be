"""The record browser: /topics/{name}/records."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.errors import AdminError
from kafkalite.admin.routes.base import ApiBase, topic_name
from kafkalite.admin.routing import route


class RecordRoutes(ApiBase):
    """Records of a partition from an offset or a time."""

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
        """Up to `limit` records of one partition as a consumer reads them (to the high
        watermark), from `offset`, from the first at or after `timestamp`, or the last ones."""
        from kafkalite.admin.browse import records_of
        from kafkalite.protocol.errors import ErrorCode
        from kafkalite.protocol.types import TopicPartition

        name = topic_name(request)
        cache = self.server.metadata_cache
        if cache is None or not cache.contains_topic(name):
            raise AdminError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        if not cache.contains_partition(name, query.partition):
            raise AdminError(
                404,
                "UNKNOWN_TOPIC_OR_PARTITION",
                f"partition {query.partition} of {name!r} does not exist",
                field="partition",
            )
        tp = TopicPartition(name, query.partition)
        (e1, earliest), (e2, latest) = await asyncio.gather(
            self.list_offset(tp, -2), self.list_offset(tp, -1)
        )
        for error in (e1, e2):
            if error != ErrorCode.NONE:
                raise AdminError.kafka(error, f"{name}-{query.partition}: {error.name}")
        if query.offset is None and query.timestamp is not None:
            error, start = await self.list_offset(tp, query.timestamp)
            if error != ErrorCode.NONE:
                raise AdminError.kafka(error, f"{name}-{query.partition}: {error.name}")
            start = latest if start < 0 else start
        elif query.offset is not None:  # an offset wins over a timestamp
            start = query.offset
        else:
            start = latest - query.limit
        start = min(max(start, earliest), latest)
        records: list[dict[str, Any]] = []
        position = start
        while position < latest and len(records) < query.limit:
            client = await self.kafka_client()
            response = await client.fetch(tp, position, max_wait_ms=0, max_bytes=4 * 1024 * 1024)
            answer = response.responses[0].partitions[0]
            error = ErrorCode.of(int(answer.error_code))
            if error != ErrorCode.NONE:
                raise AdminError.kafka(error, f"{name}-{query.partition}: {error.name}")
            page, after = records_of(
                answer.records or b"", position, query.limit - len(records), query.partition
            )
            records += [r for r in page if r["offset"] < latest]
            if after <= position:  # nothing more within the high watermark
                break
            position = after
        return {
            "topic": name,
            "partition": query.partition,
            "log_start_offset": earliest,
            "high_watermark": latest,
            "start_offset": start,
            "next_offset": records[-1]["offset"] + 1 if records else start,
            "records": records,
        }
