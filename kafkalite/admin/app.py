"""The HTTP admin API of one broker (aiohttp), served on `admin.listener` inside the broker's loop.

Routes (JSON, snake_case, Kafka's names). Each is declared once, by `@route` on its handler in
routes/ (one module per resource, joined by AdminApi below; routing.py): the declaration
registers it, validates its query and body with the pydantic models of models.py, checks its
answer against its answer model, and is what openapi.py turns into the OpenAPI 3.1 document at
/openapi.json:

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
    DELETE /groups/{id}                 an empty group (a share group: its state too)
    POST   /groups/{id}/offsets         reset to earliest / latest / timestamp / explicit offsets
                                        (a share group: its share-partitions' start offsets)
    DELETE /groups/{id}/offsets         ?topic=T1,T2 (DeleteShareGroupOffsets / OffsetDelete)
    GET    /partitions/reassign         POST /partitions/reassign
    POST   /partitions/elect-leaders    preferred or unclean
    GET    /metrics                     Prometheus text format
    GET    /openapi.json
    GET    /topics/{name}/records       ?partition=&offset=|timestamp=&limit= (record browser)
    GET    /overview, /partitions       counts and partition health for the console
    GET    /brokers/{id}/storage        this broker's log dirs and settings (DESCRIBE_CONFIGS on
                                        the cluster; secrets null)
    GET    /brokers/{id}/configs, /cluster/broker-configs   settings with their sources (one
                                        broker's, the cluster-wide dynamic defaults)
    PATCH  /brokers/{id}/configs, /cluster/broker-configs   dynamic broker configs
                                        (IncrementalAlterConfigs; ALTER_CONFIGS on the cluster)
    GET    /schemas, /schemas/subjects/{subject}[/versions/{v}|/diff]   this broker's Schema
                                        Registry: subjects, versions, schemas, diffs
    PUT    /schemas/config, /schemas/subjects/{subject}/config   compatibility levels
    GET    /metrics/history             a few minutes of rates, in memory
    GET    /acls, POST /acls, DELETE /acls?...   ACL bindings (Describe/Create/DeleteAcls)
    GET    /users, POST /users, DELETE /users/{name}   SCRAM credentials
    GET    /quotas, POST /quotas, DELETE /quotas?...   client quotas
    GET    /docs                        the API reference page
    GET    /                            the console (console/index.html and its modules)

Where the data comes from: topics, assignments, partition leader/ISR/epoch, brokers and the
controller are read from the coordination store (the authority, so every broker answers alike);
offsets and sizes come from this broker's own logs, so they are null for a partition not hosted
here (ListOffsets at the leader fills a group's lag and the record browser). Topic administration writes the store nodes the controller watches (zk/admin.py);
reassignment and elections go through zk/admin.py too (`/admin/reassign_partitions`,
`/admin/preferred_replica_election`, kafkalite's `/admin/unclean_leader_election`), which the
active controller acts on; a request while an earlier one is pending is answered 409. Groups and
other brokers' log dirs are the cluster's: what another broker holds is asked of it over the
Kafka protocol (groupview.py; decision 0022), so every broker answers alike. Dynamic broker
configs are read and changed over the Kafka protocol too (routes/broker_configs.py); the Schema
Registry's subjects are this broker's registry, read in process (routes/schemas.py).

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
from typing import Any

import structlog
from aiohttp import web

from kafkalite.admin.errors import AdminError
from kafkalite.admin.history import History
from kafkalite.admin.metrics import new_registry
from kafkalite.admin.routes.broker_configs import BrokerConfigRoutes
from kafkalite.admin.routes.cluster import ClusterRoutes
from kafkalite.admin.routes.console import ConsoleRoutes
from kafkalite.admin.routes.groups import GroupRoutes
from kafkalite.admin.routes.health import HealthRoutes
from kafkalite.admin.routes.metrics import MetricsRoutes
from kafkalite.admin.routes.partitions import PartitionRoutes
from kafkalite.admin.routes.records import RecordRoutes
from kafkalite.admin.routes.schemas import SchemaRoutes
from kafkalite.admin.routes.security_views import SecurityRoutes
from kafkalite.admin.routes.topics import TopicRoutes
from kafkalite.admin.routes.transactions import TransactionRoutes
from kafkalite.admin.routing import route_specs
from kafkalite.observability import RequestStats, TopicStats

log = structlog.get_logger("kafkalite.admin")

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


class AdminApi(
    HealthRoutes,
    ClusterRoutes,
    BrokerConfigRoutes,
    TopicRoutes,
    RecordRoutes,
    SchemaRoutes,
    TransactionRoutes,
    GroupRoutes,
    PartitionRoutes,
    SecurityRoutes,
    MetricsRoutes,
    ConsoleRoutes,
):
    """Every route handler (one module of routes/ per resource), over a running KafkaServer.
    The order of the bases is the order of the routes: the router's and the OpenAPI document's."""


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


async def start_site(
    app: web.Application,
    url: str,
    host: str,
    port: int,
    config: Any,
    logger: Any,
    what: str,
) -> tuple[web.AppRunner, web.TCPSite, int] | None:
    """Serve `app` on `host:port` (TLS from the ADMIN listener's ssl.* keys when `url` is
    https) for the admin API and the Schema Registry alike. Returns the runner, the site and
    the port really bound (port 0 picks one); a port that cannot be bound is logged as a
    warning naming `what` and gives None, so the broker keeps serving Kafka without it."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, logger=ServerLog())
    await runner.setup()
    ssl_context = None
    if url.lower().startswith("https://"):
        from kafkalite.admin.security import admin_ssl_context

        ssl_context = admin_ssl_context(config)
    site = web.TCPSite(runner, host or "0.0.0.0", port, reuse_address=True, ssl_context=ssl_context)
    try:
        await site.start()
    except OSError as e:
        logger.warning(f"{what} not started: cannot bind", url=url, error=str(e))
        await runner.cleanup()
        return None
    sockets = getattr(getattr(site, "_server", None), "sockets", None) or []
    bound_port = sockets[0].getsockname()[1] if sockets else port
    scheme = "https" if ssl_context is not None else "http"
    logger.info(f"{what} listening", url=f"{scheme}://{host}:{bound_port}")
    return runner, site, bound_port


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
        started = await start_site(
            create_app(self.server, self.request_stats, self.topic_stats),
            self.url,
            host,
            port,
            self.server.config,
            log,
            "admin API",
        )
        if started is not None:
            self.runner, self.site, self.bound_port = started

    async def stop(self) -> None:
        if self.runner is not None:
            runner, self.runner = self.runner, None
            await runner.cleanup()
