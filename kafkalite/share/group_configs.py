"""Group configs: Kafka's GROUP config resource (ConfigResource type 32), per group id.

The keys are Kafka's GroupConfig names (``GROUP_CONFIGS``). A group's overrides are stored like
a topic's: ``/config/groups/<sanitised group id>`` holds ``{"version":1,"config":{...}}`` (in
ZooKeeper or the embedded store, whichever the cluster uses) and each change is announced by a
``/config/changes/config_change_*`` notification naming ``groups/<group>``, so every broker's
`GroupConfigStore` reloads that group. A key a group does not override takes the broker's
setting (``defaults``): ``share.record.lock.duration.ms`` is ``group.share.record.lock.duration.ms``
and so on, as Kafka's ``extractGroupConfigMap`` maps them.

Validation (`validate`) is Kafka's GroupConfig.validate: an unknown name, a value that does not
parse or is out of its type's range, an interval or timeout outside the broker's
``group.*.min/max.*`` bounds, or a session timeout not above its heartbeat interval is refused
with a message naming the key (INVALID_CONFIG on the wire).

Invariants: `value` never touches the store (the share coordinator reads it on every fetch);
the overrides it answers are those last read from the store or written by this broker, so a
write is visible on the broker that made it before its request is answered, and on the others
once they see the notification.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from kafkalite.coord import NoNode
from kafkalite.coord.base import CreateOp, SetDataOp
from kafkalite.coord.errors import BadVersion, NodeExists
from kafkalite.zk import data as paths
from kafkalite.zk.security import desanitize, sanitize

log = structlog.get_logger(__name__)

GROUP_RESOURCE = 32
"""ConfigResource.Type.GROUP."""
SOURCE_DYNAMIC_GROUP_CONFIG = 8
GROUPS_PATH = f"{paths.CONFIG}/groups"
_CAS_RETRIES = 10
WATCH_RETRY_SECONDS = 1.0

BOOLEAN, INT, STRING = 1, 3, 2
"""DescribeConfigs' config_type values."""

GROUP_CONFIGS: dict[str, int] = {
    "consumer.session.timeout.ms": INT,
    "consumer.heartbeat.interval.ms": INT,
    "consumer.assignment.interval.ms": INT,
    "consumer.assignor.offload.enable": BOOLEAN,
    "share.session.timeout.ms": INT,
    "share.heartbeat.interval.ms": INT,
    "share.record.lock.duration.ms": INT,
    "share.auto.offset.reset": STRING,
    "share.isolation.level": STRING,
}
"""Kafka's group config names and their types."""

_AT_LEAST = {"share.record.lock.duration.ms": 1000, "consumer.assignment.interval.ms": 0}
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
_DURATION = re.compile(
    r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE
)


def by_duration_ms(value: str) -> int | None:
    """The milliseconds of ``by_duration:<ISO-8601 duration>`` (``PnDTnHnMn.nS``), or None
    when ``value`` is not one."""
    if not value.lower().startswith("by_duration:"):
        return None
    text = value.split(":", 1)[1].strip()
    match = _DURATION.match(text)
    if match is None or text.upper() in ("P", "PT") or text.upper().endswith("T"):
        return None
    days, hours, minutes, seconds = match.groups()
    total = (
        int(days or 0) * 86_400_000
        + int(hours or 0) * 3_600_000
        + int(minutes or 0) * 60_000
        + round(float(seconds or 0) * 1000)
    )
    return total


@dataclass(frozen=True, slots=True)
class GroupConfigBounds:
    """The broker settings a group config is validated against (Kafka's
    GroupCoordinatorConfig and ShareGroupConfig bounds)."""

    consumer_min_session_timeout_ms: int = 45_000
    consumer_max_session_timeout_ms: int = 60_000
    consumer_min_heartbeat_interval_ms: int = 5_000
    consumer_max_heartbeat_interval_ms: int = 15_000
    share_min_session_timeout_ms: int = 45_000
    share_max_session_timeout_ms: int = 60_000
    share_min_heartbeat_interval_ms: int = 5_000
    share_max_heartbeat_interval_ms: int = 15_000
    share_min_record_lock_duration_ms: int = 15_000
    share_max_record_lock_duration_ms: int = 60_000
    consumer_min_assignment_interval_ms: int = 0
    consumer_max_assignment_interval_ms: int = 15_000

    def ranges(self) -> dict[str, tuple[int, int, str, str]]:
        """name -> (min, max, the min setting's name, the max setting's name)."""
        return {
            "consumer.session.timeout.ms": (
                self.consumer_min_session_timeout_ms,
                self.consumer_max_session_timeout_ms,
                "group.consumer.min.session.timeout.ms",
                "group.consumer.max.session.timeout.ms",
            ),
            "consumer.heartbeat.interval.ms": (
                self.consumer_min_heartbeat_interval_ms,
                self.consumer_max_heartbeat_interval_ms,
                "group.consumer.min.heartbeat.interval.ms",
                "group.consumer.max.heartbeat.interval.ms",
            ),
            "consumer.assignment.interval.ms": (
                self.consumer_min_assignment_interval_ms,
                self.consumer_max_assignment_interval_ms,
                "group.consumer.min.assignment.interval.ms",
                "group.consumer.max.assignment.interval.ms",
            ),
            "share.session.timeout.ms": (
                self.share_min_session_timeout_ms,
                self.share_max_session_timeout_ms,
                "group.share.min.session.timeout.ms",
                "group.share.max.session.timeout.ms",
            ),
            "share.heartbeat.interval.ms": (
                self.share_min_heartbeat_interval_ms,
                self.share_max_heartbeat_interval_ms,
                "group.share.min.heartbeat.interval.ms",
                "group.share.max.heartbeat.interval.ms",
            ),
            "share.record.lock.duration.ms": (
                self.share_min_record_lock_duration_ms,
                self.share_max_record_lock_duration_ms,
                "group.share.min.record.lock.duration.ms",
                "group.share.max.record.lock.duration.ms",
            ),
        }


def bounds_from(config: Any) -> GroupConfigBounds:
    """The bounds from a BrokerConfig."""
    return GroupConfigBounds(
        config.group_consumer_min_session_timeout_ms,
        config.group_consumer_max_session_timeout_ms,
        config.group_consumer_min_heartbeat_interval_ms,
        config.group_consumer_max_heartbeat_interval_ms,
        config.group_share_min_session_timeout_ms,
        config.group_share_max_session_timeout_ms,
        config.group_share_min_heartbeat_interval_ms,
        config.group_share_max_heartbeat_interval_ms,
        config.group_share_min_record_lock_duration_ms,
        config.group_share_max_record_lock_duration_ms,
        consumer_min_assignment_interval_ms=getattr(
            config, "group_consumer_min_assignment_interval_ms", 0
        ),
        consumer_max_assignment_interval_ms=getattr(
            config, "group_consumer_max_assignment_interval_ms", 15_000
        ),
    )


def defaults_from(config: Any) -> dict[str, str]:
    """Each group config's value when a group does not set it: the broker's setting."""
    return {
        "consumer.session.timeout.ms": str(config.group_consumer_session_timeout_ms),
        "consumer.heartbeat.interval.ms": str(config.group_consumer_heartbeat_interval_ms),
        "consumer.assignment.interval.ms": str(
            getattr(config, "group_consumer_assignment_interval_ms", 1000)
        ),
        "consumer.assignor.offload.enable": str(
            getattr(config, "group_consumer_assignor_offload_enable", True)
        ).lower(),
        "share.session.timeout.ms": str(config.group_share_session_timeout_ms),
        "share.heartbeat.interval.ms": str(config.group_share_heartbeat_interval_ms),
        "share.record.lock.duration.ms": str(config.group_share_record_lock_duration_ms),
        "share.auto.offset.reset": config.share_auto_offset_reset,
        "share.isolation.level": config.share_isolation_level,
    }


def validate(
    overrides: Mapping[str, str], defaults: Mapping[str, str], bounds: GroupConfigBounds
) -> str | None:
    """Why ``overrides`` are not a valid group config (over ``defaults``), or None."""
    for name in overrides:
        if name not in GROUP_CONFIGS:
            return f"Unknown group config name: {name}"
    values = {**defaults, **overrides}
    numbers: dict[str, int] = {}
    for name, kind in GROUP_CONFIGS.items():
        value = str(values.get(name, "")).strip()
        if kind == INT:
            try:
                number = int(value)
            except ValueError:
                return f"Invalid value {value} for configuration {name}: Not a number of type INT"
            least = _AT_LEAST.get(name, 1)
            if number < least:
                return (
                    f"Invalid value {value} for configuration {name}: "
                    f"Value must be at least {least}"
                )
            numbers[name] = number
        elif kind == BOOLEAN and value.lower() not in ("true", "false"):
            return f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
    reset = str(values.get("share.auto.offset.reset", "")).strip().lower()
    if reset not in ("latest", "earliest") and by_duration_ms(reset) is None:
        return (
            f"Invalid value {values.get('share.auto.offset.reset')} for configuration "
            "share.auto.offset.reset: must be latest, earliest or by_duration:<ISO-8601 duration>"
        )
    isolation = str(values.get("share.isolation.level", "")).strip().lower()
    if isolation not in _ISOLATION_LEVELS:
        return (
            f"Invalid value {values.get('share.isolation.level')} for configuration "
            f"share.isolation.level: String must be one of: {', '.join(_ISOLATION_LEVELS)}"
        )
    for name, (low, high, low_name, high_name) in bounds.ranges().items():
        if name not in overrides:
            continue  # Kafka checks the merged values; a broker default is valid by itself
        if numbers[name] < low:
            return f"{name} must be greater than or equal to {low_name}"
        if numbers[name] > high:
            return f"{name} must be less than or equal to {high_name}"
    for session, heartbeat in (
        ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
        ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ):
        if (session in overrides or heartbeat in overrides) and numbers[session] <= numbers[
            heartbeat
        ]:
            return f"{session} must be greater than {heartbeat}"
    return None


def group_config_path(group_id: str) -> str:
    return f"{GROUPS_PATH}/{sanitize(group_id)}"


@dataclass
class GroupConfigStore:
    """Every group's overrides, from the coordination store, and their writes."""

    session: Any
    defaults: dict[str, str]
    bounds: GroupConfigBounds = field(default_factory=GroupConfigBounds)
    overrides: dict[str, dict[str, str]] = field(default_factory=dict)
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once every group's overrides were read (the watch's first load)."""

    # -- lookups (the coordinators) ----------------------------------------------------------

    def value(self, group_id: str, name: str) -> str:
        """The group's value of ``name``: its override, else the broker's default."""
        found = self.overrides.get(group_id)
        if found is not None and name in found:
            return found[name]
        return self.defaults[name]

    def int_value(self, group_id: str, name: str) -> int:
        return int(self.value(group_id, name))

    # -- the store ---------------------------------------------------------------------------

    async def read(self, group_id: str) -> dict[str, str]:
        """The group's stored overrides (read from the store, and cached)."""
        try:
            data, _ = await self.session.get_data(group_config_path(group_id))
            config = paths.decode_entity_config(data)
        except NoNode:
            config = {}
        except ValueError as e:
            log.warning("group config unreadable", group=group_id, error=str(e))
            return dict(self.overrides.get(group_id, {}))
        self._cache(group_id, config)
        return dict(config)

    async def write(self, group_id: str, config: Mapping[str, str]) -> None:
        """Replace the group's overrides and announce the change."""
        config = {str(k): str(v) for k, v in config.items()}
        path = group_config_path(group_id)
        encoded = paths.encode_entity_config(config)
        await self.session.ensure_path(GROUPS_PATH)
        for _ in range(_CAS_RETRIES):
            stat = await self.session.exists(path)
            try:
                if stat is None:
                    await self.session.multi([CreateOp(path, encoded)])
                else:
                    await self.session.multi([SetDataOp(path, encoded, stat.version)])
                break
            except (NodeExists, BadVersion, NoNode):
                continue
        else:
            raise RuntimeError(f"{path} kept changing; try again")
        self._cache(group_id, config)
        await self.session.ensure_path(paths.CONFIG_CHANGES)
        await self.session.create(
            paths.config_change_sequence_path(),
            paths.encode_config_change(f"groups/{sanitize(group_id)}"),
            sequential=True,
        )

    async def load(self) -> None:
        """Every group's overrides."""
        try:
            names = await self.session.get_children(GROUPS_PATH)
        except NoNode:
            names = []
        fresh: dict[str, dict[str, str]] = {}
        for name in names:
            group_id = desanitize(name)
            try:
                data, _ = await self.session.get_data(f"{GROUPS_PATH}/{name}")
                config = paths.decode_entity_config(data)
            except (NoNode, ValueError):
                continue
            if config:
                fresh[group_id] = config
        self.overrides = fresh
        self.loaded.set()

    async def wait_loaded(self, timeout_s: float = 5.0) -> None:
        """Until the first load is done (a share-partition initialised right after a start
        reads its group's ``share.auto.offset.reset``), or ``timeout_s``: the store may be
        away, and the broker's defaults are then all there is."""
        try:
            await asyncio.wait_for(self.loaded.wait(), timeout_s)
        except TimeoutError:
            log.warning("group configs not loaded yet; using the broker defaults")

    async def watch(self) -> None:
        """Follow the change notifications naming ``groups/<g>`` (runs until cancelled; a
        store error restarts it after a pause, reading everything again)."""
        while True:
            try:
                await self._watch_once()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the store went away for a moment: start over
                log.warning("group config watch restarting", error=repr(e))
                await asyncio.sleep(WATCH_RETRY_SECONDS)

    async def _watch_once(self) -> None:
        await self.session.ensure_path(paths.CONFIG_CHANGES)
        seen: set[str] | None = None
        async for children in self.session.watch_children(paths.CONFIG_CHANGES):
            current = set(children or ())
            if seen is None:
                await self.load()
                seen = current
                continue
            fresh = sorted(current - seen)
            seen = current
            for child in fresh:
                try:
                    data, _ = await self.session.get_data(f"{paths.CONFIG_CHANGES}/{child}")
                    relative = paths.decode_config_change(data)
                except (NoNode, ValueError):
                    continue
                kind, _, name = relative.partition("/")
                if kind == "groups" and name:
                    await self.read(desanitize(name))

    def _cache(self, group_id: str, config: Mapping[str, str]) -> None:
        if config:
            self.overrides[group_id] = dict(config)
        else:
            self.overrides.pop(group_id, None)
