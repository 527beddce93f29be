"""SASL/OAUTHBEARER with a real client (librdkafka through confluent-kafka).

One in-process broker with the ACL authorizer and two OAUTHBEARER listeners:

- UNSECURED: Kafka's unsecured validator; librdkafka makes its own unsigned token
  (``enable.sasl.oauthbearer.unsecure.jwt``), and the ACLs of the token's principal apply;
- OIDC: Kafka's OAuthBearerValidatorCallbackHandler against a JWKS that this module serves on
  127.0.0.1 (``Idp``: a tiny HTTP server with a token endpoint signing RS256 JWTs with a key made
  here); librdkafka fetches its tokens with ``sasl.oauthbearer.method=oidc``.

Every wait is for a condition with a deadline.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from kafkalite.client.connection import KafkaConnection
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.oauthbearer import ALLOWED_URLS, VALIDATOR_HANDLERS
from kafkalite.testing import Broker
from kafkalite.testing import wait_for as shared_wait_for

pytestmark = pytest.mark.integration

DEADLINE_S = 30.0
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
AUDIENCE = "kafka"


def wait_for(condition: Callable[[], Any], what: str, timeout: float = DEADLINE_S) -> Any:
    return shared_wait_for(condition, what, timeout=timeout)


# ---------------------------------------------------------------- the identity provider


@dataclass
class Client:
    """What the token endpoint gives one client id."""

    sub: str
    lifetime_s: int = 3600
    claims: dict[str, Any] = field(default_factory=dict)
    key: str = "main"  # the signing key's name in Idp.keys
    kid: str | None = None  # the kid put in the header (default: the key's own)
    refuse_after: int | None = None  # tokens issued before the endpoint answers 401
    issued: int = 0


class Idp:
    """A token endpoint (client credentials, HTTP basic) and a JWKS, on 127.0.0.1."""

    SECRET = "s3cret"

    def __init__(self) -> None:
        self.keys = {
            "main": RSAKey.generate_key(2048, parameters={"kid": "main", "use": "sig"}),
            "rogue": RSAKey.generate_key(2048, parameters={"kid": "main"}),  # not published
            "later": RSAKey.generate_key(2048, parameters={"kid": "later", "use": "sig"}),
        }
        self.published = ["main"]
        self.clients: dict[str, Client] = {}
        self.jwks_fetches = 0
        self.lock = threading.Lock()
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path != "/jwks":
                    return self._send(404, {})
                with idp.lock:
                    idp.jwks_fetches += 1
                    keys = KeySet([idp.keys[name] for name in idp.published])
                self._send(200, keys.as_dict(private=False))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                auth = self.headers.get("Authorization", "")
                try:
                    user, _, secret = (
                        base64.b64decode(auth.split(" ", 1)[1]).decode().partition(":")
                    )
                except (IndexError, ValueError):
                    return self._send(401, {"error": "invalid_client"})
                token = idp.token_for(user) if secret == Idp.SECRET else None
                if token is None:
                    return self._send(401, {"error": "invalid_client"})
                self._send(200, token)

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def token_for(self, client_id: str) -> dict | None:
        with self.lock:
            client = self.clients.get(client_id)
            if client is None or (
                client.refuse_after is not None and client.issued >= client.refuse_after
            ):
                return None
            client.issued += 1
        now = int(time.time())
        claims = {
            "sub": client.sub,
            "iss": self.url,
            "aud": [AUDIENCE],
            "iat": now,
            "exp": now + client.lifetime_s,
            **client.claims,
        }
        key = self.keys[client.key]
        header = {"alg": "RS256", "kid": client.kid or key.kid}
        access = jwt.encode(header, claims, key)
        return {"access_token": access, "token_type": "bearer", "expires_in": client.lifetime_s}

    def sign(self, claims: dict, key: str = "main") -> str:
        return jwt.encode({"alg": "RS256", "kid": self.keys[key].kid}, claims, self.keys[key])

    def __enter__(self) -> Idp:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


# ---------------------------------------------------------------- the broker


@dataclass
class Setup:
    broker: Broker
    idp: Idp
    ports: dict[str, int]


@pytest.fixture(scope="module")
def oauth():
    with Idp() as idp:
        jwks_url = f"{idp.url}/jwks"
        config = {
            "listeners": ("PLAINTEXT://127.0.0.1:0,UNSECURED://127.0.0.1:0,OIDC://127.0.0.1:0"),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,UNSECURED:SASL_PLAINTEXT,OIDC:SASL_PLAINTEXT"
            ),
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.unsecured.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
            "listener.name.oidc.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
            "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": (
                VALIDATOR_HANDLERS[0]
            ),
            "listener.name.oidc.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks_url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": idp.url,
            "sasl.oauthbearer.clock.skew.seconds": "0",
            ALLOWED_URLS: jwks_url,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": "User:ANONYMOUS",
            # every client of this module fails from 127.0.0.1 on purpose: no per-address limit
            "failed.authentication.burst.per.ip": "0",
        }
        with Broker(config) as broker:
            ports = {e.listener_name: e.port for e in broker.server.bound_endpoints}
            for topic in ("alice-topic", "secret", "oidc-topic"):
                broker.create_topic(topic, partitions=1)
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            acls = [
                AclBinding(
                    ResourceType.TOPIC,
                    topic,
                    ResourcePatternType.LITERAL,
                    f"User:{user}",
                    "*",
                    op,
                    AclPermissionType.ALLOW,
                )
                for user, topic in (("alice", "alice-topic"), ("svc-good", "oidc-topic"))
                for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)
            ] + [
                AclBinding(
                    ResourceType.GROUP,
                    "alice-group",
                    ResourcePatternType.LITERAL,
                    "User:alice",
                    "*",
                    AclOperation.READ,
                    AclPermissionType.ALLOW,
                )
            ]
            for future in admin.create_acls(acls).values():
                future.result(DEADLINE_S)
            yield Setup(broker, idp, ports)


def unsecured_conf(setup: Setup, principal: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{setup.ports['UNSECURED']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": f"principal={principal} lifeSeconds=3600",
        **extra,
    }


def oidc_conf(setup: Setup, client_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{setup.ports['OIDC']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": client_id,
        "sasl.oauthbearer.client.secret": Idp.SECRET,
        "sasl.oauthbearer.token.endpoint.url": f"{setup.idp.url}/token",
        **extra,
    }


def produce_one(conf: dict[str, Any], topic: str) -> KafkaError | None:
    """The delivery result of one record."""
    results: list[KafkaError | None] = []
    producer = Producer({"linger.ms": 0, "message.timeout.ms": 20000, **conf})
    producer.produce(topic, b"v", on_delivery=lambda err, msg: results.append(err))
    wait_for(lambda: producer.poll(0.1) is not None and results, "the delivery report")
    return results[0]


def consume(conf: dict[str, Any], topic: str, group: str) -> list[bytes]:
    consumer = Consumer(
        {**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    try:
        got: list[bytes] = []

        def one() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None:
                if msg.error():
                    raise KafkaException(msg.error())
                got.append(msg.value())
            return bool(got)

        wait_for(one, f"a record of {topic}")
        return got
    finally:
        consumer.close()


def auth_failure(conf: dict[str, Any]) -> str:
    """The authentication error librdkafka reports for `conf` (a producer that never
    authenticates)."""
    errors: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": errors.append})
    try:
        failure = wait_for(
            lambda: (
                producer.poll(0.1) is not None
                and next((e for e in errors if e.code() == KafkaError._AUTHENTICATION), None)
            ),
            "an authentication failure",
        )
        return failure.str()
    finally:
        producer.purge()


# ---------------------------------------------------------------- (a) unsecured tokens and ACLs


def test_unsecured_token_produces_and_consumes_as_its_principal(oauth):
    conf = unsecured_conf(oauth, "alice")
    assert produce_one(conf, "alice-topic") is None
    assert consume(conf, "alice-topic", "alice-group") == [b"v"]


def test_the_tokens_principal_is_held_to_its_acls(oauth):
    err = produce_one(unsecured_conf(oauth, "alice"), "secret")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    err = produce_one(unsecured_conf(oauth, "mallory"), "alice-topic")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_an_unsigned_token_is_refused_on_the_oidc_listener(oauth):
    conf = unsecured_conf(
        oauth, "alice", **{"bootstrap.servers": f"127.0.0.1:{oauth.ports['OIDC']}"}
    )
    assert '{"status":"invalid_token"}' in auth_failure(conf)


# ---------------------------------------------------------------- (b) librdkafka's OIDC client


def test_oidc_client_produces_and_consumes_with_a_signed_token(oauth):
    oauth.idp.clients["good"] = Client("svc-good")
    conf = oidc_conf(oauth, "good")
    assert produce_one(conf, "oidc-topic") is None
    assert produce_one(conf, "secret").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize(
    "client",
    [
        Client("svc-good", claims={"aud": ["someone-else"]}),
        Client("svc-good", claims={"iss": "https://evil.example"}),
        Client("svc-good", key="rogue"),  # the published kid, another key: bad signature
        Client("svc-good", key="rogue", kid="unknown"),
    ],
    ids=["wrong-audience", "wrong-issuer", "bad-signature", "unknown-kid"],
)
def test_bad_tokens_are_refused_and_others_still_served(oauth, client):
    name = f"bad-{id(client)}"
    oauth.idp.clients[name] = client
    assert '{"status":"invalid_token"}' in auth_failure(oidc_conf(oauth, name))
    oauth.idp.clients["good"] = Client("svc-good")
    assert produce_one(oidc_conf(oauth, "good"), "oidc-topic") is None


def test_an_expired_token_is_refused(oauth):
    """librdkafka does not send a token it knows to be expired; its token callback can claim
    a later expiry for one whose ``exp`` has passed."""
    now = int(time.time())
    claims = {"sub": "svc-good", "iss": oauth.idp.url, "aud": AUDIENCE, "iat": now - 60}
    expired = oauth.idp.sign({**claims, "exp": now - 1})
    conf = {
        "bootstrap.servers": f"127.0.0.1:{oauth.ports['OIDC']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: (expired, time.time() + 3600),
    }
    assert '{"status":"invalid_token"}' in auth_failure(conf)


def test_a_rotated_key_is_fetched_when_a_token_names_it(oauth):
    before = oauth.idp.jwks_fetches
    with oauth.idp.lock:
        oauth.idp.published.append("later")
    oauth.idp.clients["rotated"] = Client("svc-good", key="later")
    assert produce_one(oidc_conf(oauth, "rotated"), "oidc-topic") is None
    assert oauth.idp.jwks_fetches > before


async def _raw_authenticate(port: int, token: bytes) -> Any:
    async with KafkaConnection("127.0.0.1", port) as conn:
        shake = await conn.send(ApiKey.SASL_HANDSHAKE, {"mechanism": "OAUTHBEARER"}, 1)
        assert shake.error_code == ErrorCode.NONE
        first = await conn.send(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, 2)
        final = await conn.send(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"\x01"}, 2)
        return first, final


def test_on_the_wire_the_challenge_then_sasl_authentication_failed(oauth):
    import asyncio

    token = oauth.idp.sign(
        {"sub": "x", "iss": oauth.idp.url, "aud": "nobody", "iat": 1, "exp": 2**31}
    )
    first, final = asyncio.run(
        _raw_authenticate(
            oauth.ports["OIDC"], b"n,,\x01auth=Bearer " + token.encode() + b"\x01\x01"
        )
    )
    assert first.error_code == ErrorCode.NONE
    assert bytes(first.auth_bytes) == b'{"status":"invalid_token"}'
    assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert final.error_message == '{"status":"invalid_token"}'


# ---------------------------------------------------------------- (c) re-authentication at expiry


class Stats:
    """librdkafka's statistics of the one broker connection (not the bootstrap one)."""

    def __init__(self) -> None:
        self.last: dict[str, Any] = {}
        self.up = False
        """Whether the latest statistics show a connection to the broker UP. When its last
        connection fails and the bootstrap address is refused too, librdkafka re-bootstraps:
        the broker is decommissioned and leaves the statistics, possibly between two samples,
        so its last entry (``last``) may still say UP."""

    def __call__(self, text: str) -> None:
        brokers = json.loads(text)["brokers"]
        self.up = False
        for b in brokers.values():
            if b.get("nodeid", -1) >= 0:
                self.last = b
                self.up = self.up or b.get("state") == "UP"

    def sasl_authenticates(self) -> int:
        return int(self.last.get("req", {}).get("SaslAuthenticate", 0))

    def disconnects(self) -> int:
        return int(self.last.get("disconnects", 0))


def test_short_lived_tokens_are_renewed_on_the_same_connection(oauth):
    oauth.idp.clients["short"] = Client("svc-good", lifetime_s=4)
    stats = Stats()
    errors: list[KafkaError] = []
    producer = Producer(
        {
            **oidc_conf(oauth, "short"),
            "linger.ms": 0,
            "statistics.interval.ms": 100,
            "stats_cb": stats,
            "error_cb": errors.append,
        }
    )
    delivered: list[KafkaError | None] = []

    def renewed_twice() -> bool:
        producer.produce("oidc-topic", b"v", on_delivery=lambda e, m: delivered.append(e))
        producer.poll(0.1)
        return stats.sasl_authenticates() >= 3 and oauth.idp.clients["short"].issued >= 3

    wait_for(renewed_twice, "two re-authentications", timeout=60)
    producer.flush(DEADLINE_S)
    assert delivered and all(e is None for e in delivered)
    assert stats.disconnects() == 0, errors


def test_a_token_that_is_not_renewed_ends_the_session(oauth):
    """The endpoint refuses the second token: librdkafka keeps the first, which expires; the
    broker then refuses it (re-authentication or a new connection) and nothing more is
    delivered."""
    oauth.idp.clients["ending"] = Client("svc-good", lifetime_s=4, refuse_after=1)
    stats = Stats()
    errors: list[KafkaError] = []
    producer = Producer(
        {
            **oidc_conf(oauth, "ending"),
            "linger.ms": 0,
            "statistics.interval.ms": 100,
            "stats_cb": stats,
            "error_cb": errors.append,
        }
    )
    delivered: list[KafkaError | None] = []
    producer.produce("oidc-topic", b"v", on_delivery=lambda e, m: delivered.append(e))
    wait_for(lambda: producer.poll(0.1) is not None and delivered, "the first delivery")
    assert delivered == [None]

    def refused() -> bool:
        producer.produce("oidc-topic", b"v", on_delivery=lambda e, m: delivered.append(e))
        producer.poll(0.1)
        return any(
            e.code() == KafkaError._AUTHENTICATION and "invalid_token" in e.str() for e in errors
        )

    wait_for(refused, "the expired token's refusal", timeout=60)
    assert oauth.idp.clients["ending"].issued == 1

    def ended() -> bool:
        # a session ends at the first request after its token expired (as Kafka's processor
        # checks it): keep sending, or an idle connection that re-authenticated with the old
        # token just before it expired stays up
        producer.produce("oidc-topic", b"v", on_delivery=lambda e, m: delivered.append(e))
        producer.poll(0.1)
        return not stats.up

    wait_for(ended, "the end")
    settled = len(delivered)
    producer.produce("oidc-topic", b"late", on_delivery=lambda e, m: delivered.append(e))
    producer.flush(1.0)
    assert len(delivered) == settled  # not delivered: no session
    producer.purge()


# ---------------------------------------------------------------- start-up


def _oidc_broker(url: str, allowed: str) -> Broker:
    return Broker(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,OIDC://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OIDC:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.oidc.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
            "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": (
                VALIDATOR_HANDLERS[1]
            ),
            "sasl.oauthbearer.jwks.endpoint.url": url,
            ALLOWED_URLS: allowed,
        },
        admin=False,
    )


def _start_up_error(broker: Broker) -> str:
    from kafkalite.server.errors import StartupError

    try:
        with pytest.raises(StartupError) as info:
            broker.start()
        return str(info.value)
    finally:
        broker.close()


def test_a_jwks_url_not_allowed_or_not_reachable_stops_start_up(oauth):
    good = f"{oauth.idp.url}/jwks"
    message = _start_up_error(_oidc_broker(good, ""))
    assert "sasl.oauthbearer.jwks.endpoint.url" in message and ALLOWED_URLS in message
    missing = f"{oauth.idp.url}/nothing-here"
    message = _start_up_error(_oidc_broker(missing, missing))
    assert "sasl.oauthbearer.jwks.endpoint.url: could not fetch the JWKS" in message
