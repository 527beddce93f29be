"""SASL/OAUTHBEARER without sockets: the client initial response (RFC 7628, fuzzed with
hypothesis), Kafka's unsecured validator, the signed-JWT validator against a JWKS (keys made
here), the JWKS endpoint's refresh rules, the authenticator's exchange (challenge, failure,
session lifetime = token expiry, re-authentication) and the start-up checks of the settings."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, OctKey, RSAKey
from joserfc.jws import JWSRegistry

from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.listeners import listener_security
from kafkalite.security.oauthbearer import (
    ALLOWED_URLS,
    VALIDATOR_HANDLERS,
    BearerToken,
    ClientInitialResponse,
    Invalid,
    JwksEndpoint,
    JwtValidator,
    OAuthBearerError,
    OAuthConfigError,
    StaticKeys,
    UnsecuredValidator,
    build_validator,
    parse_client_initial_response,
)
from kafkalite.security.ratelimit import FailedAuthLimiter
from kafkalite.security.sasl import COMPLETE, CloseAfter, SaslRefused, SaslServerAuthenticator
from tests.security.support import request, response_body, run

NOW = 1_800_000_000.0
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def b64(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def unsecured(claims: dict, header: dict | None = None, signature: str = "") -> str:
    return f"{b64({'alg': 'none'} if header is None else header)}.{b64(claims)}.{signature}"


def initial(token: str, authzid: str = "", **extensions: str) -> bytes:
    ext = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    head = f"n,a={authzid}," if authzid else "n,,"
    return f"{head}\x01auth=Bearer {token}\x01{ext}\x01".encode()


# ---------------------------------------------------------------- the client initial response


def test_client_initial_response_as_librdkafka_and_kafka_send_it():
    parsed = parse_client_initial_response(initial("a.b.", "alice", traceId="123", x="y z"))
    assert parsed == ClientInitialResponse("a.b.", "alice", {"traceId": "123", "x": "y z"})
    assert parse_client_initial_response(b"n,,\x01auth=bearer abc==\x01\x01").token == "abc=="


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\x01",
        b"n,,\x01\x01",  # no auth
        b"n,,\x01auth=Bearer t\x01",  # no final separator
        b"n,,\x01auth=Basic dXNlcjpwdw==\x01\x01",  # another scheme
        b"n,,\x01auth=Bearer t\x01a1=b\x01\x01",  # an extension name with a digit
        b"n,,\x01auth=Bearer t\x01x=\x01\x01",  # an empty extension value
        b"y,,\x01auth=Bearer t\x01\x01",  # channel binding
        b"n,a=al,ice,\x01auth=Bearer t\x01\x01",
        b"n,,\x01auth=Bearer t t\x01\x01",
        "n,,\x01auth=Bearer t\x01x=é\x01\x01".encode(),
        b"n,,\x01auth=Bearer \xff\x01\x01",
    ],
)
def test_malformed_client_initial_responses_are_refused(message):
    with pytest.raises(OAuthBearerError):
        parse_client_initial_response(message)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=120))
def test_random_bytes_never_raise_anything_but_the_sasl_error(data):
    try:
        parsed = parse_client_initial_response(data)
    except OAuthBearerError:
        return
    assert data.startswith(b"n,") and data.endswith(b"\x01\x01") and parsed.token


_TOKEN_CHARS = st.text("-_~+/.abcXYZ019", min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    token=_TOKEN_CHARS,
    authzid=st.text(st.characters(min_codepoint=1, max_codepoint=127, exclude_characters=",="))
    | st.just(""),
    extensions=st.dictionaries(
        st.text("abcXYZ", min_size=1, max_size=5).filter(lambda k: k != "auth"),
        st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=9),
        max_size=3,
    ),
    noise=st.binary(max_size=3),
    cut=st.integers(0, 200),
)
def test_well_formed_responses_parse_and_mangled_ones_fail_cleanly(
    token, authzid, extensions, noise, cut
):
    message = initial(token, authzid, **extensions)
    parsed = parse_client_initial_response(message)
    assert (parsed.token, parsed.authzid, dict(parsed.extensions)) == (token, authzid, extensions)
    mangled = message[:cut] + noise + message[cut:]
    try:
        parse_client_initial_response(mangled)
    except OAuthBearerError:
        pass


# ---------------------------------------------------------------- Kafka's unsecured validator


def validator(**options: str) -> UnsecuredValidator:
    return UnsecuredValidator(options, clock=lambda: NOW)


def test_unsecured_token_gives_its_subject_scope_and_expiry():
    token = unsecured({"sub": "alice", "exp": NOW + 60, "iat": NOW, "scope": ["a", "b "]})
    result = validator().validate(token)
    assert result == BearerToken(
        token, "alice", int((NOW + 60) * 1000), frozenset({"a", "b"}), int(NOW * 1000)
    )
    custom = unsecured({"user": "bob", "exp": NOW + 1, "roles": "admin"})
    result = validator(
        unsecuredValidatorPrincipalClaimName="user", unsecuredValidatorScopeClaimName="roles"
    ).validate(custom)
    assert isinstance(result, BearerToken)
    assert (result.principal_name, result.scope) == ("bob", frozenset({"admin"}))


@pytest.mark.parametrize(
    "token",
    [
        unsecured({"sub": "alice", "exp": NOW}),  # expires now
        unsecured({"sub": "alice", "exp": NOW + 60, "iat": NOW + 1}),  # issued in the future
        unsecured({"sub": "alice", "exp": NOW + 60, "iat": NOW + 60}),  # exp not after iat
        unsecured({"sub": "alice"}),
        unsecured({"sub": "alice", "exp": "later"}),
        unsecured({"sub": 7, "exp": NOW + 60}),
        unsecured({"sub": " ", "exp": NOW + 60}),
        unsecured({"exp": NOW + 60}),
        unsecured({"sub": "alice", "exp": NOW + 60, "scope": 5}),
        unsecured({"sub": "alice", "exp": NOW + 60}, {"alg": "RS256"}),
        unsecured({"sub": "alice", "exp": NOW + 60}, {}),
        unsecured({"sub": "alice", "exp": NOW + 60}, signature="c2ln"),
        "a..b",
        "abc",
        "!!.??.",
        f"{b64({'alg': 'none'})}.W10.",  # claims that are not an object
    ],
)
def test_unsecured_tokens_kafka_refuses(token):
    result = validator().validate(token)
    assert isinstance(result, Invalid)
    assert result.challenge() == '{"status":"invalid_token"}'


def test_clock_skew_and_required_scope():
    late = unsecured({"sub": "alice", "exp": NOW - 1})
    assert isinstance(validator().validate(late), Invalid)
    assert isinstance(
        validator(unsecuredValidatorAllowableClockSkewMs="2000").validate(late), BearerToken
    )
    scoped = validator(unsecuredValidatorRequiredScope="read write")
    missing = scoped.validate(unsecured({"sub": "a", "exp": NOW + 9, "scope": "read"}))
    assert isinstance(missing, Invalid)
    assert missing.challenge() == '{"status":"insufficient_scope", "scope":"[read, write]"}'
    ok = scoped.validate(unsecured({"sub": "a", "exp": NOW + 9, "scope": ["write", "read"]}))
    assert isinstance(ok, BearerToken)


@pytest.mark.parametrize(
    "options",
    [
        {"unsecuredValidatorAllowableClockSkewMs": "-1"},
        {"unsecuredValidatorAllowableClockSkewMs": "soon"},
        {"unsecuredValidatorRequiredScope": 'a "b"'},
    ],
)
def test_bad_unsecured_options_name_the_option(options):
    with pytest.raises(ValueError) as info:
        UnsecuredValidator(options)
    assert next(iter(options)) in str(info.value)


# ---------------------------------------------------------------- signed JWTs and the JWKS

RSA = RSAKey.generate_key(2048, parameters={"kid": "rsa-1", "use": "sig"})
EC = ECKey.generate_key("P-256", parameters={"kid": "ec-1"})
OTHER = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})  # same kid, another key
JWKS = KeySet([RSA, EC]).as_dict(private=False)
CLAIMS = {"sub": "alice", "iss": "https://idp", "aud": ["kafka"], "iat": NOW, "exp": NOW + 60}


ANY_ALG = JWSRegistry(algorithms=["RS256", "PS256", "ES256", "HS256"])


def signed(claims: dict | None = None, key=RSA, alg: str = "RS256", **header) -> str:
    header = {"alg": alg, "kid": key.kid, **header}
    return jwt.encode(header, claims or CLAIMS, key, registry=ANY_ALG)


def jwt_validator(keys=None, **kwargs) -> JwtValidator:
    from kafkalite.security.oauthbearer import _import_keys

    kwargs = {"audience": frozenset({"kafka"}), "issuer": "https://idp", **kwargs}
    return JwtValidator(keys or StaticKeys(_import_keys(JWKS)), clock=lambda: NOW, **kwargs)


def test_signed_tokens_rs256_and_es256():
    for token in (signed(), signed(key=EC, alg="ES256")):
        result = jwt_validator().validate(token)
        assert isinstance(result, BearerToken), result
        assert result.principal_name == "alice"
        assert result.lifetime_ms == int((NOW + 60) * 1000)
    scoped = signed({**CLAIMS, "scp": ["read", "write"], "client": "svc-1"})
    result = jwt_validator(scope_claim="scp", sub_claim="client").validate(scoped)
    assert isinstance(result, BearerToken)
    assert (result.principal_name, result.scope) == ("svc-1", frozenset({"read", "write"}))
    # no kid: the only key of the algorithm's type is taken, as jose4j does
    no_kid = jwt.encode({"alg": "ES256"}, CLAIMS, EC)
    assert isinstance(jwt_validator().validate(no_kid), BearerToken)
    # clock skew: 30 s by default
    assert isinstance(jwt_validator().validate(signed({**CLAIMS, "exp": NOW - 10})), BearerToken)


@pytest.mark.parametrize(
    "token",
    [
        signed({**CLAIMS, "aud": "other"}),
        signed({k: v for k, v in CLAIMS.items() if k != "aud"}),
        signed({**CLAIMS, "iss": "https://evil"}),
        signed({**CLAIMS, "exp": NOW - 31}),
        signed({**CLAIMS, "nbf": NOW + 31}),
        signed({k: v for k, v in CLAIMS.items() if k != "iat"}),
        signed({k: v for k, v in CLAIMS.items() if k != "exp"}),
        signed({**CLAIMS, "sub": " "}),
        signed({**CLAIMS, "scope": ["a", "a"]}),
        signed(key=OTHER),  # bad signature
        signed(kid="unknown"),
        signed(key=RSA, alg="PS256", kid="ec-1"),  # the kid's key is of another type
        unsecured(CLAIMS),
        jwt.encode({"alg": "HS256"}, CLAIMS, OctKey.import_key(b"k" * 32)),
        signed()[:-6] + "AAAAAA",
        "a.b",
        "",
    ],
)
def test_signed_tokens_kafka_refuses(token):
    result = jwt_validator().validate(token)
    assert isinstance(result, Invalid), result
    assert result.challenge() == '{"status":"invalid_token"}'


def endpoint_with(documents: list[dict]) -> tuple[JwksEndpoint, list[int]]:
    """A JwksEndpoint whose fetches return `documents` in turn (the last one from then on)."""
    from kafkalite.security.oauthbearer import _import_keys

    now = [0.0]
    fetched: list[int] = []
    endpoint = JwksEndpoint("http://127.0.0.1:1/jwks", refresh_ms=1000, clock=lambda: now[0])

    def fetch():
        fetched.append(1)
        return _import_keys(documents[min(len(fetched), len(documents)) - 1])

    endpoint.fetch_blocking = fetch  # type: ignore[method-assign]
    endpoint.now = now  # type: ignore[attr-defined]
    return endpoint, fetched


def test_an_unknown_kid_refreshes_the_jwks_once_a_minute_and_is_then_found():
    rotated = RSAKey.generate_key(2048, parameters={"kid": "rsa-2"})
    endpoint, fetched = endpoint_with(
        [{"keys": [RSA.as_dict(private=False)]}, KeySet([RSA, rotated]).as_dict(private=False)]
    )

    async def scenario():
        await endpoint.start()
        v = jwt_validator(endpoint)
        assert isinstance(v.validate(signed()), BearerToken)
        pending = v.validate(signed(key=rotated))
        assert not isinstance(pending, BearerToken | Invalid)  # waits for the refresh
        assert isinstance(await pending, BearerToken)
        assert len(fetched) == 2
        # an id no refresh finds is refused; it is not fetched for again within the minute
        first = v.validate(signed(kid="nope"))
        assert isinstance(await first, Invalid)
        assert isinstance(v.validate(signed(kid="nope")), Invalid)
        assert len(fetched) == 3
        # keys older than refresh.ms are refreshed in the background on the next use
        endpoint.now[0] += 2  # type: ignore[attr-defined]
        assert isinstance(v.validate(signed()), BearerToken)
        refreshing = endpoint._refreshing
        assert refreshing is not None, "the stale keys started a background refresh"
        await asyncio.wait_for(asyncio.shield(refreshing), 10)
        assert len(fetched) == 4

    asyncio.run(scenario())


def test_a_failed_refresh_keeps_the_known_keys():
    endpoint, fetched = endpoint_with([JWKS])

    async def scenario():
        await endpoint.start()

        def broken():
            fetched.append(1)
            raise OSError("connection refused")

        endpoint.fetch_blocking = broken  # type: ignore[method-assign]
        endpoint.backoff_ms, endpoint.backoff_max_ms = 1, 3
        v = jwt_validator(endpoint)
        assert isinstance(await v.validate(signed(kid="new")), Invalid)
        assert len(fetched) >= 2  # retried with back-off
        assert isinstance(v.validate(signed()), BearerToken)

    asyncio.run(scenario())


_CLAIM_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**400)
    | st.floats(allow_nan=True)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
_CLAIMS = st.dictionaries(
    st.sampled_from(["sub", "exp", "iat", "nbf", "aud", "iss", "scope", "x"]), _CLAIM_VALUES
)


@settings(max_examples=300, deadline=None)
@given(
    claims=_CLAIMS,
    header=st.dictionaries(st.sampled_from(["alg", "kid", "typ"]), _CLAIM_VALUES),
    raw=st.text(max_size=40),
)
@example(claims={"sub": "a", "exp": 10**400}, header={"alg": "none"}, raw="")
@example(claims={**CLAIMS, "exp": 10**400}, header={}, raw="")
def test_validators_only_ever_accept_or_refuse(claims, header, raw):
    """Whatever a token holds, the validators answer a token or a refusal; never an
    exception."""
    v = jwt_validator()
    for token in (unsecured(claims, header), unsecured(claims), raw, signed({**claims})):
        assert isinstance(validator().validate(token), BearerToken | Invalid)
        assert isinstance(v.validate(token), BearerToken | Invalid)


# ---------------------------------------------------------------- the authenticator


def authenticator(validator=None, *, now=None, reauth_ms=0, limiter=None):
    clock = now or [100.0]
    return SaslServerAuthenticator(
        ("OAUTHBEARER", "PLAIN"),
        oauth_validator=validator or UnsecuredValidator({}, clock=lambda: NOW),
        clock=lambda: clock[0],
        wall_clock=lambda: NOW,
        reauth_ms=reauth_ms,
        limiter=limiter,
    ), clock


def handshake(auth, version=1):
    return response_body(
        auth.intercept(request(ApiKey.SASL_HANDSHAKE, version, mechanism="OAUTHBEARER")),
        ApiKey.SASL_HANDSHAKE,
        version,
    )


def authenticate(auth, data: bytes, version=2):
    answer = run(auth.intercept(request(ApiKey.SASL_AUTHENTICATE, version, auth_bytes=data)))
    if isinstance(answer, CloseAfter):
        return response_body(answer.response, ApiKey.SASL_AUTHENTICATE, version), True
    return response_body(answer, ApiKey.SASL_AUTHENTICATE, version), False


def test_a_valid_token_authenticates_its_subject_until_it_expires():
    auth, clock = authenticator()
    assert handshake(auth).error_code == ErrorCode.NONE
    body, closed = authenticate(auth, initial(unsecured({"sub": "alice", "exp": NOW + 30})))
    assert not closed and body.error_code == ErrorCode.NONE and body.auth_bytes == b""
    assert body.session_lifetime.total_seconds() * 1000 == 30_000
    assert auth.state == COMPLETE and auth.principal == "User:alice"
    metadata = request(ApiKey.METADATA, 1, topics=None)
    assert auth.intercept(metadata) is None
    clock[0] += 29
    assert auth.intercept(metadata) is None
    # re-authentication with a fresh token extends the session
    handshake(auth)
    body, _ = authenticate(auth, initial(unsecured({"sub": "alice", "exp": NOW + 45})))
    assert (
        body.error_code == ErrorCode.NONE and body.session_lifetime.total_seconds() * 1000 == 45_000
    )
    clock[0] += 40
    assert auth.intercept(metadata) is None
    clock[0] += 6
    with pytest.raises(SaslRefused):
        auth.intercept(metadata)


def test_connections_max_reauth_ms_bounds_the_token_lifetime():
    auth, _ = authenticator(reauth_ms=5000)
    handshake(auth)
    body, _ = authenticate(auth, initial(unsecured({"sub": "alice", "exp": NOW + 30})))
    assert body.session_lifetime.total_seconds() * 1000 == 5000


def test_a_refused_token_gets_the_json_challenge_then_fails():
    limiter = FailedAuthLimiter(10, 0.001, clock=lambda: 0.0)
    auth, _ = authenticator(limiter=limiter)
    handshake(auth)
    body, closed = authenticate(auth, initial(unsecured({"sub": "alice", "exp": NOW - 1})))
    assert not closed and body.error_code == ErrorCode.NONE
    assert body.auth_bytes == b'{"status":"invalid_token"}'
    assert auth.principal is None
    body, closed = authenticate(auth, b"\x01")
    assert closed and body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert body.error_message == '{"status":"invalid_token"}'
    assert limiter._tokens("", 0.0) == 9.0  # counted once, at the challenge


def test_authzid_must_be_the_principal_and_reauth_must_keep_it():
    auth, _ = authenticator()
    handshake(auth)
    token = unsecured({"sub": "alice", "exp": NOW + 30})
    body, closed = authenticate(auth, initial(token, authzid="bob"))
    assert closed and body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    auth, _ = authenticator()
    handshake(auth)
    authenticate(auth, initial(token, authzid="alice"))
    assert auth.principal == "User:alice"
    handshake(auth)
    with pytest.raises(SaslRefused):
        authenticate(auth, initial(unsecured({"sub": "mallory", "exp": NOW + 30})))


def test_garbage_fails_the_exchange():
    auth, _ = authenticator()
    handshake(auth)
    body, closed = authenticate(auth, b"n,,\x01auth=Basic x\x01\x01")
    assert closed and body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_raw_tokens_after_a_v0_handshake():
    auth, _ = authenticator()
    handshake(auth, version=0)
    answer = auth.intercept(bytearray(initial(unsecured({"sub": "alice", "exp": NOW + 30}))))
    assert answer == b"\x00\x00\x00\x00" and auth.principal == "User:alice"


# ---------------------------------------------------------------- settings


def settings_getter(values: dict[str, str]):
    return lambda key: (key, values.get(key))


def test_build_validator_from_kafkas_settings(tmp_path):
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(JWKS))
    url = jwks.as_uri()
    values = {
        "sasl.server.callback.handler.class": VALIDATOR_HANDLERS[0],
        "sasl.oauthbearer.jwks.endpoint.url": url,
        "sasl.oauthbearer.expected.audience": "kafka, other",
        "sasl.oauthbearer.expected.issuer": "https://idp",
        "sasl.oauthbearer.clock.skew.seconds": "5",
    }
    v = build_validator(settings_getter(values), {}, f"http://x,{url}")
    assert isinstance(v, JwtValidator)
    assert (v.audience, v.issuer, v.clock_skew_s) == (
        frozenset({"kafka", "other"}),
        "https://idp",
        5,
    )
    assert isinstance(v.validate(signed()), BearerToken)
    assert isinstance(build_validator(settings_getter({}), {}, ""), UnsecuredValidator)


@pytest.mark.parametrize(
    "values, allowed, key",
    [
        (
            {"sasl.server.callback.handler.class": "com.example.Handler"},
            "",
            "sasl.server.callback.handler.class",
        ),
        ({}, "", "sasl.oauthbearer.jwks.endpoint.url"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "ftp://x/jwks"}, "ftp://x/jwks", "endpoint.url"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks"}, "", ALLOWED_URLS),
        ({"sasl.oauthbearer.jwks.endpoint.url": "file:///nope.json"}, "file:///nope.json", "nope"),
        (
            {
                "sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks",
                "sasl.oauthbearer.jwks.endpoint.refresh.ms": "0",
            },
            "https://idp/jwks",
            "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        ),
        (
            {
                "sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks",
                "sasl.oauthbearer.sub.claim.name": " ",
            },
            "https://idp/jwks",
            "sasl.oauthbearer.sub.claim.name",
        ),
    ],
)
def test_bad_oauth_settings_name_their_key(values, allowed, key):
    values = {"sasl.server.callback.handler.class": VALIDATOR_HANDLERS[1], **values}
    with pytest.raises(OAuthConfigError) as info:
        build_validator(settings_getter(values), {}, allowed)
    assert key in str(info.value)


def test_a_jwks_file_that_is_not_one_stops_start_up(tmp_path):
    bad = tmp_path / "jwks.json"
    bad.write_text("[1]")
    values = {
        "sasl.server.callback.handler.class": VALIDATOR_HANDLERS[0],
        "sasl.oauthbearer.jwks.endpoint.url": bad.as_uri(),
    }
    with pytest.raises(OAuthConfigError, match="not a JWKS"):
        build_validator(settings_getter(values), {}, bad.as_uri())


OAUTH_LISTENER = {
    "listeners": "PLAINTEXT://127.0.0.1:1,OIDC://127.0.0.1:2",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OIDC:SASL_PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.enabled.mechanisms": "OAUTHBEARER",
    "listener.name.oidc.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
}


def load(**overrides: str) -> BrokerConfig:
    return BrokerConfig.load(overrides=overrides, environ={})


def test_listener_prefixed_oauth_settings_reach_the_validator(tmp_path):
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(JWKS))
    config = load(
        **OAUTH_LISTENER,
        **{
            "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": (
                VALIDATOR_HANDLERS[0]
            ),
            "listener.name.oidc.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
            "listener.name.oidc.sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.expected.issuer": "https://idp",
            ALLOWED_URLS: jwks.as_uri(),
        },
    )
    v = listener_security(config)["OIDC"].oauth_validator
    assert isinstance(v, JwtValidator)
    assert (v.audience, v.issuer, v.clock_skew_s) == (frozenset({"kafka"}), "https://idp", 30)


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"sasl.oauthbearer.clock.skew.seconds": "-1"}, "sasl.oauthbearer.clock.skew.seconds"),
        (
            {"sasl.oauthbearer.jwks.endpoint.refresh.ms": "0"},
            "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        ),
        (
            {"listener.name.oidc.oauthbearer.sasl.oauthbearer.bogus": "1"},
            "listener.name.oidc.oauthbearer.sasl.oauthbearer.bogus",
        ),
        (
            {"inter.broker.listener.name": "OIDC"},
            "sasl.mechanism.inter.broker.protocol",
        ),
        (
            {"sasl.server.callback.handler.class": "com.example.MyHandler"},
            "sasl.server.callback.handler.class",
        ),
    ],
)
def test_bad_oauth_broker_settings_stop_start_up(overrides, key):
    with pytest.raises((ConfigError, ValueError)) as info:
        load(
            **{**OAUTH_LISTENER, **overrides, "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}
        )
    assert key in str(info.value)


@pytest.mark.parametrize(
    "overrides, key",
    [
        (
            {"listener.name.oidc.oauthbearer.sasl.jaas.config": None},
            "listener.name.oidc.oauthbearer.sasl.jaas.config",
        ),
        (
            {
                "listener.name.oidc.oauthbearer.sasl.jaas.config": (
                    f'{MODULE} required unsecuredValidatorAllowableClockSkewMs="x";'
                )
            },
            "listener.name.oidc.oauthbearer.sasl.jaas.config",
        ),
        (
            {"listener.name.oidc.sasl.server.callback.handler.class": "x.Y"},
            "listener.name.oidc.sasl.server.callback.handler.class",
        ),
    ],
)
def test_bad_oauth_listener_settings_stop_start_up(overrides, key):
    values = {**OAUTH_LISTENER, **overrides}
    config = load(**{k: v for k, v in values.items() if v is not None})
    with pytest.raises(OAuthConfigError) as info:
        listener_security(config)
    assert key in str(info.value)


def test_the_unsecured_validator_uses_wall_clock_time():
    token = unsecured({"sub": "alice", "exp": time.time() + 60})
    assert isinstance(UnsecuredValidator({}).validate(token), BearerToken)


def test_an_https_jwks_is_fetched_with_the_jaas_entrys_trust_store(tmp_path):
    """An https JWKS endpoint with a certificate of a private CA: trusted through the PEM
    ssl.truststore.location of the JAAS options (as Kafka's JaasOptionsUtils), refused
    without it."""
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import trustme

    from kafkalite.security.listeners import _jwks_ssl_context

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    body = json.dumps(JWKS).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = server_ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{httpd.server_address[1]}/jwks"
    try:
        trusted = JwksEndpoint(
            url,
            ssl_context=_jwks_ssl_context({"ssl.truststore.location": str(tmp_path / "ca.pem")}),
        )
        asyncio.run(trusted.start())
        assert isinstance(jwt_validator(trusted).validate(signed()), BearerToken)
        with pytest.raises(OSError):
            asyncio.run(JwksEndpoint(url).start())  # the system's CAs do not know this one
    finally:
        httpd.shutdown()
        httpd.server_close()
