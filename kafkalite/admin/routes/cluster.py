"""The cluster, its brokers, a broker's storage, and the partition health the console shows:
/cluster, /brokers, /brokers/{id}, /brokers/{id}/storage, /overview and /partitions."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.access import Access
from kafkalite.admin.errors import AdminError
from kafkalite.admin.routes.base import ApiBase
from kafkalite.admin.routing import Reply, route
from kafkalite.admin.storage_status import broker_storage_fields
from kafkalite.protocol.acl import AclOperation as Op
from kafkalite.protocol.acl import ResourceType as T
from kafkalite.security.acl import CLUSTER_NAME


def path_int(request: web.Request, name: str) -> int:
    text = request.match_info[name]
    try:
        value = int(text)
    except ValueError:
        raise AdminError.invalid(name, f"must be an integer, got {text!r}") from None
    if not -(2**31) <= value < 2**31:
        raise AdminError.invalid(name, "out of range")
    return value


class ClusterRoutes(ApiBase):
    """The cluster, its brokers, the overview and the partition health list."""

    async def _brokers(self) -> list[dict[str, Any]]:
        from kafkalite.zk import client as zk_data

        controller_id = await zk_data.get_controller_id(self.session)
        found = await zk_data.get_all_brokers_and_epochs(self.session)
        return [
            {
                **self._broker_json(b, epoch, controller_id),
                **broker_storage_fields(self.server, b.id),
            }
            for b, epoch in found.values()
        ]

    @staticmethod
    def _broker_json(broker: Any, epoch: int, controller_id: int | None) -> dict[str, Any]:
        endpoints = [
            {
                "listener": e.listener_name,
                "host": e.host,
                "port": e.port,
                "security_protocol": e.security_protocol,
            }
            for e in broker.endpoints
        ]
        first = endpoints[0] if endpoints else {"host": None, "port": None}
        return {
            "id": broker.id,
            "host": first["host"],
            "port": first["port"],
            "rack": broker.rack,
            "endpoints": endpoints,
            "broker_epoch": epoch,
            "is_controller": broker.id == controller_id,
        }

    @route("GET", "/cluster", summary="Describe cluster", tag="cluster", answer=m.Cluster)
    async def cluster(self, request: web.Request) -> Any:
        from kafkalite.zk import client as zk_data

        controller_id = await zk_data.get_controller_id(self.session)
        epoch = await zk_data.get_controller_epoch(self.session)
        return {
            "cluster_id": self.server.services.cluster_id,
            "controller": {
                "broker_id": controller_id if controller_id is not None else -1,
                "epoch": epoch[0] if epoch is not None else -1,
            },
            "brokers": await self._brokers(),
            "this_broker": self.server.broker_id,
        }

    @route("GET", "/brokers", summary="List brokers", tag="cluster", answer=list[m.Broker])
    async def brokers(self, request: web.Request) -> Any:
        return await self._brokers()

    @route(
        "GET",
        "/brokers/{id}",
        summary="Describe broker",
        tag="cluster",
        answer=m.Broker,
        params={"id": m.BrokerId},
    )
    async def broker(self, request: web.Request) -> Any:
        broker_id = path_int(request, "id")
        for broker in await self._brokers():
            if broker["id"] == broker_id:
                return broker
        raise AdminError(404, "BROKER_NOT_AVAILABLE", f"broker {broker_id} is not registered")

    @route(
        "GET",
        "/brokers/{id}/storage",
        summary="Broker storage and configs",
        tag="cluster",
        answer=m.BrokerStorage,
        params={"id": m.BrokerId},
    )
    async def broker_storage(self, request: web.Request) -> Any:
        """Log directories (size, partitions, offline) and settings of a broker: this broker's
        from its own log manager, another's asked of it over the Kafka protocol."""
        broker_id = path_int(request, "id")
        if broker_id not in {b["id"] for b in await self._brokers()}:
            raise AdminError(404, "BROKER_NOT_AVAILABLE", f"broker {broker_id} is not registered")
        # as DescribeConfigs of the broker answers: only with DESCRIBE_CONFIGS on the cluster,
        # and secrets (config.SENSITIVE_CONFIGS) null
        may_see_configs = Access(self.server, request).allowed(
            Op.DESCRIBE_CONFIGS, T.CLUSTER, CLUSTER_NAME
        )
        if broker_id != self.server.broker_id:
            return await self._remote_storage(broker_id, may_see_configs)
        configs: dict[str, str | None] = {}
        if may_see_configs:
            configs = self.server.config.public_properties()
        lm = self.server.log_manager
        dirs: list[dict[str, Any]] = []
        if lm is not None:
            by_dir: dict[str, list[Any]] = {}
            for log_ in lm.all_logs():
                by_dir.setdefault(str(log_.dir.parent), []).append(log_)
            offline = set(getattr(lm, "offline_dirs", ()))
            for path in lm.log_dirs:
                size = 0
                for log_ in by_dir.get(path, ()):
                    try:
                        size += log_.size_bytes
                    except (OSError, ValueError):
                        continue
                dirs.append(
                    {
                        "path": path,
                        "offline": path in offline,
                        "partitions": len(by_dir.get(path, ())),
                        "size_bytes": size,
                    }
                )
        return {
            "broker_id": broker_id,
            "log_dirs": dirs,
            "configs": configs,
        }

    async def _remote_storage(self, broker_id: int, with_configs: bool) -> dict[str, Any]:
        """Another broker's log dirs (DescribeLogDirs) and settings (DescribeConfigs of the
        broker, which answers secrets as null), asked of that broker."""
        import asyncio

        from kafkalite.protocol.errors import ErrorCode

        try:
            client = await self.kafka_client()
            dirs_answer = await client.describe_log_dirs(broker_id)
            configs_answer = (
                await client.describe_configs([(4, str(broker_id))], node_id=broker_id)
                if with_configs
                else None
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the client's I/O and protocol failures, at the boundary
            raise AdminError(
                503, "BROKER_NOT_AVAILABLE", f"broker {broker_id} did not answer: {e}"
            ) from None
        if int(getattr(dirs_answer, "error_code", 0)):
            raise AdminError.kafka(ErrorCode.of(int(dirs_answer.error_code)))
        dirs = []
        for result in dirs_answer.results:
            partitions = [p for t in result.topics for p in t.partitions]
            dirs.append(
                {
                    "path": result.log_dir,
                    "offline": int(result.error_code) != 0,
                    "partitions": len(partitions),
                    "size_bytes": sum(max(int(p.partition_size), 0) for p in partitions),
                }
            )
        configs: dict[str, str | None] = {}
        if configs_answer is not None:
            for result in configs_answer.results:
                if int(result.error_code) == 0:
                    configs.update(
                        {c.name: None if c.is_sensitive else c.value for c in result.configs}
                    )
        return {
            "broker_id": broker_id,
            "log_dirs": sorted(dirs, key=lambda d: d["path"]),
            "configs": dict(sorted(configs.items())),
        }

    def _partition_health(self, access: Access) -> list[dict[str, Any]]:
        """Every partition in this broker's metadata the principal may see (its topic's
        DESCRIBE) with its health, by topic and partition."""
        cache = self.server.metadata_cache
        if cache is None:
            return []
        alive = {b.id for b in cache.get_alive_brokers()}
        default_min_isr = getattr(self.server.config, "min_insync_replicas", 1)
        lm = self.server.log_manager
        out = []
        for topic in access.topics(sorted(cache.partition_states)):
            min_isr = default_min_isr
            for info in sorted(
                cache.partition_states[topic].values(), key=lambda i: i.partition_index
            ):
                log_ = lm.get_log(topic, info.partition_index) if lm is not None else None
                if log_ is not None:
                    min_isr = log_.config.min_insync_replicas
                offline = info.leader < 0 or info.leader not in alive
                out.append(
                    {
                        "topic": topic,
                        "partition": info.partition_index,
                        "leader": info.leader,
                        "replicas": list(info.replicas),
                        "isr": list(info.isr),
                        "under_replicated": len(info.isr) < len(info.replicas),
                        "offline": offline,
                        "under_min_isr": not offline and len(info.isr) < min_isr,
                    }
                )
        return out

    @route("GET", "/overview", summary="Cluster overview", tag="cluster", answer=m.Overview)
    async def overview(self, request: web.Request) -> Any:
        cache = self.server.metadata_cache
        access = Access(self.server, request)
        health = self._partition_health(access)
        topics = set(access.topics(cache.partition_states)) if cache is not None else set()
        internal = {t for t in topics if t.startswith("__")}
        groups = 0
        if self.server.services.group_coordinator is not None:
            from kafkalite.admin.groupview import GroupView

            groups = len(await GroupView(self, access).overviews())
        controller = cache.get_controller_id() if cache is not None else None
        alive = {b.id for b in cache.get_alive_brokers()} if cache is not None else set()
        named = {b for p in health for b in p["replicas"]}
        return {
            "cluster_id": self.server.services.cluster_id,
            "controller_id": controller if controller is not None else -1,
            "brokers": len(alive),
            "down_brokers": sorted(named - alive),
            "topics": len(topics - internal),
            "internal_topics": len(internal),
            "partitions": len(health),
            "under_replicated": sum(p["under_replicated"] for p in health),
            "offline": sum(p["offline"] for p in health),
            "under_min_isr": sum(p["under_min_isr"] for p in health),
            "groups": groups,
        }

    @route(
        "GET",
        "/partitions",
        summary="List partitions",
        tag="partitions",
        answer=list[m.PartitionHealth],
        query=m.PartitionsQuery,
        headers={"X-Total-Count": "partitions matching the filter, before offset and limit"},
    )
    async def partitions(self, request: web.Request, query: m.PartitionsQuery) -> Any:
        """Partitions with their health, filtered (state, a broker holding a replica, a topic
        substring) and paged on the server."""
        found = self._partition_health(Access(self.server, request))
        if query.state != "all":
            found = [p for p in found if p[query.state]]
        if query.broker is not None:
            found = [p for p in found if query.broker in p["replicas"]]
        if query.topic:
            needle = query.topic.lower()
            found = [p for p in found if needle in p["topic"].lower()]
        if not query.internal:
            found = [p for p in found if not p["topic"].startswith("__")]
        page = found[query.offset : query.offset + query.limit]
        return Reply(page, 200, {"X-Total-Count": str(len(found))})
