"""Broker configuration (layer 0): Kafka's property names, Kafka's defaults.

`BrokerConfig` is a pydantic-settings model. Each field is a Kafka broker property with the dots
replaced by underscores (`log.dirs` -> `log_dirs`); the mapping is one-to-one, so a property name
is always recoverable from the field name and the other way round.

Sources, lowest precedence first (like Kafka's start script, where `--override` wins):

1. the defaults below (Kafka's, except that the out-of-the-box values run a single node:
   broker.id=0, listeners=PLAINTEXT://127.0.0.1:9092, log.dirs=./data, embedded store);
2. a `server.properties` file (`--config`), Java properties syntax (`key=value` or `key: value`,
   `#`/`!` comments, backslash line continuation);
3. `KAFKALITE_` environment variables: `KAFKALITE_LOG_DIRS` for `log.dirs`;
4. `--override key=value`, repeatable.

Invariant: start-up never proceeds with a value it did not understand. An unknown key (in any
source) or a value that fails validation raises `ConfigError`, whose message names the Kafka
property, e.g. ``invalid value for num.partitions: Input should be greater than 0``.

Layer 0: no I/O besides reading the properties file the caller names; no asyncio.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

ENV_PREFIX = "KAFKALITE_"
INT_MAX = 2**31 - 1  # Kafka's INT configs


class ConfigError(ValueError):
    """A configuration key is unknown or its value is invalid; `key` is the Kafka property name."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One entry of `listeners`: `PLAINTEXT://host:port` (listener name = security protocol)."""

    listener_name: str
    host: str
    port: int

    @property
    def connection_string(self) -> str:
        return f"{self.listener_name}://{self.host}:{self.port}"


def property_name(field_name: str) -> str:
    return field_name.replace("_", ".")


def field_name(key: str) -> str:
    return key.strip().replace(".", "_").replace("-", "_")


UNSUPPORTED_SECURITY_PROTOCOLS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_endpoints(value: str, key: str = "listeners") -> list[Endpoint]:
    """Parse a comma-separated listener list; raise ValueError naming the bad entry."""
    endpoints = []
    for raw in value.split(","):
        raw = raw.strip()
        if not raw:
            continue
        name, sep, rest = raw.partition("://")
        if not sep or not name:
            raise ValueError(f"{raw!r} is not NAME://host:port")
        host, colon, port_text = rest.rpartition(":")
        if not colon:
            raise ValueError(f"{raw!r} has no port")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"{raw!r} has a non-numeric port") from None
        if not 0 <= port <= 65535:
            raise ValueError(f"{raw!r}: port out of range")
        if name.upper() in UNSUPPORTED_SECURITY_PROTOCOLS:
            # Kafka maps these names to their protocols; kafkalite has no TLS or SASL, and a
            # listener by that name would be announced as what it is not.
            raise ValueError(
                f"{raw!r}: the {name.upper()} security protocol is not supported "
                "(kafkalite listeners are PLAINTEXT; any other name is a plaintext listener)"
            )
        endpoints.append(Endpoint(name.upper(), host, port))
    names = [e.listener_name for e in endpoints]
    if len(set(names)) != len(names):
        raise ValueError(f"{key} names must be unique, got {names}")
    return endpoints


_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]+")  # Kafka's Utils.validHostPattern, non-empty


def parse_connection_overrides(value: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host:count,host:count` (Kafka's parseCsvMap: each
    entry split at its last ':', so IPv6 addresses need no brackets); ValueError if malformed."""
    out: dict[str, int] = {}
    if not value.strip():
        return out
    for entry in value.split(","):
        host, sep, count = entry.strip().rpartition(":")
        host = host.strip()
        if not sep or not _VALID_HOST.fullmatch(host):
            raise ValueError(f"{entry.strip()!r} is not host:count")
        if not count.strip().isdigit() or int(count) > INT_MAX:
            raise ValueError(f"{entry.strip()!r}: the count must be an integer 0..{INT_MAX}")
        out[host] = int(count)
    return out


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a Java .properties file (the subset Kafka's server.properties uses)."""
    text = Path(path).read_text(encoding="utf-8")
    props: dict[str, str] = {}
    logical = ""
    for line in re.split(r"\r\n|\r|\n", text):
        stripped = line.strip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            logical += stripped[:-1]
            continue
        logical += stripped
        key, value = _split_property(logical)
        props[key] = value
        logical = ""
    if logical:
        key, value = _split_property(logical)
        props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str]:
    for i, ch in enumerate(line):
        if ch in "=:":
            return line[:i].strip(), line[i + 1 :].strip()
        if ch.isspace():
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return line[:i].strip(), rest.strip()
    return line.strip(), ""


def parse_override(text: str) -> tuple[str, str]:
    """`key=value` from `--override`; raises ConfigError when there is no `=`."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(text, f"--override expects key=value, got {text!r}")
    return key.strip(), value.strip()


class _PropertiesSource(PydanticBaseSettingsSource):
    """A pydantic-settings source over an already-read mapping of Kafka property names."""

    def __init__(self, settings_cls: type[BaseSettings], props: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self._values = {field_name(k): v for k, v in props.items()}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._values)


class BrokerConfig(BaseSettings):
    """The broker's settings; see the module docstring for sources and precedence."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        case_sensitive=False,
        validate_default=True,
        frozen=True,
    )

    # The properties file's contents for the current `load`, consumed by the settings source.
    _file_props: ClassVar[Mapping[str, str]] = {}

    # --- broker identity and listeners
    broker_id: int = Field(0, ge=0)
    broker_rack: str | None = None
    listeners: str = "PLAINTEXT://127.0.0.1:9092"
    advertised_listeners: str | None = None
    inter_broker_listener_name: str | None = None
    admin_listener: str | None = "http://127.0.0.1:9644"
    """kafkalite: `http://host:port` of the HTTP admin API; empty = disabled. A port already in
    use is logged and the broker runs without the admin API."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """kafkalite: the broker's log level."""

    # --- coordination
    zookeeper_connect: str | None = None
    """Unset (the default) = the embedded coordination store under the first log dir."""
    zookeeper_session_timeout_ms: int = Field(18000, gt=0)
    zookeeper_connection_timeout_ms: int | None = Field(None, gt=0)

    # --- logs
    log_dir: str = "/tmp/kafka-logs"
    log_dirs: str | None = "./data"
    num_partitions: int = Field(1, gt=0)
    default_replication_factor: int = Field(1, gt=0)
    min_insync_replicas: int = Field(1, ge=1, le=INT_MAX)
    auto_create_topics_enable: bool = True
    delete_topic_enable: bool = True
    log_segment_bytes: int = Field(1073741824, ge=14, le=INT_MAX)
    log_roll_ms: int | None = Field(None, gt=0)
    log_roll_hours: int = Field(168, ge=1)
    log_retention_ms: int | None = Field(None, ge=-1)
    log_retention_minutes: int | None = Field(None, ge=-1)
    log_retention_hours: int = Field(168, ge=-1)
    log_retention_bytes: int = Field(-1, ge=-1)
    log_retention_check_interval_ms: int = Field(300000, ge=1)
    log_index_interval_bytes: int = Field(4096, ge=0, le=INT_MAX)
    log_index_size_max_bytes: int = Field(10485760, ge=4, le=INT_MAX)
    log_flush_interval_messages: int = Field(9223372036854775807, ge=1)
    log_flush_interval_ms: int | None = Field(None, ge=0)
    log_flush_scheduler_interval_ms: int = Field(9223372036854775807, ge=0)
    log_flush_offset_checkpoint_interval_ms: int = Field(60000, ge=0)
    num_recovery_threads_per_data_dir: int = Field(1, ge=1)
    log_cleanup_policy: str = "delete"
    log_cleaner_enable: bool = True
    log_cleaner_threads: int = Field(1, ge=0)
    log_cleaner_backoff_ms: int = Field(15000, ge=0)
    log_cleaner_dedupe_buffer_size: int = Field(134217728, ge=1)
    log_cleaner_io_buffer_size: int = Field(524288, ge=0)
    log_cleaner_io_buffer_load_factor: float = Field(0.9, gt=0, le=1)
    log_cleaner_io_max_bytes_per_second: float = Field(1.7976931348623157e308, gt=0)
    log_cleaner_min_cleanable_ratio: float = Field(0.5, ge=0, le=1)
    log_cleaner_delete_retention_ms: int = Field(86400000, ge=0)
    log_cleaner_min_compaction_lag_ms: int = Field(0, ge=0)
    log_cleaner_max_compaction_lag_ms: int = Field(9223372036854775807, ge=1)
    log_message_timestamp_type: Literal["CreateTime", "LogAppendTime"] = "CreateTime"
    log_preallocate: bool = False
    log_segment_delete_delay_ms: int = Field(60000, ge=0)
    compression_type: Literal["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"] = (
        "producer"
    )
    message_max_bytes: int = Field(1048588, ge=0, le=INT_MAX)

    # --- network
    socket_request_max_bytes: int = Field(104857600, ge=1)
    connections_max_idle_ms: int = Field(600000, ge=1)
    max_connections: int = Field(INT_MAX, ge=0, le=INT_MAX)
    max_connections_per_ip: int = Field(INT_MAX, ge=0, le=INT_MAX)
    max_connections_per_ip_overrides: str = ""
    """`host:count,host:count`; a host is an IP address or a name resolved at start-up."""
    fetch_max_bytes: int = Field(57671680, ge=1024)
    max_incremental_fetch_session_cache_slots: int = Field(1000, ge=0)

    # --- replication
    replica_lag_time_max_ms: int = Field(30000, gt=0)
    replica_fetch_max_bytes: int = Field(1048576, ge=0)
    replica_fetch_min_bytes: int = Field(1, ge=1)
    replica_fetch_wait_max_ms: int = Field(500, ge=0)
    replica_fetch_backoff_ms: int = Field(1000, ge=0)
    replica_fetch_response_max_bytes: int = Field(10485760, ge=0)
    replica_socket_timeout_ms: int = Field(30000, gt=0)
    num_replica_fetchers: int = Field(1, ge=1)
    replica_high_watermark_checkpoint_interval_ms: int = Field(5000, ge=1)
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = Field(300, ge=1)
    controller_socket_timeout_ms: int = Field(30000, gt=0)
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = Field(3, ge=0)
    controlled_shutdown_retry_backoff_ms: int = Field(5000, ge=0)

    # --- producers and groups
    producer_id_expiration_ms: int = Field(86400000, ge=1)
    transactional_id_expiration_ms: int = Field(604800000, ge=1)
    transaction_max_timeout_ms: int = Field(900000, ge=1)
    transaction_state_log_num_partitions: int = Field(50, ge=1)
    transaction_state_log_replication_factor: int = Field(3, ge=1)
    transaction_state_log_segment_bytes: int = Field(104857600, ge=1)
    transaction_state_log_load_buffer_size: int = Field(5242880, ge=1)
    transaction_state_log_min_isr: int = Field(2, ge=1)
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = Field(10000, ge=1)
    transaction_remove_expired_transaction_cleanup_interval_ms: int = Field(3600000, ge=1)
    offsets_topic_num_partitions: int = Field(50, ge=1)
    offsets_topic_replication_factor: int = Field(3, ge=1)
    offsets_topic_segment_bytes: int = Field(104857600, ge=1)
    offsets_retention_minutes: int = Field(10080, ge=1)
    offsets_commit_timeout_ms: int = Field(5000, ge=1)
    group_initial_rebalance_delay_ms: int = Field(3000, ge=0)
    group_min_session_timeout_ms: int = Field(6000, ge=0)
    group_max_session_timeout_ms: int = Field(1800000, ge=0)

    @field_validator("listeners", "advertised_listeners")
    @classmethod
    def _valid_listeners(cls, value: str | None) -> str | None:
        if value is not None:
            if not parse_endpoints(value):
                raise ValueError("no listener given")
        return value

    @field_validator("log_cleanup_policy")
    @classmethod
    def _valid_cleanup_policy(cls, value: str) -> str:
        policies = {p.strip() for p in value.split(",") if p.strip()}
        if not policies or not policies <= {"delete", "compact"}:
            raise ValueError(f"{value!r}: expected delete, compact or both")
        return value

    @field_validator("max_connections_per_ip_overrides")
    @classmethod
    def _valid_per_ip_overrides(cls, value: str) -> str:
        parse_connection_overrides(value)
        return value

    @field_validator("admin_listener")
    @classmethod
    def _valid_admin_listener(cls, value: str | None) -> str | None:
        if value:
            endpoints = parse_endpoints(value, "admin.listener")
            if len(endpoints) != 1 or endpoints[0].listener_name != "HTTP":
                raise ValueError(f"{value!r} is not one http://host:port")
        return value or None

    @model_validator(mode="after")
    def _consistent(self) -> BrokerConfig:
        if self.advertised_listeners is not None:
            names = {e.listener_name for e in self.listener_endpoints}
            for endpoint in parse_endpoints(self.advertised_listeners):
                if endpoint.listener_name not in names:
                    raise ValueError(
                        f"advertised.listeners: {endpoint.listener_name} is not in listeners"
                    )
        if self.max_connections_per_ip == 0 and not self.max_connections_per_ip_override_map:
            raise ValueError(
                "max.connections.per.ip: can be set to zero only if "
                "max.connections.per.ip.overrides is set"
            )
        if self.replica_socket_timeout_ms < self.replica_fetch_wait_max_ms:
            # Kafka's rule: a follower's fetch would time out while the leader holds it.
            raise ValueError(
                f"replica.socket.timeout.ms: {self.replica_socket_timeout_ms} is less than "
                f"replica.fetch.wait.max.ms ({self.replica_fetch_wait_max_ms}); it should always "
                "be at least that, to prevent unnecessary socket timeouts"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # First wins: overrides (init kwargs) > environment > properties file > defaults.
        return (init_settings, env_settings, _PropertiesSource(settings_cls, cls._file_props))

    # ------------------------------------------------------------------ loading

    @classmethod
    def known_keys(cls) -> set[str]:
        return {property_name(name) for name in cls.model_fields}

    @classmethod
    def load(
        cls,
        config_file: str | os.PathLike[str] | None = None,
        overrides: Iterable[str] | Mapping[str, Any] = (),
        environ: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """Build the configuration from all sources; raise ConfigError naming the bad key."""
        file_props: dict[str, str] = {}
        if config_file is not None:
            try:
                file_props = read_properties(config_file)
            except OSError as e:
                raise ConfigError("--config", f"cannot read {config_file}: {e}") from None
            except UnicodeDecodeError as e:
                raise ConfigError(
                    "--config",
                    f"--config: {config_file} is not UTF-8 text (byte {e.object[e.start]:#04x} at "
                    f"position {e.start}): save it as UTF-8",
                ) from None
        if isinstance(overrides, Mapping):
            override_props = {str(k): v for k, v in overrides.items()}
        else:
            override_props = dict(parse_override(item) for item in overrides)
        environ = os.environ if environ is None else environ
        env_keys = {
            k[len(ENV_PREFIX) :].lower()
            for k in environ
            if k.upper().startswith(ENV_PREFIX) and len(k) > len(ENV_PREFIX)
        }
        known = set(cls.model_fields)
        for key in list(file_props) + list(override_props):
            if field_name(key) not in known:
                raise ConfigError(key, f"unknown configuration key {key!r}")
        for key in env_keys:
            if key not in known:
                raise ConfigError(
                    ENV_PREFIX + key.upper(),
                    f"unknown configuration key {property_name(key)!r} "
                    f"(environment variable {ENV_PREFIX + key.upper()})",
                )
        init = {field_name(k): v for k, v in override_props.items()}
        previous = cls._file_props
        cls._file_props = file_props
        try:
            if environ is os.environ:
                return cls(**init)
            return _with_environ(cls, environ, init)
        except ValidationError as e:
            raise _config_error(e) from None
        finally:
            cls._file_props = previous

    # ------------------------------------------------------------------ derived views

    @property
    def log_dir_list(self) -> list[str]:
        value = self.log_dirs if self.log_dirs else self.log_dir
        return [d.strip() for d in value.split(",") if d.strip()]

    @property
    def listener_endpoints(self) -> list[Endpoint]:
        return parse_endpoints(self.listeners)

    @property
    def advertised_endpoints(self) -> list[Endpoint]:
        """What clients are told: advertised.listeners, else listeners (0.0.0.0 -> 127.0.0.1)."""
        if self.advertised_listeners is not None:
            return parse_endpoints(self.advertised_listeners)
        return [
            Endpoint(
                e.listener_name, "127.0.0.1" if e.host in ("", "0.0.0.0", "::") else e.host, e.port
            )
            for e in self.listener_endpoints
        ]

    @property
    def max_connections_per_ip_override_map(self) -> dict[str, int]:
        return parse_connection_overrides(self.max_connections_per_ip_overrides)

    @property
    def log_retention_time_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours (Kafka's order); -1 = unlimited."""
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        if self.log_retention_minutes is not None:
            return -1 if self.log_retention_minutes < 0 else self.log_retention_minutes * 60000
        return -1 if self.log_retention_hours < 0 else self.log_retention_hours * 3600000

    @property
    def log_roll_time_ms(self) -> int:
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * 3600000

    def topic_config_defaults(self) -> dict[str, str]:
        """The broker-level defaults of topic configs, under the topic-config names."""
        return {
            "segment.bytes": str(self.log_segment_bytes),
            "segment.ms": str(self.log_roll_time_ms),
            "segment.index.bytes": str(self.log_index_size_max_bytes),
            "index.interval.bytes": str(self.log_index_interval_bytes),
            "retention.ms": str(self.log_retention_time_ms),
            "retention.bytes": str(self.log_retention_bytes),
            "flush.messages": str(self.log_flush_interval_messages),
            "flush.ms": str(
                self.log_flush_interval_ms
                if self.log_flush_interval_ms is not None
                else 9223372036854775807
            ),
            "max.message.bytes": str(self.message_max_bytes),
            "message.timestamp.type": self.log_message_timestamp_type,
            "cleanup.policy": self.log_cleanup_policy,
            "min.insync.replicas": str(self.min_insync_replicas),
            "unclean.leader.election.enable": str(self.unclean_leader_election_enable).lower(),
            "compression.type": self.compression_type,
            "preallocate": str(self.log_preallocate).lower(),
            "file.delete.delay.ms": str(self.log_segment_delete_delay_ms),
            "delete.retention.ms": str(self.log_cleaner_delete_retention_ms),
            "min.compaction.lag.ms": str(self.log_cleaner_min_compaction_lag_ms),
            "max.compaction.lag.ms": str(self.log_cleaner_max_compaction_lag_ms),
            "min.cleanable.dirty.ratio": str(self.log_cleaner_min_cleanable_ratio),
        }

    def properties(self) -> dict[str, str | None]:
        """All settings under Kafka's names, values as Kafka prints them (DescribeConfigs)."""
        out: dict[str, str | None] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, bool):
                value = str(value).lower()
            out[property_name(name)] = None if value is None else str(value)
        return out


def _with_environ(
    cls: type[BrokerConfig], environ: Mapping[str, str], init: dict[str, Any]
) -> BrokerConfig:
    """Construct with an explicit environment (tests): swap os.environ's view for the call."""
    saved = {k: v for k, v in os.environ.items() if k.upper().startswith(ENV_PREFIX)}
    try:
        for k in saved:
            del os.environ[k]
        for k, v in environ.items():
            if k.upper().startswith(ENV_PREFIX):
                os.environ[k] = v
        return cls(**init)
    finally:
        for k in [k for k in os.environ if k.upper().startswith(ENV_PREFIX)]:
            del os.environ[k]
        os.environ.update(saved)


def _config_error(error: ValidationError) -> ConfigError:
    first = error.errors()[0]
    loc = [str(part) for part in first.get("loc", ()) if isinstance(part, str)]
    if loc:
        key = property_name(loc[0])
        value = first.get("input")
        return ConfigError(key, f"invalid value for {key}: {value!r}: {first['msg']}")
    message = first["msg"].removeprefix("Value error, ")
    key = message.split(":", 1)[0] if ":" in message else "configuration"
    return ConfigError(key, f"invalid configuration: {message}")
