"""Dynamic configuration from the coordination store, and its change notifications (Kafka's
DynamicConfigManager with its TopicConfigHandler, UserConfigHandler and ClientIdConfigHandler,
ZooKeeper era).

The admin path writes an entity's config (``/config/topics/<t>``, ``/config/users/<u>``,
``/config/clients/<c>``) and then a sequential ``/config/changes/config_change_*`` node naming
it. Two watchers follow ``/config/changes``:

- `TopicConfigs.watch`: on any new notification, every topic's overrides are read again and a
  changed `LogConfig` is handed to the LogManager (the notifications there before
  `TopicConfigs.load` read every topic count as applied by its first watch);
- `watch_entity_configs`: each new notification naming a user or client entity sets its quotas
  again, and a user's cached SCRAM credentials are dropped.

- `watch_broker_configs`: a notification naming ``brokers/<this id>`` or ``brokers/<default>``
  reads that level again and hands it to the DynamicBrokerConfig (server/dynamic_config.py),
  which applies what changed (Kafka's BrokerConfigHandler).

All are restarted by the server on a renewed session (notifications may have been missed).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import structlog

from kafkalite.coord import NoNode
from kafkalite.storage.config import LogConfig
from kafkalite.zk import data as paths
from kafkalite.zk.security import config_at, entity_of_path, load_quota_configs

log = structlog.get_logger("kafkalite.server")

TOPIC_CONFIG_READ_BATCH = 1024
TOPIC_CONFIGS = "/config/topics"


class TopicConfigs:
    """Each topic's LogConfig: the broker defaults overlaid with ``/config/topics/<t>``.

    `configs` is the dict the LogManager is given (``topic_configs``): it is updated in place.
    """

    def __init__(self, session: Any, defaults: LogConfig) -> None:
        self.session = session
        self.defaults = defaults
        self.configs: dict[str, LogConfig] = {}
        self.overrides: dict[str, dict[str, str]] = {}
        """Each topic's stored overrides, kept so a new broker default can be applied to the
        configs it does not override."""
        self._changes_at_load: set[str] | None = None
        """The change notifications listed before ``load`` read every topic: the first
        ``watch`` after it counts them as applied (a broker of 10,000 topics re-read each
        topic's config, one read after another, right after its start)."""

    def for_topic(self, topic: str) -> LogConfig:
        """The topic's LogConfig (read when the controller's LeaderAndIsr creates a log)."""
        return self.configs.get(topic, self.defaults)

    async def load(self) -> None:
        """Read every topic's overrides."""
        await self.session.ensure_path(paths.CONFIG_CHANGES)
        # Listed before the reads: a notification made after this is applied by `watch`.
        self._changes_at_load = set(await self.session.get_children(paths.CONFIG_CHANGES))
        await self.session.ensure_path(TOPIC_CONFIGS)
        topics = await self.session.get_children(TOPIC_CONFIGS)
        # Bulk reads (the embedded store's multiRead; ZooKeeper's multiRead or pipelined
        # reads, as Kafka's getEntitiesConfigs), a yield to the loop after each batch: with a
        # read and a task per topic, a start with 10,000 topics spent 0.13 s here. A topic
        # without overrides shares the defaults' LogConfig.
        for start in range(0, len(topics), TOPIC_CONFIG_READ_BATCH):
            chunk = topics[start : start + TOPIC_CONFIG_READ_BATCH]
            found = await self.session.get_data_versions_many(
                [f"{TOPIC_CONFIGS}/{t}" for t in chunk]
            )
            for topic, node in zip(chunk, found, strict=True):
                self._apply(topic, None if node is None else node[0])
            await asyncio.sleep(0)

    async def reload(self, topic: str) -> bool:
        """Re-read one topic's overrides; True if its LogConfig changed."""
        try:
            data, _ = await self.session.get_data(f"{TOPIC_CONFIGS}/{topic}")
        except NoNode:
            return self._apply(topic, None)
        return self._apply(topic, data)

    def _apply(self, topic: str, data: bytes | None) -> bool:
        """The topic's overrides as read (None: no node); True if its LogConfig changed."""
        if data is None:
            new = self.defaults
            self.overrides.pop(topic, None)
        else:
            try:
                props = json.loads(data).get("config", {}) if data else {}
                new = LogConfig.from_properties(props, self.defaults) if props else self.defaults
            except (ValueError, json.JSONDecodeError) as e:
                log.warning(
                    "topic config unreadable; keeping the previous one", topic=topic, error=str(e)
                )
                return False
            self.overrides[topic] = dict(props)
        old = self.configs.get(topic, self.defaults)
        self.configs[topic] = new
        return old is not new and old != new

    def set_defaults(self, defaults: LogConfig) -> list[str]:
        """A new broker default (a dynamic broker config changed): every topic's LogConfig
        built again over it, its overrides still winning; the topics whose config changed."""
        self.defaults = defaults
        changed = []
        for topic, old in list(self.configs.items()):
            try:
                new = LogConfig.from_properties(self.overrides.get(topic, {}), defaults)
            except ValueError as e:
                log.warning(
                    "topic config unreadable; keeping the previous one", topic=topic, error=str(e)
                )
                continue
            if new != old:
                self.configs[topic] = new
                changed.append(topic)
        return changed

    async def watch(self, on_change: Callable[[str, LogConfig], None]) -> None:
        """Apply topic config changes as their notifications arrive (runs until cancelled)."""
        await self.session.ensure_path(paths.CONFIG_CHANGES)
        # After a renewed session (a later call) every notification counts as new again: some
        # may have been missed meanwhile.
        seen: set[str] = self._changes_at_load or set()
        self._changes_at_load = None
        async for children in self.session.watch_children(paths.CONFIG_CHANGES):
            fresh = set(children or ()) - seen
            seen |= fresh
            if not fresh:
                continue
            for topic in await self.session.get_children(TOPIC_CONFIGS):
                if await self.reload(topic):
                    on_change(topic, self.configs[topic])
                    log.info("topic config changed", topic=topic)


async def _changed_path(session: Any, child: str) -> str | None:
    """The entity path a config change notification names; None when the notification is
    gone already (deleted after its retention) or unreadable, which its watchers skip."""
    try:
        data, _ = await session.get_data(f"{paths.CONFIG_CHANGES}/{child}")
        return paths.decode_config_change(data)
    except (NoNode, ValueError):
        return None


async def load_quotas(session: Any, quotas: Any) -> None:
    """Every user and client quota from ``/config/users`` and ``/config/clients``."""
    for entity, config in await load_quota_configs(session):
        quotas.set_entity(entity, config)


async def watch_entity_configs(
    session: Any, quotas: Any, credential_cache: Callable[[], Any]
) -> None:
    """Kafka's config change notifications for users/... and clients/... entities: quotas
    set again, a user's cached SCRAM credentials dropped (``credential_cache()``: the
    broker's CredentialCache, None until a SCRAM client first authenticated). Runs until
    cancelled."""
    await session.ensure_path(paths.CONFIG_CHANGES)
    seen: set[str] | None = None
    async for children in session.watch_children(paths.CONFIG_CHANGES):
        current = set(children or ())
        fresh = sorted(current - seen) if seen is not None else []
        cache = credential_cache()
        if seen is None and cache is not None:
            cache.clear()  # (re)started: notifications may have been missed
        seen = current
        for child in fresh:
            relative = await _changed_path(session, child)
            if relative is None:
                continue
            entity = entity_of_path(relative)
            if entity is not None:
                cache = credential_cache()
                if len(entity) == 1 and entity[0][0] == "user" and cache is not None:
                    cache.invalidate(entity[0][1])
                quotas.set_entity(entity, await config_at(session, relative))


async def load_broker_configs(session: Any, dynamic: Any) -> None:
    """Both dynamic levels of this broker, read and applied (start-up, a renewed session)."""
    from kafkalite.zk.broker_configs import get_broker_config

    default = dynamic.from_persistent(await get_broker_config(session, None), per_broker=False)
    own = dynamic.from_persistent(
        await get_broker_config(session, dynamic.broker_id), per_broker=True
    )
    dynamic.update(per_broker=own, default=default)


async def watch_broker_configs(session: Any, dynamic: Any) -> None:
    """Kafka's BrokerConfigHandler: each new notification naming this broker's config or
    the cluster default reads that level again and applies it. Runs until cancelled."""
    from kafkalite.zk.broker_configs import broker_of_entity_path, get_broker_config

    await session.ensure_path(paths.CONFIG_CHANGES)
    seen: set[str] | None = None
    async for children in session.watch_children(paths.CONFIG_CHANGES):
        current = set(children or ())
        fresh = sorted(current - seen) if seen is not None else []
        if seen is None:
            await load_broker_configs(session, dynamic)  # (re)started: may have missed some
        seen = current
        for child in fresh:
            relative = await _changed_path(session, child)
            if relative is None:
                continue
            broker = broker_of_entity_path(relative)
            if broker is None:
                stored = await get_broker_config(session, None)
                dynamic.update(default=dynamic.from_persistent(stored, per_broker=False))
            elif broker == dynamic.broker_id:
                stored = await get_broker_config(session, broker)
                dynamic.update(per_broker=dynamic.from_persistent(stored, per_broker=True))
