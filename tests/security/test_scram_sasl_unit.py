"""SCRAM math, the SASL server state machine, JAAS and TLS settings: unit tests, no sockets.

The SCRAM-SHA-256 exchange of RFC 7677 section 3 is replayed byte for byte; client and server
agree for any user/password (hypothesis); the authenticator is fed malformed frames
(hypothesis) and never serves anything but ApiVersions / SaslHandshake / SaslAuthenticate
before a successful exchange.
"""

from __future__ import annotations

import asyncio
import base64
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.security.jaas import parse_jaas_config
from kafkalite.security.sasl import (
    COMPLETE,
    CloseAfter,
    SaslRefused,
    SaslServerAuthenticator,
)
from kafkalite.security.scram import (
    ScramClient,
    ScramCredential,
    ScramError,
    ScramSaslServer,
    make_credential,
    parse_client_first,
)
from kafkalite.security.tls import PrincipalMapper, TlsConfigError, subject_dn
from tests.broker.conftest import wait_until
from tests.security.support import request, response_body, run


def test_rfc7677_scram_sha_256_exchange():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = make_credential("SCRAM-SHA-256", "pencil", salt=salt, iterations=4096)
    client = ScramClient("SCRAM-SHA-256", "user", "pencil")
    client.nonce = "rOprNGfwEbeRWgbNEkqO"
    client._bare = f"n=user,r={client.nonce}"
    server_first = (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = client.final(server_first)
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    # and the server side checks that proof against the stored credential
    server = ScramSaslServer("SCRAM-SHA-256")
    server.first(parse_client_first(b"n,," + client._bare.encode()), credential)
    server._nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    server._server_first = server_first.decode()
    assert server.final(final) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_credential_string_is_kafkas_format():
    credential = make_credential("SCRAM-SHA-512", "pw", salt=b"salt", iterations=4096)
    text = credential.to_string()
    assert text.startswith("salt=c2FsdA==,stored_key=") and text.endswith(",iterations=4096")
    assert ScramCredential.from_string(text) == credential
    with pytest.raises(ScramError):
        ScramCredential.from_string("salt=c2FsdA==")
    with pytest.raises(ScramError):
        make_credential("SCRAM-SHA-256", "pw", iterations=100)


@settings(max_examples=25, deadline=None)
@given(
    user=st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=12),
    password=st.text(min_size=1, max_size=12),
    wrong=st.booleans(),
    mechanism=st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
)
def test_scram_client_and_server_agree(user, password, wrong, mechanism):
    stored = make_credential(mechanism, password)
    client = ScramClient(mechanism, user, password + ("x" if wrong else ""))
    server = ScramSaslServer(mechanism)
    first = parse_client_first(client.first())
    assert first.username == user
    final = client.final(server.first(first, stored))
    if wrong:
        with pytest.raises(ScramError, match="Authentication failed"):
            server.final(final)
    else:
        client.verify(server.final(final))


# ---------------------------------------------------------------------- the authenticator


def authenticator(**kw) -> SaslServerAuthenticator:
    async def credentials(user, mechanism):
        return STORE.get((user, mechanism))

    return SaslServerAuthenticator(
        ("PLAIN", "SCRAM-SHA-256"),
        plain_users={"alice": "alice-secret"},
        credentials=credentials,
        **kw,
    )


STORE = {("bob", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", "bob-secret")}


def test_plain_success_and_session_lifetime():
    now = [100.0]
    auth = authenticator(reauth_ms=5000, clock=lambda: now[0])
    assert (
        auth.intercept(
            request(ApiKey.API_VERSIONS, 3, client_software_name="a", client_software_version="1")
        )
        is None
    )
    handshake = response_body(
        auth.intercept(request(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")), 17, 1
    )
    assert handshake.error_code == ErrorCode.NONE and "PLAIN" in handshake.mechanisms
    answer = auth.intercept(
        request(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=b"\0alice\0alice-secret")
    )
    body = response_body(answer, 36, 1)
    assert body.error_code == ErrorCode.NONE
    assert body.session_lifetime.total_seconds() == 5
    assert auth.state == COMPLETE and auth.principal == "User:alice"
    assert auth.intercept(request(ApiKey.METADATA, 1, topics=None)) is None
    now[0] += 6  # past the session's lifetime without re-authenticating
    with pytest.raises(SaslRefused, match="expired"):
        auth.intercept(request(ApiKey.METADATA, 1, topics=None))


def test_reauthentication_keeps_the_session_alive():
    now = [0.0]
    auth = authenticator(reauth_ms=1000, clock=lambda: now[0])
    auth.intercept(request(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN"))
    auth.intercept(request(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=b"\0alice\0alice-secret"))
    now[0] = 0.9
    auth.intercept(request(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN"))
    body = response_body(
        auth.intercept(request(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=b"\0alice\0alice-secret")),
        36,
        1,
    )
    assert body.error_code == ErrorCode.NONE
    now[0] = 1.5
    assert auth.intercept(request(ApiKey.METADATA, 1, topics=None)) is None


@pytest.mark.parametrize(
    "token, message",
    [
        (b"\0alice\0wrong", "Invalid username or password"),
        (b"\0nobody\0x", "Invalid username or password"),
        (b"alice", "expected 3 tokens"),
        (b"bob\0alice\0alice-secret", "authorization id"),
    ],
)
def test_plain_failure_answers_then_closes(token, message):
    auth = authenticator()
    auth.intercept(request(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN"))
    answer = auth.intercept(request(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=token))
    assert isinstance(answer, CloseAfter)
    body = response_body(answer.response, 36, 2)
    assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert message in body.error_message
    assert auth.principal is None


def test_scram_over_raw_tokens_after_a_v0_handshake():
    auth = authenticator()
    auth.intercept(request(ApiKey.SASL_HANDSHAKE, 0, mechanism="SCRAM-SHA-256"))
    client = ScramClient("SCRAM-SHA-256", "bob", "bob-secret")
    server_first = run(auth.intercept(bytearray(client.first())))
    (size,) = struct.unpack(">i", server_first[:4])
    final = run(auth.intercept(bytearray(client.final(server_first[4 : 4 + size]))))
    client.verify(final[4:])
    assert auth.principal == "User:bob" and auth.complete


def test_scram_unknown_user_fails_like_a_wrong_password():
    auth = authenticator()
    auth.intercept(request(ApiKey.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256"))
    client = ScramClient("SCRAM-SHA-256", "nobody", "x")
    first = response_body(
        run(auth.intercept(request(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=client.first()))), 36, 1
    )
    answer = run(
        auth.intercept(
            request(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=client.final(first.auth_bytes))
        )
    )
    assert isinstance(answer, CloseAfter)
    assert response_body(answer.response, 36, 1).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_unsupported_mechanism_and_requests_before_authentication():
    auth = authenticator()
    answer = auth.intercept(request(ApiKey.SASL_HANDSHAKE, 1, mechanism="GSSAPI"))
    assert isinstance(answer, CloseAfter)
    body = response_body(answer.response, 17, 1)
    assert body.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert set(body.mechanisms) == {"PLAIN", "SCRAM-SHA-256"}
    for frame in (
        request(ApiKey.METADATA, 1, topics=None),
        request(ApiKey.SASL_AUTHENTICATE, 0, auth_bytes=b"\0alice\0alice-secret"),
    ):
        with pytest.raises(SaslRefused):
            authenticator().intercept(frame)


SERVED_BEFORE_AUTH = {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prefix=st.sampled_from([b"", b"\x00\x11\x00\x01", b"\x00\x24\x00\x02", b"\x00\x11\x00\x00"]),
    frames_=st.lists(st.binary(max_size=80), min_size=1, max_size=4),
)
def test_malformed_frames_never_authenticate_or_get_served(prefix, frames_):
    """Arbitrary frames (some starting like a handshake or authenticate header) either close
    the connection or get a SASL answer; nothing else is dispatched, and no garbage exchange
    ends authenticated."""
    auth = authenticator()
    for raw in frames_:
        frame = bytearray(prefix + raw)
        try:
            answer = run(auth.intercept(frame))
        except (KafkaError, ValueError, struct.error, UnicodeDecodeError, IndexError):
            return  # the connection is closed
        except Exception as e:  # a decoder failure of another kind: also a close
            assert not auth.complete, e
            return
        if answer is None:
            api_key = int.from_bytes(frame[:2], "big", signed=True)
            assert api_key == ApiKey.API_VERSIONS and not auth.complete
        if isinstance(answer, CloseAfter):
            return
    assert not auth.complete


# ---------------------------------------------------------------------- JAAS and TLS settings


def test_jaas_config_parsing():
    entry = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="a b;c" user_admin="a b;c" user_alice=alice-secret;'
    )
    assert entry.options["password"] == "a b;c"
    assert entry.plain_users == {"admin": "a b;c", "alice": "alice-secret"}
    for bad in ("x required a=;", "x maybe;", 'x required a="b"', "x required a b;", ""):
        with pytest.raises(ValueError):
            parse_jaas_config(bad)


def test_principal_mapping_rules_and_subject_dn():
    subject = (
        (("countryName", "US"),),
        (("organizationName", "acme, inc"),),
        (("organizationalUnitName", "Eng"),),
        (("commonName", "Alice"),),
    )
    dn = subject_dn({"subject": subject})
    assert dn == "CN=Alice,OU=Eng,O=acme\\, inc,C=US"
    mapper = PrincipalMapper("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L,DEFAULT")
    assert mapper.name(dn) == "alice@eng"
    assert PrincipalMapper("RULE:^O=(.*)$/$1/,DEFAULT").name(dn) == dn
    assert PrincipalMapper("DEFAULT").name("CN=x") == "CN=x"
    with pytest.raises(TlsConfigError) as info:
        PrincipalMapper("RULE:^CN=(.*$/$1/")
    assert info.value.key == "ssl.principal.mapping.rules"


def test_credential_cache_reads_once_until_invalidated():
    from kafkalite.security.scram import CredentialCache

    store = {"alice": make_credential("SCRAM-SHA-256", "one")}
    reads = []
    gate: dict[str, asyncio.Event] = {}

    async def load(user, mechanism):
        reads.append(user)
        if user in gate:
            await gate[user].wait()
        return store.get(user)

    async def scenario():
        cache = CredentialCache(load, max_entries=3)
        first = await cache.get("alice", "SCRAM-SHA-256")
        assert await cache.get("alice", "SCRAM-SHA-256") is first
        assert await cache.get("nobody", "SCRAM-SHA-256") is None
        assert await cache.get("nobody", "SCRAM-SHA-256") is None  # remembered too
        assert reads == ["alice", "nobody"]
        # a changed password: the notification invalidates, the next read sees the new one
        store["alice"] = make_credential("SCRAM-SHA-256", "two")
        cache.invalidate("alice")
        assert await cache.get("alice", "SCRAM-SHA-256") is store["alice"]
        # a read overlapping an invalidation is answered but not kept
        gate["bob"] = asyncio.Event()
        store["bob"] = make_credential("SCRAM-SHA-256", "old")
        pending = asyncio.ensure_future(cache.get("bob", "SCRAM-SHA-256"))
        await wait_until(lambda: reads[-1] == "bob")  # its read is waiting at the gate
        store["bob"] = make_credential("SCRAM-SHA-256", "new")
        cache.invalidate("bob")
        gate["bob"].set()
        await pending
        del gate["bob"]
        assert await cache.get("bob", "SCRAM-SHA-256") is store["bob"]
        # clear() (the watcher restarted) forgets everything; the cache stays bounded
        cache.clear()
        assert len(cache) == 0
        for user in ("a", "b", "c", "d"):
            await cache.get(user, "SCRAM-SHA-256")
        assert len(cache) <= 3

    asyncio.run(scenario())
