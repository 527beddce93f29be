"""KafkaServer: the composition root of one broker (Kafka's KafkaServer.startup, ZooKeeper era).

Start-up order (each step needs the previous ones):

1. coordination store: ZooKeeper when `zookeeper.connect` is set, else the embedded store kept in
   the first log dir (its `coord.lock` refuses a second broker on the same data dir); open the
   broker's session; read or create the cluster id (`/cluster/id`); read the topic configs;
2. LogManager startup: lock every log dir (`.lock`: a second broker on the same data dir is
   refused while the first runs), load every partition, recover unflushed segments after an
   unclean stop;
3. MetadataCache, ReplicaManager, fetch sessions, producer ids;
4. network listeners are bound (so port 0 is resolved before the broker announces itself);
   client requests wait until start-up finishes, except Metadata, answered from the cache
   once the controller's UpdateMetadata (its answer to the registration) has filled it;
5. register `/brokers/ids/<id>` (ephemeral, Kafka's JSON) with the advertised endpoints;
6. KafkaController startup: every broker runs it, the one that creates `/controller` is active;
7. background tasks (retention, flush, checkpoints, ISR expiration), then requests are served.

After a clean shutdown (every log dir holds the clean-shutdown marker, so loading recovers
nothing and takes a bounded time) steps 5 and 6 do not wait for 2 and 3: the broker registers
and its controller runs for election, loads its context and decides while the logs load in
threads (the GIL's switch interval lowered to 1 ms meanwhile, so the loading threads get it back
soon after each file system call); the controller's requests wait for step 3
(``dispatcher.roles_ready``). After an unclean stop the order above holds: no leadership comes
to a broker still recovering its logs (decision 0054).

Shutdown (SIGTERM/SIGINT) reverses it: stop accepting connections, answer the requests already
read (deadline), controller resigns, replica manager completes waiters, LogManager flushes and
writes checkpoints and the clean-shutdown marker, the session closes (the ephemeral registration
goes away), the log dirs are unlocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import importlib
import io
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import structlog

from kafkalite.apis import load_handlers
from kafkalite.apis.authorization import BrokerAuthorizer, guard
from kafkalite.apis.base import BrokerServices
from kafkalite.apis.client_quotas import throttle
from kafkalite.apis.dispatcher import ApiDispatcher
from kafkalite.broker.fetch_session import FetchSessionCache
from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.broker.producer_id_manager import ProducerIdManager
from kafkalite.broker.replica_fetcher import remote_leader_endpoints
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.client.connection import KafkaConnection, request_builder, set_default_security
from kafkalite.config import BrokerConfig, ConfigError, Endpoint
from kafkalite.controller.controller import new_controller
from kafkalite.coord import (
    CoordError,
    SessionClosed,
    SessionExpired,
    SessionState,
    open_store,
)
from kafkalite.coord.renewable import RenewableSession
from kafkalite.group import GroupCoordinator, ReplicaManagerLogWriter
from kafkalite.group.config import from_broker_config as group_configs
from kafkalite.network.quotas import ConnectionQuotas
from kafkalite.network.server import SocketServer, install_uvloop
from kafkalite.observability import (
    RequestStats,
    TopicStats,
    configure_logging,
    gc_freezer,
    install_gc_freezer,
    loop_exception_handler,
    start_loop_lag_monitor,
    start_stall_reporter,
)
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.types import TopicPartition
from kafkalite.security.listeners import inter_broker_client, listener_security, start_security
from kafkalite.security.quotas import QuotaManager
from kafkalite.security.ratelimit import FailedAuthLimiter
from kafkalite.security.scram import CredentialCache
from kafkalite.security.tls import TlsConfigError
from kafkalite.server.config_watch import (
    TopicConfigs,
    load_broker_configs,
    load_quotas,
    watch_broker_configs,
    watch_entity_configs,
)
from kafkalite.server.dynamic_config import (
    DynamicBrokerConfig,
    add_broker_reconfigurables,
    changed_tls_listeners,
)
from kafkalite.server.errors import StartupError, log_dir_problem
from kafkalite.server.registration import (
    SESSION_RETRY_BACKOFF_SECONDS,
    get_or_create_cluster_id,
    register_broker,
    scram_unknown_user_secret,
)
from kafkalite.storage.cleaner import CleanerConfig
from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import StorageError
from kafkalite.storage.log_manager import LogManager
from kafkalite.txn import (
    ReplicaManagerTxnLogWriter,
    TransactionCoordinator,
    TransactionMarkerChannelManager,
    append_txn_markers,
)
from kafkalite.txn.config import from_broker_config as txn_configs
from kafkalite.zk import client as zk_data
from kafkalite.zk import writes as zk_writes
from kafkalite.zk.security import scram_credential

log = structlog.get_logger("kafkalite.server")

# The imports made on worker threads take turns, process-wide. Several brokers of one process
# (kafkalite.testing) start together, and ast.parse on two threads at once can raise
# "SystemError: AST constructor recursion depth mismatch" on CPython 3.11 (the AST objects'
# depth counter is shared); pytest's assertion rewriting parses every module of a package it
# loads as a plugin, kafkalite's included.
_IMPORTS = threading.Lock()


def _import_module(name: str) -> Any:
    with _IMPORTS:
        return importlib.import_module(name)


SHUTDOWN_DRAIN_SECONDS = 10.0
# A shutdown still running after this long logs every task's stack (which step is stuck, and on
# what), and again each period after; it never cuts the shutdown short.
SHUTDOWN_REPORT_SECONDS = 10.0


class KafkaServer:
    """One broker. `await startup()`, then `await shutdown()` (or `run()` until a signal)."""

    def __init__(self, config: BrokerConfig, *, store: Any = None) -> None:
        """``store``: a coordination store to use instead of the one the config names (several
        brokers of one process sharing an embedded store: ``kafkalite.testing.Cluster``)."""
        self.config = config
        self._given_store = store
        self.broker_id = config.broker_id
        load_handlers()
        self.services = BrokerServices(config=config, broker_id=config.broker_id)
        # The broker's counters (Kafka's RequestMetrics and BrokerTopicStats): recorded by the
        # dispatcher and the replica manager, read by the admin API's /metrics.
        self.request_stats = RequestStats()
        self.topic_stats = TopicStats()
        self.dispatcher = ApiDispatcher(self.services, stats=self.request_stats)
        # Metadata is answered from the cache once the controller's UpdateMetadata has filled
        # it (a restarted broker tells clients where the leaders are before its start-up ends,
        # as Kafka's answers from its MetadataCache); before that it waits for the start-up.
        self._metadata_served = asyncio.Event()
        self.dispatcher.served_early[ApiKey.METADATA] = self._metadata_served
        self.socket_server: SocketServer | None = None
        self.store: Any = None
        self.session: Any = None
        self.log_manager: Any = None
        self.replica_manager: Any = None
        self.metadata_cache: Any = None
        self.controller: Any = None
        self.group_coordinator: Any = None
        self.admin_server: Any = None
        self.schema_registry: Any = None  # schema_registry/server.py, when its listener is set
        self.authorizer: Any = None
        self._scram_cache: Any = None  # security/scram.py's CredentialCache, made when first used
        self.quotas: Any = None
        self.topic_configs: Any = None  # config_watch.TopicConfigs, made at start-up
        # Dynamic broker configs (server/dynamic_config.py): self.config and services.config
        # follow its `current`.
        self.dynamic_config = DynamicBrokerConfig(config)
        self.services.extra["dynamic_config"] = self.dynamic_config
        add_broker_reconfigurables(self.dynamic_config, self)
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopping = False
        self._shutdown_phases: dict[str, float] = {}
        self._shutdown_began: float | None = None
        self._replica_manager_stopped = False
        self._skip_controlled_shutdown = False
        self.shutdown_requested = asyncio.Event()

    # ------------------------------------------------------------------ start-up

    async def startup(self) -> None:
        # The cyclic garbage collector is paused until the broker serves: start-up makes the
        # objects of every partition (logs, the controller's context, partitions, metadata),
        # which all live on, and with it running, each time the heap had grown by a quarter a
        # full collection walked all of it again (decision 0054).
        collecting = gc.isenabled()
        if collecting:
            gc.disable()
        try:
            await self._startup()
        finally:
            if collecting:
                gc.enable()
        freezer = gc_freezer()
        if collecting and freezer is not None:
            # `kafkalite serve`'s freezer (decisions 0052, 0056): what start-up made is frozen
            # now, once, rather than walked by a full collection on the loop
            freezer.freeze_now(at="started")

    async def _startup(self) -> None:
        config = self.config
        log.info("starting", broker_id=self.broker_id, log_dirs=config.log_dir_list)
        # event-loop lag for /metrics, and what holds the loop when it stalls (one each per loop)
        start_stall_reporter(start_loop_lag_monitor(), config.loop_stall_report_ms)
        clock = asyncio.get_running_loop().time
        phases: dict[str, float] = {}
        began = clock()

        def phase(name: str) -> None:
            phases[name] = round(clock() - began, 3)

        try:
            listener_security = await self._security_settings()
            if not config.zookeeper_connect:
                try:
                    Path(config.log_dir_list[0]).mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise StartupError(log_dir_problem(config.log_dir_list[0], e)) from None
            try:
                self.store = self._given_store or open_store(
                    config.zookeeper_connect,
                    None if config.zookeeper_connect else config.log_dir_list[0],
                    config.zookeeper_session_timeout_ms,
                    connection_timeout_ms=config.zookeeper_connection_timeout_ms,
                )
                self.session = await RenewableSession(
                    self.store, config.zookeeper_session_timeout_ms
                ).open()
            except CoordError as e:
                raise StartupError(f"coordination store: {e}") from None
            self.services.store = self.session
            self.services.cluster_id = await get_or_create_cluster_id(self.session)
            await load_broker_configs(self.session, self.dynamic_config)
            config = self.config  # the static settings overlaid with the dynamic ones
            phase("store_open_s")
            await self._start_quotas()
            await self._start_authorizer()
            await self._load_topic_configs()
            phase("topic_configs_s")
            # The listener opens before the logs are loaded (Kafka's order: the socket server,
            # then the log manager): ApiVersions is answered at once, controller requests
            # wait for the replica manager, client requests for the end of start-up.
            self.dispatcher.roles_ready.clear()
            self.socket_server = SocketServer(
                config.listener_endpoints,
                self.dispatcher,
                max_request_bytes=config.socket_request_max_bytes,
                max_unauthenticated_bytes=config.sasl_server_max_receive_size,
                connections_max_idle_ms=config.connections_max_idle_ms,
                quotas=ConnectionQuotas.from_config(config),
                security=listener_security,
                credentials=self._scram_credential,
                failed_authentication_delay_ms=config.connection_failed_authentication_delay_ms,
                auth_limiter=FailedAuthLimiter.from_config(config),
                scram_unknown_user_secret=await scram_unknown_user_secret(
                    self.session, listener_security
                ),
            )
            try:
                await self.socket_server.start()
            except OSError as e:  # the port is taken, the address is not this host's...
                raise StartupError(f"listeners: {e.strerror or e}") from None
            phase("listening_s")
            self._new_log_manager()
            self.dynamic_config.reload_tls(
                config, changed_tls_listeners(self.dynamic_config.static, config)
            )
            if self.log_manager.clean_shutdown_marked():
                # After a clean shutdown the logs load in a bounded time (no recovery): the
                # broker registers and its controller runs for election, loads its context
                # and decides while the logs load in threads; the controller's requests wait
                # for the replica manager (dispatcher.roles_ready). See decision 0054. With
                # the default 5 ms switch interval a loading thread back from each file
                # system call waited for the loop's Python to give up the GIL (the loading
                # took 2.3 times as long beside it; 1.7 times at 1 ms).
                switch = sys.getswitchinterval()
                sys.setswitchinterval(min(switch, 0.001))
                loading = asyncio.ensure_future(self._load_logs())
                loading.add_done_callback(lambda _: sys.setswitchinterval(switch))
                try:
                    await self._register_broker()
                    phase("registered_s")
                    controller = asyncio.ensure_future(self._start_controller_only())
                except BaseException:
                    await asyncio.gather(loading, return_exceptions=True)
                    raise
                try:
                    await loading
                    phase("logs_loaded_s")
                    await self._start_roles()
                    self.dispatcher.roles_ready.set()
                finally:
                    if not self.dispatcher.roles_ready.is_set():
                        controller.cancel()
                    await asyncio.gather(controller, return_exceptions=True)
                await controller  # its error, if any
                await self._wait_for_initial_metadata()
            else:
                # Recovery may take long: registered only once the logs are loaded (Kafka's
                # order), so no leadership comes here while its logs are being recovered.
                await self._load_logs()
                phase("logs_loaded_s")
                await self._start_roles()
                self.dispatcher.roles_ready.set()
                await self._register_broker()
                phase("registered_s")
                await self._start_controller()
            phase("controller_metadata_s")
            self._start_background_tasks()
        except BaseException:
            if self.socket_server is not None:
                # The listener opened before the logs were loaded: a failed start closes it.
                with contextlib.suppress(Exception):
                    await self.socket_server.stop_accepting()
            await self._stop_components()
            raise
        self._metadata_served.set()
        self.dispatcher.ready.set()
        await self._start_admin_server()
        await self._start_schema_registry()
        log.info(
            "started",
            broker_id=self.broker_id,
            cluster_id=self.services.cluster_id,
            listeners=[e.connection_string for e in self.bound_endpoints],
            logs=len(self.log_manager.all_logs()) if self.log_manager is not None else 0,
            phases=phases,
        )

    async def _security_settings(self) -> dict[str, Any]:
        """TLS contexts and SASL settings per listener (kafkalite/security), and the
        inter-broker client's, which every connection this broker makes to others uses; a
        bad TLS file or setting stops start-up naming its key."""
        try:
            security = listener_security(self.config)
            set_default_security(inter_broker_client(self.config))
            await start_security(security)  # a JWKS endpoint's first fetch
        except TlsConfigError as e:
            raise StartupError(str(e)) from None
        return security

    async def _start_authorizer(self) -> None:
        """authorizer.class.name set: every ACL is loaded into memory, changes are followed
        (acl-watcher), and every handler is put behind its authorization check."""
        if not self.config.authorizer_class_name:
            return
        self.authorizer = BrokerAuthorizer(
            self.config.super_user_list, self.config.allow_everyone_if_no_acl_found
        )
        await self.authorizer.load(self.session)
        self.services.extra["authorizer"] = self.authorizer
        self.dispatcher.handlers = {k: guard(k, h) for k, h in self.dispatcher.handlers.items()}

    async def _start_quotas(self) -> None:
        """Client quotas (security/quotas.py): loaded from /config/users and /config/clients,
        counted by the Produce and Fetch handlers (apis/client_quotas.py)."""
        self.quotas = QuotaManager(
            self.config.quota_window_num, float(self.config.quota_window_size_seconds)
        )
        self.services.extra["quotas"] = self.quotas
        await self._load_quotas()
        self.dispatcher.handlers = {k: throttle(k, h) for k, h in self.dispatcher.handlers.items()}

    async def _load_quotas(self) -> None:
        await load_quotas(self.session, self.quotas)

    async def _watch_quotas(self) -> None:
        """Quota and SCRAM credential changes of users and clients (server/config_watch.py)."""
        await watch_entity_configs(self.session, self.quotas, lambda: self._scram_cache)

    async def _watch_acls(self) -> None:
        await self.authorizer.watch(self.session)

    async def _scram_credential(self, user: str, mechanism: str) -> Any:
        """From the broker's credential cache, kept fresh by ``_watch_quotas``."""
        if self._scram_cache is None:
            self._scram_cache = CredentialCache(lambda u, m: scram_credential(self.session, u, m))
            self.services.extra["scram_cache"] = self._scram_cache
        return await self._scram_cache.get(user, mechanism)

    async def _start_admin_server(self) -> None:
        """The HTTP admin API on admin.listener (kafkalite/admin/); empty = disabled."""
        if not self.config.admin_listener:
            return
        # aiohttp and the admin app take 0.2-0.5 s to import: in a worker thread, so that the
        # loop serves the first clients meanwhile (the broker is ready before the admin API)
        admin_app = await asyncio.to_thread(_import_module, "kafkalite.admin.app")
        AdminServer = admin_app.AdminServer  # noqa: N806

        self.admin_server = AdminServer(
            self,
            self.config.admin_listener,
            request_stats=self.request_stats,
            topic_stats=self.topic_stats,
        )
        with _logged("admin API start-up"):
            await self.admin_server.start()

    async def _start_schema_registry(self) -> None:
        """The Schema Registry on schema.registry.listeners (kafkalite/schema_registry/; empty
        = none), and its validator in the produce path (apis/produce.py's RecordValidator)."""
        if not self.config.schema_registry_listeners:
            return
        module = await asyncio.to_thread(_import_module, "kafkalite.schema_registry.server")
        # Its start serves through the admin app's start_site: imported here in the worker
        # thread too. Imported by start() on the loop, the admin app (aiohttp routes, pydantic
        # models: 0.2-0.3 s) held the loop right when the first clients after a restart came.
        await asyncio.to_thread(_import_module, "kafkalite.admin.app")
        from kafkalite.schema_registry.validation import SchemaValidator

        self.schema_registry = module.SchemaRegistryServer(
            self, self.config.schema_registry_listeners
        )
        with _logged("schema registry start-up"):
            await self.schema_registry.start()
        if self.schema_registry.registry is not None:
            self.services.extra["record_validator"] = SchemaValidator(
                self.schema_registry.registry, self.topic_configs.for_topic
            )

    @property
    def schema_registry_url(self) -> str | None:
        """``http://host:port`` of the running Schema Registry (its port resolved), else None."""
        registry = self.schema_registry
        return registry.bound_url if registry is not None else None

    @property
    def admin_url(self) -> str | None:
        """``http://host:port`` of the running admin API (its port resolved), else None."""
        server = self.admin_server
        if server is None or server.site is None or server.bound_port is None:
            return None
        host, _ = server.parse_url(server.url)
        return f"http://{host or '127.0.0.1'}:{server.bound_port}"

    @property
    def bound_endpoints(self) -> list[Endpoint]:
        return self.socket_server.bound_endpoints if self.socket_server else []

    @property
    def inter_broker_listener(self) -> str:
        """inter.broker.listener.name, else the first listener's name (Kafka's default is the
        PLAINTEXT listener; here the first one configured)."""
        return self.config.inter_broker_listener

    @property
    def advertised_endpoints(self) -> list[Endpoint]:
        """advertised.listeners, else the bound listeners (0.0.0.0 -> 127.0.0.1)."""
        if self.config.advertised_listeners is not None:
            return self.config.advertised_endpoints
        return [
            Endpoint(
                e.listener_name,
                "127.0.0.1" if e.host in ("", "0.0.0.0", "::") else e.host,
                e.port,
            )
            for e in self.bound_endpoints
        ]

    async def _load_topic_configs(self) -> None:
        """Broker defaults, and each topic's overrides from `/config/topics/<t>`."""
        defaults = LogConfig.from_broker_config(self.config)
        self.topic_configs = TopicConfigs(self.session, defaults)
        await self.topic_configs.load()

    async def _load_logs(self) -> None:
        try:
            await self._start_log_manager()
        except StorageError as e:
            raise StartupError(str(e)) from None

    def _new_log_manager(self) -> None:
        config = self.config
        self.log_manager = LogManager(
            config.log_dir_list,
            self.topic_configs.defaults,
            topic_configs=self.topic_configs.configs,
            retention_check_interval_ms=config.log_retention_check_interval_ms,
            flush_check_interval_ms=config.log_flush_scheduler_interval_ms,
            flush_recovery_offset_checkpoint_interval_ms=(
                config.log_flush_offset_checkpoint_interval_ms
            ),
            high_watermark_checkpoint_interval_ms=(
                config.replica_high_watermark_checkpoint_interval_ms
            ),
            cleaner_config=CleanerConfig.from_broker_config(config),
            num_recovery_threads_per_data_dir=config.num_recovery_threads_per_data_dir,
        )

    async def _start_log_manager(self) -> None:
        if self.log_manager is None:
            self._new_log_manager()
        # In a worker thread: loading thousands of logs must not hold the event loop (the
        # coordination session is already open and must keep answering).
        await asyncio.to_thread(self.log_manager.startup)

    async def _start_roles(self) -> None:
        config = self.config
        self.metadata_cache = MetadataCache(self.broker_id)
        self.metadata_cache.update_listeners.append(self._metadata_arrived)
        self.replica_manager = ReplicaManager(
            self.broker_id,
            self.log_manager,
            config,
            metadata_cache=self.metadata_cache,
            alter_isr=functools.partial(zk_data.update_leader_and_isr, self.session),
            alter_isr_batch=functools.partial(zk_writes.update_leader_and_isr_batch, self.session),
            log_config_for_topic=self.topic_configs.for_topic,
            topic_stats=self.topic_stats,
        )
        self.log_manager.log_dir_failure_listeners.append(self._propagate_log_dir_failure)
        self.log_manager.partition_failure_listeners.append(
            lambda topic, partition: self._propagate_log_dir_failure(f"{topic}-{partition}")
        )
        # Followers pull from their leaders over the inter-broker listener (Kafka's
        # ReplicaFetcherThread); leader addresses come from this broker's MetadataCache.
        self.replica_manager.enable_replica_fetchers(
            remote_leader_endpoints(
                self.metadata_cache,
                self.inter_broker_listener,
                self.broker_id,
                request_timeout=config.replica_socket_timeout_ms / 1000,
            ),
            config,
        )
        self.services.log_manager = self.log_manager
        self.services.metadata_cache = self.metadata_cache
        self.services.replica_manager = self.replica_manager
        self.services.fetch_sessions = FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots,
            park=self.replica_manager.park_idle_partition,
            forget_parked=self.replica_manager.forget_parked_partition,
        )
        self.services.producer_id_manager = ProducerIdManager(self.broker_id, self.session)
        self._start_group_coordinator()
        self._start_txn_coordinator()
        self._start_share_groups()

    def _metadata_arrived(self) -> None:
        """An UpdateMetadata was applied: once it names this broker alive (the controller's
        answer to its registration, which carries every partition), Metadata is served."""
        if self.metadata_cache.has_alive_broker(self.broker_id):
            self._metadata_served.set()

    def _start_group_coordinator(self) -> None:
        """The consumer-group coordinator over the ReplicaManager; it owns the groups of the
        ``__consumer_offsets`` partitions led here (LeaderAndIsr loads them)."""
        group_config, offset_config = group_configs(self.config)
        self.group_coordinator = GroupCoordinator(
            self.broker_id,
            ReplicaManagerLogWriter(self.replica_manager, offset_config),
            group_config,
            offset_config,
        )
        self.group_coordinator.startup()
        self.services.group_coordinator = self.group_coordinator

    def _start_txn_coordinator(self) -> None:
        """The transaction coordinator (kafkalite/txn/): owns the transactional ids of the
        ``__transaction_state`` partitions led here; sends markers to partition leaders (this
        broker's own directly) over the inter-broker listener."""
        txn_config = txn_configs(self.config)
        services = self.services

        def write_locally(markers):
            groups = services.group_coordinator
            return append_txn_markers(
                self.replica_manager,
                markers,
                txn_config.request_timeout_ms,
                groups.complete_transaction if groups is not None else None,
            )

        self.txn_markers = TransactionMarkerChannelManager(
            self.broker_id,
            self.metadata_cache,
            self.inter_broker_listener,
            write_locally,
            txn_config.request_timeout_ms,
        )
        self.txn_coordinator = TransactionCoordinator(
            self.broker_id,
            ReplicaManagerTxnLogWriter(self.replica_manager, txn_config),
            self.txn_markers,
            services.producer_id_manager.generate_producer_id,
            txn_config,
        )
        self.txn_coordinator.startup()
        services.txn_coordinator = self.txn_coordinator

    def _start_share_groups(self) -> None:
        """Share groups (kafkalite/share/): the share coordinator on ``__share_group_state``
        (LeaderAndIsr loads its partitions) and the share-group service the handlers use."""
        from kafkalite.share.service import start_share_groups

        start_share_groups(self.services, self.config, self.inter_broker_listener)

    async def _stop_group_coordinator(self) -> None:
        share = self.services.extra.get("share_groups")
        if share is not None:
            with _logged("share groups shutdown"):
                await share.shutdown()
        txn = getattr(self, "txn_coordinator", None)
        if txn is not None and txn.is_active:
            with _logged("transaction coordinator shutdown"):
                await txn.shutdown()
                await self.txn_markers.close()
        if self.group_coordinator is not None and self.group_coordinator.is_active:
            with _logged("group coordinator shutdown"):
                await self.group_coordinator.shutdown()

    def _propagate_log_dir_failure(self, log_dir: str) -> None:
        """After the replica manager took the directory's partitions offline: tell the
        controller, which moves their leadership elsewhere (Kafka's propagateLogDirEvent)."""

        async def propagate() -> None:
            # Retried until it is written: without it the controller never moves leadership off
            # the failed directory (a renewed session is picked up by the next attempt).
            while not self._stopping:
                try:
                    await zk_data.propagate_log_dir_event(self.session, self.broker_id)
                    return
                except CoordError as e:
                    log.warning(
                        "log dir failure not propagated yet", log_dir=log_dir, error=repr(e)
                    )
                    await asyncio.sleep(SESSION_RETRY_BACKOFF_SECONDS)

        task = asyncio.get_running_loop().create_task(propagate(), name="log-dir-event")
        self._tasks.append(task)

    async def _register_broker(self, renewed: bool = False) -> None:
        """``/brokers/ids/<id>`` with the advertised endpoints (server/registration.py); the
        node's czxid is the broker epoch the controller fences this broker's requests with."""
        self.services.extra["broker_epoch"] = await register_broker(
            self.session,
            self.config,
            self.broker_id,
            self.advertised_endpoints,
            renewed=renewed,
        )

    async def _start_controller(self) -> None:
        await self._start_controller_only()
        await self._wait_for_initial_metadata()

    async def _start_controller_only(self) -> None:
        self.controller = new_controller(self.broker_id, self.session, self.config)
        self.services.controller = self.controller
        await _maybe_await(self.controller.startup())

    async def _wait_for_initial_metadata(self, timeout: float = 10.0) -> None:
        """When this broker won the election, wait (bounded) until its own MetadataCache holds
        every topic the controller knows, so the first clients after a restart see them.
        Another broker's controller sends UpdateMetadata when it notices this broker; clients
        retry until then, as with Kafka."""
        context = getattr(self.controller, "context", None)
        if context is None:
            return
        wanted = set(getattr(context, "all_topics", ()))
        started = asyncio.get_running_loop().time()
        deadline = started + timeout
        while True:
            cache = self.metadata_cache
            if cache.get_controller_id() is not None and wanted <= cache.get_all_topics():
                log.info(
                    "controller metadata arrived",
                    topics=len(wanted),
                    waited_ms=round((asyncio.get_running_loop().time() - started) * 1000),
                )
                return
            if asyncio.get_running_loop().time() > deadline:
                log.warning("serving before the controller's metadata arrived")
                return
            await asyncio.sleep(0.01)

    def _start_background_tasks(self) -> None:
        for name, factory in (
            ("log-scheduler", self.log_manager.run_scheduler),
            ("isr-expiration", self.replica_manager.run_isr_expiration),
            ("producer-state-maintenance", self.replica_manager.run_producer_state_maintenance),
            ("topic-config-watcher", self._watch_topic_configs),
            ("session-renewal", self._renew_expired_sessions),
            ("acl-watcher", self._watch_acls if self.authorizer is not None else None),
            ("quota-watcher", self._watch_quotas),
            ("broker-config-watcher", self._watch_broker_configs),
        ):
            if factory is not None:
                self._tasks.append(asyncio.create_task(factory(), name=name))

    async def _renew_expired_sessions(self) -> None:
        """Kafka's session expiry handling: when the coordination session expires (the
        ephemeral registration is gone and the other brokers see this one as dead), open a
        new one, register again, run for controller again (Kafka's RegisterBrokerAndReelect)
        and restart the config watcher. The broker keeps serving meanwhile; its roles see
        SessionExpired from the store until the new session is in place."""
        while not self._stopping:
            if await self.session.wait_for_expiry() is SessionState.CLOSED:
                return
            if self._stopping:
                return
            log.warning("coordination session expired; opening a new one")
            try:
                await self.session.renew()
            except SessionClosed:
                return
            if await self._register_again():
                log.info("coordination session renewed", session_renewals=self.session.renewals)

    async def _register_again(self) -> bool:
        """On a renewed session: register, run for controller, restart the config watcher.
        Store errors are retried (ZooKeeper may still be settling); False when the new session
        expired meanwhile (the caller renews again) or the broker is stopping."""
        while not self._stopping:
            try:
                await self._register_broker(renewed=True)
                if self._stopping:
                    return False
                if self.controller is not None:
                    await self.controller.reinitialize(self.session)
                self._restart_task("topic-config-watcher", self._watch_topic_configs)
                await self._load_quotas()
                self._restart_task("quota-watcher", self._watch_quotas)
                self._restart_task("broker-config-watcher", self._watch_broker_configs)
                if self.authorizer is not None:
                    await self.authorizer.load(self.session)
                    self._restart_task("acl-watcher", self._watch_acls)
                return True
            except (SessionExpired, SessionClosed):
                return False
            except CoordError as e:
                log.warning("registering again failed; retrying", error=repr(e))
                await asyncio.sleep(SESSION_RETRY_BACKOFF_SECONDS)
        return False

    def _restart_task(self, name: str, factory: Any) -> None:
        for task in [t for t in self._tasks if t.get_name() == name]:
            task.cancel()
            self._tasks.remove(task)
        self._tasks.append(asyncio.create_task(factory(), name=name))

    async def _watch_broker_configs(self) -> None:
        """Dynamic broker config changes (server/config_watch.py)."""
        await watch_broker_configs(self.session, self.dynamic_config)

    async def _watch_topic_configs(self) -> None:
        """Topic config changes reach the LogManager (server/config_watch.py)."""
        await self.topic_configs.watch(self.log_manager.update_topic_config)

    # ------------------------------------------------------------------ shutdown

    async def shutdown(self, *, controlled: bool = True) -> None:
        """``controlled=False`` skips the controlled shutdown (leaderships are not moved
        first), as a crashed broker would."""
        if self._stopping:
            return
        self._stopping = True
        self._skip_controlled_shutdown = not controlled
        log.info("shutting down", broker_id=self.broker_id)
        watchdog = asyncio.get_running_loop().create_task(_report_slow_shutdown())
        self._shutdown_phases = {}
        self._shutdown_began = asyncio.get_running_loop().time()
        try:
            await self._shutdown_steps()
        finally:
            watchdog.cancel()
        # Seconds from the start of the shutdown at the end of each step (what holds an exit).
        log.info("shut down", broker_id=self.broker_id, phases=self._shutdown_phases)

    def _shutdown_phase(self, name: str) -> None:
        began = self._shutdown_began
        if began is not None:
            self._shutdown_phases[name] = round(asyncio.get_running_loop().time() - began, 3)

    async def _shutdown_steps(self) -> None:
        if self.admin_server is not None:
            with _logged("admin API shutdown"):
                await self.admin_server.stop()
        if self.schema_registry is not None:
            self.services.extra.pop("record_validator", None)
            with _logged("schema registry shutdown"):
                await self.schema_registry.stop()
        if self.socket_server is not None and self.controller is not None:
            await self._controlled_shutdown()
            self._shutdown_phase("controlled_shutdown_s")
        if self.socket_server is not None:
            # No new connections and no new requests; the ones already read are answered:
            # waiting produces and long-poll fetches are completed now by the replica manager.
            await self.socket_server.stop_accepting()
            self.socket_server.stop_reading()
            await self._stop_group_coordinator()
            self._shutdown_phase("group_coordinator_s")
            await self._stop_replica_manager()
            self._shutdown_phase("replica_manager_s")
            drained = await self.socket_server.drain(SHUTDOWN_DRAIN_SECONDS)
            if not drained:
                log.warning("in-flight requests still pending at shutdown")
            self._shutdown_phase("drained_s")
        await self._stop_components()

    async def _stop_replica_manager(self) -> None:
        if self.replica_manager is not None and not self._replica_manager_stopped:
            self._replica_manager_stopped = True
            with _logged("replica manager shutdown"):
                await _maybe_await(self.replica_manager.shutdown())

    async def _controlled_shutdown(self) -> None:
        """Kafka's KafkaServer.controlledShutdown: ask the controller to move this broker's
        leaderships away before it stops serving (requests keep being served meanwhile: the
        controller's LeaderAndIsr/StopReplica come to this broker). Up to
        controlled.shutdown.max.retries attempts, controlled.shutdown.retry.backoff.ms apart;
        then the shutdown goes on regardless, as in Kafka."""
        config = self.config
        if not config.controlled_shutdown_enable or self._skip_controlled_shutdown:
            return
        epoch = self.services.extra.get("broker_epoch", -1)
        if self.replica_manager is not None:
            self.replica_manager.in_controlled_shutdown = True
        for attempt in range(1, config.controlled_shutdown_max_retries + 1):
            try:
                remaining = await self._send_controlled_shutdown(epoch)
            except Exception as e:  # controller unreachable, moved, or refused: retry
                log.warning("controlled shutdown attempt failed", attempt=attempt, error=str(e))
            else:
                if not remaining:
                    log.info("controlled shutdown succeeded", attempt=attempt)
                    return
                log.info(
                    "controlled shutdown: partitions still led here",
                    attempt=attempt,
                    remaining=[str(tp) for tp in remaining][:20],
                )
            if attempt < config.controlled_shutdown_max_retries:
                await asyncio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
        log.warning("controlled shutdown did not complete; shutting down anyway")

    async def _send_controlled_shutdown(self, broker_epoch: int) -> list[Any]:
        """Send ControlledShutdown to the active controller; the partitions still led here."""
        if self.controller is not None and self.controller.is_active:
            return list(await self.controller.controlled_shutdown(self.broker_id, broker_epoch))
        controller_id = self.metadata_cache.get_controller_id()
        broker = (
            self.metadata_cache.get_alive_broker(controller_id)
            if controller_id is not None
            else None
        )
        listener = self.inter_broker_listener
        endpoint = broker.endpoint_for(listener) if broker is not None else None
        if endpoint is None:
            raise KafkaError("no controller known", error_code=ErrorCode.NOT_CONTROLLER)
        conn = KafkaConnection(
            endpoint.host,
            endpoint.port,
            client_id=f"broker-{self.broker_id}-controlled-shutdown",
            request_timeout=self.config.controller_socket_timeout_ms / 1000,
        )
        try:
            await conn.connect()
            response = await conn.send(
                ApiKey.CONTROLLED_SHUTDOWN,
                request_builder(
                    ApiKey.CONTROLLED_SHUTDOWN, broker_id=self.broker_id, broker_epoch=broker_epoch
                ),
            )
        finally:
            await conn.close()
        if int(response.error_code) != ErrorCode.NONE:
            raise KafkaError(error_code=ErrorCode.of(int(response.error_code)))
        return [
            TopicPartition(p.topic_name, p.partition_index) for p in response.remaining_partitions
        ]

    async def _stop_components(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self.controller is not None:
            with _logged("controller shutdown"):
                await _maybe_await(self.controller.shutdown())
            self._shutdown_phase("controller_s")
        await self._stop_group_coordinator()
        await self._stop_replica_manager()
        if self.socket_server is not None:
            self.socket_server.close_connections()
        if self.log_manager is not None:
            with _logged("log manager shutdown"):
                await self.log_manager.shutdown_async()
            self._shutdown_phase("logs_closed_s")
        if self.session is not None:
            with _logged("coordination session close"):
                await self.session.close()
        if self.store is not None:
            with _logged("coordination store close"):
                await self.store.close()
        self._shutdown_phase("store_closed_s")

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Start, serve until SIGTERM/SIGINT, shut down cleanly."""
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(loop_exception_handler)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.shutdown_requested.set)
        try:
            await self.startup()
            await self.shutdown_requested.wait()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            await self.shutdown()


async def _report_slow_shutdown() -> None:
    """Log the stack of every pending task each SHUTDOWN_REPORT_SECONDS until cancelled."""
    me = asyncio.current_task()
    while True:
        await asyncio.sleep(SHUTDOWN_REPORT_SECONDS)
        stacks = []
        for task in asyncio.all_tasks():
            if task is me or task.done():
                continue
            out = io.StringIO()
            task.print_stack(limit=12, file=out)
            stacks.append(out.getvalue())
        log.warning("shutdown still in progress", pending_tasks=len(stacks), stacks=stacks)


async def _maybe_await(value: Any) -> Any:
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        return await value
    return value


@contextlib.contextmanager
def _logged(what: str):
    try:
        yield
    except Exception:
        log.exception(f"{what} failed")


def serve(config: BrokerConfig, *, exit_when_stopped: bool = False) -> int:
    """Run a broker in this process until a signal; the exit status.

    ``exit_when_stopped`` (the ``kafkalite serve`` command): after a clean shutdown the
    process exits at once (``os._exit``, output flushed) instead of returning: every log is
    closed and synced, every connection and the session closed, and the interpreter's
    teardown of the broker's objects (about a second with 10,000 partitions) would only
    delay the exit an operator or a supervisor waits for."""
    configure_logging(config.log_level)
    load_handlers()
    install_uvloop()
    install_gc_freezer(config.gc_freeze_min_objects)  # process-wide: this process's broker
    server = KafkaServer(config)
    try:
        asyncio.run(server.run())
    except (StartupError, ConfigError) as e:  # ConfigError: a host name that does not resolve
        log.error("start-up failed", error=str(e))
        return 1
    except Exception:
        log.exception("broker failed")  # one JSON line with the traceback, not plain text
        return 1
    if exit_when_stopped and sys.getprofile() is None and sys.gettrace() is None:
        # (not under a profiler or a coverage tracer: they write their data at exit)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
