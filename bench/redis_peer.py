"""The Redis Streams peer of the load benchmark: Debian's `redis-server` on a free loopback port,
in-memory only (no RDB, no AOF), started for one run and stopped after.

The load job itself talks to it through spark_tasks.RedisProducerTask / RedisConsumerTask
(XADD in pipelines, XREAD BLOCK), one stream per partition, so the same generated records go
through both systems and the results carry a kafkalite/redis ratio.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from local_broker import SetupError, free_port

READY_TIMEOUT_S = 10.0
INSTALL_HINT = (
    "install it (apt-get install redis-server, or `make debs`) or pass --no-peer to skip the "
    "Redis Streams comparison"
)


def redis_server_path() -> str:
    path = shutil.which("redis-server")
    if path is None:
        raise SetupError(f"redis-server is not on PATH: {INSTALL_HINT}")
    return path


class RedisServer:
    def __init__(self) -> None:
        self.binary = redis_server_path()
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="kafkalite-bench-redis-"))
        self.log_path = self.dir / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.dir),
            "--logfile", str(self.log_path),
            "--daemonize", "no",
        ]  # fmt: skip

    def start(self, timeout: float = READY_TIMEOUT_S) -> RedisServer:
        try:
            import redis
        except ImportError as e:
            raise SetupError(f"the redis client is missing ({e}): pip install -e '.[bench]'") from e
        self.proc = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        deadline = time.monotonic() + timeout
        try:
            while True:
                if self.proc.poll() is not None:
                    raise SetupError(
                        f"redis-server exited with status {self.proc.returncode}: {self.log_tail()}"
                    )
                try:
                    if client.ping():
                        return self
                except redis.exceptions.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise SetupError(f"redis-server not answering after {timeout:.0f}s")
                time.sleep(0.05)  # readiness polling interval
        finally:
            client.close()

    def stream_lengths(self, prefix: str, partitions: int) -> int:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        try:
            pipe = client.pipeline(transaction=False)
            for p in range(partitions):
                pipe.xlen(f"{prefix}:{p}")
            return sum(pipe.execute())
        finally:
            client.close()

    def log_tail(self, lines: int = 10) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
