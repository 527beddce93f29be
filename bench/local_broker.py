"""A throwaway kafkalite broker for `make bench`: `kafkalite serve` on the embedded coordination
store, a free loopback port and a temporary log dir, removed on stop.

Ready means: the broker answers Metadata listing itself and a controller (so topic creation
works). A broker that exits or is not ready within the deadline raises SetupError with the tail
of its log.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READY_TIMEOUT_S = 60.0
REPO_DIR = Path(__file__).resolve().parent.parent


class SetupError(Exception):
    """The benchmark cannot run; the message says what to do."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalBroker:
    def __init__(self, python: str = sys.executable, keep_dir: bool = False) -> None:
        self.python = python
        self.keep_dir = keep_dir
        self.port = free_port()
        self.data_dir = Path(tempfile.mkdtemp(prefix="kafkalite-bench-"))
        self.log_path = self.data_dir / "broker.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        overrides = {
            "broker.id": "0",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir / "logs"),
            "offsets.topic.replication.factor": "1",
            "group.initial.rebalance.delay.ms": "0",
            "admin.listener": "",  # the benchmark does not use it; leave 9644 to `make serve`
        }
        cmd = [self.python, "-m", "kafkalite", "serve"]
        for key, value in overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = READY_TIMEOUT_S) -> LocalBroker:
        env = dict(os.environ)
        # The checkout's kafkalite, installed (`pip install -e .`) or not.
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_DIR), env.get("PYTHONPATH", "")) if p
        )
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.data_dir, env=env
            )
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.proc.poll() is not None:
                raise SetupError(
                    f"kafkalite serve exited with status {self.proc.returncode} before it was "
                    f"ready; its log ({self.log_path}) ends with:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise SetupError(
                    f"kafkalite serve was not ready after {timeout:.0f}s; its log ends with:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.1)  # readiness polling interval
        return self

    def _ready(self) -> bool:
        from confluent_kafka.admin import AdminClient

        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass
        except OSError:
            return False
        admin = AdminClient(
            {"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 2000, "log_level": 0}
        )
        try:
            metadata = admin.list_topics(timeout=2)
        except Exception:
            return False
        return 0 in metadata.brokers and metadata.controller_id >= 0

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.keep_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
