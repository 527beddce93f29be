"""Dynamic broker configs (Kafka's DynamicBrokerConfig, ZooKeeper era).

Two levels live in the coordination store, Kafka's znodes and JSON
(``{"version":1,"config":{...}}``, kafkalite/zk/broker_configs.py):

- per broker, ``/config/brokers/<id>`` (DescribeConfigs/AlterConfigs resource name = the id);
- cluster-wide defaults, ``/config/brokers/<default>`` (resource name "").

Precedence, highest first (Kafka's order, and the order of synonyms in DescribeConfigs):
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG (server.properties,
environment, --override), DEFAULT_CONFIG. A dynamic value replaces its synonyms of lower
levels (``log.retention.ms`` set dynamically wins over a static ``log.retention.hours``).

Invariants:

- `current` is always a `BrokerConfig` validated by the same validators as start-up: the
  effective properties are built and handed to ``BrokerConfig.load``. A stored value that
  does not validate (written by another tool, or valid for another version) is dropped with a
  log line and the rest applies, as Kafka's ``removeInvalidConfigs`` does.
- Only `DYNAMIC_CONFIGS` may be altered (Kafka's ``AllDynamicConfigs``); `PER_BROKER_CONFIGS`
  (TLS, SASL and listener settings) only per broker; the TLS key/trust settings only behind a
  ``listener.name.<l>.`` prefix. Kafka's dynamic settings that kafkalite has no use for
  (`STORED_ONLY_CONFIGS`: Kerberos, thread pools kafkalite does not have, metric reporters) are
  type-checked, stored and described, and change nothing.
- A password-type value (`is_password_config`) is stored encrypted with
  ``password.encoder.secret`` (security/password_encoder.py) and kept in plain text only in
  memory; one the broker cannot decrypt is ignored with a log line.
- Reconfigurables (``add_reconfigurable``) are called with (old, new) after `current` changes,
  on the event loop; a failing one is logged and the others still run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog

from kafkalite.config import (
    LISTENER_PREFIX,
    SENSITIVE_CONFIGS,
    BrokerConfig,
    ConfigError,
    is_sensitive_config,
    property_name,
)
from kafkalite.security.password_encoder import PasswordDecodeError, PasswordEncoder

log = structlog.get_logger("kafkalite.server")

# DescribeConfigs config_source values (Kafka's ConfigSource).
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

SSL_RECONFIGURABLE = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
    }
)
"""Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: settable only behind a listener prefix."""

LOG_CONFIGS = frozenset(
    {
        "log.segment.bytes",
        "log.roll.ms",
        "log.roll.jitter.ms",
        "log.index.size.max.bytes",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.retention.bytes",
        "log.retention.ms",
        "message.max.bytes",
        "log.index.interval.bytes",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.segment.delete.delay.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleanup.policy",
        "unclean.leader.election.enable",
        "min.insync.replicas",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "log.preallocate",
        "log.message.timestamp.type",
        "log.message.timestamp.difference.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms",
        "log.message.downconversion.enable",
        "log.local.retention.ms",
        "log.local.retention.bytes",
    }
)
"""Kafka's DynamicLogConfig: the first broker synonym of each topic config (so
``log.retention.hours`` and ``log.roll.hours`` are not dynamic, as in Kafka)."""

CLEANER_CONFIGS = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "message.max.bytes",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
    }
)
THREAD_CONFIGS = frozenset(
    {"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir"}
    | {"background.threads"}
)
CONNECTION_CONFIGS = frozenset(
    {
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connections",
        "max.connection.creation.rate",
    }
)
LISTENER_CONFIGS = frozenset(
    {
        "advertised.listeners",
        "listeners",
        "listener.security.protocol.map",
        "principal.builder.class",
        "ssl.protocol",
        "ssl.provider",
        "ssl.cipher.suites",
        "ssl.enabled.protocols",
        *SSL_RECONFIGURABLE,
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm",
        "ssl.secure.random.implementation",
        "ssl.client.auth",
        "ssl.engine.factory.class",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.jaas.config",
        "sasl.enabled.mechanisms",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "max.connections",
        "max.connection.creation.rate",
        "num.network.threads",
    }
)
"""Kafka's DynamicListenerConfig.ReconfigurableConfigs."""

REPLICATION_QUOTA_CONFIGS = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)
"""Kafka's broker quota configs (QuotaConfig.brokerQuotaConfigs): dynamic only."""

CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
DYNAMIC_CONFIGS = (
    LOG_CONFIGS
    | CLEANER_CONFIGS
    | THREAD_CONFIGS
    | CONNECTION_CONFIGS
    | LISTENER_CONFIGS
    | REPLICATION_QUOTA_CONFIGS
    | {"metric.reporters", "producer.id.expiration.ms", "transaction.partition.verification.enable"}
)
"""Kafka's AllDynamicConfigs (less remote storage's), plus the broker quota configs."""

NOT_DYNAMIC_IN_KAFKALITE = frozenset({"listeners", "advertised.listeners"}) | {
    "listener.security.protocol.map"
}
"""Dynamic in Kafka, refused here: kafkalite does not add or remove listeners while running."""

PER_BROKER_CONFIGS = (SSL_RECONFIGURABLE | LISTENER_CONFIGS) - CLUSTER_LEVEL_LISTENER_CONFIGS
MECHANISM_CONFIGS = (
    "sasl.jaas.config",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
)

# Kafka settings that are dynamic but have no BrokerConfig field here: their ConfigDef type
# (checked on alter) and Kafka's default. Stored and described; they change nothing.
STORED_ONLY_CONFIGS: dict[str, tuple[str, str | None]] = {
    "log.roll.jitter.ms": ("long", None),
    "compression.gzip.level": ("int", "-1"),
    "compression.lz4.level": ("int", "9"),
    "compression.zstd.level": ("int", "3"),
    "log.message.timestamp.difference.max.ms": ("long", "9223372036854775807"),
    "log.message.timestamp.before.max.ms": ("long", "9223372036854775807"),
    "log.message.timestamp.after.max.ms": ("long", "9223372036854775807"),
    "log.message.downconversion.enable": ("boolean", "true"),
    "log.local.retention.ms": ("long", "-2"),
    "log.local.retention.bytes": ("long", "-2"),
    "num.io.threads": ("int", "8"),
    "num.network.threads": ("int", "3"),
    "background.threads": ("int", "10"),
    "max.connection.creation.rate": ("int", "2147483647"),
    "metric.reporters": ("list", ""),
    "transaction.partition.verification.enable": ("boolean", "true"),
    "principal.builder.class": ("string", None),
    "ssl.provider": ("string", None),
    "ssl.keymanager.algorithm": ("string", "SunX509"),
    "ssl.trustmanager.algorithm": ("string", "PKIX"),
    "ssl.secure.random.implementation": ("string", None),
    "ssl.engine.factory.class": ("string", None),
    "sasl.kerberos.service.name": ("string", None),
    "sasl.kerberos.kinit.cmd": ("string", "/usr/bin/kinit"),
    "sasl.kerberos.ticket.renew.window.factor": ("double", "0.8"),
    "sasl.kerberos.ticket.renew.jitter": ("double", "0.05"),
    "sasl.kerberos.min.time.before.relogin": ("long", "60000"),
    "sasl.kerberos.principal.to.local.rules": ("list", "DEFAULT"),
    "sasl.login.refresh.window.factor": ("double", "0.8"),
    "sasl.login.refresh.window.jitter": ("double", "0.05"),
    "sasl.login.refresh.min.period.seconds": ("short", "60"),
    "sasl.login.refresh.buffer.seconds": ("short", "300"),
    **{name: ("long", "9223372036854775807") for name in REPLICATION_QUOTA_CONFIGS},
}

BROKER_SYNONYMS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_LISTENER_KEY = re.compile(r"listener\.name\.[^.]*\.(.*)")


def is_password_config(name: str) -> bool:
    """Kafka's DynamicPasswordConfigs: a dynamic PASSWORD-type setting (prefix allowed)."""
    return any(name.endswith(p) for p in SENSITIVE_CONFIGS & DYNAMIC_CONFIGS)


def broker_config_synonyms(name: str, match_listener_override: bool) -> list[str]:
    """Kafka's brokerConfigSynonyms: the names of one setting, highest precedence first."""
    for group in BROKER_SYNONYMS:
        if name in group:
            return list(group)
    if name == "log.flush.interval.ms":
        return [name, "log.flush.scheduler.interval.ms"]
    match = _LISTENER_KEY.fullmatch(name)
    if match and match_listener_override:
        base = match.group(1)
        mechanism = next((m for m in MECHANISM_CONFIGS if base.endswith(m)), None)
        return [name, mechanism or base]
    return [name]


def _scala_set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


class InvalidDynamicConfig(ValueError):
    """An alteration Kafka refuses; `invalid_request` selects INVALID_REQUEST over
    INVALID_CONFIG."""

    def __init__(self, message: str, *, invalid_request: bool = False) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


def _check_type(name: str, kind: str, value: str) -> None:
    try:
        if kind in ("int", "long", "short"):
            int(value.strip())
        elif kind == "double":
            float(value.strip())
        elif kind == "boolean" and value.strip().lower() not in ("true", "false"):
            raise ValueError
    except ValueError:
        raise InvalidDynamicConfig(
            f"Invalid value {value} for configuration {name}: Not a {kind}"
        ) from None


def password_encoder_of(config: BrokerConfig, old: bool = False) -> PasswordEncoder | None:
    secret = config.password_encoder_old_secret if old else config.password_encoder_secret
    if not secret:
        return None
    return PasswordEncoder(
        secret,
        config.password_encoder_keyfactory_algorithm,
        config.password_encoder_cipher_algorithm,
        config.password_encoder_key_length,
        config.password_encoder_iterations,
    )


class DynamicBrokerConfig:
    """The broker's static config overlaid with its two dynamic levels; see the module
    docstring. Single event loop."""

    def __init__(self, static: BrokerConfig) -> None:
        self.static = static
        self.broker_id = static.broker_id
        props = static.properties()
        explicit = {property_name(f) for f in static.model_fields_set}
        self.static_props: dict[str, str] = {
            k: v
            for k, v in props.items()
            if v is not None and (k in explicit or k.startswith(LISTENER_PREFIX))
        }
        defaults = BrokerConfig.model_construct().properties()
        self.default_props: dict[str, str] = {
            **{
                k: v
                for k, v in defaults.items()
                if v is not None and k in BrokerConfig.known_keys()
            },
            **{k: d for k, (_, d) in STORED_ONLY_CONFIGS.items() if d is not None},
        }
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        self.current = static
        self.encoder = password_encoder_of(static)
        self._reconfigurables: list[Callable[[BrokerConfig, BrokerConfig], Any]] = []
        self.reload_tls: Callable[[BrokerConfig, Iterable[str]], None] = lambda c, names: None
        """Set by `add_broker_reconfigurables`: new TLS contexts for listeners whose files
        changed in place (Kafka's reloadUpdatedFilesWithoutConfigChange)."""

    # ------------------------------------------------------------------ reconfigurables

    def add_reconfigurable(self, callback: Callable[[BrokerConfig, BrokerConfig], Any]) -> None:
        self._reconfigurables.append(callback)

    # ------------------------------------------------------------------ validation

    def validate(self, props: Mapping[str, str], per_broker: bool) -> BrokerConfig:
        """Kafka's validateConfigs and a trial build: the config the broker would run with
        if `props` were its new per-broker (or default) level; InvalidDynamicConfig if not."""
        unknown = [k for k in props if not self._known(k)]
        if unknown:
            raise InvalidDynamicConfig(f"Unknown broker configs: {_scala_set(unknown)}")
        non_dynamic = [
            k
            for k in props
            if not k.startswith(LISTENER_PREFIX)
            and (k not in DYNAMIC_CONFIGS or k in NOT_DYNAMIC_IN_KAFKALITE)
        ]
        if non_dynamic:
            raise InvalidDynamicConfig(
                f"Cannot update these configs dynamically: {_scala_set(non_dynamic)}"
            )
        bare_ssl = [k for k in props if k in SSL_RECONFIGURABLE]
        if bare_ssl:
            raise InvalidDynamicConfig(
                "These security configs can be dynamically updated only per-listener using "
                f"the listener prefix: {_scala_set(bare_ssl)}"
            )
        for k, v in props.items():
            base = _LISTENER_KEY.fullmatch(k)
            name = base.group(1) if base else k
            if name in STORED_ONLY_CONFIGS:
                _check_type(k, STORED_ONLY_CONFIGS[name][0], v)
        if not per_broker:
            per_broker_only = [
                k
                for k in props
                if k in PER_BROKER_CONFIGS
                or (
                    (m := _LISTENER_KEY.fullmatch(k)) is not None
                    and m.group(1) not in CLUSTER_LEVEL_LISTENER_CONFIGS
                )
            ]
            if per_broker_only:
                raise InvalidDynamicConfig(
                    "Cannot update these configs at default cluster level, broker id must be "
                    f"specified: {_scala_set(per_broker_only)}"
                )
        if any(is_password_config(k) for k in props):
            if not per_broker:
                raise InvalidDynamicConfig("Password config can be defined only at broker level")
            if self.encoder is None:
                raise InvalidDynamicConfig("Password encoder secret not configured")
        try:
            if per_broker:
                new = self._build(self.cluster_default, dict(props))
            else:
                new = self._build(dict(props), self.per_broker)
        except ConfigError as e:
            raise InvalidDynamicConfig(str(e)) from None
        for listener in changed_tls_listeners(self.current, new):
            server_context_for(new, listener)  # the files are readable and the key matches
        return new

    def _known(self, key: str) -> bool:
        if key.startswith(LISTENER_PREFIX):
            return True  # the trial build checks the listener and the setting
        return key in BrokerConfig.known_keys() or key in STORED_ONLY_CONFIGS

    def _effective_props(
        self, default_level: Mapping[str, str], broker_level: Mapping[str, str]
    ) -> dict[str, str]:
        """Kafka's updateCurrentConfig: static, then defaults, then per-broker, each value
        removing its lower-precedence synonyms."""
        props = dict(self.static_props)
        for level in (default_level, broker_level):
            for k, v in level.items():
                for synonym in broker_config_synonyms(k, match_listener_override=False):
                    props.pop(synonym, None)
                props[k] = v
        return props

    def _build(
        self, default_level: Mapping[str, str], broker_level: Mapping[str, str]
    ) -> BrokerConfig:
        if not default_level and not broker_level:
            return self.static  # nothing dynamic: the start-up config itself
        props = self._effective_props(default_level, broker_level)
        known = BrokerConfig.known_keys()
        given = {k: v for k, v in props.items() if k in known or k.startswith(LISTENER_PREFIX)}
        return BrokerConfig.load(overrides=given, environ={})

    # ------------------------------------------------------------------ persistence

    def to_persistent(self, props: Mapping[str, str]) -> dict[str, str]:
        """What is written to the store: passwords encrypted (Kafka's toPersistentProps)."""
        out = dict(props)
        for k, v in props.items():
            if is_password_config(k):
                if self.encoder is None:
                    raise InvalidDynamicConfig("Password encoder secret not configured")
                out[k] = self.encoder.encode(v)
        return out

    def from_persistent(self, stored: Mapping[str, str], per_broker: bool) -> dict[str, str]:
        """Kafka's fromPersistentProps: what cannot apply is dropped with a log line."""
        props = dict(stored)
        level = "broker" if per_broker else "default cluster"
        for k in list(props):
            if not self._known(k) or (
                not k.startswith(LISTENER_PREFIX)
                and (k not in DYNAMIC_CONFIGS or k in NOT_DYNAMIC_IN_KAFKALITE)
            ):
                log.error("non-dynamic config in the store ignored", config=k, level=level)
                props.pop(k)
            elif k in SSL_RECONFIGURABLE:
                log.error("security config without a listener prefix ignored", config=k)
                props.pop(k)
            elif not per_broker and (
                k in PER_BROKER_CONFIGS or k.startswith(LISTENER_PREFIX) or is_password_config(k)
            ):
                log.error("per-broker config at the default cluster level ignored", config=k)
                props.pop(k)
        for k, v in list(props.items()):
            if not is_password_config(k):
                continue
            try:
                if self.encoder is None:
                    raise PasswordDecodeError("password.encoder.secret is not set")
                props[k] = self.encoder.decode(v)
            except PasswordDecodeError as e:
                old = password_encoder_of(self.static, old=True)
                try:
                    if old is None:
                        raise e
                    props[k] = old.decode(v)
                except PasswordDecodeError:
                    log.error("dynamic password config could not be decoded, ignoring", config=k)
                    props.pop(k)
        return props

    # ------------------------------------------------------------------ updates

    def update(
        self, per_broker: Mapping[str, str] | None = None, default: Mapping[str, str] | None = None
    ) -> bool:
        """Take new stored levels (decoded already, None = unchanged); apply and tell the
        reconfigurables. True if the effective config changed."""
        new_broker = dict(self.per_broker if per_broker is None else per_broker)
        new_default = dict(self.cluster_default if default is None else default)
        new_broker, new_default = self._drop_invalid(new_broker, new_default)
        self.per_broker, self.cluster_default = new_broker, new_default
        old = self.current
        try:
            new = self._build(new_default, new_broker)
        except ConfigError as e:  # _drop_invalid left nothing dynamic: unreachable in practice
            log.error("dynamic broker configs not applied", error=str(e))
            return False
        if new == old:
            return False
        self.current = new
        before = old.properties()
        changed = sorted(k for k, v in new.properties().items() if before.get(k) != v)
        log.info("dynamic broker config applied", changed=changed)  # names only, never values
        for reconfigure in self._reconfigurables:
            try:
                reconfigure(old, new)
            except Exception as e:  # one failing part must not stop the others reconfiguring
                log.error("reconfiguration failed", part=repr(reconfigure), error=repr(e))
        return True

    def _drop_invalid(
        self, broker: dict[str, str], default: dict[str, str]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Kafka's removeInvalidConfigs: a stored value that fails validation is ignored, one
        at a time, so the others still apply."""
        for _ in range(len(broker) + len(default) + 1):
            try:
                self._build(default, broker)
                return broker, default
            except ConfigError as e:
                bad = e.key
                if bad in broker:
                    log.error("invalid dynamic broker config ignored", config=bad, error=str(e))
                    broker.pop(bad)
                elif bad in default:
                    log.error("invalid dynamic default config ignored", config=bad, error=str(e))
                    default.pop(bad)
                else:
                    # the error names no stored key (a rule across settings): which stored
                    # value broke it is not knowable, so neither level applies
                    log.error("dynamic broker configs ignored", error=str(e))
                    return {}, {}
        return {}, {}

    # ------------------------------------------------------------------ describing

    def synonyms(self, name: str, per_broker: bool) -> list[tuple[str, str | None, int]]:
        """Kafka's configSynonyms: (name, value, source), every dynamic-broker synonym first,
        then dynamic-default, static, default; starting at `name` itself."""
        names = broker_config_synonyms(name, match_listener_override=True)
        out: list[tuple[str, str | None, int]] = []
        levels = [
            (self.per_broker, DYNAMIC_BROKER_CONFIG),
            (self.cluster_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static_props, STATIC_BROKER_CONFIG),
            (self.default_props, DEFAULT_CONFIG),
        ]
        for values, source in levels:
            if source == DYNAMIC_BROKER_CONFIG and not per_broker:
                continue
            for n in names:
                if n in values:
                    out.append((n, values[n], source))
        while out and out[0][0] != name:
            out.pop(0)
        return out

    def has_dynamic(self, name: str) -> bool:
        """Whether a dynamic level sets `name` or one of its synonyms."""
        names = broker_config_synonyms(name, match_listener_override=True)
        return any(n in self.per_broker or n in self.cluster_default for n in names)

    def described_names(self) -> list[str]:
        """Every setting DescribeConfigs of this broker lists."""
        props = self.current.properties()
        stored_only = {k for k, (_, default) in STORED_ONLY_CONFIGS.items() if default is not None}
        return sorted(set(props) | set(self.per_broker) | set(self.cluster_default) | stored_only)

    def current_value(self, name: str) -> str | None:
        props = self.current.properties()
        if name in props:
            return props[name]
        for level in (self.per_broker, self.cluster_default, self.static_props):
            if name in level:
                return level[name]
        return self.default_props.get(name)


# Kafka's ConfigDef.Type ids (DescribeConfigs v3+): 1 BOOLEAN, 2 STRING, 3 INT, 4 SHORT,
# 5 LONG, 6 DOUBLE, 7 LIST, 8 CLASS, 9 PASSWORD.
_TYPE_IDS = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7}
_LIST_SETTINGS = frozenset(
    {"log.cleanup.policy", "log.dirs", "listeners", "advertised.listeners", "super.users"}
    | {"sasl.enabled.mechanisms", "ssl.enabled.protocols", "ssl.cipher.suites"}
)


def config_type(name: str) -> int:
    """The Kafka type id of a broker setting, from its stored-only entry or its field."""
    if is_sensitive_config(name):
        return 9
    base = _LISTENER_KEY.fullmatch(name)
    name = base.group(1) if base else name
    if name in STORED_ONLY_CONFIGS:
        return _TYPE_IDS[STORED_ONLY_CONFIGS[name][0]]
    if name in _LIST_SETTINGS:
        return 7
    field = BrokerConfig.model_fields.get(name.replace(".", "_"))
    if field is None:
        return 2
    text = str(field.annotation)
    if "bool" in text:
        return 1
    if "float" in text:
        return 6
    if "int" in text and "Literal" not in text:
        default = field.default if isinstance(field.default, int) else 0
        return 5 if default > 2**31 - 1 or name.endswith(".ms") else 3
    return 2


# ---------------------------------------------------------------------- applying live

TLS_KEYS = tuple(sorted(k for k in SSL_RECONFIGURABLE | LISTENER_CONFIGS if k.startswith("ssl.")))


def tls_listeners(config: BrokerConfig) -> list[str]:
    return [
        e.listener_name
        for e in config.listener_endpoints
        if config.security_protocol(e.listener_name) in ("SSL", "SASL_SSL")
    ]


def changed_tls_listeners(old: BrokerConfig, new: BrokerConfig) -> list[str]:
    """The TLS listeners whose TLS settings differ between two configs."""
    return [
        name
        for name in tls_listeners(new)
        if any(old.listener_setting(name, k) != new.listener_setting(name, k) for k in TLS_KEYS)
    ]


def server_context_for(config: BrokerConfig, listener: str) -> Any:
    """A listener's TLS server context from its settings (files read now); InvalidDynamicConfig
    naming the key when one cannot be used."""
    from kafkalite.security.tls import TlsConfigError, server_context

    def get(key: str) -> str | None:
        value = config.listener_setting(listener, key)
        return value if value not in ("", None) else None

    try:
        return server_context(get)
    except TlsConfigError as e:
        raise InvalidDynamicConfig(
            f"Validation of dynamic config update of SSLFactory failed: "
            f"{config.listener_key(listener, e.key)}: {e}"
        ) from None


def add_broker_reconfigurables(dynamic: DynamicBrokerConfig, server: Any) -> None:
    """Kafka's addReconfigurables for a kafkalite broker (`server`: the KafkaServer): what
    each changed setting reaches while the broker runs."""
    from kafkalite.storage.cleaner import CleanerConfig
    from kafkalite.storage.config import LogConfig

    def services(old: BrokerConfig, new: BrokerConfig) -> None:
        # handlers read the broker config per request (topic defaults of CreateTopics, ...)
        server.config = new
        server.services.config = new
        controller = getattr(server, "controller", None)
        if controller is not None:  # the default for topics without their own setting
            controller.unclean_leader_election_enable = new.unclean_leader_election_enable

    def log_config(old: BrokerConfig, new: BrokerConfig) -> None:
        """DynamicLogConfig: topics without an override follow the new broker default."""
        topics, log_manager = server.topic_configs, server.log_manager
        if topics is None or log_manager is None:
            return
        defaults = LogConfig.from_broker_config(new)
        if defaults == topics.defaults:
            return
        topics.set_defaults(defaults)  # the dict the LogManager reads is updated in place
        log_manager.default_config = defaults
        # one pass over the logs (LogManager.update_topic_config per topic would scan every log
        # once per topic); setting a LogConfig is an attribute write
        for log in log_manager.all_logs():
            log.update_config(topics.for_topic(log.topic))

    def cleaner(old: BrokerConfig, new: BrokerConfig) -> None:
        """LogCleaner's reconfigure: the next cleaning pass reads the new settings; the
        I/O rate applies at once (the thread count at the next restart)."""
        log_manager = server.log_manager
        if log_manager is None or getattr(log_manager, "cleaner", None) is None:
            return
        config = CleanerConfig.from_broker_config(new)
        log_manager.cleaner.config = config
        throttler = getattr(log_manager.cleaner, "throttler", None)
        if throttler is not None:
            import math

            throttler.desired_rate_per_second = config.io_max_bytes_per_second
            throttler.unlimited = math.isinf(config.io_max_bytes_per_second)

    def connection_quotas(old: BrokerConfig, new: BrokerConfig) -> None:
        """SocketServer's ConnectionQuotas: new limits for the connections to come."""
        socket_server = server.socket_server
        if socket_server is None:
            return
        quotas = socket_server.quotas
        overrides = new.max_connections_per_ip_override_map
        quotas.reconfigure(new.max_connections, new.max_connections_per_ip, overrides)
        if overrides != old.max_connections_per_ip_override_map:
            import asyncio

            task = asyncio.get_running_loop().create_task(quotas.resolve_overrides())
            task.add_done_callback(
                lambda t: (
                    t.cancelled()
                    or t.exception() is None
                    or log.error("max.connections.per.ip.overrides", error=str(t.exception()))
                )
            )

    def tls(old: BrokerConfig, new: BrokerConfig) -> None:
        """SslFactory's reconfigure: a listener whose TLS settings changed gets a new
        context for its next connections."""
        reload_tls(new, changed_tls_listeners(old, new))

    def reload_tls(config: BrokerConfig, listeners: Iterable[str]) -> None:
        socket_server = server.socket_server
        if socket_server is None:
            return
        for name in listeners:
            try:
                context = server_context_for(config, name)
            except InvalidDynamicConfig as e:
                log.error("TLS context not reloaded; keeping the previous one", error=str(e))
                continue
            socket_server.replace_ssl_context(name, context)
            log.info("TLS context reloaded", listener=name)

    dynamic.reload_tls = reload_tls
    for callback in (services, log_config, cleaner, connection_quotas, tls):
        dynamic.add_reconfigurable(callback)
