"""Consumer groups of the cluster: /groups, /groups/{id} and its offset resets."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.access import Access
from kafkalite.admin.errors import AdminError
from kafkalite.admin.groupview import GROUP_TYPES, GroupData, GroupView, lag_rows
from kafkalite.admin.routes.base import ApiBase
from kafkalite.admin.routing import route
from kafkalite.protocol.acl import AclOperation as Op

# ---------------------------------------------------------------------- the API


class GroupRoutes(ApiBase):
    """List, describe and delete groups; reset and delete their offsets (a share group's: its
    share-partitions' start offsets). Any broker answers for
    every group (groupview.py: a group another broker coordinates is asked of it over the Kafka
    protocol)."""

    @route(
        "GET",
        "/groups",
        summary="List groups",
        tag="groups",
        answer=list[m.GroupSummary],
        query=m.GroupsQuery,
    )
    async def list_groups(self, request: web.Request, query: m.GroupsQuery) -> Any:
        """Every group of the cluster (ListGroups v5 to every broker) with its type and state
        (`type` keeps one type only), and unless `lag=false` its members, topics and total
        lag (each described by its coordinator). A share group has no committed offsets and
        so no lag: its members, topics and lag are null here (see its own page)."""
        self.group_coordinator()
        access = Access(self.server, request)  # as ListGroups answers
        view = GroupView(self, access)
        overviews = await view.overviews()
        out: list[dict[str, Any]] = [
            {
                "group_id": o.group_id,
                "group_type": o.group_type if o.group_type in GROUP_TYPES else "classic",
                "protocol_type": o.protocol_type,
                "state": o.state,
                "coordinator": o.coordinator,
                "members": None,
                "topics": None,
                "total_lag": None,
            }
            for o in overviews
            if query.type is None or o.group_type == query.type
        ]
        if not query.lag or not out:
            return out
        described = [g["group_id"] for g in out if g["group_type"] == "classic"]
        consumers = [g["group_id"] for g in out if g["group_type"] == "consumer"]
        datas = await view.many(described)
        datas.update(await view.many_consumer(consumers))
        wanted = set().union(*(d.partitions() for d in datas.values() if d is not None))
        ends = await view.ends(wanted)
        for g in out:
            data = datas.get(g["group_id"])
            if data is None:
                continue
            rows = lag_rows(data, ends)
            g["state"] = data.state
            g["members"] = len(data.members)
            g["topics"] = data.topics()
            g["total_lag"] = sum(r["lag"] or 0 for r in rows)
        return out

    @route(
        "GET",
        "/groups/{id}",
        summary="Describe group",
        tag="groups",
        answer=m.Group,
        params={"id": str},
    )
    async def describe_group(self, request: web.Request) -> Any:
        """State, members with their assignments, and the lag of every partition the group
        committed or has assigned (a partition never committed has no committed offset and
        counts its lag from the log start offset)."""
        group_id = request.match_info["id"]
        access = Access(self.server, request)
        view = GroupView(self, access)
        self.group_coordinator()
        # as OffsetFetch for every topic answers: the topics the principal may not DESCRIBE
        # are left out (of the offsets, the lag and the members' assignments)
        data, share_offsets = await self._any_group(view, group_id)
        data = data.visible(access)
        offsets = (
            lag_rows(data, await view.ends(data.partitions())) if share_offsets is None else []
        )
        return {
            "group_id": group_id,
            "group_type": data.group_type,
            "state": data.state,
            "protocol_type": data.protocol_type,
            "protocol": data.protocol,
            "coordinator": data.coordinator,
            "group_epoch": data.group_epoch,
            "assignment_epoch": data.assignment_epoch,
            "assignor": data.assignor,
            "members": [
                {
                    "member_id": mb.member_id,
                    "group_instance_id": mb.group_instance_id,
                    "client_id": mb.client_id,
                    "client_host": mb.client_host,
                    "assignment": mb.assignment,
                    "member_epoch": mb.member_epoch,
                    "subscribed_topics": mb.subscribed_topics,
                    "subscribed_topic_regex": mb.subscribed_topic_regex,
                    "target_assignment": mb.target_assignment,
                }
                for mb in data.members
            ],
            "offsets": offsets,
            "total_lag": sum(o["lag"] or 0 for o in offsets),
            "share_offsets": share_offsets,
        }

    @staticmethod
    async def _any_group(
        view: GroupView, group_id: str
    ) -> tuple[GroupData, list[dict[str, Any]] | None]:
        """The group whatever its type: a classic group as DescribeGroups describes it; one
        DescribeGroups does not know (Dead) as ConsumerGroupDescribe, then ShareGroupDescribe
        does; a Dead classic group with only committed offsets as that. The share-partitions'
        start offsets are the second item (None unless a share group)."""
        try:
            classic: GroupData | None = await view.group(group_id)
        except AdminError as e:
            if e.code != "GROUP_ID_NOT_FOUND":
                raise
            classic = None
        if classic is not None and classic.state != "Dead":
            return classic, None
        try:
            return await view.consumer_group(group_id), None
        except AdminError as e:
            if e.code != "GROUP_ID_NOT_FOUND":
                raise
        try:
            data, starts = await view.share_group(group_id)
            return data, starts
        except AdminError as e:
            if e.code != "GROUP_ID_NOT_FOUND" or classic is None:
                raise
        return classic, None

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
        view = GroupView(self, Access(self.server, request))
        node = await view.coordinator_of(group_id)
        share = self.server.services.extra.get("share_groups")
        if view.is_local(node) and share is not None and share.is_share_group(group_id):
            # its share-partitions' persisted state first, as Kafka deletes a share group
            results = {group_id: await share.delete_group(group_id)}
        elif view.is_local(node):
            coordinator = await self.coordinator_for(group_id)
            results = await coordinator.delete_groups([group_id])
        else:  # DeleteGroups at its coordinator, as an admin client sends it
            client = await self.kafka_client()
            results = await client.delete_groups(node, [group_id])
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
        """Kafka's kafka-consumer-groups --reset-offsets --execute, for an inactive group
        (OffsetCommit at its coordinator); of a share group, kafka-share-groups
        --reset-offsets: AlterShareGroupOffsets at its coordinator replaces each
        share-partition's state by an empty one at the new start offset (its in-flight records
        are forgotten). Refused with 409 NON_EMPTY_GROUP while the group has members, dry run
        included. Without `topics`: the topics the group committed, or a share group's
        topics."""
        from kafkalite.group.metadata import OffsetAndMetadata
        from kafkalite.protocol.errors import ErrorCode
        from kafkalite.protocol.types import TopicPartition
        from kafkalite.zk import client as zk_data

        group_id = request.match_info["id"]
        body = reset.root
        dry_run = body.dry_run
        from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME

        if not self.server.metadata_cache.contains_topic(GROUP_METADATA_TOPIC_NAME):
            await self.coordinator_for(group_id, create=True)  # creates it, as FindCoordinator
        view = GroupView(self, Access(self.server, request))
        node = await view.coordinator_of(group_id)
        try:
            # whatever its type: a consumer group (KIP-848) with members is not Dead
            group, share_offsets = await self._any_group(view, group_id)
        except AdminError as e:
            if e.code != "GROUP_ID_NOT_FOUND":
                raise
            group = GroupData(group_id, "Dead", "", "", node)  # a reset may seed a new group
            share_offsets = None
        if share_offsets is not None and group.members:
            # Kafka's AlterShareGroupOffsets answer (GroupNotEmptyException), dry run or not
            raise AdminError(
                409,
                "NON_EMPTY_GROUP",
                f"share group {group_id!r} is not empty: it has {len(group.members)} "
                "member(s); its offsets can only be reset while it has none",
            )
        if group.state not in ("Empty", "Dead"):
            raise AdminError(
                409,
                "NON_EMPTY_GROUP",
                f"group {group_id!r} is {group.state} with {len(group.members)} member(s); "
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
            elif share_offsets is not None:
                # every topic the share group was subscribed to (DescribeShareGroupOffsets)
                topics = sorted(
                    {r["topic"] for r in share_offsets if access.topic(r["topic"], Op.READ)}
                )
                if not topics:
                    raise AdminError(
                        404,
                        "GROUP_ID_NOT_FOUND",
                        f"share group {group_id!r} has no share-partitions to reset; name the "
                        "topics",
                    )
            else:
                # every committed topic the principal may see (OffsetFetch of all topics)
                committed = group.committed
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
        if share_offsets is not None:
            if not dry_run:
                await self._alter_share_offsets(view, node, group_id, targets)
        elif not dry_run and not view.is_local(node):
            # OffsetCommit at its coordinator, as an admin client commits for an inactive group
            client = await self.kafka_client()
            results = await client.offset_commit(node, group_id, targets)
            failed = {tp: e for tp, e in results.items() if e != ErrorCode.NONE}
            if failed:
                tp, error = next(iter(sorted(failed.items())))
                raise AdminError.kafka(error, f"commit for {tp.topic}-{tp.partition}: {error.name}")
        elif not dry_run:
            coordinator = await self.coordinator_for(group_id)
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
            "group_type": group.group_type if share_offsets is None else "share",
            "dry_run": dry_run,
            "offsets": [
                {"topic": tp.topic, "partition": tp.partition, "offset": offset}
                for tp, offset in sorted(targets.items())
            ],
        }

    async def _alter_share_offsets(
        self, view: GroupView, node: int, group_id: str, targets: dict[Any, int]
    ) -> None:
        """AlterShareGroupOffsets at the group's coordinator (this broker too is asked over the
        protocol, as an admin client would): each share-partition's state replaced by an empty
        one at its target under a higher state epoch. The first error refuses the request
        (the partitions before it are altered: a retry is idempotent)."""
        from kafkalite.client.connection import request_builder
        from kafkalite.protocol.api import ApiKey
        from kafkalite.protocol.errors import ErrorCode

        by_topic: dict[str, list[dict[str, int]]] = {}
        for tp, offset in sorted(targets.items()):
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "start_offset": offset}
            )
        request = request_builder(
            ApiKey.ALTER_SHARE_GROUP_OFFSETS,
            group_id=group_id,
            topics=[{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()],
        )
        response = await view._ask(
            node,
            group_id,
            lambda client: client.send(ApiKey.ALTER_SHARE_GROUP_OFFSETS, request, node_id=node),
        )
        _raise_share_error(group_id, response.error_code)
        for topic in response.responses:
            for p in topic.partitions:
                error = ErrorCode.of(int(p.error_code))
                if error != ErrorCode.NONE:
                    raise AdminError.kafka(
                        error, f"{topic.topic_name}-{p.partition_index}: {error.name}"
                    )

    @route(
        "DELETE",
        "/groups/{id}/offsets",
        summary="Delete group offsets",
        tag="groups",
        answer=m.DeletedOffsets,
        query=m.OffsetsDeleteQuery,
        params={"id": str},
    )
    async def delete_offsets(self, request: web.Request, query: m.OffsetsDeleteQuery) -> Any:
        """Kafka's kafka-share-groups --delete-offsets (DeleteShareGroupOffsets: the share
        group must have no members; its share-partitions' state is deleted, so it starts
        again at share.auto.offset.reset) and kafka-consumer-groups --delete-offsets
        (OffsetDelete of every partition of the topics: refused for a topic the group's
        members still subscribe to, GROUP_SUBSCRIBED_TO_TOPIC), at the group's coordinator."""
        from kafkalite.client.connection import request_builder
        from kafkalite.protocol.api import ApiKey
        from kafkalite.protocol.errors import ErrorCode

        group_id = request.match_info["id"]
        access = Access(self.server, request)
        topics = query.topics()
        # as DeleteShareGroupOffsets and OffsetDelete: READ on each topic (the group's DELETE
        # is the route's), checked before anything is looked up
        refused = sorted(t for t in topics if not access.topic(t, Op.READ))
        if refused:
            raise AdminError(
                403,
                ErrorCode.TOPIC_AUTHORIZATION_FAILED.name,
                f"not authorized to access topics: {refused}",
            )
        self.group_coordinator()
        view = GroupView(self, access)
        group, share_offsets = await self._any_group(view, group_id)
        node = group.coordinator
        cache = self.server.metadata_cache
        for t in topics:
            if not cache.contains_topic(t):
                raise AdminError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {t!r} does not exist")
        if share_offsets is not None:
            request_ = request_builder(
                ApiKey.DELETE_SHARE_GROUP_OFFSETS,
                group_id=group_id,
                topics=[{"topic_name": t} for t in topics],
            )
            response = await view._ask(
                node,
                group_id,
                lambda c: c.send(ApiKey.DELETE_SHARE_GROUP_OFFSETS, request_, node_id=node),
            )
            _raise_share_error(group_id, response.error_code)
            for topic in response.responses:
                error = ErrorCode.of(int(topic.error_code))
                if error != ErrorCode.NONE:
                    raise AdminError.kafka(error, f"topic {topic.topic_name}: {error.name}")
        else:
            request_ = request_builder(
                ApiKey.OFFSET_DELETE,
                group_id=group_id,
                topics=[
                    {
                        "name": t,
                        "partitions": [
                            {"partition_index": p} for p in range(cache.num_partitions(t) or 0)
                        ],
                    }
                    for t in topics
                ],
            )
            response = await view._ask(
                node, group_id, lambda c: c.send(ApiKey.OFFSET_DELETE, request_, node_id=node)
            )
            _raise_share_error(group_id, response.error_code)
            for topic in response.topics:
                for p in topic.partitions:
                    error = ErrorCode.of(int(p.error_code))
                    if error != ErrorCode.NONE:
                        raise AdminError.kafka(
                            error, f"{topic.name}-{p.partition_index}: {error.name}"
                        )
        return {
            "group_id": group_id,
            "group_type": "share" if share_offsets is not None else group.group_type,
            "topics": topics,
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


def _raise_share_error(group_id: str, code: int) -> None:
    """A group-level error of an offsets request as the admin API's answer (NON_EMPTY_GROUP:
    409, as for a reset of a consumer group with members)."""
    from kafkalite.protocol.errors import ErrorCode

    error = ErrorCode.of(int(code))
    if error != ErrorCode.NONE:
        raise AdminError.kafka(error, f"group {group_id!r}: {error.message or error.name}")
