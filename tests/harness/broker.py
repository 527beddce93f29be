"""Run `kafkalite serve` as a subprocess for integration tests.

`BrokerProcess(data_dir)` picks a free loopback port, starts the broker with its log dir in
`data_dir`, and waits (with a deadline) until it is ready: the port answers ApiVersions and the
broker's Metadata lists itself and a controller (the controller has sent UpdateMetadata).
`stop()` sends SIGTERM and waits for a clean exit, `kill()` sends SIGKILL, `start()` again
restarts on the same data dir and port. The broker's output goes to `<data_dir>/broker.log`;
a failed start raises with the tail of that log.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_versions_ok(host: str, port: int, timeout: float = 1.0) -> bool:
    """Send ApiVersions v0 over a raw socket; True if a well-formed answer with error 0 comes."""
    client_id = b"harness"
    payload = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(payload)) + payload)
            head = recv_exactly(s, 4)
            (size,) = struct.unpack(">i", head)
            body = recv_exactly(s, size)
    except OSError:
        return False
    correlation_id, error = struct.unpack_from(">ih", body)
    return correlation_id == 1 and error == 0


def recv_exactly(s: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from a blocking socket; ConnectionError if it closes first."""
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


async def _metadata_ready(bootstrap: str, broker_id: int) -> bool:
    from kafkalite.client.client import KafkaClient

    client = KafkaClient(bootstrap, client_id="harness", request_timeout=2.0, connect_timeout=2.0)
    try:
        await client.start()
        await client.refresh_metadata(topics=[])
        return broker_id in client.brokers and client.controller_id >= 0
    except Exception:
        return False
    finally:
        await client.close()


class BrokerProcess:
    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        broker_id: int = 0,
        port: int | None = None,
        overrides: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = self.data_dir / "logs"
        self.broker_id = broker_id
        self.port = port or free_port()
        self.overrides = dict(overrides or {})
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir / "broker.log"
        self.starts = 0

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        settings = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.log_dir),
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.replication.factor": "1",
            # off unless a test asks for it: brokers of parallel tests (or a developer's
            # `make serve`) would otherwise race for the default port 9644
            "admin.listener": "",
            **self.overrides,
        }
        cmd = [sys.executable, "-m", "kafkalite", "serve"]
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the process without waiting for readiness."""
        env = dict(os.environ)
        env.pop("KAFKALITE_LOG_DIRS", None)
        # run this checkout's kafkalite even when it is not pip-installed
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        if self.env:
            env.update(self.env)
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child process
        log.write(f"--- start {self.starts} ---\n".encode())
        log.flush()
        self.starts += 1
        self.proc = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(self.data_dir),
        )
        log.close()
        return self.proc

    def start(self, timeout: float = READY_TIMEOUT_S) -> BrokerProcess:
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("broker already running")
        self.spawn()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(
                    f"broker exited with {self.proc.returncode if self.proc else None} "
                    f"before becoming ready:\n{self.log_tail()}"
                )
            if (
                api_versions_ok(self.host, self.port)
                and asyncio.run(_metadata_ready(self.bootstrap, self.broker_id))
                and self._admin_listening()
            ):
                return
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"broker not ready after {timeout}s:\n{self.log_tail()}")
            time.sleep(0.05)  # polling interval of the readiness probe, not synchronisation

    def _admin_listening(self) -> bool:
        """The admin API (when a test turned it on) accepts connections: the broker starts it
        after the Kafka listeners, once its app is imported."""
        url = self.overrides.get("admin.listener", "")
        if not url:
            return True
        host, _, port = url.split("://", 1)[-1].rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=1.0).close()
        except OSError:
            return False
        return True

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait for the exit; returns the exit status (SIGKILL after the deadline)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise TimeoutError(
                    f"broker ignored SIGTERM for {timeout}s:\n{self.log_tail()}"
                ) from None
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self, *, hard: bool = False, timeout: float = READY_TIMEOUT_S) -> None:
        self.kill() if hard else self.stop()
        self.start(timeout)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.running:
            try:
                self.stop()
            except TimeoutError:
                pass
