"""The HTTP admin API of one broker (aiohttp), served on `admin.listener` inside the broker's loop.

Routes (JSON, snake_case, Kafka's names). Each is declared once, by `@route` on its handler
below (routing.py): the declaration registers it, validates its query and body with the pydantic
models of models.py, checks its answer against its answer model, and is what openapi.py turns
into the OpenAPI 3.1 document at /openapi.json:

    GET    /health                      process up
    GET    /ready                       listening, coordination session live, logs loaded
    GET    /cluster                     cluster id, controller (id, epoch), brokers
    GET    /brokers, /brokers/{id}
    GET    /topics                      ?search=&internal=&offset=&limit= (server-side paging)
    POST   /topics                      create
    GET    /topics/{name}               configs and partitions (leader, replicas, ISR, epochs,
                                        log start offset, high watermark, LEO, size on disk)
    PATCH  /topics/{name}/config        set (string) or remove (null) topic config overrides
    POST   /topics/{name}/partitions    grow to a new partition count
    DELETE /topics/{name}               mark for deletion (the controller deletes it)
    GET    /groups, /groups/{id}        state, members, assignments, committed offsets and lag
    DELETE /groups/{id}
    POST   /groups/{id}/offsets         reset to earliest / latest / timestamp / explicit offsets
    GET    /partitions/reassign         POST /partitions/reassign
    POST   /partitions/elect-leaders    preferred or unclean
    GET    /metrics                     Prometheus text format
    GET    /openapi.json
    GET    /topics/{name}/records       ?partition=&offset=|timestamp=&limit= (record browser)
    GET    /overview, /partitions       counts and partition health for the console
    GET    /brokers/{id}/storage        this broker's log dirs and settings (DESCRIBE_CONFIGS on
                                        the cluster; secrets null)
    GET    /metrics/history             a few minutes of rates, in memory
    GET    /docs                        the API reference page
    GET    /                            the console (console/index.html and its modules)

Where the data comes from: topics, assignments, partition leader/ISR/epoch, brokers and the
controller are read from the coordination store (the authority, so every broker answers alike);
offsets and sizes come from this broker's own logs, so they are null for a partition not hosted
here. Topic administration writes the store nodes the controller watches (zk/admin.py);
reassignment and elections go through zk/admin.py too (`/admin/reassign_partitions`,
`/admin/preferred_replica_election`, kafkalite's `/admin/unclean_leader_election`), which the
active controller acts on; a request while an earlier one is pending is answered 409. Groups are those coordinated by this
broker (the leader of the group's `__consumer_offsets` partition); others answer NOT_COORDINATOR.

Request bodies are JSON only and cross-origin writes are refused (csrf.py); every answer carries
the console's security headers (Content-Security-Policy, X-Frame-Options, nosniff).

Invariant: no request can take the broker down. Every handler runs under `error_middleware`,
which turns AdminError, Kafka errors and coordination-store errors into JSON answers and any
other exception into a logged 500.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from kafkalite.admin import models as m
from kafkalite.admin.access import Access
from kafkalite.admin.errors import AdminError
from kafkalite.admin.history import History
from kafkalite.admin.metrics import new_registry, render
from kafkalite.admin.routing import Reply, route, route_specs
from kafkalite.admin.storage_status import broker_storage_fields
from kafkalite.observability import RequestStats, TopicStats
from kafkalite.protocol.acl import AclOperation as Op
from kafkalite.protocol.acl import ResourceType as T
from kafkalite.protocol.consumer_protocol import assigned_partitions
from kafkalite.security.acl import CLUSTER_NAME

log = structlog.get_logger("kafkalite.admin")

CREATE_WAIT_S = 10.0
"""How long POST /topics waits for the controller to elect leaders before answering."""

REMOTE_TIMEOUT_S = 5.0
"""Timeout of the Kafka requests the admin API sends to other brokers (ListOffsets)."""
REMOTE_BATCH = 1000
"""Partitions per ListOffsets the admin API sends to another broker."""
REMOTE_CONCURRENCY = 4
"""ListOffsets one admin request keeps in flight at most (partitions are asked in batches, never
one request or task per partition)."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

SERVER_KEY = web.AppKey("server", Any)
REGISTRY_KEY = web.AppKey("registry", Any)


# ---------------------------------------------------------------------- helpers


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    from kafkalite.coord.errors import BadArguments, CoordError, NoNode
    from kafkalite.protocol.errors import ErrorCode, KafkaError

    try:
        return await handler(request)
    except AdminError as e:
        return json_response(e.body(), e.status)
    except KafkaError as e:
        code = (
            e.error_code if isinstance(e.error_code, ErrorCode) else ErrorCode.UNKNOWN_SERVER_ERROR
        )
        return json_response(
            AdminError.kafka(code, str(e) or None).body(), AdminError.kafka(code).status
        )
    except NoNode as e:
        return json_response({"error": "NOT_FOUND", "message": str(e) or "no such node"}, 404)
    except BadArguments as e:  # e.g. a path built from a name no node can have
        return json_response({"error": "INVALID_REQUEST", "message": str(e)}, 400)
    except CoordError as e:
        return json_response(
            {"error": "COORDINATION_ERROR", "message": f"coordination store: {e}"}, 503
        )
    except web.HTTPException as e:
        if e.status < 400:
            raise
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "REQUEST_TOO_LARGE"}.get(
            e.status, "INVALID_REQUEST" if e.status < 500 else "INTERNAL_ERROR"
        )
        response = json_response({"error": code, "message": e.reason or code}, e.status)
        if isinstance(e, web.HTTPMethodNotAllowed):  # RFC 9110: a 405 names what is allowed
            response.headers["Allow"] = ", ".join(sorted(e.allowed_methods))
        return response
    except asyncio.CancelledError:
        raise
    except Exception as e:  # the boundary: a bug here must not take the broker down
        log.exception("admin request failed", method=request.method, path=request.path)
        return json_response(
            {"error": "INTERNAL_ERROR", "message": f"{type(e).__name__}: {e}"}, 500
        )


def refuse_invalid_topic_configs(name: str, configs: dict[str, str]) -> None:
    """Refuse what CreateTopics refuses (unknown names, bad values), with the same code: stored
    once, an override Kafka's validation rejects makes every later Kafka-protocol alter of the
    topic fail."""
    from kafkalite.storage.config import validate_topic_configs

    problem = validate_topic_configs(configs)
    if problem is not None:
        raise AdminError.invalid(name, problem)


def path_int(request: web.Request, name: str) -> int:
    text = request.match_info[name]
    try:
        value = int(text)
    except ValueError:
        raise AdminError.invalid(name, f"must be an integer, got {text!r}") from None
    if not -(2**31) <= value < 2**31:
        raise AdminError.invalid(name, "out of range")
    return value


def is_valid_topic_name(name: str) -> bool:
    from kafkalite.protocol.errors import KafkaError
    from kafkalite.zk.admin import validate_topic_name

    try:
        validate_topic_name(name)
    except KafkaError:
        return False
    return True


def topic_name(request: web.Request) -> str:
    """The {name} path parameter; a name that no topic can have is answered 404 at once."""
    name = request.match_info["name"]
    if not is_valid_topic_name(name):
        raise AdminError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
    return name


CONSOLE_DIR = Path(__file__).with_name("console")
CONSOLE_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


def console_file(name: str) -> web.Response:
    """A file of the console (console/), by plain name only: no path leaves the directory."""
    kind = CONSOLE_TYPES.get(Path(name).suffix)
    path = CONSOLE_DIR / name
    if kind is None or "/" in name or name.startswith(".") or not path.is_file():
        raise AdminError.not_found(f"no console file {name!r}")
    return web.Response(
        body=path.read_bytes(),
        content_type=kind,
        charset="utf-8",
        headers={"Cache-Control": "no-cache"},
    )


def decode_consumer_assignment(data: bytes) -> list[dict[str, Any]]:
    """Kafka's ConsumerProtocolAssignment as [{"topic", "partitions"}]; [] when empty or not the
    consumer protocol."""
    decoded = assigned_partitions(data) if len(data) >= 6 else None
    return [{"topic": t, "partitions": p} for t, p in decoded or ()]


# ---------------------------------------------------------------------- the API


class AdminApi:
    """Route handlers over a running KafkaServer (duck-typed: `services`, `config`,
    `socket_server`, `controller`, `replica_manager`, `log_manager`, `metadata_cache`,
    `dispatcher`)."""

    def __init__(self, server: Any, registry: Any, history: Any) -> None:
        self.server = server
        self.registry = registry
        self.history = history
        self._kafka_client: Any = None
        self._client_lock = asyncio.Lock()

    # -- plumbing --------------------------------------------------------------------------

    async def close(self, app: web.Application | None = None) -> None:
        client, self._kafka_client = self._kafka_client, None
        if client is not None:
            await client.close()

    async def kafka_client(self) -> Any:
        """The project's Kafka client, bootstrapped at this broker (for partitions led
        elsewhere); created on first use, closed with the app."""
        from kafkalite.client.client import KafkaClient

        async with self._client_lock:
            if self._kafka_client is None:
                # the inter-broker listener: the client speaks its protocol (TLS, SASL)
                listener = getattr(self.server, "inter_broker_listener", None)
                endpoints = [
                    e for e in self.server.advertised_endpoints if e.listener_name == listener
                ] or self.server.advertised_endpoints
                bootstrap = ",".join(f"{e.host}:{e.port}" for e in endpoints)
                client = KafkaClient(
                    bootstrap,
                    client_id=f"kafkalite-admin-{self.server.broker_id}",
                    request_timeout=REMOTE_TIMEOUT_S,
                    connect_timeout=REMOTE_TIMEOUT_S,
                )
                await client.start()
                self._kafka_client = client
            return self._kafka_client

    async def list_offset(self, tp: Any, timestamp: int) -> tuple[Any, int]:
        """(error, offset) of ListOffsets as a consumer sees it (-2 earliest, -1 latest = the
        high watermark, else the first offset at or after a time; -1 when none): answered by
        this broker's replica when it leads the partition, else asked of the leader."""
        from kafkalite.protocol.errors import ErrorCode

        rm = self.server.replica_manager
        status = rm.partition_status(tp) if rm is not None else None
        if status is not None and status.is_leader:
            result = rm.list_offset(tp, timestamp)
            return result.error_code, result.offset
        try:
            client = await self.kafka_client()
            response = await client.list_offsets(tp, timestamp)
            answer = response.topics[0].partitions[0]
            return ErrorCode.of(int(answer.error_code)), int(answer.offset)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the client's I/O and protocol failures, at the boundary
            log.info("remote ListOffsets failed", partition=str(tp), error=repr(e))
            return ErrorCode.LEADER_NOT_AVAILABLE, -1

    async def list_offsets(self, partitions: Any, timestamp: int) -> dict[Any, tuple[Any, int]]:
        """``list_offset`` for many partitions without a request (or a task) per partition:
        the ones this broker leads are answered here, the others with one ListOffsets per
        leader and ``REMOTE_BATCH`` partitions, at most ``REMOTE_CONCURRENCY`` in flight. (One
        task per partition left 137,000 pending ListOffsets and a 2.1 GB broker after 100,000
        partitions were added.)"""
        from kafkalite.protocol.errors import ErrorCode

        rm = self.server.replica_manager
        cache = self.server.metadata_cache
        out: dict[Any, tuple[Any, int]] = {}
        by_leader: dict[int, list[Any]] = {}
        for i, tp in enumerate(partitions):
            status = rm.partition_status(tp) if rm is not None else None
            if status is not None and status.is_leader:
                result = rm.list_offset(tp, timestamp)
                out[tp] = (result.error_code, result.offset)
            else:
                info = cache.get_partition_info(tp.topic, tp.partition) if cache else None
                if info is None or info.leader < 0:
                    out[tp] = (ErrorCode.LEADER_NOT_AVAILABLE, -1)
                else:
                    by_leader.setdefault(info.leader, []).append(tp)
            if i % REMOTE_BATCH == REMOTE_BATCH - 1:
                await asyncio.sleep(0)  # thousands of local lookups: let the loop breathe
        gate = asyncio.Semaphore(REMOTE_CONCURRENCY)

        async def ask(leader: int, batch: list[Any]) -> None:
            async with gate:
                try:
                    client = await self.kafka_client()
                    answers = await client.list_offsets_of(leader, batch, timestamp)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # the client's I/O and protocol failures, at the boundary
                    log.info("remote ListOffsets failed", broker=leader, error=repr(e))
                    answers = {}
            for tp in batch:
                out[tp] = answers.get(tp, (ErrorCode.LEADER_NOT_AVAILABLE, -1))

        await asyncio.gather(
            *(
                ask(leader, tps[i : i + REMOTE_BATCH])
                for leader, tps in by_leader.items()
                for i in range(0, len(tps), REMOTE_BATCH)
            )
        )
        return out

    async def high_watermarks(self, partitions: Any) -> dict[Any, int | None]:
        """The high watermark of each partition (None when its leader cannot tell)."""
        from kafkalite.protocol.errors import ErrorCode

        found = await self.list_offsets(sorted(set(partitions)), -1)
        return {
            tp: (offset if error == ErrorCode.NONE and offset >= 0 else None)
            for tp, (error, offset) in found.items()
        }

    @property
    def session(self) -> Any:
        session = self.server.services.store
        if session is None:
            raise AdminError(503, "UNAVAILABLE", "the coordination session is not open")
        return session

    def group_coordinator(self) -> Any:
        coordinator = self.server.services.group_coordinator
        if coordinator is None:
            raise AdminError(
                503,
                "UNAVAILABLE",
                "this broker has no group coordinator (consumer groups are not served)",
            )
        return coordinator

    async def coordinator_for(self, group_id: str, *, create: bool = False) -> Any:
        """This broker's group coordinator, once it owns `group_id` (leads the group's
        `__consumer_offsets` partition and has loaded it).

        No offsets topic: 404 GROUP_ID_NOT_FOUND (no group ever committed), unless `create`
        (an offset reset may seed a new group): the topic is then created as FindCoordinator
        does. Another broker leads the partition: 421 NOT_COORDINATOR naming it.
        """
        from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME

        coordinator = self.group_coordinator()
        cache = self.server.metadata_cache
        if not cache.contains_topic(GROUP_METADATA_TOPIC_NAME):
            if not create:
                raise AdminError(
                    404,
                    "GROUP_ID_NOT_FOUND",
                    f"group {group_id!r} does not exist (no group has committed offsets yet)",
                )
            await self._create_offsets_topic(coordinator)
        partition = coordinator.partition_for(group_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CREATE_WAIT_S
        while True:
            info = cache.get_partition_info(GROUP_METADATA_TOPIC_NAME, partition)
            if info is not None and info.leader >= 0 and info.leader != self.server.broker_id:
                raise AdminError(
                    421,
                    "NOT_COORDINATOR",
                    f"group {group_id!r} is coordinated by broker {info.leader} "
                    f"({GROUP_METADATA_TOPIC_NAME}-{partition}); ask that broker's admin API",
                )
            if info is not None and coordinator.core.is_group_local(group_id):
                return coordinator
            if loop.time() > deadline:
                raise AdminError(
                    503,
                    "COORDINATOR_LOAD_IN_PROGRESS",
                    f"the coordinator of group {group_id!r} is not ready yet; retry",
                )
            await asyncio.sleep(0.02)

    async def _create_offsets_topic(self, coordinator: Any) -> None:
        from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME
        from kafkalite.protocol.errors import TopicAlreadyExistsError
        from kafkalite.zk import admin

        offset_config = coordinator.offset_config
        alive = len(self.server.metadata_cache.get_alive_brokers())
        try:
            await admin.create_topic(
                self.session,
                GROUP_METADATA_TOPIC_NAME,
                offset_config.offsets_topic_num_partitions,
                min(offset_config.offsets_topic_replication_factor, max(alive, 1)),
                offset_config.offsets_topic_configs(),
            )
        except TopicAlreadyExistsError:
            pass

    # -- health ----------------------------------------------------------------------------

    @route("GET", "/health", summary="Health", tag="health", answer=m.Health)
    async def health(self, request: web.Request) -> Any:
        return {"status": "ok", "broker_id": self.server.broker_id}

    @route("GET", "/ready", summary="Readiness", tag="health", answer=m.Ready, also=(503,))
    async def ready(self, request: web.Request) -> Any:
        from kafkalite.coord.base import SessionState

        server = self.server
        session = server.services.store
        checks = {
            "listening": bool(server.socket_server is not None and server.bound_endpoints),
            "coordination_session": bool(
                session is not None and session.state is SessionState.CONNECTED
            ),
            "logs_loaded": server.log_manager is not None,
            "started": bool(server.dispatcher.ready.is_set()),
        }
        ok = all(checks.values())
        return Reply({"ready": ok, "checks": checks}, 200 if ok else 503)

    # -- cluster and brokers ---------------------------------------------------------------

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
        """Log directories (size, partitions, offline) and settings of this broker; another
        broker's are asked of that broker's admin API (421)."""
        broker_id = path_int(request, "id")
        if broker_id not in {b["id"] for b in await self._brokers()}:
            raise AdminError(404, "BROKER_NOT_AVAILABLE", f"broker {broker_id} is not registered")
        if broker_id != self.server.broker_id:
            raise AdminError(
                421,
                "NOT_THIS_BROKER",
                f"broker {self.server.broker_id} answers for itself only; ask broker "
                f"{broker_id}'s admin API",
            )
        # as DescribeConfigs of the broker answers: only with DESCRIBE_CONFIGS on the cluster,
        # and secrets (config.SENSITIVE_CONFIGS) null
        configs: dict[str, str | None] = {}
        if Access(self.server, request).allowed(Op.DESCRIBE_CONFIGS, T.CLUSTER, CLUSTER_NAME):
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
        from kafkalite.protocol.errors import ErrorCode

        cache = self.server.metadata_cache
        access = Access(self.server, request)
        health = self._partition_health(access)
        topics = set(access.topics(cache.partition_states)) if cache is not None else set()
        internal = {t for t in topics if t.startswith("__")}
        groups = 0
        coordinator = self.server.services.group_coordinator
        if coordinator is not None:
            error, overviews = coordinator.list_groups()
            visible = [o for o in overviews if access.group(o.group_id)]
            groups = len(visible) if error == ErrorCode.NONE else 0
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

    # -- topics ----------------------------------------------------------------------------

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
        if Access(self.server, request).topic(name, Op.DESCRIBE_CONFIGS):  # as DescribeConfigs
            configs = await zk_data.get_topic_config(session, name)
        deleting = name in set(await zk_data.get_topic_deletions(session))
        local = {p: self._local_offsets(name, p) for p in assignment}
        remote = [
            TopicPartition(name, p)
            for p, offsets in local.items()
            if offsets["high_watermark"] is None
            and (state := states.get(TopicPartition(name, p))) is not None
            and state.leader_and_isr.leader >= 0
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
        return {
            "name": name,
            "topic_id": topic_id,
            "internal": name.startswith("__"),
            "marked_for_deletion": deleting,
            "configs": configs,
            "partitions": partitions,
        }

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

    # -- transactions ----------------------------------------------------------------------

    def txn_coordinator(self) -> Any:
        coordinator = self.server.services.txn_coordinator
        if coordinator is None:
            raise AdminError(503, "UNAVAILABLE", "this broker has no transaction coordinator")
        return coordinator

    @route(
        "GET",
        "/transactions",
        summary="List transactions",
        tag="transactions",
        answer=list[m.TransactionSummary],
    )
    async def list_transactions(self, request: web.Request) -> Any:
        """The transactional ids this broker coordinates (as ListTransactions answers)."""
        from kafkalite.protocol.errors import ErrorCode

        error, _, listed = self.txn_coordinator().list_transactions()
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error)
        access = Access(self.server, request)
        listed = [t for t in listed if access.transactional_id(t.transactional_id)]
        return [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "state": t.state,
            }
            for t in listed
        ]

    @route(
        "GET",
        "/transactions/{id}",
        summary="Describe transaction",
        tag="transactions",
        answer=m.Transaction,
        params={"id": str},
    )
    async def describe_transaction(self, request: web.Request) -> Any:
        from kafkalite.protocol.errors import ErrorCode

        txn_id = request.match_info["id"]
        d = self.txn_coordinator().describe(txn_id)
        if d.error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            raise AdminError(404, d.error.name, f"transactional id {txn_id!r} does not exist")
        if d.error == ErrorCode.NOT_COORDINATOR:
            raise AdminError(
                409, d.error.name, f"broker {self.server.broker_id} does not coordinate {txn_id!r}"
            )
        if d.error != ErrorCode.NONE:
            raise AdminError.kafka(d.error)
        return {
            "transactional_id": txn_id,
            "coordinator": self.server.broker_id,
            "state": d.state,
            "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch,
            "timeout_ms": d.timeout_ms,
            "start_time_ms": d.start_time_ms,
            "last_update_time_ms": d.last_update_time_ms,
            "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in d.partitions],
        }

    @route(
        "POST",
        "/transactions/{id}/abort",
        summary="Abort transaction",
        tag="transactions",
        answer=m.TransactionAborted,
        status=202,
        params={"id": str},
    )
    async def abort_transaction(self, request: web.Request) -> Any:
        """Fence the producer of an open transaction and abort it (the timeout abort, now)."""
        from kafkalite.protocol.errors import ErrorCode

        txn_id = request.match_info["id"]
        error = await self.txn_coordinator().abort_transaction(txn_id, reason="admin API")
        if error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            raise AdminError(404, error.name, f"transactional id {txn_id!r} does not exist")
        if error == ErrorCode.INVALID_TXN_STATE:
            raise AdminError(409, error.name, f"{txn_id!r} has no open transaction")
        if error == ErrorCode.NOT_COORDINATOR:
            raise AdminError(
                409, error.name, f"broker {self.server.broker_id} does not coordinate {txn_id!r}"
            )
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error)
        return {"transactional_id": txn_id, "aborted": True}

    # -- groups ----------------------------------------------------------------------------

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

    # -- reassignment and elections --------------------------------------------------------

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

    # -- metrics and the document ----------------------------------------------------------

    @route(
        "GET",
        "/metrics/history",
        summary="Metrics history",
        tag="metrics",
        answer=m.MetricsHistory,
        query=m.HistoryQuery,
    )
    async def metrics_history(self, request: web.Request, query: m.HistoryQuery) -> Any:
        return self.history.answer(query.topic, visible=Access(self.server, request).topic)

    @route(
        "GET",
        "/metrics",
        summary="Prometheus metrics",
        tag="metrics",
        content_type="text/plain",
    )
    async def metrics(self, request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        # series labelled by a topic or a group the principal may not see are left out
        body = render(self.registry, Access(self.server, request).labels())
        response = web.Response(body=body)
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    @route("GET", "/", summary="Console", tag="health", content_type="text/html")
    async def console(self, request: web.Request) -> web.Response:
        """The operator console: a single page (console/index.html and its modules) over
        this API."""
        return console_file("index.html")

    @route("GET", "/docs", summary="API reference", tag="health", content_type="text/html")
    async def docs(self, request: web.Request) -> web.Response:
        """A page rendering /openapi.json, served from the package (console/docs.html)."""
        return console_file("docs.html")

    async def console_asset(self, request: web.Request) -> web.Response:
        """The console's own files (console/*.js, *.css), not documented as API routes."""
        return console_file(request.match_info["file"])

    async def openapi(self, request: web.Request) -> web.Response:
        from kafkalite.admin.openapi import openapi_document
        from kafkalite.admin.security import document_security

        # not itself documented; states this broker's authentication and ACLs
        return json_response(openapi_document(*document_security(self.server)))


def create_app(
    server: Any,
    request_stats: RequestStats | None = None,
    topic_stats: TopicStats | None = None,
) -> web.Application:
    """The aiohttp application for `server`. /metrics and /metrics/history read the broker's
    counters, which the dispatcher and the replica manager fill (given by the composition root;
    empty ones when none are given)."""
    request_stats = request_stats if request_stats is not None else RequestStats()
    topic_stats = topic_stats if topic_stats is not None else TopicStats()
    registry = new_registry(server, request_stats, topic_stats)
    history = History(request_stats, topic_stats)
    api = AdminApi(server, registry, history)
    from kafkalite.admin.csrf import add_security_headers, csrf_middleware
    from kafkalite.admin.security import security_middleware

    # the cross-site checks come before authentication: a forged request is refused whoever it
    # would act for
    app = web.Application(
        middlewares=[error_middleware, csrf_middleware, security_middleware(server)],
        client_max_size=1024 * 1024,
    )
    app.on_response_prepare.append(add_security_headers)
    app.on_startup.append(history.start)
    app.on_cleanup.append(history.stop)
    app.on_cleanup.append(api.close)
    app[SERVER_KEY] = server
    app[REGISTRY_KEY] = registry
    # the routes declared on AdminApi (@route): the same declarations make the OpenAPI document
    for name, spec in route_specs(AdminApi):
        if spec.method == "GET":  # GET answers HEAD too
            app.router.add_get(spec.path, getattr(api, name))
        else:
            app.router.add_route(spec.method, spec.path, getattr(api, name))
    app.router.add_get("/openapi.json", api.openapi)
    app.router.add_get("/console/{file}", api.console_asset)
    return app


MALFORMED_LOG_INTERVAL_S = 60.0
"""At most one warning line per this many seconds for malformed HTTP requests."""


class ServerLog:
    """The logger of aiohttp's connection handler. A request aiohttp cannot parse (a bad
    request line, header or length; TLS on the http port) is answered 400 by aiohttp and is the
    client's fault, not the broker's: it is logged as one warning line without a traceback, at
    most once per MALFORMED_LOG_INTERVAL_S with the count of those not logged, so a flood of
    them cannot flood the log. Anything else is logged as aiohttp logs it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        import logging

        self.clock = clock
        self.server_logger = logging.getLogger("aiohttp.server")
        self.next_at: float | None = None
        self.suppressed = 0

    def malformed(self, exc: BaseException) -> None:
        now = self.clock()
        if self.next_at is not None and now < self.next_at:
            self.suppressed += 1
            return
        text = str(getattr(exc, "message", "") or exc).strip()
        first_line = text.splitlines()[0] if text else type(exc).__name__
        log.warning(
            "malformed HTTP request answered 400",
            error=first_line[:200],
            not_logged_since_last=self.suppressed,
        )
        self.next_at, self.suppressed = now + MALFORMED_LOG_INTERVAL_S, 0

    def exception(self, msg: str, *args: Any, exc_info: Any = None, **kw: Any) -> None:
        from aiohttp.http_exceptions import HttpProcessingError

        if isinstance(exc_info, HttpProcessingError):
            self.malformed(exc_info)
        else:
            self.server_logger.exception(msg, *args, exc_info=exc_info or True, **kw)

    def debug(self, msg: str, *args: Any, exc_info: Any = None, **kw: Any) -> None:
        from aiohttp.http_exceptions import HttpProcessingError

        if isinstance(exc_info, HttpProcessingError):
            exc_info = None  # no traceback for a client's bad bytes, even when debugging
        self.server_logger.debug(msg, *args, exc_info=exc_info, **kw)

    def warning(self, msg: str, *args: Any, **kw: Any) -> None:
        self.server_logger.warning(msg, *args, **kw)


class AdminServer:
    """Runs the admin app on `admin.listener` (`http://host:port`) in the broker's loop.

    A listener that cannot be bound (port in use) is logged and the broker runs on without the
    admin API: it is an operator convenience, never a reason for the broker to stop.
    """

    def __init__(
        self,
        server: Any,
        url: str,
        *,
        request_stats: RequestStats | None = None,
        topic_stats: TopicStats | None = None,
    ) -> None:
        self.server = server
        self.url = url
        self.request_stats = request_stats
        self.topic_stats = topic_stats
        self.runner: web.AppRunner | None = None
        self.site: web.TCPSite | None = None
        self.bound_port: int | None = None

    @staticmethod
    def parse_url(url: str) -> tuple[str, int]:
        from kafkalite.config import parse_endpoints

        endpoint = parse_endpoints(url, "admin.listener")[0]
        if endpoint.listener_name not in ("HTTP", "HTTPS"):
            raise ValueError(f"admin.listener: {url!r} must be http(s)://host:port")
        return endpoint.host, endpoint.port

    async def start(self) -> None:
        host, port = self.parse_url(self.url)
        self.runner = web.AppRunner(
            create_app(self.server, self.request_stats, self.topic_stats),
            access_log=None,
            handle_signals=False,
            logger=ServerLog(),
        )
        await self.runner.setup()
        ssl_context = None
        if self.url.lower().startswith("https://"):
            from kafkalite.admin.security import admin_ssl_context

            ssl_context = admin_ssl_context(self.server.config)
        site = web.TCPSite(
            self.runner, host or "0.0.0.0", port, reuse_address=True, ssl_context=ssl_context
        )
        try:
            await site.start()
        except OSError as e:
            log.warning("admin API not started: cannot bind", url=self.url, error=str(e))
            await self.runner.cleanup()
            self.runner = None
            return
        self.site = site
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        self.bound_port = sockets[0].getsockname()[1] if sockets else port
        scheme = "https" if ssl_context is not None else "http"
        log.info("admin API listening", url=f"{scheme}://{host}:{self.bound_port}")

    async def stop(self) -> None:
        if self.runner is not None:
            runner, self.runner = self.runner, None
            await runner.cleanup()
