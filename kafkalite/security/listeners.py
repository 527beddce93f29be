"""What each listener needs for security, resolved once at start-up from the broker's config
(duck-typed BrokerConfig: security is layer 0 beside config and never imports it).

``listener_security(config)`` -> {listener name: ListenerSecurity}; ``inter_broker_client(config)``
-> the ClientSecurity the broker's own client uses towards other brokers (over the
inter-broker listener, with ``sasl.mechanism.inter.broker.protocol`` and the username/password
of that listener's JAAS entry). TLS files are read here; a problem raises TlsConfigError naming
the key (the listener-prefixed key when the value came from there). An OAUTHBEARER listener's
validator is built here too (oauthbearer.py: a JWKS file is read, the settings checked) and
``start_security`` makes a JWKS endpoint's first fetch, before the listeners open.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .jaas import parse_jaas_config
from .oauthbearer import MECHANISM as OAUTHBEARER
from .oauthbearer import Getter, OAuthConfigError, Validator, build_validator, start_validator
from .ratelimit import FailedAuthLimiter
from .sasl import CredentialLookup, SaslServerAuthenticator
from .tls import PrincipalMapper, TlsConfigError, client_context, server_context


@dataclass
class ListenerSecurity:
    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: PrincipalMapper | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict)
    reauth_ms: Callable[[str], int] | int = 0
    oauth_validator: Validator | None = None
    oauth_settings: Getter | None = None

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def authenticator(
        self,
        credentials: CredentialLookup | None,
        *,
        client_host: str = "",
        limiter: FailedAuthLimiter | None = None,
        failed_delay_ms: int = 0,
        scram_unknown_user_secret: bytes | None = None,
    ) -> SaslServerAuthenticator:
        return SaslServerAuthenticator(
            self.mechanisms,
            plain_users=self.plain_users,
            credentials=credentials,
            reauth_ms=self.reauth_ms,
            client_host=client_host,
            limiter=limiter,
            failed_delay_ms=failed_delay_ms,
            scram_unknown_user_secret=scram_unknown_user_secret,
            oauth_validator=self.oauth_validator,
        )


@dataclass
class ClientSecurity:
    """How the broker's own client connects: protocol, TLS context, SASL mechanism and
    credentials (None where unused)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None


def _getter(config: Any, listener: str) -> Callable[[str], str | None]:
    def get(key: str) -> str | None:
        value = config.listener_setting(listener, key)
        return value if value not in ("", None) else None

    return get


def _named(config: Any, listener: str, error: TlsConfigError) -> TlsConfigError:
    key = config.listener_key(listener, error.key)
    if key == error.key:
        return error
    return TlsConfigError(key, str(error).replace(error.key, key, 1))


def _oauth_getter(config: Any, listener: str) -> Getter:
    """An OAUTHBEARER setting of a listener, as Kafka looks it up:
    ``listener.name.<l>.oauthbearer.<key>``, ``listener.name.<l>.<key>``, then ``<key>``."""
    overrides = config.listener_name_overrides
    prefix = f"listener.name.{listener.lower()}."

    def get(key: str) -> tuple[str, str | None]:
        for candidate in (f"{prefix}oauthbearer.{key}", f"{prefix}{key}"):
            if candidate in overrides:
                return candidate, overrides[candidate]
        if key == "sasl.jaas.config":
            return f"{prefix}oauthbearer.{key}", config.jaas_config(listener, OAUTHBEARER)
        value = getattr(config, key.replace(".", "_"), None)
        return key, None if value is None else str(value)

    return get


def _jwks_ssl_context(options: Any) -> ssl.SSLContext | None:
    """The TLS settings of an https JWKS endpoint, from the JAAS options (``ssl.truststore.*``,
    as Kafka's JaasOptionsUtils); None: the system's trusted CAs."""
    if not any(k.startswith("ssl.") for k in options):
        return None
    return client_context(lambda key: options.get(key) or None)


def _oauth_validator(config: Any, listener: str) -> tuple[Validator, Getter]:
    get = _oauth_getter(config, listener)
    jaas_key, jaas = get("sasl.jaas.config")
    if not jaas:
        raise OAuthConfigError(jaas_key, f"{jaas_key}: required for OAUTHBEARER on {listener}")
    entry = parse_jaas_config(jaas)
    validator = build_validator(
        get,
        entry.options,
        getattr(config, "org_apache_kafka_sasl_oauthbearer_allowed_urls", "") or "",
        ssl_context_for=_jwks_ssl_context,
    )
    return validator, get


async def start_security(security: dict[str, ListenerSecurity]) -> None:
    """What the listeners need before they open: each JWKS endpoint's first fetch (off the
    event loop); TlsConfigError (OAuthConfigError) naming the key when one fails."""
    for sec in security.values():
        if sec.oauth_validator is not None and sec.oauth_settings is not None:
            await start_validator(sec.oauth_validator, sec.oauth_settings)


def listener_security(config: Any) -> dict[str, ListenerSecurity]:
    out: dict[str, ListenerSecurity] = {}
    for endpoint in config.listener_endpoints:
        name = endpoint.listener_name
        protocol = config.security_protocol(name)
        sec = ListenerSecurity(name, protocol)
        get = _getter(config, name)
        if protocol in ("SSL", "SASL_SSL"):
            try:
                sec.ssl_context = server_context(get)
                sec.principal_mapper = PrincipalMapper(
                    get("ssl.principal.mapping.rules") or "DEFAULT"
                )
            except TlsConfigError as e:
                raise _named(config, name, e) from None
        if sec.sasl:
            sec.mechanisms = tuple(config.sasl_mechanisms(name))
            if "PLAIN" in sec.mechanisms:
                sec.plain_users = parse_jaas_config(config.jaas_config(name, "PLAIN")).plain_users
            sec.reauth_ms = lambda mechanism, name=name: config.reauth_ms(name, mechanism)
            if OAUTHBEARER in sec.mechanisms:
                sec.oauth_validator, sec.oauth_settings = _oauth_validator(config, name)
        out[name] = sec
    return out


def inter_broker_client(config: Any) -> ClientSecurity:
    listener = config.inter_broker_listener
    protocol = config.security_protocol(listener)
    sec = ClientSecurity(protocol)
    if protocol in ("SSL", "SASL_SSL"):
        try:
            sec.ssl_context = client_context(_getter(config, listener))
        except TlsConfigError as e:
            raise _named(config, listener, e) from None
    if protocol.startswith("SASL_"):
        mechanism = config.sasl_mechanism_inter_broker_protocol
        options = parse_jaas_config(config.jaas_config(listener, mechanism)).options
        sec.mechanism = mechanism
        sec.username = options.get("username")
        sec.password = options.get("password")
    return sec


def client_security_from_properties(props: dict[str, str]) -> ClientSecurity:
    """A Kafka client's properties (``--command-config client.properties``): security.protocol,
    ssl.* (PEM), sasl.mechanism and sasl.jaas.config's username/password."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise TlsConfigError(
            "security.protocol", f"invalid value for security.protocol: {protocol}"
        )
    sec = ClientSecurity(protocol)
    if protocol in ("SSL", "SASL_SSL"):
        sec.ssl_context = client_context(lambda key: props.get(key) or None)
    if protocol.startswith("SASL_"):
        sec.mechanism = props.get("sasl.mechanism", "GSSAPI").upper()
        jaas = props.get("sasl.jaas.config")
        if not jaas:
            raise TlsConfigError("sasl.jaas.config", "sasl.jaas.config is required for SASL")
        options = parse_jaas_config(jaas).options
        sec.username, sec.password = options.get("username"), options.get("password")
    return sec
