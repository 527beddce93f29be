"""KafkaController: election, store watches and the event loop around ``ControllerCore``.

Every broker runs one, as every Kafka broker does, and one of them at a time is the active
controller. The I/O shell does only this:

1. **Election** (``_elect``): whoever creates the ephemeral ``/controller`` while bumping
   ``/controller_epoch`` in the same multi is the controller with that epoch; the others watch
   ``/controller`` and try again when it disappears.
2. **Failover** (``_on_controller_failover``): register the watches, load the
   ``ControllerContext`` from the store (brokers with epochs, topics, topic ids, assignments,
   leadership, unclean-election settings), open a channel to every live broker, and apply
   ``ControllerCore.on_controller_failover``.
3. **Events**: watches (``/brokers/ids``, ``/brokers/topics``, ``/brokers/topics/<t>``,
   ``/admin/delete_topics``, ``/isr_change_notification``, ``/admin/reassign_partitions``,
   ``/admin/preferred_replica_election``, ``/config/changes``), broker responses, API calls
   (controlled shutdown, leader elections, partition reassignments) and the auto leader
   rebalance timer only enqueue events; the single event task (``ControllerEventManager``)
   reads what the event needs from the store, asks ``ControllerCore`` for a decision and
   applies it (``_apply``).
4. **Applying a decision**: the store writes, fenced by the controller epoch's version (in one
   multi; partition state writes alone per partition, in chunked multis), THEN the requests to
   the brokers' channels, coalesced into one LeaderAndIsr and one UpdateMetadata per broker.
   Persist before announce: a broker never hears of a leader or ISR the store does not hold
   (a partition whose write failed is left out of the requests). If the epoch check fails
   another broker is controller: resign. Broker changes, elections and controlled shutdowns
   decide from the CACHED leadership, not from a fresh read: only the controller writes
   leaders, its own writes update the cache, and the leaders' ISR changes reach it through
   their notifications. A cache that is stale (an ISR change in flight) cannot produce a wrong
   leader: every partition state write is a compare-and-set on the cached version, so it
   fails; the failed partitions alone are re-read and decided again (up to ``MAX_RELOADS``
   times, then the context is reloaded from the store and the failover decisions recomputed,
   which is always safe). A refusal decided from the cache (no eligible leader in the cached
   ISR) is re-read and decided again too. Work on thousands of partitions yields to the event
   loop between slices.
5. **Resignation** (``/controller`` moved, session expired, shutdown): stop the watches,
   channels and timers and forget the context.

Nothing depends on the number of brokers: a single broker elects itself and sends LeaderAndIsr
and UpdateMetadata to itself over its own listener, like to any other broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from kafkalite.coord.base import CoordSession, SessionState
from kafkalite.coord.errors import (
    BadVersion,
    ConnectionLoss,
    CoordError,
    NodeExists,
    NoNode,
    SessionClosed,
    SessionExpired,
)
from kafkalite.protocol.errors import ErrorCode, NotControllerError, UnknownServerError
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk import client as zk_data
from kafkalite.zk import data as paths
from kafkalite.zk.types import Broker, ReplicaAssignment
from kafkalite.zk.writes import (
    DeleteIsrChangeNotifications,
    DeleteLeaderElectionRequest,
    DeleteLogDirEventNotifications,
    DeleteTopic,
    SetTopicAssignment,
)

from .broker_request_batch import (
    LeaderAndIsrRequestData,
    StopReplicaRequestData,
    announced_versions,
    coalesce_requests,
    without_announced,
    without_partitions,
)
from .channel_manager import (
    ControllerChannelManager,
    KafkaConnectionTransport,
    TransportFactory,
    leader_and_isr_errors,
    response_errors,
)
from .context import ControllerContext
from .controller_core import ControllerCore
from .event_manager import SLOW_EVENT_SECONDS, ControllerEventManager
from .partition_state_machine import NEW_PARTITION, OFFLINE_PARTITION
from .results import ControllerResult
from .topic_watch import TopicNodeWatcher

log = structlog.get_logger("kafkalite.controller")

MAX_RELOADS = 3
"""Consecutive failed writes after which the controller gives up its role (re-election)."""
MAX_EVENT_RETRIES = 5
"""Times an event is re-run after the store connection dropped and came back."""
PARTITIONS_PER_SLICE = 500
"""Partitions decided between two yields to the event loop when an event creates thousands
(the decisions of one slice take a few tens of milliseconds)."""


# -- events ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Startup:
    pass


@dataclass(frozen=True)
class ControllerChange:
    """``/controller`` changed: maybe another broker won."""


@dataclass(frozen=True)
class Reelect:
    """``/controller`` disappeared: resign if needed and run for election."""


@dataclass(frozen=True)
class Expire:
    """The session expired: the ephemeral ``/controller`` is gone with it."""


@dataclass(frozen=True)
class Shutdown:
    pass


@dataclass(frozen=True)
class BrokerChange:
    pass


@dataclass(frozen=True)
class TopicChange:
    pass


@dataclass(frozen=True)
class PartitionModifications:
    topic: str
    data: bytes | None = field(default=None, compare=False)
    """The ``/brokers/topics/<t>`` content the watch delivered (None: read it). Each new topic's
    watch delivers the node once when it starts: deciding from that content spares one store
    round trip per topic, which a CreateTopics of a hundred topics paid in turn while the
    other events waited."""


@dataclass(frozen=True)
class TopicDeletion:
    pass


@dataclass(frozen=True)
class IsrChangeNotification:
    pass


@dataclass(frozen=True)
class LogDirEventNotification:
    pass


@dataclass(frozen=True)
class ControlledShutdown:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class LeaderAndIsrResponseReceived:
    broker_id: int
    partition_errors: Mapping[TopicPartition, int] = field(hash=False)


@dataclass(frozen=True)
class TopicDeletionStopReplicaResponseReceived:
    broker_id: int
    error_code: int
    partition_errors: dict[TopicPartition, int] = field(hash=False)


@dataclass(frozen=True)
class ZkPartitionReassignment:
    """``/admin/reassign_partitions`` was created or changed."""


@dataclass(frozen=True)
class ZkLeaderElectionRequest:
    """``/admin/preferred_replica_election`` or ``/admin/unclean_leader_election`` was created."""

    path: str


@dataclass(frozen=True)
class UncleanLeaderElection:
    partitions: tuple[TopicPartition, ...] | None = None
    """None: every partition."""


_NOT_LOADED = object()


@dataclass(frozen=True)
class TopicConfigChange:
    """A ``/config/changes`` notification: topic overrides changed (unclean election may now
    be allowed for some topic). ``notifications``: the node's children as the watch read them
    (sorted; None while it is absent)."""

    notifications: tuple[str, ...] | None = None


@dataclass(frozen=True)
class AutoPreferredReplicaLeaderElection:
    pass


@dataclass(frozen=True)
class PreferredReplicaLeaderElection:
    partitions: tuple[TopicPartition, ...] | None = None
    """None: every partition."""


@dataclass(frozen=True)
class ApiPartitionReassignment:
    """AlterPartitionReassignments: partition -> target replicas, or None to cancel."""

    reassignments: dict[TopicPartition, tuple[int, ...] | None] = field(hash=False)


@dataclass(frozen=True)
class ListPartitionReassignments:
    partitions: tuple[TopicPartition, ...] | None = None
    """None: every partition being reassigned."""


@dataclass(frozen=True)
class ElectionOutcome:
    """One partition's answer to an ElectLeaders request."""

    error_code: ErrorCode
    leader: int = -1
    """The elected leader when ``error_code`` is NONE."""


# -- the controller -------------------------------------------------------------------------------


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel ``tasks`` and wait for them to end. ``asyncio.wait`` rather than ``await task``:
    the caller's own cancellation propagates instead of being taken for the task's."""
    pending = [t for t in tasks if t is not None]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)


def _setting(config: Any, name: str, default: Any) -> Any:
    return getattr(config, name, default) if config is not None else default


class KafkaController:
    """See the module docstring. Public: ``startup``, ``shutdown``, ``reinitialize``,
    ``is_active``, ``active_controller_id``, ``epoch``, ``context``, ``controlled_shutdown``,
    ``elect_leaders``, ``elect_preferred_leaders``, ``elect_unclean_leaders``,
    ``alter_partition_reassignments``, ``list_partition_reassignments``."""

    def __init__(
        self,
        broker_id: int,
        session: CoordSession,
        config: Any = None,
        *,
        transport_factory: TransportFactory | None = None,
        retry_backoff: float = 0.1,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.broker_id = broker_id
        self.session = session
        self.config = config
        self.delete_topic_enable: bool = _setting(config, "delete_topic_enable", True)
        self.unclean_leader_election_enable: bool = _setting(
            config, "unclean_leader_election_enable", False
        )
        self.auto_leader_rebalance_enable: bool = _setting(
            config, "auto_leader_rebalance_enable", True
        )
        self.leader_imbalance_check_interval: float = float(
            _setting(config, "leader_imbalance_check_interval_seconds", 300)
        )
        self.leader_imbalance_per_broker_percentage: int = _setting(
            config, "leader_imbalance_per_broker_percentage", 10
        )
        self.listener_name: str | None = _setting(config, "inter_broker_listener", None)
        request_timeout = _setting(config, "controller_socket_timeout_ms", 30000) / 1000
        self.transport_factory: TransportFactory = transport_factory or (
            lambda broker: KafkaConnectionTransport(
                broker,
                listener_name=self.listener_name,
                client_id=f"controller-{broker_id}",
                request_timeout=request_timeout,
            )
        )
        self.retry_backoff = retry_backoff
        self._sleep = sleep
        self.controlled_shutdown_propagation_timeout = min(10.0, request_timeout / 2)

        self.active_controller_id = -1
        self.core: ControllerCore | None = None
        self.channel_manager: ControllerChannelManager | None = None
        self.event_manager = ControllerEventManager(
            self.process, name=f"controller-{broker_id}-event-thread"
        )
        self._controller_watch: asyncio.Task[None] | None = None
        self._session_watch: asyncio.Task[None] | None = None
        self._watches: dict[str, asyncio.Task[None]] = {}
        self._topic_watcher: TopicNodeWatcher | None = None
        """Every topic's node, for partitions added (one per failover, closed at resignation)."""
        self._config_notifications_at_load: object = _NOT_LOADED
        """``/config/changes``' children as the last failover read them, before the configs."""
        self._rebalance_task: asyncio.Task[None] | None = None
        self._reloads = 0
        self._started = False
        self._deliveries: list[asyncio.Future[Any]] | None = None
        """While a controlled shutdown is decided: the futures of the requests ``_apply``
        sent in its first stage (the leadership moves; see ``ControllerChannelManager.send_request``)."""
        self._phases: dict[str, float] = {}
        self._marks: list[tuple[str, float, float, float]] = []

    # -- public ---------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self.core is not None

    @property
    def epoch(self) -> int:
        return self.core.ctx.epoch if self.core is not None else -1

    @property
    def context(self) -> ControllerContext | None:
        return self.core.ctx if self.core is not None else None

    async def startup(self) -> None:
        """Start the event task, run for election (awaited), and watch ``/controller``."""
        if self._started:
            return
        self._started = True
        self.event_manager.start()
        # Fire-and-forget then wait: a failed election is logged (and retried on the next
        # /controller change) instead of failing the broker's start-up.
        self.event_manager.put(Startup())
        await self.event_manager.wait_idle()
        self._controller_watch = asyncio.get_running_loop().create_task(
            self._watch_controller(), name=f"controller-{self.broker_id}-watch"
        )
        self._session_watch = asyncio.get_running_loop().create_task(
            self._watch_session(), name=f"controller-{self.broker_id}-session"
        )

    async def reinitialize(self, session: CoordSession) -> None:
        """The owner opened a new session after the old one expired (Kafka's
        ``ZooKeeperClient.reinitialize``): drop everything of the old session and run for
        election again on the new one."""
        await cancel_and_wait([self._controller_watch, self._session_watch])
        if self.event_manager.is_running:
            self.event_manager.clear_and_put(Expire())
            await self.event_manager.wait_idle()
        self.session = session
        self._started = False
        await self.startup()

    async def shutdown(self) -> None:
        """Resign (deleting ``/controller`` when it is ours) and stop everything."""
        if not self._started:
            return
        self._started = False
        await cancel_and_wait([self._controller_watch, self._session_watch])
        self._controller_watch = self._session_watch = None
        if self.event_manager.is_running:
            with contextlib.suppress(Exception):
                await self.event_manager.put_and_wait(Shutdown())
        await self.event_manager.close()

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int = -1
    ) -> list[TopicPartition]:
        """Move leadership off ``broker_id``; returns the partitions it still leads (the broker
        retries until none remain). Raises ``NotControllerError`` when not the controller,
        ``BrokerNotAvailableError`` / STALE_BROKER_EPOCH errors from the core."""
        if not self.is_active:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        remaining, deliveries = await self.event_manager.put_and_wait(
            ControlledShutdown(broker_id, broker_epoch)
        )
        # Answer once the brokers know the new leaders (bounded): the stopping broker exits
        # on this answer, and clients asking any other broker must not find its leaderships
        # (nor lose them to a resigning controller whose queued requests die with it). Only
        # the leadership moves' requests are waited for, not the ISR shrinks' that follow
        # them: those are in the store already, and a new controller sends them at its
        # failover (Kafka's controller waits for neither).
        if deliveries:
            await asyncio.wait(deliveries, timeout=self.controlled_shutdown_propagation_timeout)
        return remaining

    async def elect_preferred_leaders(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, ErrorCode]:
        """Move leadership back to the preferred replicas (all partitions when None); the
        ElectLeaders PREFERRED answer per partition (see ``ControllerCore.elect_leaders``)."""
        outcomes = await self.elect_leaders(partitions, unclean=False)
        return {tp: outcome.error_code for tp, outcome in outcomes.items()}

    async def elect_unclean_leaders(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, ErrorCode]:
        """Give leaderless partitions a leader even outside the ISR; the ElectLeaders UNCLEAN
        answer per partition (see ``ControllerCore.elect_leaders``)."""
        outcomes = await self.elect_leaders(partitions, unclean=True)
        return {tp: outcome.error_code for tp, outcome in outcomes.items()}

    async def elect_leaders(
        self, partitions: Iterable[TopicPartition] | None = None, *, unclean: bool = False
    ) -> dict[TopicPartition, ElectionOutcome]:
        """Kafka's ``KafkaController.electLeaders`` (the ElectLeaders API): per partition the
        error code and, when NONE, the leader the controller elected (the API handler waits for
        its metadata to show it). Raises ``NotControllerError`` when not the controller."""
        if not self.is_active:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        chosen = tuple(partitions) if partitions is not None else None
        event = UncleanLeaderElection(chosen) if unclean else PreferredReplicaLeaderElection(chosen)
        outcomes = await self.event_manager.put_and_wait(event)
        if outcomes is None:  # the session ended while the event ran: no longer controller
            raise NotControllerError(f"broker {self.broker_id} is no longer the controller")
        return outcomes

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Iterable[int] | None]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """Kafka's ``KafkaController.alterPartitionReassignments``: start, replace (a target
        list) or cancel (None) reassignments; per partition the error code and message (see
        ``ControllerCore.process_api_partition_reassignment``). Raises ``NotControllerError``
        when not the controller."""
        if not self.is_active:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        event = ApiPartitionReassignment(
            {tp: (tuple(r) if r is not None else None) for tp, r in reassignments.items()}
        )
        answers = await self.event_manager.put_and_wait(event)
        if answers is None:
            raise NotControllerError(f"broker {self.broker_id} is no longer the controller")
        return answers

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """Kafka's ``KafkaController.listPartitionReassignments``: the assignments (replicas,
        adding, removing) of the given partitions (None: all) that are being reassigned.
        Raises ``NotControllerError`` when not the controller."""
        if not self.is_active:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        chosen = tuple(partitions) if partitions is not None else None
        answer = await self.event_manager.put_and_wait(ListPartitionReassignments(chosen))
        if answer is None:
            raise NotControllerError(f"broker {self.broker_id} is no longer the controller")
        return answer

    # -- event processing -----------------------------------------------------------------------

    @contextlib.contextmanager
    def _phase(self, name: str) -> Any:
        """Time one phase of the event in progress (store reads, decision, writes, sends): an
        event slower than ``SLOW_EVENT_SECONDS`` is logged with its phases, so a slow cluster
        shows which of them holds the controller. The end of each phase is also stamped on the
        event's timeline (``time.monotonic``, the clock of every process on the host, so a
        benchmark lines the controller's phases up with what its clients saw)."""
        started = time.monotonic()
        try:
            yield
        finally:
            ended = time.monotonic()
            self._phases[name] = self._phases.get(name, 0.0) + ended - started
            self._marks.append((name, ended, time.thread_time(), time.process_time()))

    async def process(self, event: Any) -> Any:
        self._phases = {}
        self._marks = []
        started = time.monotonic()
        cpu_started = time.thread_time()
        process_started = time.process_time()
        try:
            return await self._process_with_retries(event)
        finally:
            ended = time.monotonic()
            took = ended - started
            if took > SLOW_EVENT_SECONDS and self._phases:
                # cpu_s: this thread's CPU meanwhile (the event's own Python and whatever else
                # ran on the controller's loop); total_s less cpu_s is waiting: for the store,
                # a broker, or the interpreter held by another thread of the process.
                log.info(
                    "controller event phases",
                    event_type=type(event).__name__,
                    total_s=round(took, 3),
                    cpu_s=round(time.thread_time() - cpu_started, 3),
                    started_at=round(started, 4),
                    ended_at=round(ended, 4),
                    # [phase, its end, this thread's CPU until then, the process's CPU (every
                    # thread) until then], from the event's start: a phase whose wall time
                    # the process's CPU fills while this thread's does not waited for the
                    # interpreter held by another thread of the process
                    marks=[
                        [
                            name,
                            round(at - started, 4),
                            round(cpu - cpu_started, 4),
                            round(process - process_started, 4),
                        ]
                        for name, at, cpu, process in self._marks
                    ],
                    **{f"{k}_s": round(v, 3) for k, v in self._phases.items()},
                )

    async def _process_with_retries(self, event: Any) -> Any:
        try:
            for attempt in range(MAX_EVENT_RETRIES + 1):
                try:
                    return await self._process(event)
                except ConnectionLoss as error:
                    # Reads failed (writes handle it in _apply): the event re-reads what it
                    # needs, so it is simply run again once the session is reconnected.
                    if attempt == MAX_EVENT_RETRIES:
                        raise
                    log.warning(
                        "store connection lost, event retried",
                        event_type=type(event).__name__,
                        error=repr(error),
                    )
                    await self._wait_for_reconnect()
        except (SessionExpired, SessionClosed):
            # The session is gone and the ephemeral /controller with it: whatever this event
            # wanted, this broker is no longer the controller.
            self.active_controller_id = -1
            await self._on_controller_resignation()
            if isinstance(event, ControlledShutdown):
                raise NotControllerError(f"broker {self.broker_id} lost its session") from None
            return None

    async def _wait_for_reconnect(self) -> None:
        state = await self.session.wait_for_state(SessionState.CONNECTED)
        if state is SessionState.EXPIRED:
            raise SessionExpired(f"session 0x{self.session.session_id:x} expired")
        if state is not SessionState.CONNECTED:
            raise SessionClosed(f"session 0x{self.session.session_id:x} closed")

    async def _process(self, event: Any) -> Any:
        match event:
            case Startup():
                await self._elect()
            case ControllerChange():
                await self._maybe_resign()
            case Reelect():
                await self._maybe_resign()
                await self._elect()
            case Expire():
                self.active_controller_id = -1
                await self._on_controller_resignation()
            case Shutdown():
                await self._shutdown_as_controller()
            case ControlledShutdown(broker_id, broker_epoch):
                if self.core is None:
                    raise NotControllerError(f"broker {self.broker_id} is not the controller")
                return await self._process_controlled_shutdown(broker_id, broker_epoch)
            case _ if self.core is None:
                return None  # events of a past term
            case BrokerChange():
                await self._process_broker_change()
            case TopicChange():
                await self._process_topic_change()
            case PartitionModifications(topic, data):
                await self._process_partition_modifications(topic, data)
            case TopicDeletion():
                await self._apply(
                    self.core.process_topic_deletion(
                        await zk_data.get_topic_deletions(self.session)
                    )
                )
            case IsrChangeNotification():
                await self._process_isr_change_notification()
            case LogDirEventNotification():
                await self._process_log_dir_event_notification()
            case TopicConfigChange(notifications):
                await self._process_topic_config_change(notifications)
            case ZkLeaderElectionRequest(path):
                await self._process_zk_leader_election_request(path)
            case UncleanLeaderElection(partitions):
                return await self._process_elect_leaders(partitions, unclean=True)
            case ZkPartitionReassignment():
                requested = await zk_data.get_partition_reassignments(self.session)
                await self._refresh_leadership(requested)
                await self._apply(self.core.process_zk_partition_reassignment(requested))
            case LeaderAndIsrResponseReceived(broker_id, errors):
                await self._apply(self.core.on_leader_and_isr_response(broker_id, errors))
            case TopicDeletionStopReplicaResponseReceived(broker_id, error_code, errors):
                await self._apply(self.core.on_stop_replica_response(broker_id, error_code, errors))
            case AutoPreferredReplicaLeaderElection():
                # From the cache; a lost compare-and-set is re-read and tried again.
                await self._apply_redeciding(
                    self.core.check_and_trigger_auto_leader_rebalance(),
                    self.core.elect_preferred_leaders,
                )
            case PreferredReplicaLeaderElection(partitions):
                return await self._process_elect_leaders(partitions, unclean=False)
            case ApiPartitionReassignment(reassignments):
                return await self._process_api_partition_reassignment(reassignments)
            case ListPartitionReassignments(partitions):
                return self.core.list_partition_reassignments(partitions)
            case _:
                raise TypeError(f"unknown controller event {event!r}")
        return None

    # -- election and resignation ---------------------------------------------------------------

    async def _owns_controller_node(self) -> bool:
        """Whether ``/controller`` is this session's ephemeral node."""
        stat = await self.session.exists(paths.CONTROLLER)
        return stat is not None and stat.ephemeral_owner == self.session.session_id

    async def _elect(self) -> None:
        current = await zk_data.get_controller_id(self.session)
        won = current == self.broker_id and await self._owns_controller_node()
        if current is not None and not won:
            self.active_controller_id = current
            log.debug("controller already elected", controller=current, broker=self.broker_id)
            return
        if won:
            # Our election multi was applied but its answer lost (the event is being retried):
            # /controller and /controller_epoch were written together, so the epoch is ours
            # (Kafka's checkControllerAndEpoch).
            found = await zk_data.get_controller_epoch(self.session)
            if found is None:
                self.active_controller_id = await self._read_controller_id()
                return
            epoch, epoch_zk_version = found
        else:
            try:
                (
                    epoch,
                    epoch_zk_version,
                ) = await zk_data.register_controller_and_increment_controller_epoch(
                    self.session, self.broker_id
                )
            except zk_data.ControllerMovedError:
                self.active_controller_id = await self._read_controller_id()
                return
        self.active_controller_id = self.broker_id
        log.info("elected controller", broker=self.broker_id, epoch=epoch)
        try:
            for attempt in range(MAX_EVENT_RETRIES + 1):
                try:
                    await self._on_controller_failover(epoch, epoch_zk_version)
                    break
                except ConnectionLoss:
                    if attempt == MAX_EVENT_RETRIES:
                        raise
                    await self._wait_for_reconnect()
        except zk_data.ControllerMovedError:
            await self._on_controller_resignation()
        except (SessionExpired, SessionClosed):
            raise
        except CoordError as error:
            log.error("controller failover failed, resigning", error=repr(error))
            await self._trigger_controller_move()

    async def _read_controller_id(self) -> int:
        current = await zk_data.get_controller_id(self.session)
        return -1 if current is None else current

    async def _maybe_resign(self) -> None:
        was_active = self.is_active
        self.active_controller_id = await self._read_controller_id()
        if was_active and self.active_controller_id != self.broker_id:
            log.info(
                "controller moved", broker=self.broker_id, new_controller=self.active_controller_id
            )
            await self._on_controller_resignation()

    async def _trigger_controller_move(self) -> None:
        """Give up the role: resign and delete our ``/controller`` so an election runs."""
        await self._on_controller_resignation()
        await self._delete_own_controller_node()
        self.active_controller_id = -1

    async def _delete_own_controller_node(self) -> None:
        with contextlib.suppress(CoordError):
            data, stat = await self.session.get_data(paths.CONTROLLER)
            if paths.decode_controller(data).broker_id == self.broker_id:
                await self.session.delete(paths.CONTROLLER, stat.version)

    async def _shutdown_as_controller(self) -> None:
        if self.is_active:
            await self._on_controller_resignation()
            await self._delete_own_controller_node()
        self.active_controller_id = -1

    async def _on_controller_resignation(self) -> None:
        await cancel_and_wait([*self._watches.values(), self._rebalance_task])
        self._watches.clear()
        if self._topic_watcher is not None:
            await self._topic_watcher.close()
            self._topic_watcher = None
        self._rebalance_task = None
        if self.channel_manager is not None:
            await self.channel_manager.shutdown()
            self.channel_manager = None
        if self.core is not None:
            self.core.on_controller_resignation()
            log.info("resigned as controller", broker=self.broker_id)
        self.core = None

    # -- failover -------------------------------------------------------------------------------

    async def _on_controller_failover(self, epoch: int, epoch_zk_version: int) -> None:
        ctx = ControllerContext(epoch=epoch, epoch_zk_version=epoch_zk_version)
        self.core = ControllerCore(
            self.broker_id,
            ctx,
            delete_topic_enable=self.delete_topic_enable,
            leader_imbalance_per_broker_percentage=self.leader_imbalance_per_broker_percentage,
        )
        # Every read and write of the failover goes out in as few round trips as its
        # dependencies allow (the paths; then the watches; then everything that does not need
        # the topics; then the assignments and configs; then the partition states).
        await asyncio.gather(
            *(
                self.session.ensure_path(path)
                for path in (
                    paths.BROKER_IDS,
                    paths.BROKER_TOPICS,
                    paths.DELETE_TOPICS,
                    paths.ISR_CHANGE_NOTIFICATION,
                    paths.LOG_DIR_EVENT_NOTIFICATION,
                    paths.CONFIG_CHANGES,
                )
            )
        )
        # Watches first: what changes while we load queues up behind this event.
        self._start_watch(
            "brokers", lambda: self.session.watch_children(paths.BROKER_IDS), BrokerChange
        )
        self._start_watch(
            "topics", lambda: self.session.watch_children(paths.BROKER_TOPICS), TopicChange
        )
        self._start_watch(
            "deletions", lambda: self.session.watch_children(paths.DELETE_TOPICS), TopicDeletion
        )
        self._start_watch(
            "isr_changes",
            lambda: self.session.watch_children(paths.ISR_CHANGE_NOTIFICATION),
            IsrChangeNotification,
        )
        self._start_watch(
            "log_dir_events",
            lambda: self.session.watch_children(paths.LOG_DIR_EVENT_NOTIFICATION),
            LogDirEventNotification,
        )
        self._start_watch(
            "reassignments",
            lambda: self.session.watch_data(paths.REASSIGN_PARTITIONS),
            ZkPartitionReassignment,
        )
        self._start_watch(
            "config_changes",
            lambda: self.session.watch_children(paths.CONFIG_CHANGES),
            lambda children: TopicConfigChange(
                None if children is None else tuple(sorted(children))
            ),
            with_value=True,
        )
        for name, path in (
            ("preferred_election", paths.PREFERRED_REPLICA_ELECTION),
            ("unclean_election", zk_data.UNCLEAN_LEADER_ELECTION),
        ):
            # [misc]: the checker cannot infer a lambda that binds the loop variable as a default
            self._start_watch(
                name,
                lambda path=path: self.session.watch_data(path),  # type: ignore[misc]
                lambda path=path: ZkLeaderElectionRequest(path),
            )
        # Failover sends every live broker LeaderAndIsr anyway: older ISR change notifications
        # and log dir events are moot. The watches are armed: what changes after these reads
        # queues up behind this event.
        with self._phase("load_context"):
            (
                stale_notifications,
                stale_log_dir_events,
                deletions,
                reassignments,
                brokers,
                topics,
            ) = await asyncio.gather(
                zk_data.get_isr_change_notifications(self.session),
                zk_data.get_log_dir_event_notifications(self.session),
                zk_data.get_topic_deletions(self.session),
                zk_data.get_partition_reassignments(self.session),
                zk_data.get_all_brokers_and_epochs(self.session),
                zk_data.get_all_topics(self.session),
            )
            # Read before the context reads the topics' configs: a config change notification
            # event that finds exactly these has nothing the context does not hold.
            self._config_notifications_at_load = await self._config_notifications()
            await self._initialize_controller_context(brokers, topics)
        result = ControllerResult()
        if stale_notifications:
            result.writes.append(DeleteIsrChangeNotifications(tuple(stale_notifications)))
        if stale_log_dir_events:
            result.writes.append(DeleteLogDirEventNotifications(tuple(stale_log_dir_events)))
        with self._phase("decide"):
            result += self.core.on_controller_failover(deletions, reassignments)
        await self._apply(result)
        if self.auto_leader_rebalance_enable and self._rebalance_task is None:
            self._rebalance_task = asyncio.get_running_loop().create_task(
                self._auto_rebalance_timer(), name=f"controller-{self.broker_id}-auto-rebalance"
            )
        log.info(
            "controller ready",
            broker=self.broker_id,
            epoch=epoch,
            brokers=sorted(ctx.live_broker_ids),
            topics=len(ctx.all_topics),
        )

    async def _initialize_controller_context(
        self, brokers: dict[int, tuple[Broker, int]], topics: set[str]
    ) -> None:
        assert self.core is not None
        ctx = self.core.ctx
        ctx.set_live_brokers({broker: epoch for broker, epoch in brokers.values()})
        ctx.set_all_topics(topics)
        raw_assignments: dict[str, bytes] = {}
        # Pipelined: the topics' assignments and their configs in one wait.
        assignments, unclean_topics = await asyncio.gather(
            zk_data.get_topic_assignments(self.session, topics, raw_assignments),
            zk_data.get_unclean_leader_election_topics(
                self.session, topics, self.unclean_leader_election_enable
            ),
        )
        missing_ids = ControllerResult()
        for topic, (topic_id, assignment) in sorted(assignments.items()):
            if topic_id is None:
                # A topic created without an id (an old tool): give it one, as Kafka does.
                topic_id = paths.new_topic_id()
                missing_ids.writes.append(SetTopicAssignment(topic, topic_id, assignment))
            ctx.topic_ids[topic] = topic_id
            # (update_partition_full_replica_assignment for each partition, in one update)
            ctx.partition_assignments.setdefault(topic, {}).update(assignment)
            for partition, replicas in assignment.items():
                if replicas.is_being_reassigned:
                    ctx.partitions_being_reassigned.add(TopicPartition(topic, partition))
        if missing_ids.writes:
            await zk_data.apply_writes(self.session, missing_ids.writes, ctx.epoch_zk_version)
        states = await zk_data.get_partition_states(self.session, ctx.all_partitions())
        # (put_partition_leadership_info for each partition with a state, in one update)
        ctx.partition_leadership_info.update(
            (tp, info) for tp, info in states.items() if info is not None
        )
        ctx.unclean_leader_election_topics = unclean_topics
        if self.channel_manager is not None:
            await self.channel_manager.shutdown()
        self.channel_manager = ControllerChannelManager(
            self.broker_id,
            self.transport_factory,
            self._on_response,
            listener_name=self.listener_name,
            retry_backoff=self.retry_backoff,
        )
        self.channel_manager.startup(ctx.live_or_shutting_down_brokers)
        self._watch_partition_modifications_of(sorted(topics), raw_assignments)

    async def _reload_and_failover(self) -> None:
        """The store moved under a decision: rebuild the context from it and start over."""
        assert self.core is not None
        self._reloads += 1
        if self._reloads > MAX_RELOADS:
            log.error(
                "controller keeps losing write races, giving up the role", broker=self.broker_id
            )
            self._reloads = 0
            await self._trigger_controller_move()
            return
        ctx = self.core.ctx
        log.warning("controller context stale, reloading", broker=self.broker_id, epoch=ctx.epoch)
        await self._on_controller_failover(ctx.epoch, ctx.epoch_zk_version)

    # -- applying decisions ---------------------------------------------------------------------

    async def _apply(
        self, result: ControllerResult, *, redecided: bool = False
    ) -> bool | set[TopicPartition]:
        """Writes, then requests (coalesced: one LeaderAndIsr and one UpdateMetadata per broker).

        Returns True when everything was written and announced, False when nothing was (the
        controller resigned, or the context was reloaded from the store and the failover
        decisions re-sent). Partition state writes alone (elections, ISR shrinks, new
        partitions) are applied per partition (``zk_data.apply_partition_state_writes``): the
        partitions whose write lost a race are left out of the requests and re-read from the
        store; with ``redecided`` they are returned for the caller to decide again, else the
        context is reloaded (the failover path, which recomputes them).

        A result with elections to announce first (``announce_first``: a broker's failure, a
        failover) is applied in two stages, as Kafka sends the elections' batch before the
        replica state machine's: the elected partitions' writes, then their requests; then the
        other writes (the ISR shrinks) and the other requests, without the elected partitions
        (their states there are older). Persist before announce holds in each stage."""
        core = self.core
        if core is None:
            return False
        first = result.announce_first
        if first and zk_data.can_apply_per_partition(result.writes):
            elected_writes, other_writes = zk_data.split_partition_writes(result.writes, first)
        else:
            elected_writes, other_writes = result.writes, []
        failed = await self._write(core, elected_writes)
        if failed is None:
            return False
        with self._phase("queue_requests"):
            first_requests = coalesce_requests(without_partitions(result.first_requests, failed))
            self._send(first_requests)
            announced = announced_versions(first_requests)
            if not other_writes:
                self._send(self._later_requests(result, failed, announced), first=False)
        if other_writes:
            # One turn of the loop first: the channels' tasks encode and send the elections'
            # requests before this task builds the other writes (thousands of operations,
            # without a yield), not after.
            await asyncio.sleep(0)
            failed_later = await self._write(core, other_writes)
            if failed_later is None:
                return False
            failed |= failed_later
            with self._phase("queue_requests"):
                self._send(self._later_requests(result, failed, announced), first=False)
        for key, reason in result.failed.items():
            log.info("state change failed", item=str(key), reason=reason)
        if failed:
            log.warning(
                "partition state writes lost races",
                partitions=len(failed),
                example=str(min(failed)),
            )
            for tp in failed:
                result.leadership.pop(tp, None)
            await self._refresh_leadership(failed)
            if redecided:
                return failed
            await self._reload_and_failover()
            return False
        self._reloads = 0
        return True

    @staticmethod
    def _later_requests(
        result: ControllerResult, failed: set[TopicPartition], announced: dict[Any, int]
    ) -> list[Any]:
        """The result's requests after its elections were announced: without the partitions
        whose writes failed, nor the states not newer than those announced."""
        return coalesce_requests(
            without_announced(without_partitions(result.requests, failed), announced)
        )

    def _send(self, requests: Iterable[Any], *, first: bool = True) -> None:
        """Queue ``requests``; with ``first`` (a result's first stage: its announced
        elections) a controlled shutdown being decided waits for their delivery."""
        if self.channel_manager is not None:
            track = self._deliveries if first else None
            for request in requests:
                delivery = self.channel_manager.send_request(request)
                if track is not None:
                    track.append(delivery)

    async def _write(self, core: ControllerCore, writes: list[Any]) -> set[TopicPartition] | None:
        """Apply ``writes`` (see ``_apply``): the partitions whose compare-and-set lost a race,
        or None when nothing more may be announced (the controller resigned, or the context
        was reloaded and the failover decisions re-sent)."""
        if not writes:
            return set()
        self._phases.setdefault("writes", 0.0)
        writes_started = time.monotonic()
        try:
            if zk_data.can_apply_per_partition(writes):
                failed = await zk_data.apply_partition_state_writes(
                    self.session, writes, core.ctx.epoch_zk_version
                )
            else:
                await zk_data.apply_writes(self.session, writes, core.ctx.epoch_zk_version)
                failed = set()
        except zk_data.ControllerMovedError:
            log.info(
                "controller epoch moved on, resigning",
                broker=self.broker_id,
                epoch=core.ctx.epoch,
            )
            await self._on_controller_resignation()
            self.active_controller_id = await self._read_controller_id()
            return None
        except (BadVersion, NodeExists, NoNode) as error:
            log.warning("controller write lost a race", error=repr(error))
            await self._reload_and_failover()
            return None
        except ConnectionLoss as error:
            # The multi may or may not have been applied: rebuild from what the store holds.
            log.warning("store connection lost during a controller write", error=repr(error))
            await self._wait_for_reconnect()
            await self._reload_and_failover()
            return None
        finally:
            writes_ended = time.monotonic()
            self._phases["writes"] += writes_ended - writes_started
            self._marks.append(("writes", writes_ended, time.thread_time(), time.process_time()))
        for write in writes:
            if isinstance(write, DeleteTopic):
                self._stop_partition_watch(write.topic)
        return failed

    # -- event handlers -------------------------------------------------------------------------

    async def _refresh_leadership(self, partitions: Iterable[TopicPartition]) -> None:
        """Re-read partition state nodes: leaders change ISRs in the store on their own. Only
        partitions the context knows are read (a request may name any partition, even one no
        store path can hold, like topic ''): the others are answered unknown from the context."""
        assert self.core is not None
        ctx = self.core.ctx
        partitions = {tp for tp in partitions if ctx.partition_replica_assignment(tp)}
        if partitions:
            with self._phase("read_states"):
                states = await zk_data.get_partition_states(self.session, partitions)
            self.core.update_leader_and_isr_cache(states)

    async def _process_broker_change(self) -> None:
        core = self.core
        assert core is not None and self.channel_manager is not None
        ctx = core.ctx
        brokers = await zk_data.get_all_brokers_and_epochs(self.session)
        changes = core.broker_changes(brokers)
        if changes.is_empty and all(
            ctx.live_brokers.get(b) == broker for b, (broker, _) in brokers.items()
        ):
            # Nothing changed (the watch's first delivery after a failover, which loaded the
            # same brokers): re-reading every topic's config and the leaderless partitions'
            # states would decide nothing while the events behind this one wait.
            return
        # Decided from the cached leadership (kept current by our own writes and the leaders'
        # ISR change notifications), written with compare-and-set on the cached versions: a
        # partition whose cache was stale fails its write and is re-read and decided again
        # (``_apply_redeciding``). Only the leaderless partitions, few, are read first: their
        # state node may not even exist yet.
        leaderless = set(ctx.partitions_in_state(NEW_PARTITION)) | set(
            ctx.partitions_in_state(OFFLINE_PARTITION)
        )
        await self._refresh_leadership(leaderless)
        with self._phase("read_configs"):
            await self._refresh_unclean_settings(
                self._unclean_candidates(
                    {
                        tp
                        for b in (*changes.dead, *changes.bounced)
                        for tp in ctx.partitions_on_broker(b)
                    },
                    set(brokers) - set(changes.bounced),
                )
                | {tp.topic for tp in leaderless}
            )
        before = dict(ctx.live_brokers)
        with self._phase("decide"):
            changes, result = core.process_broker_change(brokers)
        with self._phase("close_channels"):
            for broker_id in (*changes.dead, *changes.bounced):
                await self.channel_manager.remove_broker(broker_id)
        for broker_id, broker in before.items():
            if broker_id in ctx.live_brokers and ctx.live_brokers[broker_id] != broker:
                await self.channel_manager.remove_broker(broker_id)  # new endpoints: reconnect
        for broker in ctx.live_or_shutting_down_brokers:
            self.channel_manager.add_broker(broker)
        if not changes.is_empty:
            log.info(
                "broker change",
                new=list(changes.new),
                dead=list(changes.dead),
                bounced=list(changes.bounced),
            )
        new_brokers = (*changes.new, *changes.bounced)
        await self._apply_redeciding(
            result, lambda failed: core.redecide_after_lost_race(failed, new_brokers)
        )

    def _unclean_candidates(
        self, partitions: Iterable[TopicPartition], live_after: set[int]
    ) -> set[str]:
        """The topics of ``partitions`` whose cached ISR has no broker of ``live_after``: only
        an unclean election could give them a leader, so only their setting matters."""
        assert self.core is not None
        info = self.core.ctx.partition_leadership_info
        return {
            tp.topic
            for tp in partitions
            if (state := info.get(tp)) is None
            or not live_after.intersection(state.leader_and_isr.isr)
        }

    async def _refresh_unclean_settings(self, topics: set[str]) -> None:
        """Re-read ``unclean.leader.election.enable`` of ``topics`` (the config change watch
        keeps the others current)."""
        assert self.core is not None
        ctx = self.core.ctx
        topics &= ctx.all_topics
        if topics:
            enabled = await zk_data.get_unclean_leader_election_topics(
                self.session, topics, self.unclean_leader_election_enable
            )
            ctx.unclean_leader_election_topics = (
                ctx.unclean_leader_election_topics - topics
            ) | enabled

    async def _apply_redeciding(
        self, result: ControllerResult, redecide: Callable[[set[TopicPartition]], ControllerResult]
    ) -> bool:
        """``_apply``, then for the partitions whose compare-and-set lost a race (re-read by
        ``_apply``) ``redecide(failed)`` and apply that, up to ``MAX_RELOADS`` times; only
        then is the whole context reloaded from the store (Kafka's controller likewise retries
        the failed partitions' updates within the event, re-reading just those)."""
        core = self.core
        for _attempt in range(MAX_RELOADS):
            outcome = await self._apply(result, redecided=True)
            if not isinstance(outcome, set):
                return outcome
            if self.core is not core or core is None:
                return False
            with self._phase("read_configs"):
                await self._refresh_unclean_settings({tp.topic for tp in outcome})
            with self._phase("decide"):
                result = redecide(outcome)
        await self._reload_and_failover()
        return False

    async def _process_topic_change(self) -> None:
        core = self.core
        assert core is not None
        ctx = core.ctx
        topics = await zk_data.get_all_topics(self.session)
        new = core.new_topics(topics)
        deleted = ctx.all_topics - topics
        raw_assignments: dict[str, bytes] = {}
        assignments = await zk_data.get_topic_assignments(self.session, new, raw_assignments)
        ctx.unclean_leader_election_topics |= await zk_data.get_unclean_leader_election_topics(
            self.session, new, self.unclean_leader_election_enable
        )
        result = ControllerResult()
        new_partitions = core.register_topic_change(topics, assignments)
        for start in range(0, len(new_partitions), PARTITIONS_PER_SLICE):
            if start:
                await asyncio.sleep(0)  # bulk work yields (docs/architecture.md, Process model)
            result += core.on_new_partition_creation(
                new_partitions[start : start + PARTITIONS_PER_SLICE]
            )
        for topic in deleted:
            self._stop_partition_watch(topic)
        for topic in sorted(new & topics):
            self._watch_partition_modifications(topic, raw_assignments.get(topic))
        await self._apply(result)

    async def _process_partition_modifications(self, topic: str, data: bytes | None) -> None:
        assert self.core is not None
        if data is not None:
            assignment = zk_data.assignment_from_node(paths.decode_topic(topic, data))
        else:
            found = await zk_data.get_topic_assignment(self.session, topic)
            if found is None:
                return
            _, assignment, _ = found
        await self._apply(self.core.process_partition_modifications(topic, assignment))

    async def _process_log_dir_event_notification(self) -> None:
        assert self.core is not None
        seqs = await zk_data.get_log_dir_event_notifications(self.session)
        if not seqs:
            return
        brokers = await zk_data.get_broker_ids_from_log_dir_events(self.session, seqs)
        await self._apply(self.core.process_log_dir_event_notification(brokers, seqs))

    async def _process_isr_change_notification(self) -> None:
        assert self.core is not None
        seqs = await zk_data.get_isr_change_notifications(self.session)
        if not seqs:
            return
        partitions = await zk_data.get_partitions_from_isr_change_notifications(self.session, seqs)
        with self._phase("read_states"):
            leaderships = await zk_data.get_partition_states(self.session, partitions)
        with self._phase("decide"):
            result = self.core.process_isr_change_notification(leaderships, seqs)
        await self._apply(result)

    async def _config_notifications(self) -> tuple[str, ...] | None:
        try:
            return tuple(sorted(await self.session.get_children(paths.CONFIG_CHANGES)))
        except NoNode:
            return None

    async def _process_topic_config_change(self, notifications: tuple[str, ...] | None) -> None:
        """Kafka's ``TopicUncleanLeaderElectionEnable``: a topic that now allows unclean leader
        election gets its leaderless partitions elected at once.

        The watch's first event at a failover finds the notifications the context load saw
        before reading every topic's config: nothing is new, and the configs are not read
        again (10,000 topics read and decoded for nothing at every failover). Any other list
        means a notification came or went since, and every topic's config is read."""
        core = self.core
        assert core is not None
        if notifications == self._config_notifications_at_load:
            return
        ctx = core.ctx
        enabled = await zk_data.get_unclean_leader_election_topics(
            self.session, ctx.all_topics, self.unclean_leader_election_enable
        )
        newly = enabled - ctx.unclean_leader_election_topics
        ctx.unclean_leader_election_topics = enabled
        for topic in sorted(newly):
            await self._refresh_leadership(ctx.partitions_for_topic(topic))
            await self._apply(core.psm.trigger_online_partition_state_change(topic))

    async def _decide_and_apply(
        self,
        decide: Callable[
            [ControllerCore, set[TopicPartition] | None], Awaitable[tuple[ControllerResult, Any]]
        ],
    ) -> Any:
        """An API event's decision, applied: ``decide(core, only)`` refreshes what it needs and
        returns the result and the answer; ``only`` is None, or the partitions whose writes lost
        a race last time (a leader changed their state meanwhile: they were re-read), to decide
        again alone while the others' decisions stand (Kafka retries its ZooKeeper updates
        within the same event); dict answers are merged. A write that fails as a whole reloads
        the context and the decision is made again on it, so the answer always describes what
        the store holds. NotControllerError once this broker is not the controller;
        UnknownServerError (retriable by the caller) when the writes keep losing."""
        only: set[TopicPartition] | None = None
        answer: Any = None
        for _attempt in range(MAX_RELOADS):
            core = self.core
            if core is None:
                raise NotControllerError(f"broker {self.broker_id} is no longer the controller")
            result, fresh = await decide(core, only)
            answer = (
                {**answer, **fresh}
                if only is not None and isinstance(answer, dict) and isinstance(fresh, dict)
                else fresh
            )
            outcome = await self._apply(result, redecided=True)
            if outcome is True or (outcome is False and not result.writes):
                return answer
            only = outcome if isinstance(outcome, set) else None
        if self.core is None:
            raise NotControllerError(f"broker {self.broker_id} is no longer the controller")
        raise UnknownServerError("the controller's writes kept losing races; retry")

    async def _process_elect_leaders(
        self, partitions: tuple[TopicPartition, ...] | None, *, unclean: bool
    ) -> dict[TopicPartition, ElectionOutcome]:
        no_candidate = (
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            if unclean
            else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        )

        async def decide(core: ControllerCore, only: set[TopicPartition] | None):
            if only is not None:
                chosen: tuple[TopicPartition, ...] = tuple(sorted(only))
            else:
                chosen = tuple(
                    sorted(set(partitions if partitions is not None else core.ctx.all_partitions()))
                )
            # Decided from the cached leadership: only the controller moves leaders, so the
            # cached leader is the stored one; a stale ISR makes an election's compare-and-set
            # fail (re-read and decided again by _decide_and_apply), and makes a refusal
            # (no candidate in the cached ISR) doubtful: those are re-read and decided again.
            result = ControllerResult()
            errors: dict[TopicPartition, ErrorCode] = {}
            for start in range(0, len(chosen), PARTITIONS_PER_SLICE):
                if start:
                    await asyncio.sleep(0)  # bulk work yields (docs/architecture.md, Process model)
                sliced, sliced_errors = core.elect_leaders(
                    chosen[start : start + PARTITIONS_PER_SLICE], unclean=unclean
                )
                result += sliced
                errors.update(sliced_errors)
            doubtful = [tp for tp, err in errors.items() if err == no_candidate]
            if doubtful and only is None:
                await self._refresh_leadership(doubtful)
                again, again_errors = core.elect_leaders(doubtful, unclean=unclean)
                result += again
                errors.update(again_errors)
            return result, {
                tp: ElectionOutcome(err, result.leadership[tp].leader)
                if err == ErrorCode.NONE
                else ElectionOutcome(err)
                for tp, err in errors.items()
            }

        return await self._decide_and_apply(decide)

    async def _process_api_partition_reassignment(
        self, reassignments: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        async def decide(core: ControllerCore, _only: set[TopicPartition] | None):
            await self._refresh_leadership(reassignments)
            return core.process_api_partition_reassignment(reassignments)

        return await self._decide_and_apply(decide)

    async def _process_zk_leader_election_request(self, path: str) -> None:
        """Kafka's ``kafka-preferred-replica-election.sh`` (and kafkalite's unclean variant):
        elect the named partitions' leaders, then delete the request node (fenced, together
        with the elections)."""
        assert self.core is not None
        partitions = await zk_data.get_leader_election_request(self.session, path)
        if partitions is None:
            return
        core = self.core
        elect = (
            core.elect_unclean_leaders
            if path == zk_data.UNCLEAN_LEADER_ELECTION
            else core.elect_preferred_leaders
        )
        # From the cache, as the ElectLeaders API: partitions left without a new leader may
        # only look ineligible through a stale ISR, so those are re-read and tried again.
        result = elect(partitions)
        ctx = core.ctx
        unclean = path == zk_data.UNCLEAN_LEADER_ELECTION
        doubtful = [
            tp
            for tp in partitions
            if tp not in result.leadership
            and (replicas := ctx.partition_replica_assignment(tp))
            and (
                (leader := ctx.partition_leader(tp)) is None
                or not ctx.is_replica_online(leader, tp)
                if unclean
                else ctx.partition_leader(tp) != replicas[0]
            )
        ]
        if doubtful:
            await self._refresh_leadership(doubtful)
            result += elect(doubtful)
        result.writes.append(DeleteLeaderElectionRequest(path))
        await self._apply_redeciding(result, elect)

    async def _process_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[list[TopicPartition], list[asyncio.Future[Any]]]:
        """The answer must describe what the store holds: a broker told 'nothing remains'
        stops, and must not while it still leads. Returns the partitions it still leads and
        the deliveries of the requests that announce the moves."""

        refreshed = False

        async def decide(core: ControllerCore, only: set[TopicPartition] | None):
            # From the cache first (a stale ISR fails the compare-and-set: re-read, decided
            # again); a partition the broker still leads afterwards may only look stuck through
            # a stale ISR, so those are re-read and decided once more below.
            if refreshed and only is None:
                await self._refresh_leadership(
                    tp
                    for tp, info in core.ctx.partition_leadership_info.items()
                    if info.leader_and_isr.leader == broker_id
                )
            outcome = core.controlled_shutdown(broker_id, broker_epoch)
            return outcome.result, outcome.remaining_partitions

        deliveries: list[asyncio.Future[Any]] = []
        self._deliveries = deliveries
        try:
            remaining = await self._decide_and_apply(decide)
            if remaining:
                refreshed = True
                remaining = await self._decide_and_apply(decide)
        finally:
            self._deliveries = None
        return remaining, deliveries

    # -- broker responses (called from the channel's sender tasks: enqueue only) ----------------

    def _on_response(self, broker_id: int, request: Any, response: Any) -> None:
        if isinstance(request, LeaderAndIsrRequestData):
            errors = leader_and_isr_errors(request, response)
            self.event_manager.put(LeaderAndIsrResponseReceived(broker_id, errors))
        elif isinstance(request, StopReplicaRequestData) and request.deletes_partitions:
            error_code, errors = response_errors(request, response)
            deleted = {s.topic_partition for s in request.partition_states if s.delete_partition}
            self.event_manager.put(
                TopicDeletionStopReplicaResponseReceived(
                    broker_id,
                    error_code,
                    {
                        tp: errors.get(tp, error_code if error_code else ErrorCode.NONE)
                        for tp in deleted
                    },
                )
            )

    # -- watches --------------------------------------------------------------------------------

    def _start_watch(
        self,
        name: str,
        make_iterator: Callable[[], AsyncIterator[Any]],
        make_event: Callable[..., Any],
        *,
        with_value: bool = False,
    ) -> None:
        """Watch with ``make_iterator``, putting ``make_event()`` (``make_event(value)`` when
        ``with_value``) on the queue for every value it yields."""
        task = self._watches.get(name)
        if task is not None and not task.done():
            return
        self._watches[name] = asyncio.get_running_loop().create_task(
            self._watch_loop(
                make_iterator, make_event if with_value else lambda _value: make_event()
            ),
            name=f"controller-{self.broker_id}-{name}",
        )

    def _watch_partition_modifications(self, topic: str, known: bytes | None = None) -> None:
        """Watch the topic's node for partitions added to it. ``known``: the node's data the
        context was just loaded from; the watch's first read finding exactly that is no
        modification, and queues no event (at 10,000 topics, one event per topic at every
        failover and creation held the queue for seconds). Anything else read first (changed
        in between) is an event, as every later change is (``TopicNodeWatcher``)."""
        self._topics_watcher().watch(topic, known)

    def _topics_watcher(self) -> TopicNodeWatcher:
        if self._topic_watcher is None:
            self._topic_watcher = TopicNodeWatcher(
                self.session,
                lambda topic, data: self.event_manager.put(PartitionModifications(topic, data)),
                lambda: self.event_manager.put(Expire()),
                name=f"controller-{self.broker_id}-topics",
            )
        return self._topic_watcher

    def _watch_partition_modifications_of(
        self, topics: Iterable[str], known: Mapping[str, bytes]
    ) -> None:
        """``_watch_partition_modifications(topic, known.get(topic))`` for each of ``topics``
        (a failover's 10,000 topics, in one call)."""
        self._topics_watcher().watch_many((topic, known.get(topic)) for topic in topics)

    def _stop_partition_watch(self, topic: str) -> None:
        if self._topic_watcher is not None:
            self._topic_watcher.unwatch(topic)

    async def _watch_loop(
        self, make_iterator: Callable[[], AsyncIterator[Any]], make_event: Callable[[Any], Any]
    ) -> None:
        try:
            async for value in make_iterator():
                event = make_event(value)
                if event is not None:
                    self.event_manager.put(event)
        except SessionExpired:
            self.event_manager.put(Expire())
        except SessionClosed:
            return

    async def _watch_controller(self) -> None:
        await self._watch_loop(
            lambda: self.session.watch_data(paths.CONTROLLER),
            lambda node: Reelect() if node is None else ControllerChange(),
        )

    async def _watch_session(self) -> None:
        async for state in self.session.state_changes():
            if state is SessionState.EXPIRED:
                self.event_manager.clear_and_put(Expire())

    async def _auto_rebalance_timer(self) -> None:
        while True:
            await self._sleep(self.leader_imbalance_check_interval)
            self.event_manager.put(AutoPreferredReplicaLeaderElection())


__all__ = ["KafkaController", "Broker", "ElectionOutcome"]
