"""What an unauthenticated or misbehaving client can make a secured broker do.

One broker for the module (support.secure_listeners). Over raw sockets:
- before a SASL connection has authenticated, a frame above sasl.server.max.receive.size
  closes it on its size prefix alone (TLS or not), while the same frame is served on a listener
  without SASL and once the SASL connection has authenticated;
- a SCRAM client-final sent before the server-first answer fails the authentication (no
  assert, no traceback);
- mutated requests are answered or close their connection, and other clients stay served.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import ssl
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.client.messages import build_message
from kafkalite.protocol import frames
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.request_checks import InvalidRequestFieldError
from kafkalite.security.scram import ScramClient
from kafkalite.testing import Broker, api_versions_ok, free_port, recv_exactly
from tests.security.support import (
    PLAIN_USERS,
    SCRAM_PASSWORD,
    SCRAM_USER,
    add_scram_user,
    make_pki,
    secure_listeners,
)

DEADLINE_S = 30.0
SASL_MAX_RECEIVE = 524288  # Kafka's default sasl.server.max.receive.size


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    root = tmp_path_factory.mktemp("unauthenticated")
    pki = make_pki(root / "pki")
    port = free_port()
    overrides, ports = secure_listeners(pki, port)
    broker = Broker(
        data_dir=root / "broker", port=port, config=overrides, subprocess=True, admin=False
    )
    broker.start()
    asyncio.run(add_scram_user(broker.bootstrap, SCRAM_USER, SCRAM_PASSWORD))
    yield broker, pki, ports
    broker.stop()


def frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    client_id = b"raw"
    payload = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    payload += body
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    return recv_exactly(sock, size)


def closed(sock: socket.socket) -> bool:
    """True once the broker has closed the connection (waits up to the deadline)."""
    sock.settimeout(DEADLINE_S)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
            return False
    except (ConnectionResetError, ssl.SSLEOFError, BrokenPipeError):
        return True


def tls(pki, port: int) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    raw = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def big_api_versions(correlation_id: int, size: int) -> bytes:
    """An ApiVersions v0 request padded to `size` bytes (bytes after a body are ignored)."""
    head = frame(18, 0, correlation_id, b"")
    return frame(18, 0, correlation_id, b"\0" * (size - len(head) + 4))


def plain_login(sock: socket.socket, user: str = "alice") -> None:
    mechanism = b"PLAIN"
    sock.sendall(frame(17, 1, 1, struct.pack(">h", len(mechanism)) + mechanism))
    assert struct.unpack_from(">ih", read_frame(sock)) == (1, 0)
    token = f"\0{user}\0{PLAIN_USERS[user]}".encode()
    sock.sendall(frame(36, 0, 2, struct.pack(">i", len(token)) + token))
    assert struct.unpack_from(">ih", read_frame(sock)) == (2, 0)


# ---------------------------------------------------------------------- item 7


def test_a_huge_size_prefix_before_authentication_closes_the_tls_connection(secure):
    broker, pki, ports = secure
    with tls(pki, ports.sasl_ssl) as s:
        s.sendall(struct.pack(">i", 90 * 1024 * 1024))  # 90 MB announced, nothing sent
        assert closed(s)  # on the prefix alone: the broker waits for no body
    with socket.create_connection(("127.0.0.1", ports.sasl_plaintext), timeout=DEADLINE_S) as s:
        s.sendall(struct.pack(">i", 90 * 1024 * 1024) + b"\0" * 65536)
        assert closed(s)
    assert api_versions_ok(broker.host, broker.port)
    with tls(pki, ports.sasl_ssl) as s:  # others keep being served and may authenticate
        plain_login(s)


def test_the_pre_authentication_limit_is_sasl_server_max_receive_size(secure):
    broker, pki, ports = secure
    over = SASL_MAX_RECEIVE + 1
    with tls(pki, ports.sasl_ssl) as s:  # at the limit: served
        s.sendall(big_api_versions(1, SASL_MAX_RECEIVE))
        assert struct.unpack_from(">ih", read_frame(s)) == (1, 0)
    with tls(pki, ports.sasl_ssl) as s:  # one byte more: closed before authentication
        s.sendall(big_api_versions(1, over))
        assert closed(s)
    with tls(pki, ports.sasl_ssl) as s:  # after authentication socket.request.max.bytes holds
        plain_login(s)
        s.sendall(big_api_versions(3, over))
        assert struct.unpack_from(">ih", read_frame(s)) == (3, 0)
    with tls(pki, ports.ssl) as s:  # no SASL: authenticated at once, as in Kafka
        s.sendall(big_api_versions(1, over))
        assert struct.unpack_from(">ih", read_frame(s)) == (1, 0)


# ---------------------------------------------------------------------- item 12


def test_a_pipelined_early_scram_client_final_fails_the_authentication(secure):
    broker, pki, ports = secure
    with socket.create_connection(("127.0.0.1", ports.sasl_plaintext), timeout=DEADLINE_S) as s:
        mechanism = b"SCRAM-SHA-256"
        s.sendall(frame(17, 1, 1, struct.pack(">h", len(mechanism)) + mechanism))
        assert struct.unpack_from(">ih", read_frame(s)) == (1, 0)
        client = ScramClient("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)
        first = client.first()
        early_final = b"c=biws,r=" + client.nonce.encode() + b"guess,p=AAAA"
        s.sendall(
            frame(36, 1, 2, struct.pack(">i", len(first)) + first)
            + frame(36, 1, 3, struct.pack(">i", len(early_final)) + early_final)
        )
        correlation_id, error = struct.unpack_from(">ih", read_frame(s))
        assert (correlation_id, error) == (2, 0)  # the server-first message
        correlation_id, error = struct.unpack_from(">ih", read_frame(s))
        assert (correlation_id, error) == (3, 58)  # SASL_AUTHENTICATION_FAILED
        assert closed(s)
    assert "AssertionError" not in broker.log_text()
    assert api_versions_ok(broker.host, broker.port)


def metadata_payload() -> bytes:
    cls = request_class(ApiKey.METADATA, 9)
    request = cls(
        topics=(),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    return frames.encode_request(ApiKey.METADATA, 9, 7, "fuzz", request)[4:]


def offset_commit_v2(retention_ms: int, *, null_topics: bool = False) -> bytearray:
    """An OffsetCommit v2 payload (its retention_time is an int64 of milliseconds)."""
    cls = request_class(ApiKey.OFFSET_COMMIT, 2)
    message = build_message(
        cls,
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time=datetime.timedelta(milliseconds=-1),
        topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
    )
    payload = bytearray(frames.encode_request(ApiKey.OFFSET_COMMIT, 2, 7, "fuzz", message)[4:])
    at = payload.index(b"\xff" * 8)  # the retention, -1
    payload[at : at + 8] = struct.pack(">q", retention_ms)
    if null_topics:
        payload[at + 8 : at + 12] = struct.pack(">i", -1)
        del payload[at + 12 :]
    return payload


def answer_or_close(port: int, payload: bytes) -> bytes | None:
    """The broker's answer to one request payload, or None if it closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        try:
            return read_frame(s)
        except (ConnectionError, OSError):
            return None


@pytest.mark.parametrize("null_topics", [False, True])
def test_a_duration_beyond_pythons_range_is_an_invalid_request_not_a_crash(null_topics):
    payload = offset_commit_v2(2**62, null_topics=null_topics)
    header, offset = frames.parse_request_header(payload)
    with pytest.raises(InvalidRequestFieldError) as caught:
        frames.decode_request(header, payload, offset)
    assert "retention_time is out of range" in str(caught.value)
    assert caught.value.header == header  # answerable: the header and the request are known


def test_an_overflowing_duration_is_answered_invalid_request(secure):
    broker, pki, ports = secure
    body = answer_or_close(broker.port, bytes(offset_commit_v2(2**62)))
    assert body is not None, "closed instead of answering INVALID_REQUEST"
    response = frames.decode_response(ApiKey.OFFSET_COMMIT, 2, body)[1]
    assert [p.error_code for t in response.topics for p in t.partitions] == [42]
    assert api_versions_ok(broker.host, broker.port)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_mutated_requests_are_answered_or_closed_and_others_stay_served(secure, data):
    """A valid request with a few bytes changed: answered or closed, never a handler crash,
    and another client is served afterwards."""
    broker, pki, ports = secure
    payload = bytearray(data.draw(st.sampled_from([metadata_payload(), offset_commit_v2(-1)])))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(payload) - 1))
        payload[at] = data.draw(
            st.sampled_from([0x00, 0x7F, 0x80, 0xFF, data.draw(st.integers(0, 255))])
        )
    answer_or_close(broker.port, bytes(payload))
    assert api_versions_ok(broker.host, broker.port, timeout=DEADLINE_S)
    log = broker.log_text()
    assert "unparsable request" not in log and "request handler failed" not in log


# ---------------------------------------------------------------------- item 11 (last: restarts)


def scram_server_first(port: int, user: str) -> dict[str, str]:
    """The server-first message's attributes for `user` (SCRAM-SHA-256, over SaslAuthenticate)."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as s:
        mechanism = b"SCRAM-SHA-256"
        s.sendall(frame(17, 1, 1, struct.pack(">h", len(mechanism)) + mechanism))
        assert struct.unpack_from(">ih", read_frame(s)) == (1, 0)
        first = ScramClient("SCRAM-SHA-256", user, "guess").first()
        s.sendall(frame(36, 1, 2, struct.pack(">i", len(first)) + first))
        body = read_frame(s)
    response = frames.decode_response(ApiKey.SASL_AUTHENTICATE, 1, body)[1]
    assert response.error_code == 0
    return dict(part.split("=", 1) for part in response.auth_bytes.decode().split(","))


def test_an_unknown_users_salt_survives_a_restart_like_a_real_users(secure):
    broker, pki, ports = secure
    before = {u: scram_server_first(ports.sasl_plaintext, u) for u in (SCRAM_USER, "nobody")}
    assert before[SCRAM_USER]["i"] == before["nobody"]["i"] == "4096"
    assert scram_server_first(ports.sasl_plaintext, "nobody")["s"] == before["nobody"]["s"]
    broker.stop()
    broker.start()
    after = {u: scram_server_first(ports.sasl_plaintext, u) for u in (SCRAM_USER, "nobody")}
    assert after[SCRAM_USER]["s"] == before[SCRAM_USER]["s"]
    assert after["nobody"]["s"] == before["nobody"]["s"]  # the cluster's secret, not the process's
