"""Per-log configuration with Kafka's topic-config names and defaults.

``LogConfig`` holds the settings a :class:`~kafkalite.storage.log.Log` obeys. Its fields are the
snake_case of Kafka's topic config names (``segment.bytes`` -> ``segment_bytes``); the one
exception is ``segment.index.bytes`` whose field is ``segment_index_bytes`` (Kafka's
``maxIndexSize``). Defaults are Kafka's.

Two ways to build one:

* ``LogConfig.from_properties({"segment.bytes": "1048576"}, defaults=base)`` -- topic-level names,
  as stored in ``/config/topics/<topic>`` or sent in CreateTopics; values are strings (or ints).
* ``LogConfig.from_broker_config(broker_config)`` -- from the typed, already validated
  :class:`~kafkalite.config.BrokerConfig` (``log.segment.bytes``, ``log.roll.hours``,
  ``log.retention.hours``, ``message.max.bytes``, ...), giving the broker's default for every
  topic. Nothing is parsed again.

A bad topic-level value raises ``ValueError`` naming the key.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkalite.config import BrokerConfig

LONG_MAX = 2**63 - 1

DELETE = "delete"
COMPACT = "compact"


def _parse_int(key: str, value: Any, minimum: int | None = None, maximum: int = LONG_MAX) -> int:
    """Java's parseInt/parseLong: decimal digits (no '_' separators), within the type's range
    (``maximum``: 2**31 - 1 for Kafka's INT configs)."""
    if isinstance(value, bool):
        raise ValueError(f"Invalid value {value!r} for configuration {key}: not an integer")
    text = str(value).strip()
    try:
        if "_" in text:
            raise ValueError(text)
        result = int(text)
    except (TypeError, ValueError):
        raise ValueError(
            f"Invalid value {value!r} for configuration {key}: not an integer"
        ) from None
    if minimum is not None and result < minimum:
        raise ValueError(
            f"Invalid value {value!r} for configuration {key}: value must be at least {minimum}"
        )
    if result > maximum:
        raise ValueError(
            f"Invalid value {value!r} for configuration {key}: value must be at most {maximum}"
        )
    return result


def _parse_float(key: str, value: Any, lo: float, hi: float) -> float:
    try:
        result = float(str(value).strip())
    except (TypeError, ValueError):
        raise ValueError(f"Invalid value {value!r} for configuration {key}: not a number") from None
    if not lo <= result <= hi:
        raise ValueError(f"Invalid value {value!r} for configuration {key}: must be in [{lo},{hi}]")
    return result


def _parse_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise ValueError(f"Invalid value {value!r} for configuration {key}: expected true or false")


def _parse_choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    text = str(value).strip()
    if text not in choices:
        raise ValueError(
            f"Invalid value {value!r} for configuration {key}: must be one of {', '.join(choices)}"
        )
    return text


def _parse_cleanup_policy(key: str, value: Any) -> str:
    parts = [p.strip() for p in str(value).split(",") if p.strip()]
    if not parts:
        raise ValueError(f"Invalid value {value!r} for configuration {key}: empty list")
    for part in parts:
        _parse_choice(key, part, (DELETE, COMPACT))
    return ",".join(parts)


SUBJECT_NAME_STRATEGIES = tuple(
    f"io.confluent.kafka.serializers.subject.{name}"
    for name in ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
)
TOPIC_NAME_STRATEGY = SUBJECT_NAME_STRATEGIES[0]


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = LONG_MAX
    cleanup_policy: str = DELETE
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    delete_retention_ms: int = 24 * 60 * 60 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60_000
    preallocate: bool = False
    compression_type: str = "producer"
    # Confluent Server's schema validation (kafkalite/schema_registry/validation.py): the
    # broker refuses records whose key or value is not framed with an id registered under the
    # subject the strategy names. Read only by that validator, never by the log.
    confluent_key_schema_validation: bool = False
    confluent_value_schema_validation: bool = False
    confluent_key_subject_name_strategy: str = TOPIC_NAME_STRATEGY
    confluent_value_subject_name_strategy: str = TOPIC_NAME_STRATEGY

    # ---------------------------------------------------------------- derived

    # Substring tests: the validated policy is a list of "delete" and "compact" only, and
    # ``compact`` is read on every produce (a compacted topic refuses keyless records).
    @property
    def compact(self) -> bool:
        return COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return DELETE in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        """True when the broker overwrites timestamps (message.timestamp.type=LogAppendTime)."""
        return self.message_timestamp_type == "LogAppendTime"

    def to_properties(self) -> dict[str, str]:
        """Kafka topic-config names -> string values (what DescribeConfigs shows)."""
        out = {}
        for name, field in TOPIC_CONFIG_FIELDS.items():
            value = getattr(self, field)
            out[name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    # ---------------------------------------------------------------- builders

    @classmethod
    def from_properties(
        cls,
        props: Mapping[str, Any],
        defaults: LogConfig | None = None,
        *,
        strict: bool = False,
    ) -> LogConfig:
        """Overlay topic-level ``props`` (Kafka names) on ``defaults`` (Kafka's defaults if None).

        Unknown names are ignored unless ``strict`` (then ``ValueError``), as CreateTopics must
        reject them.
        """
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        for key, value in props.items():
            field = TOPIC_CONFIG_FIELDS.get(key)
            if field is None:
                if strict:
                    raise ValueError(f"Unknown topic config name: {key}")
                continue
            changes[field] = _parse_field(key, field, value)
        return dataclasses.replace(base, **changes) if changes else base

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> LogConfig:
        """The broker-wide default log config from the broker's typed settings (validated
        there). Like Kafka, the finer unit wins: ``log.roll.ms`` over ``log.roll.hours``,
        ``log.retention.ms`` over ``.minutes`` over ``.hours``."""
        policy = ",".join(p.strip() for p in config.log_cleanup_policy.split(",") if p.strip())
        return cls(
            segment_bytes=config.log_segment_bytes,
            segment_ms=config.log_roll_time_ms,
            segment_index_bytes=config.log_index_size_max_bytes,
            index_interval_bytes=config.log_index_interval_bytes,
            retention_ms=config.log_retention_time_ms,
            retention_bytes=config.log_retention_bytes,
            flush_messages=config.log_flush_interval_messages,
            flush_ms=(
                config.log_flush_interval_ms
                if config.log_flush_interval_ms is not None
                else LONG_MAX
            ),
            max_message_bytes=config.message_max_bytes,
            message_timestamp_type=config.log_message_timestamp_type,
            cleanup_policy=policy,
            min_insync_replicas=config.min_insync_replicas,
            unclean_leader_election_enable=config.unclean_leader_election_enable,
            delete_retention_ms=config.log_cleaner_delete_retention_ms,
            min_compaction_lag_ms=config.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms=config.log_cleaner_max_compaction_lag_ms,
            min_cleanable_dirty_ratio=config.log_cleaner_min_cleanable_ratio,
            file_delete_delay_ms=config.log_segment_delete_delay_ms,
            preallocate=config.log_preallocate,
            compression_type=config.compression_type,
        )


def _parse_field(key: str, field: str, value: Any) -> Any:
    if field in (
        "unclean_leader_election_enable",
        "preallocate",
        "confluent_key_schema_validation",
        "confluent_value_schema_validation",
    ):
        return _parse_bool(key, value)
    if field == "min_cleanable_dirty_ratio":
        return _parse_float(key, value, 0.0, 1.0)
    if field == "message_timestamp_type":
        return _parse_choice(key, value, ("CreateTime", "LogAppendTime"))
    if field == "cleanup_policy":
        return _parse_cleanup_policy(key, value)
    if field.endswith("_subject_name_strategy"):
        text = str(value).strip()
        # the short class name is taken for the full one
        text = text if "." in text else f"io.confluent.kafka.serializers.subject.{text}"
        return _parse_choice(key, text, SUBJECT_NAME_STRATEGIES)
    if field == "compression_type":
        return _parse_choice(
            key, value, ("uncompressed", "gzip", "snappy", "lz4", "zstd", "producer")
        )
    minimum = _MINIMUMS.get(field)
    return _parse_int(key, value, minimum, INT_MAX if field in _INT_FIELDS else LONG_MAX)


INT_MAX = 2**31 - 1
# Kafka's LogConfig declares these INT (the others LONG): a segment over 2 GiB would overflow
# the 32-bit positions of the offset index.
_INT_FIELDS = frozenset(
    {
        "segment_bytes",
        "segment_index_bytes",
        "index_interval_bytes",
        "max_message_bytes",
        "min_insync_replicas",
    }
)

_MINIMUMS = {
    "segment_bytes": 14,  # Kafka: LegacyRecord.RECORD_OVERHEAD_V0
    "segment_ms": 1,
    "segment_jitter_ms": 0,
    "segment_index_bytes": 4,
    "index_interval_bytes": 0,
    "retention_ms": -1,
    "retention_bytes": -1,
    "flush_messages": 1,  # Kafka: 1 (0 would mean fsync nothing; use 1 to fsync every message)
    "flush_ms": 0,
    "max_message_bytes": 0,
    "message_timestamp_difference_max_ms": 0,
    "min_insync_replicas": 1,
    "delete_retention_ms": 0,
    "min_compaction_lag_ms": 0,
    "max_compaction_lag_ms": 1,
    "file_delete_delay_ms": 0,
}

# Kafka topic config name -> LogConfig field.
TOPIC_CONFIG_FIELDS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.difference.max.ms": "message_timestamp_difference_max_ms",
    "cleanup.policy": "cleanup_policy",
    "min.insync.replicas": "min_insync_replicas",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "preallocate": "preallocate",
    "compression.type": "compression_type",
    "confluent.key.schema.validation": "confluent_key_schema_validation",
    "confluent.value.schema.validation": "confluent_value_schema_validation",
    "confluent.key.subject.name.strategy": "confluent_key_subject_name_strategy",
    "confluent.value.subject.name.strategy": "confluent_value_subject_name_strategy",
}

# Broker config name -> (LogConfig field, multiplier to milliseconds): which broker setting gives
# a topic config its default (DescribeConfigs' config sources). Finest unit first.
BROKER_CONFIG_FIELDS: dict[str, tuple[str, int]] = {
    "log.segment.bytes": ("segment_bytes", 1),
    "log.roll.ms": ("segment_ms", 1),
    "log.roll.hours": ("segment_ms", 3_600_000),
    "log.roll.jitter.ms": ("segment_jitter_ms", 1),
    "log.roll.jitter.hours": ("segment_jitter_ms", 3_600_000),
    "log.index.size.max.bytes": ("segment_index_bytes", 1),
    "log.index.interval.bytes": ("index_interval_bytes", 1),
    "log.retention.ms": ("retention_ms", 1),
    "log.retention.minutes": ("retention_ms", 60_000),
    "log.retention.hours": ("retention_ms", 3_600_000),
    "log.retention.bytes": ("retention_bytes", 1),
    "log.flush.interval.messages": ("flush_messages", 1),
    "log.flush.interval.ms": ("flush_ms", 1),
    "message.max.bytes": ("max_message_bytes", 1),
    "log.message.timestamp.type": ("message_timestamp_type", 1),
    "log.message.timestamp.difference.max.ms": ("message_timestamp_difference_max_ms", 1),
    "log.cleanup.policy": ("cleanup_policy", 1),
    "min.insync.replicas": ("min_insync_replicas", 1),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", 1),
    "log.cleaner.delete.retention.ms": ("delete_retention_ms", 1),
    "log.cleaner.min.compaction.lag.ms": ("min_compaction_lag_ms", 1),
    "log.cleaner.max.compaction.lag.ms": ("max_compaction_lag_ms", 1),
    "log.cleaner.min.cleanable.ratio": ("min_cleanable_dirty_ratio", 1),
    "log.segment.delete.delay.ms": ("file_delete_delay_ms", 1),
    "log.preallocate": ("preallocate", 1),
    "compression.type": ("compression_type", 1),
}


# Kafka 3.9's MetadataVersion strings (message.format.version is one): 0.8.0 .. 0.11.0, 1.0 ..
# 3.9, each optionally with a patch number (dropped by Kafka's parser) or an -IVn suffix.
_METADATA_VERSION = re.compile(
    r"(0\.8\.[0-2]|0\.9\.0|0\.10\.[0-2]|0\.11\.0|1\.[01]|2\.[0-8]|3\.[0-9])"
    r"(\.\d+)?(-IV\d+)?"
)


def _metadata_version(name: str, value: str) -> str | None:
    if _METADATA_VERSION.fullmatch(value.strip()) is None:
        return (
            f"Invalid value {value} for configuration {name}: "
            f"Version {value} is not a valid version"
        )
    return None


def _boolean(name: str, value: str) -> str | None:
    if value.strip().lower() not in ("true", "false"):
        return f"Invalid value {value} for configuration {name}: Expected value to be either true or false"
    return None


@dataclass(frozen=True, slots=True)
class DeprecatedTopicConfig:
    """A topic config Kafka 3.9 still accepts but no longer acts on (removed in Kafka 4.0)."""

    default: str
    config_type: int  # Kafka's ConfigType, for DescribeConfigs v3+
    broker_name: str  # the broker property that sets its default (its synonym)
    validate: Callable[[str, str], str | None]


DEPRECATED_TOPIC_CONFIGS: dict[str, DeprecatedTopicConfig] = {
    # KIP-724: ignored once inter.broker.protocol.version >= 3.0, which every kafkalite broker
    # is (record batches are always magic v2); the default is Kafka 3.x's IBP_3_0_IV1.
    "message.format.version": DeprecatedTopicConfig(
        "3.0-IV1", 2, "log.message.format.version", _metadata_version
    ),
    # Down-conversion to magic v0/v1 for old consumers: kafkalite serves Fetch v4+ only, whose
    # clients read magic v2, so there is never anything to convert.
    "message.downconversion.enable": DeprecatedTopicConfig(
        "true", 1, "log.message.downconversion.enable", _boolean
    ),
}
"""Accepted (validated as Kafka does), stored in /config/topics and reported by
DescribeConfigs like any other topic config, and otherwise ignored, as a Kafka 3.9 broker does
with an inter-broker protocol of 3.0 or later (LogConfig still defines them). The logs never read
them (LogConfig skips names it does not know)."""


def validate_topic_configs(configs: Mapping[str, str | None]) -> str | None:
    """Why ``configs`` are not valid topic configs, or None: a null value, an unknown name or a
    bad value (Kafka's ``LogConfig.validate``), the deprecated configs by their own rules.
    CreateTopics, AlterConfigs, the admin API and the controller's topic writes all check
    with this one."""
    if not configs:  # the common case of a CreateTopics: Kafka's defaults are valid
        return None
    for name, value in configs.items():
        if value is None:
            return f"Null value not supported for topic configs: {name}"
        deprecated = DEPRECATED_TOPIC_CONFIGS.get(name)
        if deprecated is not None:
            problem = deprecated.validate(name, value)
            if problem is not None:
                return problem
    effective = {k: v for k, v in configs.items() if k not in DEPRECATED_TOPIC_CONFIGS}
    try:
        LogConfig.from_properties(effective, strict=True)
    except ValueError as e:
        return str(e)
    return None
