"""A real ZooKeeper server for tests and benchmarks (Debian's ``zookeeper`` package, 3.8).

``ZooKeeperServer`` runs ``java org.apache.zookeeper.server.ZooKeeperServerMain`` (standalone)
with a generated ``zoo.cfg`` on a free 127.0.0.1 port and a data dir of its own, with
``forceSync=no`` (tests do not need the fsync per transaction) and a short ``tickTime`` so that
session timeouts down to 2 ticks are accepted. Readiness is the ``srvr`` four-letter command
answering (enabled by ``4lw.commands.whitelist``). ``stop()`` kills the JVM by PID;
``restart()`` starts it again on the same port and data dir, so sessions and persistent nodes
survive as they do when a real ensemble member restarts.

``expire_session(session_id, password)`` is the standard trick (kazoo's harness, Curator's
KillSession): open a second connection with the same session id and password, then close it;
the server ends the session for both, deleting its ephemeral nodes, and the original client is
told its session expired when it reconnects.

When java or the ZooKeeper jars are missing, ``ZooKeeperMissing`` says what to install; test
fixtures let it fail the test (never skip).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from .proxy import free_port

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
INSTALL_HINT = (
    "a real ZooKeeper is needed: install Debian's packages with "
    "`sudo apt-get install zookeeper default-jre-headless` (or run `make debs`)"
)


class ZooKeeperMissing(RuntimeError):
    pass


def find_java() -> str:
    java = shutil.which("java") or ("/usr/bin/java" if os.path.exists("/usr/bin/java") else None)
    if java is None:
        raise ZooKeeperMissing(f"java not found; {INSTALL_HINT}")
    if not ZOOKEEPER_JAR.exists():
        raise ZooKeeperMissing(f"{ZOOKEEPER_JAR} not found; {INSTALL_HINT}")
    return java


def four_letter(host: str, port: int, command: bytes, timeout: float = 1.0) -> str:
    """Send a four-letter command and return the whole answer (the server closes after it)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command)
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server process. Not thread-safe."""

    def __init__(
        self,
        base_dir: str | os.PathLike | None = None,
        *,
        tick_time_ms: int = 200,
        max_session_timeout_ms: int = 60000,
    ) -> None:
        self.java = find_java()
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="kafkalite-zk-"))
        self.data_dir = self.base_dir / "data"
        self.config_path = self.base_dir / "zoo.cfg"
        self.log_path = self.base_dir / "zookeeper.log"
        self.host = "127.0.0.1"
        self.port = free_port()
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def servers(self) -> str:
        return f"{self.host}:{self.port}"

    def connect_string(self, chroot: str | None = None) -> str:
        return self.servers + (chroot or "")

    def write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"dataDir={self.data_dir}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "forceSync=no",
                    f"minSessionTimeout={2 * self.tick_time_ms}",
                    f"maxSessionTimeout={self.max_session_timeout_ms}",
                    "4lw.commands.whitelist=srvr,stat,ruok,cons,dump",
                    "admin.enableServer=false",
                    "maxClientCnxns=0",
                    "",
                ]
            )
        )

    def start(self, timeout: float = 30.0) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        self.write_config()
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        try:
            self.process = subprocess.Popen(
                [
                    self.java,
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    "-Dzookeeper.admin.enableServer=false",
                    "-cp",
                    str(ZOOKEEPER_JAR),
                    MAIN_CLASS,
                    str(self.config_path),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            log.close()
        self.wait_ready(timeout)

    def is_ready(self) -> bool:
        try:
            answer = four_letter(self.host, self.port, b"srvr", timeout=0.5)
        except OSError:
            return False
        return answer.startswith("Zookeeper version") and "Mode:" in answer

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.process.returncode}; log:\n{self.log_tail()}"
                )
            if self.is_ready():
                return
            time.sleep(0.05)
        raise TimeoutError(f"ZooKeeper not ready within {timeout}s; log:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, *, hard: bool = False) -> None:
        """Stop by PID: SIGTERM (SIGKILL with ``hard``), wait, SIGKILL if it lingers."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, signal.SIGCONT)  # a paused JVM cannot handle SIGTERM
        os.kill(process.pid, signal.SIGKILL if hard else signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def pause(self) -> None:
        """SIGSTOP: the server stops answering without closing sockets (a silent partition)."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def restart(self, timeout: float = 30.0) -> None:
        self.stop()
        self.start(timeout)

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.cleanup()

    # -- session expiry ------------------------------------------------------------------------

    def expire_session(self, session_id: int, password: bytes, timeout_ms: int = 4000) -> None:
        """Expire a client's session: attach a second connection to it and close the session.

        Speaks the ZooKeeper protocol directly: ConnectRequest (protocolVersion, lastZxidSeen,
        timeOut, sessionId, passwd, readOnly) and CloseSession (xid 1, opcode -11), sent in one
        write so the server reads the close right after the attach. Sent separately, the client
        (whose connection the attach drops) could re-attach in between, and the server would
        drop this connection before reading the close. Repeat until an attach is refused (the
        server answers session id 0): then the session is gone.
        """
        for _attempt in range(50):
            with socket.create_connection((self.host, self.port), timeout=5) as sock:
                close = struct.pack(">ii", 1, -11)
                sock.sendall(
                    _connect_request(session_id, password, timeout_ms)
                    + struct.pack(">i", len(close))
                    + close
                )
                try:
                    reply = _read_frame(sock)
                except ConnectionError:
                    continue
                (got_session,) = struct.unpack_from(">q", reply, 8)
                if got_session != session_id:
                    return  # refused: the session is gone
                try:
                    _read_frame(sock)  # the close's reply, or EOF: the session's sockets drop
                except ConnectionError:
                    pass
        raise RuntimeError(f"session 0x{session_id:x} could not be expired")

    def drop_connection(self, session_id: int, password: bytes, timeout_ms: int = 4000) -> None:
        """Break a client's connection but keep its session: attach to it, then just hang up.

        The client sees its socket closed, reconnects and re-arms its watches; nothing expires.
        """
        with self._attached(session_id, password, timeout_ms) as sock:
            if sock is None:
                raise RuntimeError(f"session 0x{session_id:x} is gone")

    @contextlib.contextmanager
    def _attached(self, session_id: int, password: bytes, timeout_ms: int):
        """A connection attached to the session (the client's own is dropped), or None when
        the server refuses it because the session is gone. The server may hang up on an attach
        that races the client's own traffic (seen in CI): that attempt is repeated."""
        for _attempt in range(50):
            with socket.create_connection((self.host, self.port), timeout=5) as sock:
                sock.sendall(_connect_request(session_id, password, timeout_ms))
                try:
                    reply = _read_frame(sock)
                except ConnectionError:
                    continue
                (got_session,) = struct.unpack_from(">q", reply, 8)
                yield sock if got_session == session_id else None
                return
        raise RuntimeError(f"could not attach to session 0x{session_id:x}")


def _connect_request(session_id: int, password: bytes, timeout_ms: int) -> bytes:
    """A framed ConnectRequest that attaches to an existing session."""
    body = struct.pack(">iqiqi", 0, 0, timeout_ms, session_id, len(password))
    body += password + b"\x00"
    return struct.pack(">i", len(body)) + body


def _read_frame(sock: socket.socket) -> bytes:
    header = _read_exactly(sock, 4)
    (size,) = struct.unpack(">i", header)
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    buf = b""
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            raise ConnectionError("ZooKeeper closed the connection")
        buf += chunk
    return buf
