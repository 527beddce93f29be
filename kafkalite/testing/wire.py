"""Probes for tests that talk to a broker on a raw socket (hostile input, half-written
frames): ``api_versions_ok`` says whether a broker still answers, ``recv_exactly`` reads a
frame's bytes, ``free_port`` names a port before a broker binds it (a listener a test must
configure by number, e.g. a second one for SSL).

Blocking and standard library only: usable from any test, sync or async (through a thread).
"""

from __future__ import annotations

import socket
import struct

from .proxy import free_port

__all__ = ["api_versions_ok", "free_port", "recv_exactly"]


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from a blocking socket; ConnectionError if it closes first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def api_versions_ok(host: str, port: int, timeout: float = 1.0) -> bool:
    """Send ApiVersions v0 on a new connection; True if a well-formed answer with error 0
    comes back (the broker still serves), False on any socket error."""
    client_id = b"kafkalite-testing"
    payload = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            (size,) = struct.unpack(">i", recv_exactly(sock, 4))
            body = recv_exactly(sock, size)
    except OSError:
        return False
    correlation_id, error = struct.unpack_from(">ih", body)
    return correlation_id == 1 and error == 0
