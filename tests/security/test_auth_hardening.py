"""Credential checks that cannot be used to enumerate users or to burn the event loop.

- SCRAM: an unknown user gets a salt derived from its name (the same at every attempt) and the
  default iterations, and costs no PBKDF2; a client-final out of turn fails the authentication.
- Failed authentications are rate-limited per address (ratelimit.py): a SASL attempt over the
  limit fails unchecked, an HTTP one gets 429 with Retry-After; a failed SASL answer waits
  connection.failed.authentication.delay.ms on a timer.
- The admin API's basic auth derives a SCRAM key in the executor, never on the loop, and
  remembers a verified password (not again derived until the credential changes).
"""

from __future__ import annotations

import base64
import threading
from types import SimpleNamespace

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kafkalite.admin import security as admin_security
from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security import scram
from kafkalite.security.ratelimit import FailedAuthLimiter
from kafkalite.security.sasl import CloseAfter, SaslServerAuthenticator
from kafkalite.security.scram import (
    DEFAULT_ITERATIONS,
    ScramClient,
    ScramSaslServer,
    make_credential,
    parse_client_first,
)
from tests.security.support import request, response_body, run

BOB = make_credential("SCRAM-SHA-256", "bob-secret", iterations=DEFAULT_ITERATIONS)


def authenticator(**kw) -> SaslServerAuthenticator:
    async def credentials(user, mechanism):
        return BOB if (user, mechanism) == ("bob", "SCRAM-SHA-256") else None

    return SaslServerAuthenticator(
        ("PLAIN", "SCRAM-SHA-256"),
        plain_users={"alice": "alice-secret"},
        credentials=credentials,
        **kw,
    )


def server_first(user: str, credential) -> dict[str, str]:
    client = ScramClient("SCRAM-SHA-256", user, "whatever")
    answer = ScramSaslServer("SCRAM-SHA-256").first(parse_client_first(client.first()), credential)
    return dict(part.split("=", 1) for part in answer.decode().split(","))


# ---------------------------------------------------------------------- item 11: enumeration


def test_an_unknown_user_gets_the_same_salt_and_the_default_iterations_every_time():
    first, second = server_first("nobody", None), server_first("nobody", None)
    assert first["s"] == second["s"]
    assert first["i"] == second["i"] == str(DEFAULT_ITERATIONS)
    assert server_first("bob", BOB)["i"] == first["i"]  # as a real user's default
    assert server_first("somebody-else", None)["s"] != first["s"]
    assert len(base64.b64decode(first["s"])) == len(BOB.salt)


def test_an_unknown_user_costs_no_key_derivation(monkeypatch):
    derivations = []
    real = scram.salted_password
    monkeypatch.setattr(scram, "salted_password", lambda *a: derivations.append(a) or real(*a))
    server_first("nobody", None)
    assert derivations == []


# ---------------------------------------------------------------------- item 12: out of turn


def test_a_client_final_before_the_server_first_fails_the_authentication():
    auth = authenticator()
    auth.intercept(request(ApiKey.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256"))
    client = ScramClient("SCRAM-SHA-256", "bob", "bob-secret")
    pending_first = auth.intercept(request(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=client.first()))
    early = b"c=biws,r=" + client.nonce.encode() + b"x,p=AAAA"
    answer = auth.intercept(request(ApiKey.SASL_AUTHENTICATE, 1, 3, auth_bytes=early))
    assert isinstance(answer, CloseAfter)
    body = response_body(answer.response, 36, 1)
    assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert auth.principal is None and not auth.complete
    run(pending_first)  # the first step still completes without error
    assert not auth.complete


def test_a_second_client_final_fails_the_authentication():
    server = ScramSaslServer("SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "bob", "bob-secret")
    final = client.final(server.first(parse_client_first(client.first()), BOB))
    server.final(final)
    with pytest.raises(scram.ScramError):
        server.final(final)


# ---------------------------------------------------------------------- item 9: rate limit


def test_the_limiter_lets_a_burst_through_then_one_attempt_per_refill():
    now = [0.0]
    limiter = FailedAuthLimiter(burst=3, per_second=0.5, clock=lambda: now[0])
    for _ in range(3):
        assert limiter.retry_after("10.0.0.1") == 0.0
        limiter.failed("10.0.0.1")
    assert limiter.retry_after("10.0.0.1") == pytest.approx(2.0)
    assert limiter.retry_after("10.0.0.2") == 0.0  # per address
    now[0] = 1.0
    assert limiter.retry_after("10.0.0.1") == pytest.approx(1.0)
    now[0] = 2.0
    assert limiter.retry_after("10.0.0.1") == 0.0
    limiter.failed("10.0.0.1")
    assert limiter.retry_after("10.0.0.1") > 0
    now[0] = 100.0  # refilled to the burst, no further
    for _ in range(3):
        assert limiter.retry_after("10.0.0.1") == 0.0
        limiter.failed("10.0.0.1")
    assert limiter.retry_after("10.0.0.1") > 0


def test_the_limiter_table_is_bounded():
    now = [0.0]
    limiter = FailedAuthLimiter(burst=2, per_second=1.0, max_sources=10, clock=lambda: now[0])
    for i in range(10):
        limiter.failed(f"10.0.0.{i}")
    now[0] = 5.0  # every bucket refilled: dropped when room is needed
    limiter.failed("10.0.1.1")
    assert len(limiter) == 1
    for i in range(50):
        limiter.failed(f"10.0.2.{i}")
    assert len(limiter) <= 10


def plain_attempt(limiter, password: str, host: str = "10.0.0.1", **kw):
    auth = authenticator(limiter=limiter, client_host=host, **kw)
    auth.intercept(request(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN"))
    token = f"\0alice\0{password}".encode()
    return auth, auth.intercept(request(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=token))


def test_sasl_attempts_over_the_limit_fail_unchecked():
    now = [0.0]
    limiter = FailedAuthLimiter(burst=2, per_second=1.0, clock=lambda: now[0])
    for _ in range(2):
        _, answer = plain_attempt(limiter, "wrong")
        assert isinstance(answer, CloseAfter)
    auth, answer = plain_attempt(limiter, "alice-secret")  # the right password, refused
    assert isinstance(answer, CloseAfter)
    body = response_body(answer.response, 36, 1)
    assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "too many" in body.error_message and not auth.complete
    auth, answer = plain_attempt(limiter, "alice-secret", host="10.0.0.2")
    assert auth.complete
    now[0] = 1.0  # refused attempts took nothing: one token back after a second
    auth, answer = plain_attempt(limiter, "alice-secret")
    assert auth.complete


def test_a_failed_sasl_answer_waits_on_a_timer(monkeypatch):
    delays = []

    async def fake_sleep(seconds):
        delays.append(seconds)

    monkeypatch.setattr("kafkalite.security.sasl.asyncio.sleep", fake_sleep)
    _, answer = plain_attempt(None, "wrong", failed_delay_ms=100)
    assert not isinstance(answer, CloseAfter)  # an awaitable: the loop is not held
    answer = run(answer)
    assert isinstance(answer, CloseAfter) and delays == [0.1]
    body = response_body(answer.response, 36, 1)
    assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


# ---------------------------------------------------------------------- item 9: basic auth


@pytest.fixture
def scram_store(monkeypatch):
    """The admin API's view of the SCRAM users: bob, with 16,384 iterations."""
    store = {
        ("bob", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "bob-secret", iterations=16384)
    }

    async def scram_credential(session, user, mechanism):
        return store.get((user, mechanism))

    monkeypatch.setattr("kafkalite.zk.security.scram_credential", scram_credential)
    monkeypatch.setattr(admin_security, "VERIFIED", admin_security.VerifiedPasswords())
    return store


def fake_server():
    config = SimpleNamespace(
        listener_endpoints=[],
        admin_authentication="basic",
        jaas_config=lambda listener, mechanism: None,
    )
    return SimpleNamespace(config=config, session=None, authorizer=None)


async def test_basic_auth_derives_keys_off_the_loop_and_remembers_a_verified_password(
    monkeypatch, scram_store
):
    threads, names = [], []
    real = admin_security.salted_password

    def spy(*args):
        threads.append(threading.get_ident())
        names.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(admin_security, "salted_password", spy)
    server = fake_server()
    loop_thread = threading.get_ident()
    assert await admin_security.check_password(server, "bob", "bob-secret")
    assert len(threads) == 1 and threads[0] != loop_thread
    assert await admin_security.check_password(server, "bob", "bob-secret")
    assert len(threads) == 1  # remembered
    assert not await admin_security.check_password(server, "bob", "wrong")
    assert not await admin_security.check_password(server, "bob", "wrong")
    assert len(threads) == 3  # a wrong password is never remembered
    assert loop_thread not in threads
    assert all(n.startswith("kafkalite-key-derivation") for n in names)  # not the default pool
    scram_store[("bob", "SCRAM-SHA-256")] = make_credential("SCRAM-SHA-256", "new-secret")
    assert not await admin_security.check_password(server, "bob", "bob-secret")
    assert await admin_security.check_password(server, "bob", "new-secret")


async def test_wrong_basic_credentials_are_rate_limited_with_429(scram_store):
    app = web.Application(middlewares=[admin_security.security_middleware(fake_server())])

    async def cluster(request):
        return web.json_response({"ok": True})

    app.router.add_get("/cluster", cluster)
    client = TestClient(TestServer(app))
    await client.start_server()
    try:

        def basic(user, password):
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            return {"Authorization": f"Basic {token}"}

        response = await client.get("/cluster", headers=basic("bob", "bob-secret"))
        assert response.status == 200
        statuses = []
        for _ in range(12):
            response = await client.get("/cluster", headers=basic("bob", "guess"))
            statuses.append(response.status)
        assert statuses[:10] == [401] * 10
        assert statuses[10:] == [429, 429]
        assert int(response.headers["Retry-After"]) >= 1
        response = await client.get("/cluster", headers=basic("bob", "bob-secret"))
        assert response.status == 429  # checked no more until the address may try again
        response = await client.get("/cluster")  # no credentials: asked for them
        assert response.status == 401
    finally:
        await client.close()


# ---------------------------------------------------------------------- the new settings


@pytest.mark.parametrize(
    "override, key",
    [
        ("sasl.server.max.receive.size=0", "sasl.server.max.receive.size"),
        (
            "connection.failed.authentication.delay.ms=-1",
            "connection.failed.authentication.delay.ms",
        ),
        ("failed.authentication.burst.per.ip=-1", "failed.authentication.burst.per.ip"),
        ("failed.authentication.refill.ms=0", "failed.authentication.refill.ms"),
    ],
)
def test_a_bad_value_of_a_new_setting_stops_start_up_naming_it(override, key):
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(overrides=[override], environ={})
    assert info.value.key == key and key in str(info.value)


def test_the_failure_delay_must_be_below_the_idle_timeout_as_in_kafka():
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(
            overrides=[
                "connection.failed.authentication.delay.ms=5000",
                "connections.max.idle.ms=5000",
            ],
            environ={},
        )
    assert info.value.key == "connection.failed.authentication.delay.ms"


def test_the_settings_defaults_are_kafkas_and_the_limiter_follows_them():
    config = BrokerConfig.load(overrides=[], environ={})
    assert config.sasl_server_max_receive_size == 524288
    assert config.connection_failed_authentication_delay_ms == 100
    limiter = FailedAuthLimiter.from_config(config)
    assert (limiter.burst, limiter.per_second) == (10, 1.0)
    off = BrokerConfig.load(overrides=["failed.authentication.burst.per.ip=0"], environ={})
    assert FailedAuthLimiter.from_config(off) is None
