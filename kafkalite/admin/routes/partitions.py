"""Reassignment and leader elections: /partitions/reassign and /partitions/elect-leaders."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.errors import AdminError
from kafkalite.admin.routes.base import ApiBase
from kafkalite.admin.routing import Reply, route


class PartitionRoutes(ApiBase):
    """Reassign partitions, follow reassignments, elect leaders."""

    async def _validate_partitions(self, entries: list[dict[str, Any]], field: str) -> None:
        from kafkalite.zk import client as zk_data

        assignments = await zk_data.get_topic_assignments(
            self.session, {e["topic"] for e in entries}
        )
        brokers = set((await zk_data.get_all_brokers_and_epochs(self.session)).keys())
        for i, entry in enumerate(entries):
            found = assignments.get(entry["topic"])
            if found is None or entry["partition"] not in found[1]:
                raise AdminError(
                    404,
                    "UNKNOWN_TOPIC_OR_PARTITION",
                    f"{field}[{i}]: {entry['topic']}-{entry['partition']} does not exist",
                )
            unknown = [b for b in entry.get("replicas", ()) if b not in brokers]
            if unknown:
                raise AdminError(
                    404,
                    "BROKER_NOT_AVAILABLE",
                    f"{field}[{i}].replicas: brokers {unknown} are not registered",
                    field=f"{field}[{i}].replicas",
                )

    @route(
        "POST",
        "/partitions/reassign",
        summary="Reassign partitions",
        tag="partitions",
        answer=m.ReassignmentAccepted,
        status=202,
        body=m.Reassignment,
    )
    async def reassign(self, request: web.Request, body: m.Reassignment) -> Any:
        from kafkalite.protocol.types import TopicPartition
        from kafkalite.zk import admin
        from kafkalite.zk import data as paths

        entries = [e.model_dump() for e in body.partitions]
        await self._validate_partitions(entries, "partitions")
        plan = {TopicPartition(e["topic"], e["partition"]): e["replicas"] for e in entries}
        await admin.reassign_partitions(self.session, plan)  # REASSIGNMENT_IN_PROGRESS: 409
        return Reply({"partitions": entries, "path": paths.REASSIGN_PARTITIONS}, 202)

    @route(
        "GET",
        "/partitions/reassign",
        summary="List reassignments",
        tag="partitions",
        answer=m.Reassignments,
    )
    async def reassignments(self, request: web.Request) -> Any:
        from kafkalite.zk import admin
        from kafkalite.zk import client as zk_data

        session = self.session
        try:
            pending = await admin.get_partition_reassignments(session)
        except ValueError as e:
            raise AdminError(503, "COORDINATION_ERROR", str(e)) from None
        topics = await zk_data.get_all_topics(session)
        assignments = await zk_data.get_topic_assignments(session, topics)
        ongoing = []
        for topic, (_, parts) in sorted(assignments.items()):
            for p, replicas in sorted(parts.items()):
                if replicas.adding_replicas or replicas.removing_replicas:
                    ongoing.append(
                        {
                            "topic": topic,
                            "partition": p,
                            "replicas": list(replicas.replicas),
                            "adding_replicas": list(replicas.adding_replicas),
                            "removing_replicas": list(replicas.removing_replicas),
                        }
                    )
        return {
            "pending": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(r)}
                for tp, r in sorted(pending.items())
            ],
            "ongoing": ongoing,
        }

    @route(
        "POST",
        "/partitions/elect-leaders",
        summary="Elect leaders",
        tag="partitions",
        answer=m.ElectionAccepted,
        status=202,
        body=m.Election,
    )
    async def elect_leaders(self, request: web.Request, body: m.Election) -> Any:
        from kafkalite.coord.errors import NodeExists
        from kafkalite.protocol.types import TopicPartition
        from kafkalite.zk import admin
        from kafkalite.zk import client as zk_data
        from kafkalite.zk import data as paths
        from kafkalite.zk.assignment import AdminOperationError

        election_type = body.election_type
        if body.partitions is None:
            topics = await zk_data.get_all_topics(self.session)
            assignments = await zk_data.get_topic_assignments(self.session, topics)
            partitions = sorted(
                TopicPartition(t, p) for t, (_, parts) in assignments.items() for p in parts
            )
        else:
            entries = [e.model_dump() for e in body.partitions]
            await self._validate_partitions(entries, "partitions")
            partitions = sorted({TopicPartition(e["topic"], e["partition"]) for e in entries})
        if election_type == "preferred":
            path = paths.PREFERRED_REPLICA_ELECTION
        else:
            path = zk_data.UNCLEAN_LEADER_ELECTION
        try:
            if election_type == "preferred":
                await admin.request_preferred_replica_election(self.session, partitions)
            else:
                await self.session.ensure_path(paths.ADMIN)
                await self.session.create(path, paths.encode_preferred_replica_election(partitions))
        except (NodeExists, AdminOperationError):
            raise AdminError(
                409, "ELECTION_IN_PROGRESS", f"a {election_type} leader election is already pending"
            ) from None
        return Reply(
            {
                "election_type": election_type,
                "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in partitions],
                "path": path,
            },
            202,
        )
