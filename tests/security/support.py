"""Certificates and secure broker settings for the security tests (generated, nothing external).

``Pki`` makes a CA (trustme) and PEM files: the broker's certificate for 127.0.0.1/localhost,
a client certificate for mTLS (subject ``CN=alice,OU=eng,O=acme``) and one signed by another
CA (refused). ``secure_listeners`` gives the overrides of a broker with one listener per
protocol besides the harness's PLAINTEXT one: SSL, SASL_PLAINTEXT, SASL_SSL and an mTLS
listener named MTLS (mapped to SSL, client certificates required, the principal from the
subject by ``ssl.principal.mapping.rules``) and a SASL_PLAINTEXT listener named REAUTH whose
sessions last 1 s (``connections.max.reauth.ms``). ``secured_overrides`` and ``Secured`` are the
broker of the authorization tests: ACLs enforced, ANONYMOUS on PLAINTEXT a super user, PLAIN
users and the SCRAM user mallory on SASL_PLAINTEXT.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import trustme

from kafkalite.client.connection import KafkaConnection
from kafkalite.protocol import frames
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.security.listeners import ClientSecurity
from kafkalite.testing import Broker, free_port

ADMIN_USER, ADMIN_PASSWORD = "admin", "admin-secret"
PLAIN_USERS = {ADMIN_USER: ADMIN_PASSWORD, "alice": "alice-secret", "bob": "bob-secret"}
SCRAM_USER, SCRAM_PASSWORD = "scram-user", "scram-secret"


def plain_jaas(users: dict[str, str], username: str = ADMIN_USER) -> str:
    entries = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{username}" password="{users[username]}" {entries};'
    )


def scram_jaas(username: str, password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{username}" password="{password}";'
    )


@dataclass
class Pki:
    ca_file: Path
    server_file: Path  # key + chain, PEM
    client_cert: Path
    client_key: Path
    rogue_cert: Path
    rogue_key: Path
    server_chain: str
    server_key: str


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="kafkalite-test")
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert(
        "alice@example.com",
        common_name="alice",
        organization_name="acme",
        organization_unit_name="eng",
    )
    rogue = trustme.CA().issue_cert("mallory@example.com", common_name="mallory")
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    server.private_key_and_cert_chain_pem.write_to_path(str(directory / "server.pem"))
    client.cert_chain_pems[0].write_to_path(str(directory / "client.pem"))
    client.private_key_pem.write_to_path(str(directory / "client.key"))
    rogue.cert_chain_pems[0].write_to_path(str(directory / "rogue.pem"))
    rogue.private_key_pem.write_to_path(str(directory / "rogue.key"))
    return Pki(
        directory / "ca.pem",
        directory / "server.pem",
        directory / "client.pem",
        directory / "client.key",
        directory / "rogue.pem",
        directory / "rogue.key",
        "".join(b.bytes().decode() for b in server.cert_chain_pems),
        server.private_key_pem.bytes().decode(),
    )


@dataclass
class SecurePorts:
    ssl: int
    sasl_plaintext: int
    sasl_ssl: int
    mtls: int
    reauth: int


def secure_listeners(
    pki: Pki, plaintext_port: int, **extra: str
) -> tuple[dict[str, str], SecurePorts]:
    ports = SecurePorts(free_port(), free_port(), free_port(), free_port(), free_port())
    overrides = {
        "listeners": (
            f"PLAINTEXT://127.0.0.1:{plaintext_port},SSL://127.0.0.1:{ports.ssl},"
            f"SASL_PLAINTEXT://127.0.0.1:{ports.sasl_plaintext},"
            f"SASL_SSL://127.0.0.1:{ports.sasl_ssl},MTLS://127.0.0.1:{ports.mtls},"
            f"REAUTH://127.0.0.1:{ports.reauth}"
        ),
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL,"
            "REAUTH:SASL_PLAINTEXT"
        ),
        "listener.name.reauth.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "listener.name.reauth.connections.max.reauth.ms": "1000",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server_file),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca_file),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": (
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/L,DEFAULT"
        ),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        **extra,
    }
    return overrides, ports


async def add_scram_user(bootstrap: str, user: str, password: str, security=None) -> None:
    """Create the user's SCRAM-SHA-256 and -512 credentials with AlterUserScramCredentials."""
    import os

    from kafkalite.client.connection import KafkaConnection
    from kafkalite.protocol.api import ApiKey
    from kafkalite.security.scram import salted_password

    host, port = bootstrap.rsplit(":", 1)
    upsertions = []
    for mechanism, code in (("SCRAM-SHA-256", 1), ("SCRAM-SHA-512", 2)):
        salt = os.urandom(16)
        upsertions.append(
            {
                "name": user,
                "mechanism": code,
                "iterations": 4096,
                "salt": salt,
                "salted_password": salted_password(mechanism, password.encode(), salt, 4096),
            }
        )
    async with KafkaConnection(host, int(port), security=security) as conn:
        response = await conn.send(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {"deletions": [], "upsertions": upsertions}
        )
    assert [int(r.error_code) for r in response.results] == [0], response


ADMIN_TOKEN = "admin-token-SECRET"
KEY_PASSWORD, TRUSTSTORE_PASSWORD = "key-password-SECRET", "truststore-password-SECRET"
SECRETS = (ADMIN_TOKEN, KEY_PASSWORD, TRUSTSTORE_PASSWORD, *PLAIN_USERS.values())
"""Every secret value `secured_admin_config` sets: none may leave the broker."""


def secured_admin_config(**extra: str) -> dict[str, str]:
    """An in-process broker (kafkalite.testing.Broker) secured as the README's Security section
    says: a SASL_PLAINTEXT listener with the PLAIN users of PLAIN_USERS, the ACL authorizer with
    no ACL meaning no access, and the admin API asking for credentials (basic: those users;
    bearer: ADMIN_TOKEN as User:admin). The PLAINTEXT listener is the inter-broker one; its
    ANONYMOUS principal is a super user (the tests' own setup goes through it)."""
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{ADMIN_USER};User:ANONYMOUS",
        "admin.authentication": "basic,bearer",
        "admin.bearer.token": ADMIN_TOKEN,
        "admin.bearer.principal": f"User:{ADMIN_USER}",
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.password": TRUSTSTORE_PASSWORD,
        **extra,
    }


def sasl_port(broker) -> int:
    """The SASL_PLAINTEXT port of a kafkalite.testing.Broker started with
    secured_admin_config."""
    return next(
        e.port for e in broker.server.bound_endpoints if e.listener_name == "SASL_PLAINTEXT"
    )


def basic(user: str, password: str | None = None) -> dict[str, str]:
    """The Authorization header of `user` (PLAIN_USERS' password unless given)."""
    import base64

    secret = PLAIN_USERS[user] if password is None else password
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()}


async def set_quota(bootstrap: str, client_id: str, value: float | None) -> None:
    host, port = bootstrap.rsplit(":", 1)
    async with KafkaConnection(host, int(port)) as conn:
        response = await conn.send(
            ApiKey.ALTER_CLIENT_QUOTAS,
            {
                "entries": [
                    {
                        "entity": [{"entity_type": "client-id", "entity_name": client_id}],
                        "ops": [
                            {
                                "key": "producer_byte_rate",
                                "value": value or 0.0,
                                "remove": value is None,
                            }
                        ],
                    }
                ],
                "validate_only": False,
            },
        )
        assert response.entries[0].error_code == 0
        described = await conn.send(
            ApiKey.DESCRIBE_CLIENT_QUOTAS,
            {
                "components": [{"entity_type": "client-id", "match_type": 0, "match": client_id}],
                "strict": False,
            },
        )
    values = {v.key: v.value for e in described.entries or () for v in e.values}
    assert values == ({} if value is None else {"producer_byte_rate": value})


# -- the ACL-secured broker of the authorization tests -------------------------------------------

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "c-pw"}
MALLORY, MALLORY_PASSWORD = "mallory", "mallory-secret-pw"


def secured_overrides(port: int, sasl_port: int) -> dict[str, str]:
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": "User:admin;User:ANONYMOUS",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
    }


class Secured:
    """A broker started with ``secured_overrides``, and connections to it as each user."""

    @classmethod
    @contextmanager
    def started(cls, data_dir: Path) -> Iterator[Secured]:
        """A subprocess broker with the secured listeners, stopped on exit."""
        port, sasl_port = free_port(), free_port()
        broker = Broker(
            data_dir=data_dir,
            port=port,
            config=secured_overrides(port, sasl_port),
            subprocess=True,
            admin=False,
        )
        broker.start()
        try:
            yield cls(broker, sasl_port)
        finally:
            broker.stop()

    def __init__(self, broker: Broker, sasl_port: int) -> None:
        self.broker = broker
        self.sasl_port = sasl_port

    def connect(self, user: str | None = None) -> KafkaConnection:
        """A connection as ``user`` (SASL), or as the super user (PLAINTEXT)."""
        if user is None:
            return KafkaConnection("127.0.0.1", self.broker.port)
        if user == MALLORY:
            security = ClientSecurity(
                "SASL_PLAINTEXT", None, "SCRAM-SHA-256", MALLORY, MALLORY_PASSWORD
            )
        else:
            security = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", user, USERS[user])
        return KafkaConnection("127.0.0.1", self.sasl_port, security=security)

    async def send(self, user: str | None, api_key: int, request: dict, version=None):
        async with self.connect(user) as conn:
            return await conn.send(api_key, request, version)


# -- frames for driving an authenticator without a socket -----------------------------------------


def request(api_key: int, version: int, correlation_id: int = 1, **fields) -> bytearray:
    frame = frames.encode_request(
        api_key, version, correlation_id, "test", request_class(api_key, version)(**fields)
    )
    return bytearray(frame[4:])


def response_body(encoded: bytes, api_key: int, version: int):
    return frames.decode_response(api_key, version, encoded[4:])[1]


def run(value):
    """A coroutine's result (run to completion on a fresh loop), or the value itself."""
    if asyncio.iscoroutine(value):
        return asyncio.run(value)
    return value
