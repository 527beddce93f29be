"""The HTTP admin API of one broker (aiohttp), served on `admin.listener` inside the broker's loop.

Routes (JSON, snake_case, Kafka's names; documented by the OpenAPI 3 document at /openapi.json,
built in `openapi.py` from the same route table):

    GET    /health                      process up
    GET    /ready                       listening, coordination session live, logs loaded
    GET    /cluster                     cluster id, controller (id, epoch), brokers
    GET    /brokers, /brokers/{id}
    GET    /topics                      POST /topics (create)
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
    GET    /                            the dashboard page (dashboard.py)

Where the data comes from: topics, assignments, partition leader/ISR/epoch, brokers and the
controller are read from the coordination store (the authority, so every broker answers alike);
offsets and sizes come from this broker's own logs, so they are null for a partition not hosted
here. Topic administration writes the store nodes the controller watches (controller/admin.py);
reassignment and elections go through controller/admin.py too (`/admin/reassign_partitions`,
`/admin/preferred_replica_election`, kafkalite's `/admin/unclean_leader_election`), which the
active controller acts on; a request while an earlier one is pending is answered 409. Groups are those coordinated by this
broker (the leader of the group's `__consumer_offsets` partition); others answer NOT_COORDINATOR.

Invariant: no request can take the broker down. Every handler runs under `error_middleware`,
which turns AdminError, Kafka errors and coordination-store errors into JSON answers and any
other exception into a logged 500.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from kafkalite.admin.errors import AdminError
from kafkalite.admin.metrics import RequestStats, TopicStats, instrument, new_registry, render
from kafkalite.admin.storage_status import broker_storage_fields
from kafkalite.group.consumer_protocol import assigned_partitions

log = structlog.get_logger("kafkalite.admin")

CREATE_WAIT_S = 10.0

REMOTE_TIMEOUT_S = 5.0
"""Timeout of the Kafka requests the admin API sends to other brokers (ListOffsets)."""
"""How long POST /topics waits for the controller to elect leaders before answering."""

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


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object; 400 when it is not one."""
    raw = await request.read()
    if not raw.strip():
        raise AdminError(400, "INVALID_REQUEST", "a JSON object body is required")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as e:
        # JSONDecodeError and UnicodeDecodeError are ValueErrors; so is an integer with more
        # digits than Python converts; RecursionError is a too deeply nested document.
        raise AdminError(400, "INVALID_REQUEST", f"malformed JSON: {e}") from None
    if not isinstance(body, dict):
        raise AdminError(400, "INVALID_REQUEST", "the body must be a JSON object")
    return body


def int_field(
    body: dict[str, Any],
    name: str,
    *,
    default: int | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    value = body.get(name, default)
    if value is None:
        raise AdminError.invalid(name, "is required")
    if isinstance(value, bool) or not isinstance(value, int):
        raise AdminError.invalid(name, f"must be an integer, got {json.dumps(value)[:50]}")
    if minimum is not None and value < minimum:
        raise AdminError.invalid(name, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise AdminError.invalid(name, f"must be <= {maximum}, got {value}")
    return value


def str_field(body: dict[str, Any], name: str, *, default: str | None = None) -> str:
    value = body.get(name, default)
    if value is None:
        raise AdminError.invalid(name, "is required")
    if not isinstance(value, str):
        raise AdminError.invalid(name, "must be a string")
    return value


def configs_field(body: dict[str, Any], name: str, *, nullable_values: bool) -> dict[str, Any]:
    """Topic configs as CreateTopics and IncrementalAlterConfigs carry them: string values (null
    removes an override where ``nullable_values``). A number or boolean is refused, not turned
    into a string: the Kafka protocol has only strings, and the document says so."""
    value = body.get(name, {})
    if not isinstance(value, dict):
        raise AdminError.invalid(name, "must be an object of config name -> string value")
    out: dict[str, Any] = {}
    for key, v in value.items():
        if v is None and nullable_values:
            out[key] = None
        elif isinstance(v, str):
            out[key] = v
        else:
            raise AdminError.invalid(name, f"{key}: must be a string, got {json.dumps(v)[:50]}")
    return out


def check_config_changes(name: str, changes: dict[str, str | None]) -> None:
    """Every name is a topic config and every value has the form the OpenAPI document states
    for it (the same schemas: openapi.CONFIG_VALUES, searched as JSON Schema does); a null value
    removes an override. What the document says is what is enforced."""
    import re

    from kafkalite.admin.openapi import CONFIG_VALUES

    for key, value in changes.items():
        schema = CONFIG_VALUES.get(key)
        if schema is None:
            raise AdminError.invalid(name, f"Unknown topic config name: {key}")
        if value is None:
            continue
        if "enum" in schema and value not in schema["enum"]:
            raise AdminError.invalid(name, f"{key}: must be one of {', '.join(schema['enum'])}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            raise AdminError.invalid(name, f"{key}: must be {schema['description']}")


def validate_topic_configs(name: str, configs: dict[str, str]) -> None:
    """Refuse what CreateTopics refuses (unknown names, bad values), with the same code: stored
    once, an override Kafka's validation rejects makes every later Kafka-protocol alter of the
    topic fail."""
    from kafkalite.apis.admin_common import validate_topic_configs as kafka_validation

    problem = kafka_validation(dict(configs))
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


def partitions_field(
    body: dict[str, Any], name: str, *, with_replicas: bool
) -> list[dict[str, Any]]:
    """A list of {"topic", "partition"[, "replicas"]} objects, validated."""
    value = body.get(name)
    if not isinstance(value, list) or not value:
        raise AdminError.invalid(name, "must be a non-empty list of {topic, partition} objects")
    out = []
    for i, item in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(item, dict):
            raise AdminError.invalid(where, "must be an object")
        topic = item.get("topic")
        if not isinstance(topic, str) or not is_valid_topic_name(topic):
            raise AdminError.invalid(f"{where}.topic", "must be a legal topic name")
        entry: dict[str, Any] = {"topic": topic}
        p = item.get("partition")
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < 2**31:
            raise AdminError.invalid(f"{where}.partition", "must be an int32 >= 0")
        entry["partition"] = p
        if with_replicas:
            replicas = item.get("replicas")
            if (
                not isinstance(replicas, list)
                or not replicas
                or not all(
                    isinstance(b, int) and not isinstance(b, bool) and -(2**31) <= b < 2**31
                    for b in replicas
                )
            ):
                raise AdminError.invalid(
                    f"{where}.replicas", "must be a non-empty list of broker ids"
                )
            if len(set(replicas)) != len(replicas):
                raise AdminError.invalid(f"{where}.replicas", "lists a broker twice")
            entry["replicas"] = list(replicas)
        out.append(entry)
    return out


def is_valid_topic_name(name: str) -> bool:
    from kafkalite.controller.admin import validate_topic_name
    from kafkalite.protocol.errors import KafkaError

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

    def __init__(self, server: Any, registry: Any) -> None:
        self.server = server
        self.registry = registry
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
                bootstrap = ",".join(f"{e.host}:{e.port}" for e in self.server.advertised_endpoints)
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

    async def high_watermarks(self, partitions: Any) -> dict[Any, int | None]:
        """The high watermark of each partition (None when its leader cannot tell)."""
        from kafkalite.protocol.errors import ErrorCode

        partitions = sorted(set(partitions))
        found = await asyncio.gather(*(self.list_offset(tp, -1) for tp in partitions))
        return {
            tp: (offset if error == ErrorCode.NONE and offset >= 0 else None)
            for tp, (error, offset) in zip(partitions, found, strict=True)
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
        from kafkalite.controller import admin
        from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME
        from kafkalite.protocol.errors import TopicAlreadyExistsError

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

    async def health(self, request: web.Request) -> web.Response:
        return json_response({"status": "ok", "broker_id": self.server.broker_id})

    async def ready(self, request: web.Request) -> web.Response:
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
        return json_response({"ready": ok, "checks": checks}, 200 if ok else 503)

    # -- cluster and brokers ---------------------------------------------------------------

    async def _brokers(self) -> list[dict[str, Any]]:
        from kafkalite.controller import zk_data

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

    async def cluster(self, request: web.Request) -> web.Response:
        from kafkalite.controller import zk_data

        controller_id = await zk_data.get_controller_id(self.session)
        epoch = await zk_data.get_controller_epoch(self.session)
        return json_response(
            {
                "cluster_id": self.server.services.cluster_id,
                "controller": {
                    "broker_id": controller_id if controller_id is not None else -1,
                    "epoch": epoch[0] if epoch is not None else -1,
                },
                "brokers": await self._brokers(),
                "this_broker": self.server.broker_id,
            }
        )

    async def brokers(self, request: web.Request) -> web.Response:
        return json_response(await self._brokers())

    async def broker(self, request: web.Request) -> web.Response:
        broker_id = path_int(request, "id")
        for broker in await self._brokers():
            if broker["id"] == broker_id:
                return json_response(broker)
        raise AdminError(404, "BROKER_NOT_AVAILABLE", f"broker {broker_id} is not registered")

    # -- topics ----------------------------------------------------------------------------

    async def list_topics(self, request: web.Request) -> web.Response:
        from kafkalite.controller import zk_data

        session = self.session
        topics = await zk_data.get_all_topics(session)
        assignments = await zk_data.get_topic_assignments(session, topics)
        deleting = set(await zk_data.get_topic_deletions(session))
        out = []
        for name in sorted(assignments):
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
                }
            )
        return json_response(out)

    async def create_topic(self, request: web.Request) -> web.Response:
        from kafkalite.controller import admin

        body = await json_body(request)
        config = self.server.config
        name = str_field(body, "name")
        if not name:
            raise AdminError.invalid("name", "must not be empty")
        try:
            admin.validate_topic_name(name)
        except Exception as e:
            raise AdminError.invalid("name", str(e)) from None
        partitions = int_field(
            body, "partitions", default=config.num_partitions, minimum=1, maximum=100_000
        )
        replication_factor = int_field(
            body,
            "replication_factor",
            default=config.default_replication_factor,
            minimum=1,
            maximum=32767,
        )
        configs = configs_field(body, "configs", nullable_values=False)
        check_config_changes("configs", configs)
        validate_topic_configs("configs", configs)
        brokers = await admin.registered_brokers(self.session)
        if replication_factor > len(brokers):
            raise AdminError(
                400,
                "INVALID_REPLICATION_FACTOR",
                f"replication_factor: {replication_factor} is larger than the number of "
                f"registered brokers ({len(brokers)})",
                field="replication_factor",
            )
        topic_id = await admin.create_topic(
            self.session, name, partitions, replication_factor, configs
        )
        await self._wait_for_leaders(name, partitions)
        return json_response(
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

    async def describe_topic(self, request: web.Request) -> web.Response:
        from kafkalite.controller import zk_data
        from kafkalite.protocol.errors import ErrorCode
        from kafkalite.protocol.types import TopicPartition

        name = topic_name(request)
        session = self.session
        found = await zk_data.get_topic_assignment(session, name)
        if found is None:
            raise AdminError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        topic_id, assignment, _ = found
        states = await zk_data.get_partition_states(
            session, [TopicPartition(name, p) for p in assignment]
        )
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
                asyncio.gather(*(self.list_offset(tp, -2) for tp in remote)),
                self.high_watermarks(remote),
            )
            for tp, (error, start) in zip(remote, earliest, strict=True):
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
        return json_response(
            {
                "name": name,
                "topic_id": topic_id,
                "internal": name.startswith("__"),
                "marked_for_deletion": deleting,
                "configs": configs,
                "partitions": partitions,
            }
        )

    async def alter_topic_config(self, request: web.Request) -> web.Response:
        from kafkalite.controller import admin

        name = topic_name(request)
        body = await json_body(request)
        if "configs" not in body:
            raise AdminError.invalid("configs", "is required (config name -> value, null removes)")
        changes = configs_field(body, "configs", nullable_values=True)
        check_config_changes("configs", changes)
        if not await admin.topic_exists(self.session, name):
            raise AdminError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        current = await admin.get_topic_config(self.session, name)
        for key, value in changes.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        validate_topic_configs("configs", current)
        await admin.alter_topic_config(self.session, name, current)
        return json_response({"name": name, "configs": current})

    async def add_partitions(self, request: web.Request) -> web.Response:
        from kafkalite.controller import admin

        name = topic_name(request)
        body = await json_body(request)
        from kafkalite.protocol.errors import ErrorCode, KafkaError

        count = int_field(body, "partitions", minimum=1, maximum=100_000)
        try:
            new = await admin.add_partitions(self.session, name, count)
        except KafkaError as e:
            if e.error_code in (ErrorCode.INVALID_PARTITIONS, ErrorCode.INVALID_TOPIC_EXCEPTION):
                # partitions may only grow, and not while the topic is being deleted: the
                # request conflicts with the topic's state
                raise AdminError(409, e.error_code.name, str(e)) from None
            raise
        return json_response(
            {
                "name": name,
                "partitions": count,
                "new_partitions": [
                    {"partition": p, "replicas": list(r)} for p, r in sorted(new.items())
                ],
            }
        )

    async def delete_topic(self, request: web.Request) -> web.Response:
        from kafkalite.controller import admin

        name = topic_name(request)
        await admin.delete_topic(self.session, name)
        # Like Kafka's DeleteTopics, wait (bounded) for the controller to finish: 200 when the
        # topic is gone, 202 when it is still marked for deletion.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CREATE_WAIT_S
        while await admin.topic_exists(self.session, name):
            if loop.time() > deadline:
                return json_response(
                    {"name": name, "deleted": False, "marked_for_deletion": True}, 202
                )
            await asyncio.sleep(0.02)
        return json_response({"name": name, "deleted": True, "marked_for_deletion": False})

    # -- groups ----------------------------------------------------------------------------

    # ------------------------------------------------------------------ transactions

    def txn_coordinator(self) -> Any:
        coordinator = self.server.services.txn_coordinator
        if coordinator is None:
            raise AdminError(503, "UNAVAILABLE", "this broker has no transaction coordinator")
        return coordinator

    async def list_transactions(self, request: web.Request) -> web.Response:
        """The transactional ids this broker coordinates (as ListTransactions answers)."""
        from kafkalite.protocol.errors import ErrorCode

        error, _, listed = self.txn_coordinator().list_transactions()
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error)
        return json_response(
            [
                {
                    "transactional_id": t.transactional_id,
                    "producer_id": t.producer_id,
                    "state": t.state,
                }
                for t in listed
            ]
        )

    async def describe_transaction(self, request: web.Request) -> web.Response:
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
        return json_response(
            {
                "transactional_id": txn_id,
                "coordinator": self.server.broker_id,
                "state": d.state,
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "timeout_ms": d.timeout_ms,
                "start_time_ms": d.start_time_ms,
                "last_update_time_ms": d.last_update_time_ms,
                "partitions": [
                    {"topic": tp.topic, "partition": tp.partition} for tp in d.partitions
                ],
            }
        )

    async def abort_transaction(self, request: web.Request) -> web.Response:
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
        return json_response({"transactional_id": txn_id, "aborted": True}, status=202)

    async def list_groups(self, request: web.Request) -> web.Response:
        from kafkalite.protocol.errors import ErrorCode

        error, overviews = self.group_coordinator().list_groups()
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error)
        return json_response(
            [
                {"group_id": o.group_id, "protocol_type": o.protocol_type, "state": o.state}
                for o in sorted(overviews, key=lambda o: o.group_id)
            ]
        )

    async def _describe(self, group_id: str, *, create: bool = False) -> tuple[Any, Any]:
        from kafkalite.protocol.errors import ErrorCode

        coordinator = await self.coordinator_for(group_id, create=create)
        error, summary = coordinator.describe_group(group_id)
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, f"group {group_id!r}: {error.name}")
        return coordinator, summary

    async def describe_group(self, request: web.Request) -> web.Response:
        from kafkalite.protocol.errors import ErrorCode

        group_id = request.match_info["id"]
        coordinator, summary = await self._describe(group_id)
        _, committed = coordinator.fetch_offsets(group_id)
        high_watermarks = await self.high_watermarks(committed)
        error, lags = coordinator.consumer_lag(group_id, high_watermarks.get)
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error)
        if summary.state == "Dead" and not lags:
            raise AdminError(404, "GROUP_ID_NOT_FOUND", f"group {group_id!r} does not exist")
        consumer = summary.protocol_type == "consumer"
        members = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "assignment": decode_consumer_assignment(m.assignment) if consumer else [],
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
        return json_response(
            {
                "group_id": group_id,
                "state": summary.state,
                "protocol_type": summary.protocol_type,
                "protocol": summary.protocol,
                "coordinator": self.server.broker_id,
                "members": members,
                "offsets": offsets,
                "total_lag": sum(o["lag"] or 0 for o in offsets),
            }
        )

    async def delete_group(self, request: web.Request) -> web.Response:
        from kafkalite.protocol.errors import ErrorCode

        group_id = request.match_info["id"]
        coordinator = await self.coordinator_for(group_id)
        results = await coordinator.delete_groups([group_id])
        error = results.get(group_id, ErrorCode.NONE)
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, f"group {group_id!r}: {error.message or error.name}")
        return json_response({"group_id": group_id, "deleted": True})

    async def reset_offsets(self, request: web.Request) -> web.Response:
        """Kafka's kafka-consumer-groups --reset-offsets --execute, for an inactive group."""
        from kafkalite.controller import zk_data
        from kafkalite.group.metadata import OffsetAndMetadata
        from kafkalite.protocol.errors import ErrorCode
        from kafkalite.protocol.types import TopicPartition

        group_id = request.match_info["id"]
        body = await json_body(request)
        strategy = str_field(body, "to")
        if strategy not in ("earliest", "latest", "timestamp", "explicit"):
            raise AdminError.invalid("to", "must be earliest, latest, timestamp or explicit")
        dry_run = body.get("dry_run", False)
        if not isinstance(dry_run, bool):
            raise AdminError.invalid("dry_run", "must be a boolean")
        coordinator, summary = await self._describe(group_id, create=True)
        if summary.state not in ("Empty", "Dead"):
            raise AdminError(
                409,
                "NON_EMPTY_GROUP",
                f"group {group_id!r} is {summary.state} with {len(summary.members)} member(s); "
                "offsets can only be reset while the group is inactive",
            )

        targets: dict[TopicPartition, int] = {}
        if strategy == "explicit":
            for i, entry in enumerate(partitions_field(body, "offsets", with_replicas=False)):
                offset = body["offsets"][i].get("offset")
                if (
                    isinstance(offset, bool)
                    or not isinstance(offset, int)
                    or not 0 <= offset < 2**63
                ):
                    raise AdminError.invalid(f"offsets[{i}].offset", "must be an int64 >= 0")
                targets[TopicPartition(entry["topic"], entry["partition"])] = offset
        else:
            if strategy == "timestamp":
                timestamp = int_field(body, "timestamp", minimum=0, maximum=2**63 - 1)
            else:
                timestamp = -2 if strategy == "earliest" else -1
            topics = body.get("topics")
            if topics is None:
                _, committed = coordinator.fetch_offsets(group_id)
                topics = sorted({tp.topic for tp in committed})
                if not topics:
                    raise AdminError(
                        404,
                        "GROUP_ID_NOT_FOUND",
                        f"group {group_id!r} has no committed offsets to reset; name the topics",
                    )
            if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
                raise AdminError.invalid("topics", "must be a list of topic names")
            for topic in topics:
                if not is_valid_topic_name(topic):
                    raise AdminError(
                        404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} does not exist"
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
        return json_response(
            {
                "group_id": group_id,
                "dry_run": dry_run,
                "offsets": [
                    {"topic": tp.topic, "partition": tp.partition, "offset": offset}
                    for tp, offset in sorted(targets.items())
                ],
            }
        )

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
        from kafkalite.controller import zk_data

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

    async def reassign(self, request: web.Request) -> web.Response:
        from kafkalite.controller import admin
        from kafkalite.coord import paths
        from kafkalite.protocol.types import TopicPartition

        body = await json_body(request)
        entries = partitions_field(body, "partitions", with_replicas=True)
        await self._validate_partitions(entries, "partitions")
        plan = {TopicPartition(e["topic"], e["partition"]): e["replicas"] for e in entries}
        await admin.reassign_partitions(self.session, plan)  # REASSIGNMENT_IN_PROGRESS: 409
        return json_response({"partitions": entries, "path": paths.REASSIGN_PARTITIONS}, 202)

    async def reassignments(self, request: web.Request) -> web.Response:
        from kafkalite.controller import admin, zk_data

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
        return json_response(
            {
                "pending": [
                    {"topic": tp.topic, "partition": tp.partition, "replicas": list(r)}
                    for tp, r in sorted(pending.items())
                ],
                "ongoing": ongoing,
            }
        )

    async def elect_leaders(self, request: web.Request) -> web.Response:
        from kafkalite.controller import admin, zk_data
        from kafkalite.controller.assignment import AdminOperationError
        from kafkalite.coord import paths
        from kafkalite.coord.errors import NodeExists
        from kafkalite.protocol.types import TopicPartition

        body = await json_body(request)
        election_type = str_field(body, "election_type", default="preferred")
        if election_type not in ("preferred", "unclean"):
            raise AdminError.invalid("election_type", "must be preferred or unclean")
        if body.get("partitions") is None:
            topics = await zk_data.get_all_topics(self.session)
            assignments = await zk_data.get_topic_assignments(self.session, topics)
            partitions = sorted(
                TopicPartition(t, p) for t, (_, parts) in assignments.items() for p in parts
            )
        else:
            entries = partitions_field(body, "partitions", with_replicas=False)
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
        return json_response(
            {
                "election_type": election_type,
                "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in partitions],
                "path": path,
            },
            202,
        )

    # -- metrics and the document ----------------------------------------------------------

    async def metrics(self, request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        body = render(self.registry)
        response = web.Response(body=body)
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def dashboard(self, request: web.Request) -> web.Response:
        from kafkalite.admin.dashboard import DASHBOARD_HTML

        return web.Response(text=DASHBOARD_HTML, content_type="text/html")

    async def openapi(self, request: web.Request) -> web.Response:
        from kafkalite.admin.openapi import openapi_document

        return json_response(openapi_document())


def create_app(server: Any, request_stats: RequestStats | None = None) -> web.Application:
    """The aiohttp application for `server`; instruments its replica manager for /metrics."""
    request_stats = request_stats or getattr(server.dispatcher, "stats", None) or RequestStats()
    topic_stats = TopicStats()
    if server.replica_manager is not None:
        instrument(server.replica_manager, topic_stats)
    registry = new_registry(server, request_stats, topic_stats)
    api = AdminApi(server, registry)
    app = web.Application(middlewares=[error_middleware], client_max_size=1024 * 1024)
    app.on_cleanup.append(api.close)
    app[SERVER_KEY] = server
    app[REGISTRY_KEY] = registry
    r = app.router
    r.add_get("/", api.dashboard)
    r.add_get("/health", api.health)
    r.add_get("/ready", api.ready)
    r.add_get("/cluster", api.cluster)
    r.add_get("/brokers", api.brokers)
    r.add_get("/brokers/{id}", api.broker)
    r.add_get("/topics", api.list_topics)
    r.add_post("/topics", api.create_topic)
    r.add_get("/topics/{name}", api.describe_topic)
    r.add_delete("/topics/{name}", api.delete_topic)
    r.add_patch("/topics/{name}/config", api.alter_topic_config)
    r.add_post("/topics/{name}/partitions", api.add_partitions)
    r.add_get("/groups", api.list_groups)
    r.add_get("/groups/{id}", api.describe_group)
    r.add_delete("/groups/{id}", api.delete_group)
    r.add_post("/groups/{id}/offsets", api.reset_offsets)
    r.add_get("/transactions", api.list_transactions)
    r.add_get("/transactions/{id}", api.describe_transaction)
    r.add_post("/transactions/{id}/abort", api.abort_transaction)
    r.add_get("/partitions/reassign", api.reassignments)
    r.add_post("/partitions/reassign", api.reassign)
    r.add_post("/partitions/elect-leaders", api.elect_leaders)
    r.add_get("/metrics", api.metrics)
    r.add_get("/openapi.json", api.openapi)
    return app


class AdminServer:
    """Runs the admin app on `admin.listener` (`http://host:port`) in the broker's loop.

    A listener that cannot be bound (port in use) is logged and the broker runs on without the
    admin API: it is an operator convenience, never a reason for the broker to stop.
    """

    def __init__(self, server: Any, url: str) -> None:
        self.server = server
        self.url = url
        self.runner: web.AppRunner | None = None
        self.site: web.TCPSite | None = None
        self.bound_port: int | None = None

    @staticmethod
    def parse_url(url: str) -> tuple[str, int]:
        from kafkalite.config import parse_endpoints

        endpoint = parse_endpoints(url, "admin.listener")[0]
        if endpoint.listener_name != "HTTP":
            raise ValueError(f"admin.listener: {url!r} must be http://host:port")
        return endpoint.host, endpoint.port

    async def start(self) -> None:
        host, port = self.parse_url(self.url)
        self.runner = web.AppRunner(create_app(self.server), access_log=None, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, host or "0.0.0.0", port, reuse_address=True)
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
        log.info("admin API listening", url=f"http://{host}:{self.bound_port}")

    async def stop(self) -> None:
        if self.runner is not None:
            runner, self.runner = self.runner, None
            await runner.cleanup()
