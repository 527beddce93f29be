"""Settings of the group coordinator, with Kafka's broker property names and defaults.

``GroupConfig`` governs membership (Kafka's ``GroupConfig``), ``OffsetConfig`` the offsets topic
and committed offsets (Kafka's ``OffsetConfig``). Both can be built from a mapping of Kafka
property names (``from_properties``) or from any object with the matching attributes
(``from_broker_config``: ``group.min.session.timeout.ms`` -> ``group_min_session_timeout_ms``),
so the composition root can hand over its broker configuration as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from kafkalite.group.assignors import parse_assignors

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"

#: Kafka's ConsumerGroupMigrationPolicy values
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


@dataclass(frozen=True, slots=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    group_initial_rebalance_delay_ms: int = 3_000
    #: the consumer group protocol (KIP-848): server assignors (the first is the default),
    #: session timeout and the heartbeat interval told to members, Kafka's defaults
    group_consumer_assignors: str = "uniform,range"
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = 2**31 - 1
    #: Kafka's ``group.consumer.migration.policy``: whether a classic group with members is
    #: converted to a consumer group (upgrade) and back (downgrade) online
    group_consumer_migration_policy: str = "bidirectional"
    #: Kafka 4.3's assignment batching (KIP-1263): a group's target assignment is recomputed
    #: at most once per ``group.consumer.assignment.interval.ms`` (0: whenever the group
    #: changes), within the ``group.consumer.{min,max}.assignment.interval.ms`` bounds that
    #: also limit the group-level ``consumer.assignment.interval.ms``
    group_consumer_assignment_interval_ms: int = 1_000
    group_consumer_min_assignment_interval_ms: int = 0
    group_consumer_max_assignment_interval_ms: int = 15_000
    #: ``group.consumer.assignor.offload.enable``: the assignor runs off the heartbeat path
    #: (the heartbeat that changed the group is answered with the previous target)
    group_consumer_assignor_offload_enable: bool = True

    def __post_init__(self) -> None:
        if self.group_consumer_migration_policy.lower() not in MIGRATION_POLICIES:
            raise ValueError(
                f"group.consumer.migration.policy: unknown policy "
                f"{self.group_consumer_migration_policy!r}"
            )
        try:
            parse_assignors(self.group_consumer_assignors)
        except ValueError as e:
            raise ValueError(f"group.consumer.assignors: {e}") from None
        if self.group_consumer_session_timeout_ms <= 0:
            raise ValueError("group.consumer.session.timeout.ms must be positive")
        if (
            not 0
            < self.group_consumer_heartbeat_interval_ms
            < self.group_consumer_session_timeout_ms
        ):
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be positive and below "
                "group.consumer.session.timeout.ms"
            )
        for name in ("", "min.", "max."):
            attr = f"group_consumer_{name.replace('.', '_')}assignment_interval_ms"
            if getattr(self, attr) < 0:
                raise ValueError(f"group.consumer.{name}assignment.interval.ms must be at least 0")
        low = self.group_consumer_min_assignment_interval_ms
        high = self.group_consumer_max_assignment_interval_ms
        if high < low:
            raise ValueError(
                "group.consumer.max.assignment.interval.ms must be greater than or equal to "
                "group.consumer.min.assignment.interval.ms"
            )
        if not low <= self.group_consumer_assignment_interval_ms <= high:
            raise ValueError(
                "group.consumer.assignment.interval.ms must be between "
                "group.consumer.min.assignment.interval.ms and "
                "group.consumer.max.assignment.interval.ms"
            )

    @property
    def upgrade_enabled(self) -> bool:
        return self.group_consumer_migration_policy.lower() in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.group_consumer_migration_policy.lower() in ("downgrade", "bidirectional")

    @property
    def consumer_assignors(self) -> tuple[str, ...]:
        return parse_assignors(self.group_consumer_assignors)


@dataclass(frozen=True, slots=True)
class OffsetConfig:
    offset_metadata_max_bytes: int = 4096
    offsets_load_buffer_size: int = 5 * 1024 * 1024
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_topic_replication_factor: int = 3
    offsets_topic_compression_codec: int = 0
    offsets_commit_timeout_ms: int = 5_000
    offsets_commit_required_acks: int = -1

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    def offsets_topic_configs(self) -> dict[str, str]:
        """Topic configuration of ``__consumer_offsets`` (compacted, like Kafka)."""
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.offsets_topic_segment_bytes),
            "compression.type": "producer",
        }


def _build(cls: type, values: Mapping[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in values:
            raw = values[f.name]
            if f.type == "str":
                kwargs[f.name] = str(raw)
                continue
            if f.type == "bool":
                if isinstance(raw, bool):
                    kwargs[f.name] = raw
                elif str(raw).strip().lower() in ("true", "false"):
                    kwargs[f.name] = str(raw).strip().lower() == "true"
                else:
                    raise ValueError(f"invalid value for {f.name.replace('_', '.')}: {raw!r}")
                continue
            try:
                kwargs[f.name] = int(raw)
            except (TypeError, ValueError) as e:
                raise ValueError(f"invalid value for {f.name.replace('_', '.')}: {raw!r}") from e
    return cls(**kwargs)


def from_properties(props: Mapping[str, str]) -> tuple[GroupConfig, OffsetConfig]:
    """Build both configs from Kafka property names (``offsets.retention.minutes=...``);
    unrelated keys are ignored. ``offset.metadata.max.bytes`` keeps its Kafka spelling."""
    values = {k.replace(".", "_"): v for k, v in props.items()}
    return _build(GroupConfig, values), _build(OffsetConfig, values)


def from_broker_config(config: object) -> tuple[GroupConfig, OffsetConfig]:
    """Build both configs from an object with attributes named after the properties."""
    values = {}
    for cls in (GroupConfig, OffsetConfig):
        for f in fields(cls):
            if hasattr(config, f.name):
                values[f.name] = getattr(config, f.name)
    return _build(GroupConfig, values), _build(OffsetConfig, values)
