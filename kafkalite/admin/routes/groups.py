"""Consumer groups coordinated by this broker: /groups, /groups/{id} and its offset resets."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.access import Access
from kafkalite.admin.errors import AdminError
from kafkalite.admin.routes.base import ApiBase
from kafkalite.admin.routing import route
from kafkalite.protocol.acl import AclOperation as Op
from kafkalite.protocol.consumer_protocol import assigned_partitions


def decode_consumer_assignment(data: bytes) -> list[dict[str, Any]]:
    """Kafka's ConsumerProtocolAssignment as [{"topic", "partitions"}]; [] when empty or not the
    consumer protocol."""
    decoded = assigned_partitions(data) if len(data) >= 6 else None
    return [{"topic": t, "partitions": p} for t, p in decoded or ()]


# ---------------------------------------------------------------------- the API


class GroupRoutes(ApiBase):
    """List, describe and delete groups; reset their committed offsets."""

    @route("GET", "/groups", summary="List groups", tag="groups", answer=list[m.GroupSummary])
    async def list_groups(self, request: web.Request) -> Any:
        from kafkalite.protocol.errors import ErrorCode

        error, overviews = self.group_coordinator().list_groups()
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error)
        access = Access(self.server, request)  # as ListGroups answers
        return [
            {"group_id": o.group_id, "protocol_type": o.protocol_type, "state": o.state}
            for o in sorted(overviews, key=lambda o: o.group_id)
            if access.group(o.group_id)
        ]

    async def _describe(self, group_id: str, *, create: bool = False) -> tuple[Any, Any]:
        from kafkalite.protocol.errors import ErrorCode

        coordinator = await self.coordinator_for(group_id, create=create)
        error, summary = coordinator.describe_group(group_id)
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, f"group {group_id!r}: {error.name}")
        return coordinator, summary

    @route(
        "GET",
        "/groups/{id}",
        summary="Describe group",
        tag="groups",
        answer=m.Group,
        params={"id": str},
    )
    async def describe_group(self, request: web.Request) -> Any:
        from kafkalite.protocol.errors import ErrorCode

        group_id = request.match_info["id"]
        coordinator, summary = await self._describe(group_id)
        # as OffsetFetch for every topic answers: the topics the principal may not DESCRIBE
        # are left out (of the offsets, the lag and the members' assignments)
        access = Access(self.server, request)
        _, committed = coordinator.fetch_offsets(group_id)
        committed = [tp for tp in committed if access.topic(tp.topic)]
        high_watermarks = await self.high_watermarks(committed)
        error, lags = coordinator.consumer_lag(group_id, high_watermarks.get)
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error)
        lags = {tp: lag for tp, lag in lags.items() if access.topic(tp.topic)}
        if summary.state == "Dead" and not lags:
            raise AdminError(404, "GROUP_ID_NOT_FOUND", f"group {group_id!r} does not exist")
        consumer = summary.protocol_type == "consumer"
        members = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "assignment": [
                    a
                    for a in (decode_consumer_assignment(m.assignment) if consumer else [])
                    if access.topic(a["topic"])
                ],
            }
            for m in summary.members
        ]
        offsets = []
        for tp, (committed, lag) in sorted(lags.items()):
            offsets.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "committed_offset": committed,
                    "high_watermark": high_watermarks.get(tp),
                    "lag": lag,
                }
            )
        return {
            "group_id": group_id,
            "state": summary.state,
            "protocol_type": summary.protocol_type,
            "protocol": summary.protocol,
            "coordinator": self.server.broker_id,
            "members": members,
            "offsets": offsets,
            "total_lag": sum(o["lag"] or 0 for o in offsets),
        }

    @route(
        "DELETE",
        "/groups/{id}",
        summary="Delete group",
        tag="groups",
        answer=m.DeletedGroup,
        params={"id": str},
    )
    async def delete_group(self, request: web.Request) -> Any:
        from kafkalite.protocol.errors import ErrorCode

        group_id = request.match_info["id"]
        coordinator = await self.coordinator_for(group_id)
        results = await coordinator.delete_groups([group_id])
        error = results.get(group_id, ErrorCode.NONE)
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, f"group {group_id!r}: {error.message or error.name}")
        return {"group_id": group_id, "deleted": True}

    @route(
        "POST",
        "/groups/{id}/offsets",
        summary="Reset group offsets",
        tag="groups",
        answer=m.OffsetResetResult,
        body=m.OffsetReset,
        params={"id": str},
    )
    async def reset_offsets(self, request: web.Request, reset: m.OffsetReset) -> Any:
        """Kafka's kafka-consumer-groups --reset-offsets --execute, for an inactive group."""
        from kafkalite.group.metadata import OffsetAndMetadata
        from kafkalite.protocol.errors import ErrorCode
        from kafkalite.protocol.types import TopicPartition
        from kafkalite.zk import client as zk_data

        group_id = request.match_info["id"]
        body = reset.root
        dry_run = body.dry_run
        coordinator, summary = await self._describe(group_id, create=True)
        if summary.state not in ("Empty", "Dead"):
            raise AdminError(
                409,
                "NON_EMPTY_GROUP",
                f"group {group_id!r} is {summary.state} with {len(summary.members)} member(s); "
                "offsets can only be reset while the group is inactive",
            )

        # as OffsetCommit: READ on each topic (the group's READ is the route's), checked before
        # anything is looked up, so an unknown and a forbidden topic answer alike
        access = Access(self.server, request)

        def refuse_unauthorised(names: list[str]) -> None:
            refused = sorted({n for n in names if not access.topic(n, Op.READ)})
            if refused:
                raise AdminError(
                    403,
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED.name,
                    f"not authorized to access topics: {refused}",
                )

        targets: dict[TopicPartition, int] = {}
        if isinstance(body, m.ResetToOffsets):
            refuse_unauthorised([entry.topic for entry in body.offsets])
            for entry in body.offsets:
                targets[TopicPartition(entry.topic, entry.partition)] = entry.offset
        else:
            if isinstance(body, m.ResetToTimestamp):
                timestamp = body.timestamp
            else:
                timestamp = -2 if body.to == "earliest" else -1
            topics = body.topics
            if topics is not None:
                refuse_unauthorised(list(topics))
            else:
                # every committed topic the principal may see (OffsetFetch of all topics)
                _, committed = coordinator.fetch_offsets(group_id)
                topics = sorted({tp.topic for tp in committed if access.topic(tp.topic, Op.READ)})
                if not topics:
                    raise AdminError(
                        404,
                        "GROUP_ID_NOT_FOUND",
                        f"group {group_id!r} has no committed offsets to reset; name the topics",
                    )
            assignments = await zk_data.get_topic_assignments(self.session, topics)
            for topic in topics:
                if topic not in assignments:
                    raise AdminError(
                        404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} does not exist"
                    )
                for p in sorted(assignments[topic][1]):
                    tp = TopicPartition(topic, p)
                    targets[tp] = await self._offset_for(tp, timestamp)
        if not targets:
            raise AdminError.invalid("offsets", "no partitions to reset")
        if not dry_run:
            now = int(time.time() * 1000)  # a commit timestamp is wall-clock time
            results = await coordinator.commit_offsets(
                group_id,
                "",
                None,
                -1,
                {
                    tp: OffsetAndMetadata.from_request(o, None, None, now)
                    for tp, o in targets.items()
                },
            )
            failed = {tp: e for tp, e in results.items() if e != ErrorCode.NONE}
            if failed:
                tp, error = next(iter(sorted(failed.items())))
                raise AdminError.kafka(error, f"commit for {tp.topic}-{tp.partition}: {error.name}")
        return {
            "group_id": group_id,
            "dry_run": dry_run,
            "offsets": [
                {"topic": tp.topic, "partition": tp.partition, "offset": offset}
                for tp, offset in sorted(targets.items())
            ],
        }

    async def _offset_for(self, tp: Any, timestamp: int) -> int:
        """Where a reset to `timestamp` (-2 earliest, -1 latest, else a time) puts `tp`; a
        time past the last record resolves to the end, as kafka-consumer-groups does."""
        from kafkalite.protocol.errors import ErrorCode

        error, offset = await self.list_offset(tp, timestamp)
        if error == ErrorCode.NONE and offset < 0:
            error, offset = await self.list_offset(tp, -1)
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, f"{tp.topic}-{tp.partition}: {error.name}")
        return max(offset, 0)
