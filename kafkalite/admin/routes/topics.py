"""Topic administration: /topics and /topics/{name} (list, create, describe, configs, more
partitions, delete)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.access import Access
from kafkalite.admin.errors import AdminError
from kafkalite.admin.routes.base import CREATE_WAIT_S, ApiBase, topic_name
from kafkalite.admin.routing import Reply, route
from kafkalite.protocol.acl import AclOperation as Op

CONFIG_SOURCES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}
"""Kafka's DescribeConfigs config_source values by name."""


def refuse_invalid_topic_configs(name: str, configs: dict[str, str]) -> None:
    """Refuse what CreateTopics refuses (unknown names, bad values), with the same code: stored
    once, an override Kafka's validation rejects makes every later Kafka-protocol alter of the
    topic fail."""
    from kafkalite.storage.config import validate_topic_configs

    problem = validate_topic_configs(configs)
    if problem is not None:
        raise AdminError.invalid(name, problem)


class TopicRoutes(ApiBase):
    """List, create, describe, configure, grow and delete topics."""

    @route(
        "GET",
        "/topics",
        summary="List topics",
        tag="topics",
        answer=list[m.TopicSummary],
        query=m.TopicsQuery,
        headers={"X-Total-Count": "topics matching the filter, before offset and limit"},
    )
    async def list_topics(self, request: web.Request, query: m.TopicsQuery) -> Any:
        """Names are filtered and paged before anything else is read, so a page of 5,000 topics
        costs the store reads of its own topics only."""
        from kafkalite.zk import client as zk_data

        session = self.session
        # as Metadata answers: only the topics the principal may DESCRIBE, counted and paged
        names = Access(self.server, request).topics(sorted(await zk_data.get_all_topics(session)))
        if not query.internal:
            names = [n for n in names if not n.startswith("__")]
        if query.search:
            needle = query.search.lower()
            names = [n for n in names if needle in n.lower()]
        total = len(names)
        end = None if query.limit is None else query.offset + query.limit
        page = names[query.offset : end]
        assignments = await zk_data.get_topic_assignments(session, page) if page else {}
        deleting = set(await zk_data.get_topic_deletions(session))
        out = []
        for name in page:
            if name not in assignments:  # deleted meanwhile
                continue
            topic_id, parts = assignments[name]
            rf = len(next(iter(parts.values())).replicas) if parts else 0
            out.append(
                {
                    "name": name,
                    "topic_id": topic_id,
                    "partitions": len(parts),
                    "replication_factor": rf,
                    "internal": name.startswith("__"),
                    "marked_for_deletion": name in deleting,
                    **self._topic_health(name),
                }
            )
        return Reply(out, 200, {"X-Total-Count": str(total)})

    def _topic_health(self, topic: str) -> dict[str, Any]:
        """Under-replicated and offline partitions (this broker's metadata) and bytes on this
        broker's disks."""
        cache = self.server.metadata_cache
        infos = cache.get_partition_infos(topic) if cache is not None else []
        alive = {b.id for b in cache.get_alive_brokers()} if cache is not None else set()
        under = sum(1 for i in infos if len(i.isr) < len(i.replicas))
        offline = sum(1 for i in infos if i.leader < 0 or i.leader not in alive)
        size = None
        lm = self.server.log_manager
        if lm is not None:
            for info in infos:
                log_ = lm.get_log(topic, info.partition_index)
                if log_ is None:
                    continue
                try:
                    size = (size or 0) + log_.size_bytes
                except (OSError, ValueError):
                    continue
        return {"under_replicated": under, "offline": offline, "size_bytes": size}

    @route(
        "POST",
        "/topics",
        summary="Create topic",
        tag="topics",
        answer=m.CreatedTopic,
        status=201,
        body=m.NewTopic,
    )
    async def create_topic(self, request: web.Request, body: m.NewTopic) -> Any:
        from kafkalite.controller.limits import PartitionLimits, partition_budget
        from kafkalite.zk import admin

        config = self.server.config
        name = body.name
        partitions = body.partitions or config.num_partitions
        replication_factor = body.replication_factor or config.default_replication_factor
        configs = m.configs_of(body.configs)
        refuse_invalid_topic_configs("configs", configs)
        # the Kafka handlers' ceilings (controller/limits.py), before anything is built: 400
        # POLICY_VIOLATION
        PartitionLimits.of(config).check_topic(name, partitions)
        budget = partition_budget(self.server.services)
        brokers = await admin.registered_brokers(self.session)
        if replication_factor > len(brokers):
            raise AdminError(
                400,
                "INVALID_REPLICATION_FACTOR",
                f"replication_factor: {replication_factor} is larger than the number of "
                f"registered brokers ({len(brokers)})",
                field="replication_factor",
            )
        budget.reserve(name, partitions)
        try:
            topic_id = await admin.create_topic(
                self.session, name, partitions, replication_factor, configs
            )
        except BaseException:
            budget.release(name)
            raise
        await self._wait_for_leaders(name, partitions)
        return Reply(
            {
                "name": name,
                "topic_id": topic_id,
                "partitions": partitions,
                "replication_factor": replication_factor,
                "configs": configs,
            },
            201,
        )

    async def _wait_for_leaders(self, topic: str, partitions: int) -> bool:
        """Wait (bounded) until this broker's metadata has a leader for every partition."""
        cache = self.server.metadata_cache
        if cache is None:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CREATE_WAIT_S
        while loop.time() < deadline:
            infos = cache.get_partition_infos(topic) if cache.contains_topic(topic) else []
            if len(infos) >= partitions and all(i.leader >= 0 for i in infos):
                return True
            await asyncio.sleep(0.02)
        return False

    def _local_offsets(self, topic: str, partition: int) -> dict[str, Any]:
        from kafkalite.protocol.types import TopicPartition

        empty = {
            "log_start_offset": None,
            "high_watermark": None,
            "log_end_offset": None,
            "size_bytes": None,
        }
        rm = self.server.replica_manager
        status = rm.partition_status(TopicPartition(topic, partition)) if rm is not None else None
        if status is None or status.log_end_offset < 0:
            return empty
        log_ = (
            self.server.log_manager.get_log(topic, partition) if self.server.log_manager else None
        )
        try:
            size = log_.size_bytes if log_ is not None else None
        except (OSError, ValueError):
            size = None
        return {
            "log_start_offset": status.log_start_offset,
            "high_watermark": status.high_watermark,
            "log_end_offset": status.log_end_offset,
            "size_bytes": size,
        }

    @route(
        "GET",
        "/topics/{name}",
        summary="Describe topic",
        tag="topics",
        answer=m.Topic,
        params={"name": m.TopicName},
    )
    async def describe_topic(self, request: web.Request) -> Any:
        from kafkalite.protocol.errors import ErrorCode
        from kafkalite.protocol.types import TopicPartition
        from kafkalite.zk import client as zk_data

        name = topic_name(request)
        session = self.session
        found = await zk_data.get_topic_assignment(session, name)
        if found is None:
            raise AdminError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        topic_id, assignment, _ = found
        states = await zk_data.get_partition_states(
            session, [TopicPartition(name, p) for p in assignment]
        )
        configs: dict[str, str] = {}
        overrides = await zk_data.get_topic_config(session, name)
        if Access(self.server, request).topic(name, Op.DESCRIBE_CONFIGS):  # as DescribeConfigs
            configs = overrides
        policy = overrides.get("cleanup.policy", self.server.config.log_cleanup_policy)
        deleting = name in set(await zk_data.get_topic_deletions(session))
        local = {p: self._local_offsets(name, p) for p in assignment}
        # the leader's log start and high watermark: a follower here learns them a fetch late
        remote = [
            TopicPartition(name, p)
            for p in local
            if (state := states.get(TopicPartition(name, p))) is not None
            and state.leader_and_isr.leader >= 0
            and state.leader_and_isr.leader != self.server.broker_id
        ]
        if remote:
            earliest, latest = await asyncio.gather(
                self.list_offsets(remote, -2), self.high_watermarks(remote)
            )
            for tp, (error, start) in earliest.items():
                ok = error == ErrorCode.NONE and start >= 0
                local[tp.partition]["log_start_offset"] = start if ok else None
                local[tp.partition]["high_watermark"] = latest.get(tp)
        partitions = []
        for p, replicas in sorted(assignment.items()):
            state = states.get(TopicPartition(name, p))
            lai = state.leader_and_isr if state is not None else None
            partitions.append(
                {
                    "partition": p,
                    "leader": lai.leader if lai is not None else -1,
                    "replicas": list(replicas.replicas),
                    "isr": list(lai.isr) if lai is not None else [],
                    "leader_epoch": lai.leader_epoch if lai is not None else -1,
                    **local[p],
                    "adding_replicas": list(replicas.adding_replicas),
                    "removing_replicas": list(replicas.removing_replicas),
                }
            )
        spans = [
            (p["high_watermark"], p["log_start_offset"])
            for p in partitions
            if p["high_watermark"] is not None and p["log_start_offset"] is not None
        ]
        return {
            "name": name,
            "topic_id": topic_id,
            "internal": name.startswith("__"),
            "marked_for_deletion": deleting,
            "configs": configs,
            "partitions": partitions,
            "message_count": sum(max(e - s, 0) for e, s in spans)
            if len(spans) == len(partitions)
            else None,
            "message_count_is_estimate": "compact" in policy,
        }

    @route(
        "GET",
        "/topics/{name}/configs",
        summary="Effective topic configs",
        tag="topics",
        answer=m.EffectiveConfigs,
        params={"name": m.TopicName},
    )
    async def effective_configs(self, request: web.Request) -> Any:
        """Every config of the topic with the value in effect and where it comes from, as
        DescribeConfigs answers (secrets null)."""
        from kafkalite.protocol.errors import ErrorCode

        name = topic_name(request)
        if not self.server.metadata_cache.contains_topic(name):
            raise AdminError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        client = await self.kafka_client()
        response = await client.describe_configs([(2, name)], node_id=self.server.broker_id)
        [result] = response.results
        error = ErrorCode.of(int(result.error_code))
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, result.error_message or f"{name}: {error.name}")
        return {
            "name": name,
            "configs": [
                {
                    "name": c.name,
                    "value": None if c.is_sensitive else c.value,
                    "source": CONFIG_SOURCES.get(int(c.config_source), "UNKNOWN"),
                    "read_only": bool(c.read_only),
                    "sensitive": bool(c.is_sensitive),
                }
                for c in sorted(result.configs, key=lambda c: c.name)
            ],
        }

    @route(
        "GET",
        "/topics/{name}/groups",
        summary="Groups consuming a topic",
        tag="topics",
        answer=list[m.TopicGroup],
        params={"name": m.TopicName},
    )
    async def topic_groups(self, request: web.Request) -> Any:
        """The groups that committed offsets of the topic or have its partitions assigned,
        with their lag on it (groups the principal may DESCRIBE)."""
        from kafkalite.admin.groupview import GroupView, lag_rows

        name = topic_name(request)
        if not self.server.metadata_cache.contains_topic(name):
            raise AdminError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        if self.server.services.group_coordinator is None:
            return []
        view = GroupView(self, Access(self.server, request))
        overviews = await view.overviews()
        # a share group commits no offsets; a consumer group (KIP-848) is described by
        # ConsumerGroupDescribe (DescribeGroups does not know it)
        datas = await view.many([o.group_id for o in overviews if o.group_type == "classic"])
        datas.update(
            await view.many_consumer([o.group_id for o in overviews if o.group_type == "consumer"])
        )
        using = {
            g: d for g, d in datas.items() if d is not None and any(t == name for t in d.topics())
        }
        wanted = {tp for d in using.values() for tp in d.partitions() if tp.topic == name}
        ends = await view.ends(wanted)
        out = []
        for group_id, data in sorted(using.items()):
            rows = [r for r in lag_rows(data, ends) if r["topic"] == name]
            out.append(
                {
                    "group_id": group_id,
                    "state": data.state,
                    "members": len({r["member_id"] for r in rows if r["member_id"]}),
                    "partitions": len(rows),
                    "lag": sum(r["lag"] or 0 for r in rows),
                }
            )
        return out

    @route(
        "PATCH",
        "/topics/{name}/config",
        summary="Alter topic config",
        tag="topics",
        answer=m.TopicConfigs,
        body=m.ConfigChange,
        params={"name": m.TopicName},
    )
    async def alter_topic_config(self, request: web.Request, body: m.ConfigChange) -> Any:
        from kafkalite.zk import admin
        from kafkalite.zk import client as zk_data

        name = topic_name(request)
        changes = m.configs_of(body.configs)
        if not await admin.topic_exists(self.session, name):
            raise AdminError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        current = await zk_data.get_topic_config(self.session, name)
        for key, value in changes.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        refuse_invalid_topic_configs("configs", current)
        await admin.alter_topic_config(self.session, name, current)
        return {"name": name, "configs": current}

    @route(
        "POST",
        "/topics/{name}/partitions",
        summary="Add partitions",
        tag="topics",
        answer=m.AddedPartitions,
        body=m.PartitionCount,
        params={"name": m.TopicName},
    )
    async def add_partitions(self, request: web.Request, body: m.PartitionCount) -> Any:
        from kafkalite.controller.limits import PartitionLimits, partition_budget
        from kafkalite.protocol.errors import ErrorCode, KafkaError
        from kafkalite.zk import admin

        name = topic_name(request)
        count = body.partitions
        # the Kafka handlers' ceilings (controller/limits.py), before anything is built: 400
        # POLICY_VIOLATION
        PartitionLimits.of(self.server.config).check_topic(name, count)
        budget = partition_budget(self.server.services)
        budget.reserve(name, count)
        try:
            new = await admin.add_partitions(self.session, name, count)
        except KafkaError as e:
            budget.release(name)
            if e.error_code in (ErrorCode.INVALID_PARTITIONS, ErrorCode.INVALID_TOPIC_EXCEPTION):
                # partitions may only grow, and not while the topic is being deleted: the
                # request conflicts with the topic's state
                raise AdminError(409, e.error_code.name, str(e)) from None
            raise
        return {
            "name": name,
            "partitions": count,
            "new_partitions": [
                {"partition": p, "replicas": list(r)} for p, r in sorted(new.items())
            ],
        }

    @route(
        "DELETE",
        "/topics/{name}",
        summary="Delete topic",
        tag="topics",
        answer=m.DeletedTopic,
        also=(202,),
        params={"name": m.TopicName},
    )
    async def delete_topic(self, request: web.Request) -> Any:
        from kafkalite.zk import admin

        name = topic_name(request)
        await admin.delete_topic(self.session, name)
        # Like Kafka's DeleteTopics, wait (bounded) for the controller to finish: 200 when the
        # topic is gone, 202 when it is still marked for deletion.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CREATE_WAIT_S
        while await admin.topic_exists(self.session, name):
            if loop.time() > deadline:
                return Reply({"name": name, "deleted": False, "marked_for_deletion": True}, 202)
            await asyncio.sleep(0.02)
        return {"name": name, "deleted": True, "marked_for_deletion": False}
