"""Broker configuration (layer 0): Kafka's property names, Kafka's defaults.

`BrokerConfig` is a pydantic model. Each field is a Kafka broker property with the dots
replaced by underscores (`log.dirs` -> `log_dirs`); the mapping is one-to-one, so a property name
is always recoverable from the field name and the other way round.

`BrokerConfig.load` merges the sources into one dict of field names, later sources winning a
key, and validates that dict once (lowest precedence first; like Kafka's start script, where
`--override` wins):

1. the defaults below (Kafka's, except that the out-of-the-box values run a single node:
   broker.id=0, listeners=PLAINTEXT://127.0.0.1:9092, log.dirs=./data, embedded store);
2. a `server.properties` file (`--config`), Java properties syntax (`key=value` or `key: value`,
   `#`/`!` comments, backslash line continuation);
3. `KAFKALITE_` environment variables: `KAFKALITE_LOG_DIRS` for `log.dirs`;
4. `--override key=value`, repeatable.

Loading reads no class or process state besides the environment it is given (`os.environ` when
none is), so brokers started in threads of one process each get their own configuration.

Kafka's listener-prefixed keys (``listener.name.<name>.<setting>``, e.g.
``listener.name.sasl_ssl.plain.sasl.jaas.config``) are gathered by `load` into
``listener_name_overrides`` and read through `listener_setting` (the prefixed value, else the
broker-wide one); their syntax (listener, setting, JAAS entries) is checked here, TLS files
when the listeners are built (kafkalite/security/listeners.py).

Invariant: start-up never proceeds with a value it did not understand. An unknown key (in any
source) or a value that fails validation raises `ConfigError`, whose message names the Kafka
property, e.g. ``invalid value for num.partitions: Input should be greater than 0``.

Layer 0: no I/O besides reading the properties file the caller names; no asyncio.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

ENV_PREFIX = "KAFKALITE_"
NO_NATIVE_ENV = "KAFKALITE_NO_NATIVE"
"""Not a config key: set (to anything but "" or "0"), kafkalite uses none of its optional C
extensions (the schema validator walks records in Python; empty pools stay resident)."""
INT_MAX = 2**31 - 1  # Kafka's INT configs


def native_module(name: str) -> Any:
    """The optional C extension ``name``, imported, or None when it was not built (no C
    compiler at install) or ``NO_NATIVE_ENV`` is set; the environment is read at the call."""
    if os.environ.get(NO_NATIVE_ENV, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


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


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
OAUTHBEARER_KEYS = (
    "sasl.server.callback.handler.class",
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name",
)
"""The OAUTHBEARER validator's settings (kafkalite/security/oauthbearer.py checks their values
at start-up); each may be given per listener, with or without the ``oauthbearer.`` prefix."""
LISTENER_PREFIX = "listener.name."
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
REPLICA_SELECTOR_CLASSES = frozenset({RACK_AWARE_REPLICA_SELECTOR, LEADER_SELECTOR})
"""replica.selector.class: Kafka's two selectors (broker/replica_selector.py)."""
AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafkalite.AclAuthorizer",
    }
)
PER_LISTENER_KEYS = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.cipher.suites",
        "ssl.protocol",
        "ssl.principal.mapping.rules",
        "ssl.endpoint.identification.algorithm",
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        "connections.max.reauth.ms",
        *OAUTHBEARER_KEYS,
    }
)
"""Settings a `listener.name.<name>.` prefix may override (Kafka's listener-prefixed configs);
`<mechanism>.sasl.jaas.config` and `<mechanism>.connections.max.reauth.ms` too."""

SENSITIVE_CONFIGS = frozenset(
    {
        # Kafka's ConfigDef.Type.PASSWORD broker settings
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "sasl.jaas.config",
        "password.encoder.secret",
        "password.encoder.old.secret",
        "delegation.token.master.key",
        "delegation.token.secret.key",
        # kafkalite's own secrets
        "admin.bearer.token",
    }
)
"""The settings whose values never leave the process (Kafka's PASSWORD type): DescribeConfigs
answers them null with is_sensitive=true, the admin API null, and no log line or error message
quotes them. `is_sensitive_config` also sees them behind a `listener.name.<l>.` or
`<mechanism>.` prefix."""


def is_sensitive_config(name: str) -> bool:
    """True for a SENSITIVE_CONFIGS setting, listener- or mechanism-prefixed or not."""
    name = name.strip().lower()
    if name.startswith(LISTENER_PREFIX):
        name = name[len(LISTENER_PREFIX) :].partition(".")[2]
    return name in SENSITIVE_CONFIGS or name.endswith(".sasl.jaas.config")


def hide_secret(name: str, message: str) -> str:
    """`message` about setting `name` with anything it quotes hidden when the setting is
    sensitive (a parser's "unexpected text at '...'" may be a password)."""
    if not is_sensitive_config(name):
        return message
    return re.sub(r"""(['"]).*?\1""", "[hidden]", message)


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
        endpoints.append(Endpoint(name.upper(), host, port))
    names = [e.listener_name for e in endpoints]
    if len(set(names)) != len(names):
        raise ValueError(f"{key} names must be unique, got {names}")
    return endpoints


def parse_protocol_map(value: str) -> dict[str, str]:
    """`listener.security.protocol.map`: `NAME:PROTOCOL,...`; ValueError if malformed."""
    out: dict[str, str] = {}
    for entry in value.split(","):
        if not entry.strip():
            continue
        name, sep, protocol = entry.strip().partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip():
            raise ValueError(f"{entry.strip()!r} is not NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"{entry.strip()!r}: unknown security protocol {protocol!r} "
                f"(one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        out[name.strip().upper()] = protocol
    return out


def _jaas_options(text: str) -> dict[str, str]:
    from kafkalite.security.jaas import parse_jaas_config

    return parse_jaas_config(text).options


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


class BrokerConfig(BaseModel):
    """The broker's settings; see the module docstring for sources and precedence."""

    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)

    # --- broker identity and listeners
    broker_id: int = Field(0, ge=0)
    broker_rack: str | None = None
    replica_selector_class: str | None = None
    """Kafka's RackAwareReplicaSelector lets consumers with `client.rack` read from an in-sync
    follower in their rack (KIP-392); unset or LeaderSelector: consumers read from leaders."""
    listeners: str = "PLAINTEXT://127.0.0.1:9092"
    advertised_listeners: str | None = None
    inter_broker_listener_name: str | None = None
    admin_listener: str | None = "http://127.0.0.1:9644"
    """kafkalite: `http://host:port` of the HTTP admin API; empty = disabled. A port already in
    use is logged and the broker runs without the admin API."""
    schema_registry_listeners: str | None = "http://127.0.0.1:8081"
    """kafkalite: `http(s)://host:port` of the Schema Registry (Confluent's REST API,
    kafkalite/schema_registry/); empty = disabled. A port in use is logged and the broker runs
    without it."""
    schema_registry_max_schema_bytes: int = Field(1048576, ge=1, le=64 * 1024 * 1024)
    """kafkalite: the largest schema text the registry accepts (422 above it)."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """kafkalite: the broker's log level."""

    # --- security (kafkalite/security/): listener protocols, TLS (PEM, KIP-651), SASL
    listener_security_protocol_map: str = ""
    """`NAME:PROTOCOL,...`; a listener named after a protocol has it; any other name not in
    the map is PLAINTEXT (Kafka refuses such a name)."""
    security_inter_broker_protocol: str | None = None
    ssl_keystore_type: str | None = None
    """PEM only; unset means PEM (Kafka's default JKS cannot be read here)."""
    ssl_keystore_location: str | None = None
    ssl_keystore_password: str | None = None
    ssl_keystore_certificate_chain: str | None = None
    ssl_keystore_key: str | None = None
    ssl_key_password: str | None = None
    ssl_truststore_type: str | None = None
    ssl_truststore_location: str | None = None
    ssl_truststore_password: str | None = None
    ssl_truststore_certificates: str | None = None
    ssl_client_auth: Literal["none", "requested", "required"] = "none"
    ssl_enabled_protocols: str = "TLSv1.2,TLSv1.3"
    ssl_cipher_suites: str | None = None
    ssl_protocol: str = "TLSv1.3"
    ssl_principal_mapping_rules: str = "DEFAULT"
    ssl_endpoint_identification_algorithm: str = "https"
    sasl_enabled_mechanisms: str = "GSSAPI"
    sasl_mechanism_inter_broker_protocol: str = "GSSAPI"
    connections_max_reauth_ms: int = Field(0, ge=0)
    sasl_server_callback_handler_class: str | None = None
    """OAUTHBEARER's validator: unset, Kafka's unsecured one (development only); Kafka's
    org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler: signed
    JWTs checked against sasl.oauthbearer.jwks.endpoint.url."""
    sasl_oauthbearer_jwks_endpoint_url: str | None = None
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int = Field(3_600_000, ge=1)
    sasl_oauthbearer_jwks_endpoint_retry_backoff_ms: int = Field(100, ge=0)
    sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms: int = Field(10_000, ge=0)
    sasl_oauthbearer_expected_audience: str | None = None
    sasl_oauthbearer_expected_issuer: str | None = None
    sasl_oauthbearer_clock_skew_seconds: int = Field(30, ge=0, le=INT_MAX)
    sasl_oauthbearer_scope_claim_name: str = "scope"
    sasl_oauthbearer_sub_claim_name: str = "sub"
    org_apache_kafka_sasl_oauthbearer_allowed_urls: str = ""
    """Kafka 4's system property of that name, given as a broker property: the URLs
    (comma-separated, exact) the broker may read a JWKS from; empty allows none."""
    sasl_server_max_receive_size: int = Field(524288, ge=1, le=INT_MAX)
    """The largest frame read from a SASL listener's connection before it has authenticated
    (Kafka's default 512 KiB); a larger size prefix closes the connection without its body
    being read. socket.request.max.bytes applies once the client has authenticated, and on
    listeners without SASL from the first byte."""
    connection_failed_authentication_delay_ms: int = Field(100, ge=0, le=INT_MAX)
    """How long a failed SASL authentication's answer (and the close after it) is held back,
    without holding anything else (Kafka's default 100 ms)."""
    failed_authentication_burst_per_ip: int = Field(10, ge=0, le=INT_MAX)
    """kafkalite: failed authentications (SASL, and the admin API's basic / bearer) an address
    may make in a row before its attempts are refused unchecked (0: no limit); it gets one more
    every failed.authentication.refill.ms (security/ratelimit.py)."""
    failed_authentication_refill_ms: int = Field(1000, ge=1, le=INT_MAX)
    """kafkalite: after its burst, an address gets one more authentication attempt per this
    many milliseconds."""
    authorizer_class_name: str = ""
    """Empty: no authorization. Kafka's kafka.security.authorizer.AclAuthorizer (or
    SimpleAclAuthorizer, StandardAuthorizer) turns on the ACL authorizer."""
    super_users: str = ""
    """`User:admin;User:broker`: principals allowed everything."""
    allow_everyone_if_no_acl_found: bool = False
    admin_authentication: str = "auto"
    """kafkalite: auto (credentials required when a Kafka listener authenticates clients),
    none, basic, bearer or basic,bearer (admin/security.py)."""
    admin_bearer_token: str | None = None
    admin_bearer_principal: str = "User:admin"
    password_encoder_secret: str | None = None
    """The secret dynamic password configs are encrypted with in the store (Kafka's
    PasswordEncoder, security/password_encoder.py); unset, a password config cannot be set
    dynamically."""
    password_encoder_old_secret: str | None = None
    """The previous secret, to read values stored before the secret changed."""
    password_encoder_keyfactory_algorithm: (
        Literal["PBKDF2WithHmacSHA512", "PBKDF2WithHmacSHA1"] | None
    ) = None
    password_encoder_cipher_algorithm: Literal["AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"] = (
        "AES/CBC/PKCS5Padding"
    )
    password_encoder_key_length: int = Field(128, ge=8, le=INT_MAX)
    """Bits of the AES key: 128, 192 or 256 (checked at start-up)."""
    password_encoder_iterations: int = Field(4096, ge=1024, le=INT_MAX)
    quota_window_num: int = Field(11, ge=1)
    quota_window_size_seconds: int = Field(1, ge=1)
    listener_name_overrides: dict[str, str] = Field(default_factory=dict)
    """The `listener.name.<name>.<setting>` keys (full key -> value), gathered by `load`."""

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
    # Partition ceilings (kafkalite; controller/limits.py). Every partition costs every broker
    # memory, files and start-up time and the controller work, so a count is refused before
    # anything proportional to it is built: one CreateTopics of 8,388,610 partitions held a
    # broker's loop for minutes. Over a ceiling: POLICY_VIOLATION (admin API: 400).
    max_partitions_per_request: int = Field(10000, ge=1, le=INT_MAX)
    """kafkalite: the partitions one CreateTopics may create or one CreatePartitions may add
    (all its topics together), and one Metadata request may auto-create. 10,000 is KRaft's fixed
    limit (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH / MAX_RECORDS_PER_USER_OP)."""
    max_partitions_per_topic: int = Field(10000, ge=1, le=INT_MAX)
    """kafkalite: the partitions one topic may have, created or grown by a client (CreateTopics,
    CreatePartitions, auto-creation, the admin API). A ZooKeeper-based Kafka is bounded by the
    topic's assignment znode fitting in jute.maxbuffer (1 MiB); 10,000 partitions at RF 3 take
    about a quarter of it."""
    max_partitions: int = Field(20000, ge=1, le=INT_MAX)
    """kafkalite (the name of KIP-578's proposal): the partitions the whole cluster may have
    (every topic's, internal ones included; replicas are not counted). A creation that would go
    past it is refused; the partitions that exist count. 20,000 is twice the largest cluster
    measured (10,000 partitions on one broker: 215 MB idle, 9.6 s to start). The broker's own
    internal topics (offsets.topic.num.partitions, transaction.state.log.num.partitions) are
    created regardless, since groups and transactions cannot work without them."""
    gc_freeze_min_objects: int = Field(10000, ge=0)
    """kafkalite: after a full garbage collection that left at least this many objects, they
    are frozen (``gc.freeze()``), and full collections come five times as often, each walking
    what came since the last freeze (kafkalite/observability/gc_freeze.py); 0: never, and
    CPython's own collection thresholds."""
    loop_stall_report_ms: int = Field(100, ge=0, le=INT_MAX)
    """kafkalite: an event-loop stall longer than this is reported while it happens, with what
    held the loop (``loop stalled``; kafkalite/observability/loop_stall.py); 0: never."""
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
    # --- share groups (KIP-932; kafkalite/share/, docs/share-groups.md)
    group_share_delivery_count_limit: int = Field(5, ge=2, le=10)
    group_share_record_lock_duration_ms: int = Field(30000, ge=1000, le=3600000)
    group_share_partition_max_record_locks: int = Field(2000, ge=100, le=10000)
    group_share_session_timeout_ms: int = Field(45000, ge=1)
    group_share_heartbeat_interval_ms: int = Field(5000, ge=1)
    group_share_max_size: int = Field(200, ge=1, le=1000)
    share_auto_offset_reset: Literal["latest", "earliest"] = "latest"
    share_isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted"
    # the bounds a GROUP config resource's values are validated against (Kafka's)
    group_share_min_record_lock_duration_ms: int = Field(15000, ge=1000, le=3600000)
    group_share_max_record_lock_duration_ms: int = Field(60000, ge=1000, le=3600000)
    group_share_min_session_timeout_ms: int = Field(45000, ge=1)
    group_share_max_session_timeout_ms: int = Field(60000, ge=1)
    group_share_min_heartbeat_interval_ms: int = Field(5000, ge=1)
    group_share_max_heartbeat_interval_ms: int = Field(15000, ge=1)
    group_consumer_min_session_timeout_ms: int = Field(45000, ge=1)
    group_consumer_max_session_timeout_ms: int = Field(60000, ge=1)
    group_consumer_min_heartbeat_interval_ms: int = Field(5000, ge=1)
    group_consumer_max_heartbeat_interval_ms: int = Field(15000, ge=1)
    share_coordinator_state_topic_num_partitions: int = Field(50, ge=1)
    share_coordinator_state_topic_replication_factor: int = Field(3, ge=1)
    group_consumer_assignors: str = "uniform,range"
    group_consumer_session_timeout_ms: int = Field(45000, ge=1)
    group_consumer_heartbeat_interval_ms: int = Field(5000, ge=1)
    group_consumer_migration_policy: str = "bidirectional"
    # Kafka 4.3's assignment batching and offload (KIP-1263, kafkalite/group/config.py)
    group_consumer_assignment_interval_ms: int = Field(1000, ge=0)
    group_consumer_min_assignment_interval_ms: int = Field(0, ge=0)
    group_consumer_max_assignment_interval_ms: int = Field(15000, ge=0)
    group_consumer_assignor_offload_enable: bool = True

    @field_validator("listeners", "advertised_listeners")
    @classmethod
    def _valid_listeners(cls, value: str | None) -> str | None:
        if value is not None:
            if not parse_endpoints(value):
                raise ValueError("no listener given")
        return value

    @field_validator("listener_security_protocol_map")
    @classmethod
    def _valid_protocol_map(cls, value: str) -> str:
        parse_protocol_map(value)
        return value

    @field_validator("security_inter_broker_protocol", "sasl_mechanism_inter_broker_protocol")
    @classmethod
    def _upper(cls, value: str | None) -> str | None:
        return value.strip().upper() if value else value

    @field_validator("group_consumer_migration_policy")
    @classmethod
    def _valid_migration_policy(cls, value: str) -> str:
        # Kafka's ConsumerGroupMigrationPolicy values, case-insensitive (kafkalite/group/config.py
        # checks the same for a coordinator built without a BrokerConfig)
        policy = value.strip().lower()
        if policy not in ("disabled", "upgrade", "downgrade", "bidirectional"):
            raise ValueError(
                f"unknown policy {value!r}: expected disabled, upgrade, downgrade or bidirectional"
            )
        return policy

    @field_validator("group_consumer_assignors")
    @classmethod
    def _valid_assignors(cls, value: str) -> str:
        # the consumer group protocol's server assignors (kafkalite/group/assignors.py)
        known = {
            "uniform",
            "range",
            "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
            "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
        }
        names = [n.strip() for n in value.split(",") if n.strip()]
        if not names:
            raise ValueError("at least one assignor is required")
        for name in names:
            if name not in known:
                raise ValueError(f"unknown assignor {name!r}: expected uniform or range")
        return value

    @field_validator("admin_authentication")
    @classmethod
    def _valid_admin_authentication(cls, value: str) -> str:
        modes = {m.strip().lower() for m in value.split(",") if m.strip()}
        if not modes or not (
            modes <= {"basic", "bearer"} or modes == {"auto"} or modes == {"none"}
        ):
            raise ValueError(f"{value!r}: expected auto, none, basic, bearer or basic,bearer")
        return value

    @field_validator("authorizer_class_name")
    @classmethod
    def _known_authorizer(cls, value: str) -> str:
        value = value.strip()
        if value and value not in AUTHORIZER_CLASS_NAMES:
            raise ValueError(
                f"{value!r}: kafkalite's ACL authorizer answers to "
                + ", ".join(sorted(AUTHORIZER_CLASS_NAMES))
            )
        return value

    @field_validator("replica_selector_class")
    @classmethod
    def _known_replica_selector(cls, value: str | None) -> str | None:
        value = (value or "").strip() or None
        if value is not None and value not in REPLICA_SELECTOR_CLASSES:
            raise ValueError(
                f"{value!r}: the replica selectors are Kafka's "
                + " and ".join(sorted(REPLICA_SELECTOR_CLASSES))
            )
        return value

    @field_validator("sasl_server_callback_handler_class")
    @classmethod
    def _known_callback_handler(cls, value: str | None) -> str | None:
        from kafkalite.security.oauthbearer import UNSECURED_HANDLER, VALIDATOR_HANDLERS

        value = (value or "").strip() or None
        if value is not None and value not in (UNSECURED_HANDLER, *VALIDATOR_HANDLERS):
            raise ValueError(
                f"{value!r}: only Kafka's OAUTHBEARER validators are available: "
                f"{', '.join(VALIDATOR_HANDLERS)} or {UNSECURED_HANDLER}"
            )
        return value

    @field_validator("log_cleanup_policy")
    @classmethod
    def _valid_cleanup_policy(cls, value: str) -> str:
        policies = {p.strip() for p in value.split(",") if p.strip()}
        if not policies or not policies <= {"delete", "compact"}:
            raise ValueError(f"{value!r}: expected delete, compact or both")
        return value

    @field_validator("password_encoder_key_length")
    @classmethod
    def _aes_key_length(cls, value: int) -> int:
        if value not in (128, 192, 256):
            raise ValueError(f"{value}: AES keys are 128, 192 or 256 bits")
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
            if len(endpoints) != 1 or endpoints[0].listener_name not in ("HTTP", "HTTPS"):
                raise ValueError(f"{value!r} is not one http://host:port or https://host:port")
        return value or None

    @field_validator("schema_registry_listeners")
    @classmethod
    def _valid_schema_registry_listeners(cls, value: str | None) -> str | None:
        if value:
            endpoints = parse_endpoints(value, "schema.registry.listeners")
            if len(endpoints) != 1 or endpoints[0].listener_name not in ("HTTP", "HTTPS"):
                raise ValueError(f"{value!r} is not one http://host:port or https://host:port")
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
        self._check_security()
        if self.connection_failed_authentication_delay_ms >= self.connections_max_idle_ms:
            # Kafka's rule: the delayed close must come before the idle reaper's
            raise ValueError(
                "connection.failed.authentication.delay.ms: "
                f"{self.connection_failed_authentication_delay_ms} must be less than "
                f"connections.max.idle.ms ({self.connections_max_idle_ms})"
            )
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise ValueError(
                "group.consumer.heartbeat.interval.ms: "
                f"{self.group_consumer_heartbeat_interval_ms} must be less than "
                f"group.consumer.session.timeout.ms ({self.group_consumer_session_timeout_ms})"
            )
        for kind, what in (
            ("share", "record.lock.duration.ms"),
            ("share", "session.timeout.ms"),
            ("share", "heartbeat.interval.ms"),
            ("consumer", "session.timeout.ms"),
            ("consumer", "heartbeat.interval.ms"),
            ("consumer", "assignment.interval.ms"),
        ):
            attr = what.replace(".", "_")
            low = getattr(self, f"group_{kind}_min_{attr}")
            high = getattr(self, f"group_{kind}_max_{attr}")
            if low > high:
                raise ValueError(
                    f"group.{kind}.min.{what}: {low} must not be greater than "
                    f"group.{kind}.max.{what} ({high})"
                )
        interval = self.group_consumer_assignment_interval_ms
        if not (
            self.group_consumer_min_assignment_interval_ms
            <= interval
            <= self.group_consumer_max_assignment_interval_ms
        ):
            raise ValueError(
                f"group.consumer.assignment.interval.ms: {interval} must be between "
                "group.consumer.min.assignment.interval.ms "
                f"({self.group_consumer_min_assignment_interval_ms}) and "
                "group.consumer.max.assignment.interval.ms "
                f"({self.group_consumer_max_assignment_interval_ms})"
            )
        if self.replica_socket_timeout_ms < self.replica_fetch_wait_max_ms:
            # Kafka's rule: a follower's fetch would time out while the leader holds it.
            raise ValueError(
                f"replica.socket.timeout.ms: {self.replica_socket_timeout_ms} is less than "
                f"replica.fetch.wait.max.ms ({self.replica_fetch_wait_max_ms}); it should always "
                "be at least that, to prevent unnecessary socket timeouts"
            )
        return self

    def _check_security(self) -> None:
        """Listener protocols, listener-prefixed keys and SASL settings (syntax only: files
        are read at start-up by kafkalite/security, which names the key of what fails)."""
        protocol_map = self.security_protocol_map
        names = {e.listener_name for e in self.listener_endpoints}
        for key in self.listener_name_overrides:
            listener, _, setting = key[len(LISTENER_PREFIX) :].partition(".")
            if listener.upper() not in names:
                raise ValueError(f"{key}: listener {listener.upper()} is not in listeners")
            mechanism, _, rest = setting.partition(".")
            if (
                setting not in PER_LISTENER_KEYS
                and not (
                    mechanism.upper() in SASL_MECHANISMS + ("GSSAPI",)
                    and rest in ("sasl.jaas.config", "connections.max.reauth.ms")
                )
                and not (mechanism.lower() == "oauthbearer" and rest in OAUTHBEARER_KEYS)
            ):
                raise ValueError(f"{key}: unknown listener setting {setting!r}")
            if setting.endswith("sasl.jaas.config"):
                try:
                    _jaas_options(self.listener_name_overrides[key])
                except ValueError as e:
                    raise ValueError(f"{key}: {e}") from None
        if self.security_inter_broker_protocol is not None:
            if self.inter_broker_listener_name is not None:
                raise ValueError(
                    "security.inter.broker.protocol: only one of inter.broker.listener.name "
                    "and security.inter.broker.protocol may be set"
                )
            if self.security_inter_broker_protocol not in names:
                raise ValueError(
                    f"security.inter.broker.protocol: no {self.security_inter_broker_protocol} "
                    "listener in listeners"
                )
        if self.inter_broker_listener_name is not None and (
            self.inter_broker_listener_name.upper() not in names
        ):
            raise ValueError(
                f"inter.broker.listener.name: {self.inter_broker_listener_name} is not in listeners"
            )
        for name in sorted(names):
            if not protocol_map.get(name, "PLAINTEXT").startswith("SASL_"):
                continue
            key = self.listener_key(name, "sasl.enabled.mechanisms")
            mechanisms = self.sasl_mechanisms(name)
            unsupported = [m for m in mechanisms if m not in SASL_MECHANISMS]
            if not mechanisms or unsupported:
                raise ValueError(
                    f"{key}: {','.join(unsupported) or 'none'} not supported on listener "
                    f"{name}; enable PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and/or OAUTHBEARER"
                )
            if "PLAIN" in mechanisms and self.jaas_config(name, "PLAIN") is None:
                raise ValueError(
                    f"{LISTENER_PREFIX}{name.lower()}.plain.sasl.jaas.config: required for "
                    f'PLAIN on listener {name} (PlainLoginModule with user_<name>="<password>")'
                )
        inter = self.inter_broker_listener
        if protocol_map.get(inter, "PLAINTEXT").startswith("SASL_"):
            mechanism = self.sasl_mechanism_inter_broker_protocol
            if mechanism == "OAUTHBEARER":
                raise ValueError(
                    "sasl.mechanism.inter.broker.protocol: OAUTHBEARER is not supported for the "
                    "brokers' own connections; use PLAIN or SCRAM on the inter-broker listener"
                )
            if mechanism not in self.sasl_mechanisms(inter):
                raise ValueError(
                    f"sasl.mechanism.inter.broker.protocol: {mechanism} is not enabled on the "
                    f"inter-broker listener {inter}"
                )
            jaas = self.jaas_config(inter, mechanism)
            if jaas is None or not {"username", "password"} <= set(_jaas_options(jaas)):
                raise ValueError(
                    f"{LISTENER_PREFIX}{inter.lower()}.{mechanism.lower()}.sasl.jaas.config: "
                    "needs username and password: the broker's own credentials to other brokers"
                )

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
        env_props = {
            k[len(ENV_PREFIX) :].lower(): v
            for k, v in environ.items()
            if k.upper().startswith(ENV_PREFIX)
            and len(k) > len(ENV_PREFIX)
            and k.upper() != NO_NATIVE_ENV
        }
        listener_keys: dict[str, str] = {}
        for props in (file_props, override_props):
            for key in [k for k in props if k.strip().lower().startswith(LISTENER_PREFIX)]:
                listener, _, setting = key.strip()[len(LISTENER_PREFIX) :].partition(".")
                listener_keys[f"{LISTENER_PREFIX}{listener.lower()}.{setting}"] = str(
                    props.pop(key)
                )
        known = set(cls.model_fields)
        for key in list(file_props) + list(override_props):
            if field_name(key) not in known:
                raise ConfigError(key, f"unknown configuration key {key!r}")
        for key in env_props:
            if key not in known:
                raise ConfigError(
                    ENV_PREFIX + key.upper(),
                    f"unknown configuration key {property_name(key)!r} "
                    f"(environment variable {ENV_PREFIX + key.upper()})",
                )
        # One dict, later sources winning: file < environment < overrides.
        merged: dict[str, Any] = {field_name(k): v for k, v in file_props.items()}
        merged.update(env_props)
        merged.update({field_name(k): v for k, v in override_props.items()})
        overrides_by_listener = merged.get("listener_name_overrides")
        if isinstance(overrides_by_listener, str):  # from the environment: a JSON object
            try:
                overrides_by_listener = json.loads(overrides_by_listener)
            except ValueError as e:
                raise ConfigError(
                    "listener.name.overrides", f"invalid value for listener.name.overrides: {e}"
                ) from None
        if listener_keys:
            if isinstance(overrides_by_listener, Mapping):
                listener_keys = {**overrides_by_listener, **listener_keys}
            overrides_by_listener = listener_keys
        if overrides_by_listener is not None:
            merged["listener_name_overrides"] = overrides_by_listener
        try:
            return cls.model_validate(merged)
        except ValidationError as e:
            raise _config_error(e) from None

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
    def security_protocol_map(self) -> dict[str, str]:
        """Listener name -> security protocol (see listener.security.protocol.map)."""
        out = {e.listener_name: e.listener_name for e in self.listener_endpoints}
        out = {n: (n if n in SECURITY_PROTOCOLS else "PLAINTEXT") for n in out}
        out.update(parse_protocol_map(self.listener_security_protocol_map))
        return out

    def security_protocol(self, listener: str) -> str:
        return self.security_protocol_map.get(listener.upper(), "PLAINTEXT")

    @property
    def inter_broker_listener(self) -> str:
        """inter.broker.listener.name, else the listener security.inter.broker.protocol
        names, else the first listener."""
        if self.inter_broker_listener_name:
            return self.inter_broker_listener_name.upper()
        if self.security_inter_broker_protocol:
            return self.security_inter_broker_protocol
        return self.listener_endpoints[0].listener_name

    def listener_key(self, listener: str, setting: str) -> str:
        """The key a listener's setting is read from: the prefixed one when it is set."""
        key = f"{LISTENER_PREFIX}{listener.lower()}.{setting}"
        return key if key in self.listener_name_overrides else setting

    def listener_setting(self, listener: str, setting: str) -> str | None:
        """`listener.name.<listener>.<setting>`, else the broker-wide `<setting>`."""
        key = f"{LISTENER_PREFIX}{listener.lower()}.{setting}"
        if key in self.listener_name_overrides:
            return self.listener_name_overrides[key]
        name = field_name(setting)
        if name in type(self).model_fields:
            value = getattr(self, name)
            return None if value is None else str(value)
        return None

    def sasl_mechanisms(self, listener: str) -> list[str]:
        raw = self.listener_setting(listener, "sasl.enabled.mechanisms") or ""
        return [m.strip().upper() for m in raw.split(",") if m.strip()]

    def jaas_config(self, listener: str, mechanism: str) -> str | None:
        """`listener.name.<l>.<mechanism>.sasl.jaas.config`, else `listener.name.<l>.sasl.jaas.config`."""
        prefix = f"{LISTENER_PREFIX}{listener.lower()}."
        return self.listener_name_overrides.get(
            f"{prefix}{mechanism.lower()}.sasl.jaas.config"
        ) or self.listener_name_overrides.get(f"{prefix}sasl.jaas.config")

    def reauth_ms(self, listener: str, mechanism: str) -> int:
        key = f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.connections.max.reauth.ms"
        value = self.listener_name_overrides.get(key) or self.listener_setting(
            listener, "connections.max.reauth.ms"
        )
        return int(value or 0)

    @property
    def super_user_list(self) -> list[str]:
        return [u.strip() for u in self.super_users.split(";") if u.strip()]

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

    def public_properties(self) -> dict[str, str | None]:
        """`properties` with every sensitive value None: what may leave the process."""
        return {k: (None if is_sensitive_config(k) else v) for k, v in self.properties().items()}

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            if name == "listener_name_overrides" and isinstance(value, dict):
                value = {k: "[hidden]" if is_sensitive_config(k) else v for k, v in value.items()}
            elif name and value is not None and is_sensitive_config(property_name(name)):
                value = "[hidden]"
            yield name, value

    def properties(self) -> dict[str, str | None]:
        """All settings under Kafka's names, values as Kafka prints them. Secrets included: for
        use inside the process only (`public_properties` is what may leave it)."""
        out: dict[str, str | None] = {}
        for name in type(self).model_fields:
            if name == "listener_name_overrides":
                out.update(self.listener_name_overrides)
                continue
            value = getattr(self, name)
            if isinstance(value, bool):
                value = str(value).lower()
            out[property_name(name)] = None if value is None else str(value)
        return out


def _config_error(error: ValidationError) -> ConfigError:
    first = error.errors()[0]
    loc = [str(part) for part in first.get("loc", ()) if isinstance(part, str)]
    if loc:
        key = property_name(loc[0])
        value = "[hidden]" if is_sensitive_config(key) else repr(first.get("input"))
        return ConfigError(
            key, hide_secret(key, f"invalid value for {key}: {value}: {first['msg']}")
        )
    message = first["msg"].removeprefix("Value error, ")
    key = message.split(":", 1)[0] if ":" in message else "configuration"
    return ConfigError(key, hide_secret(key, f"invalid configuration: {message}"))
