"""``Broker``: one kafkalite broker for a test, in this process or as a subprocess.

    with Broker(config={"num.partitions": 3}) as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

    async with Broker(subprocess=True) as broker:
        ...

In-process (the default) the broker runs on an event loop of its own in a daemon thread, so it
serves synchronous and asynchronous tests alike; ``subprocess=True`` runs ``python -m kafkalite
serve`` (a crash or a hang of the broker cannot take the test process with it; ``kill()`` is a
real SIGKILL). Either way the broker listens on a port the OS chose (no race for a free port),
keeps its data in a temporary directory removed at stop unless ``keep_data`` (or ``data_dir``
given), and ``stop()`` then ``start()`` comes back on the same port and data. A subprocess
broker can also be ``spawn()``ed and then ``wait_ready()``ed (brokers that need each other, on
one ZooKeeper, start together), be given its client ``port`` (a test with several listeners),
and log above INFO (its ports are then chosen before the start, not read from its log).

Defaults differ from a production broker only where a test gains time: no initial rebalance
delay, one replica and one partition for ``__consumer_offsets``, the embedded coordination store
without fsync, the admin API on a port of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess as subprocess_module
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._helpers import Helpers
from ._loop import LoopThread

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0

TEST_DEFAULTS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "log.level": "WARNING",
    "schema.registry.listeners": "http://127.0.0.1:0",
}


REGISTRY_LISTENERS = "schema.registry.listeners"


def _registry_url_of(listener: str) -> str:
    """The URL a client uses for a registry listener (a wildcard host: 127.0.0.1)."""
    scheme, _, rest = listener.partition("://")
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    return f"{scheme}://{host if host not in ('', '0.0.0.0', '::') else '127.0.0.1'}:{port}"


def _settings(values: Mapping[str, Any] | None) -> dict[str, str]:
    """Properties as strings; a key given None is left out (see Broker.settings)."""
    return {
        str(k): str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in (values or {}).items()
        if v is not None
    }


def quiet_logging(level: str) -> None:
    """structlog's default prints every line, debug included, to stdout: too loud for brokers
    inside a test run. Unless the application configured structlog itself, lines below
    ``log.level`` logged from the brokers' threads (named ``kafkalite-*``) are dropped;
    everything else, the test's own logging included, is left as structlog's defaults have it
    (``structlog.testing.capture_logs`` keeps working)."""
    import logging
    import threading

    import structlog

    if structlog.is_configured():
        return
    threshold = logging.getLevelName(level.upper())
    if not isinstance(threshold, int):
        threshold = logging.WARNING

    def drop_quiet_broker_lines(logger: Any, method_name: str, event_dict: Any) -> Any:
        if threading.current_thread().name.startswith("kafkalite-"):
            severity = logging.getLevelName(method_name.upper().replace("EXCEPTION", "ERROR"))
            if isinstance(severity, int) and severity < threshold:
                raise structlog.DropEvent
        return event_dict

    structlog.configure(processors=[drop_quiet_broker_lines, *structlog.get_config()["processors"]])


class Broker(Helpers):
    """One broker. ``start()`` / ``stop()``, or use it as a (sync or async) context manager."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        broker_id: int = 0,
        subprocess: bool = False,
        data_dir: str | os.PathLike[str] | None = None,
        keep_data: bool = False,
        admin: bool = True,
        start_timeout: float = START_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.subprocess = subprocess
        self.keep_data = keep_data or data_dir is not None
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.admin = admin
        self.start_timeout = start_timeout
        self.overrides = _settings(config)
        self.unset = frozenset(str(k) for k, v in (config or {}).items() if v is None)
        self.env = dict(env or {})
        # a given port is the one clients use, whatever listeners the config names (a test
        # with several listeners gives its PLAINTEXT one); else the OS picks it at first start
        self.port: int | None = port
        self._port_given = port is not None
        self.admin_port: int | None = None
        self._admin_host = self.host
        self._admin_scheme = "http"  # https when its admin.listener says so
        # a subprocess's Schema Registry: its URL from its log (or chosen before a quiet start),
        # and its port kept for a restart, as the client and admin ports are
        self._registry_url: str | None = None
        self._registry_port: int | None = None
        # a Cluster waits for its own conditions (a broker may start cut off from the controller)
        self._wait_until_ready = True
        self.server: Any = None  # the KafkaServer, in-process
        self.process: subprocess_module.Popen[bytes] | None = None
        self._thread: LoopThread | None = None
        self._log_offset = 0
        self.starts = 0  # how many times the broker was started

    # -- what a test needs --

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise RuntimeError("the broker has not been started")
        return f"{self.host}:{self.port}"

    @property
    def bootstrap(self) -> str:
        """The same as ``bootstrap_servers`` (one ``host:port``)."""
        return self.bootstrap_servers

    @property
    def proc(self) -> subprocess_module.Popen[bytes] | None:
        """The same as ``process``: the subprocess (None in-process or before a start)."""
        return self.process

    @property
    def admin_url(self) -> str | None:
        if self.admin_port is None:
            return None
        return f"{self._admin_scheme}://{self.host}:{self.admin_port}"

    @property
    def schema_registry_url(self) -> str | None:
        """The broker's Schema Registry (``http://127.0.0.1:port``, the port the OS chose), in
        process or subprocess; None while stopped or when its listener is disabled."""
        if self.subprocess:
            return self._registry_url if self.running else None
        return self.server.schema_registry_url if self.server is not None else None

    @property
    def log_dir(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / "logs"

    @property
    def running(self) -> bool:
        if self.subprocess:
            return self.process is not None and self.process.poll() is None
        return self.server is not None

    def settings(self) -> dict[str, str]:
        """The broker's properties: test defaults, then the caller's overrides. A key the
        caller gave as None is left out, so the broker's own default applies (a bench that runs
        an older tree leaves out a test default that tree does not know)."""
        assert self.data_dir is not None
        settings = {
            **TEST_DEFAULTS,
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://{self.host}:{self.port or 0}",
            "log.dirs": str(self.log_dir),
            "admin.listener": f"http://{self.host}:{self.admin_port or 0}" if self.admin else "",
            **self.overrides,
        }
        listener = settings.get(REGISTRY_LISTENERS, "")
        if self._registry_port is not None and listener.endswith(":0"):
            settings[REGISTRY_LISTENERS] = f"{listener[:-2]}:{self._registry_port}"
        return {k: v for k, v in settings.items() if k not in self.unset}

    # -- life cycle --

    def start(self, timeout: float | None = None) -> Broker:
        """Start and return once the broker serves (within ``timeout``, default
        ``start_timeout``)."""
        if self.subprocess:
            self.spawn()
            self.wait_ready(timeout)
            return self
        self._prepare()
        self._start_in_process(self.start_timeout if timeout is None else timeout)
        return self

    def _prepare(self) -> None:
        if self.running:
            raise RuntimeError("broker already running")
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="kafkalite-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """A clean stop (controlled shutdown, logs flushed); the data stays until ``close``.
        Returns a subprocess's exit status (None in-process, or if it never started)."""
        if self.subprocess:
            return self._stop_subprocess(timeout)
        if self.server is not None:
            assert self._thread is not None
            try:
                self._thread.run(self.server.shutdown(), timeout)
            finally:
                self.server = None
                self._thread.stop()
                self._thread = None
        return None

    def kill(self) -> None:
        """Stop without a controlled shutdown: SIGKILL for a subprocess; in-process, the
        broker's session is dropped and it stops without moving its leaderships first."""
        if self.subprocess:
            if self.process is not None and self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        elif self.server is not None:
            assert self._thread is not None
            try:
                self._thread.run(self.server.shutdown(controlled=False), STOP_TIMEOUT_S)
            finally:
                self.server = None
                self._thread.stop()
                self._thread = None

    def restart(self, *, hard: bool = False, timeout: float | None = None) -> Broker:
        """Stop (``kill()`` if ``hard``), then start again on the same port and data."""
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start(timeout)

    def close(self) -> None:
        """Stop if running, then remove the data directory unless it is kept."""
        try:
            if self.running:
                self.stop()
        finally:
            if self._own_dir and not self.keep_data and self.data_dir is not None:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def __repr__(self) -> str:
        where = "subprocess" if self.subprocess else "in-process"
        port = self.port if self.port is not None else "-"
        return f"<Broker {self.broker_id} {where} 127.0.0.1:{port} data={self.data_dir}>"

    # -- in this process --

    def _start_in_process(self, timeout: float) -> None:
        self._thread = LoopThread(f"kafkalite-broker-{self.broker_id}").start()
        try:
            self.server = self._thread.run(self._startup(), timeout)
        except BaseException:
            self._thread.stop()
            self._thread = None
            raise
        self.port = self.server.bound_endpoints[0].port
        url = self.server.admin_url
        self.admin_port = int(url.rsplit(":", 1)[1]) if url else None

    async def _startup(self) -> Any:
        from kafkalite.config import BrokerConfig
        from kafkalite.server import KafkaServer

        config = BrokerConfig.load(overrides=self.settings(), environ={})
        quiet_logging(config.log_level)
        store = None
        if not config.zookeeper_connect:
            from kafkalite.coord.embedded import EmbeddedStore

            # the test broker's own store, without an fsync per write (a test needs no
            # durability across power loss, and topic creation is several times faster)
            store = EmbeddedStore.shared(
                config.log_dir_list[0],
                session_timeout_ms=config.zookeeper_session_timeout_ms,
                fsync=False,
            )
        server = KafkaServer(config, store=store)
        await server.startup()
        return server

    # -- as a subprocess --

    @property
    def log_path(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / "broker.log"

    @property
    def _quiet(self) -> bool:
        """Its log level hides the start-up lines that say the ports (a benchmark's broker
        logs WARNING): the ports are then chosen before it starts."""
        return self.overrides.get("log.level", "INFO").upper() not in ("INFO", "DEBUG")

    def command(self) -> list[str]:
        settings = self.settings()
        if "log.level" not in self.overrides:
            # the subprocess says its ports in its "started" and "admin API listening" lines
            settings["log.level"] = "INFO"
        cmd = [sys.executable, "-m", "kafkalite", "serve"]
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def spawn(self) -> subprocess_module.Popen[bytes]:
        """Start the subprocess and return at once; ``wait_ready()`` then waits until it
        serves. (Several brokers that need each other, a cluster on ZooKeeper, are spawned
        together, then waited for.)"""
        import kafkalite

        if not self.subprocess:
            raise RuntimeError("spawn() needs a broker with subprocess=True")
        self._prepare()
        assert self.data_dir is not None
        self._registry_url = None  # said again by this start's log
        if self._quiet:
            self._choose_ports()
        # the child's configuration is its settings alone, as in-process (no KAFKALITE_*
        # variable of the environment), plus the caller's ``env``
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKALITE_")}
        # the child imports the same kafkalite as this process, installed or not, unless the
        # caller's ``env`` names a PYTHONPATH (a benchmark's baseline tree)
        package_root = str(Path(kafkalite.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        env.update(self.env)
        with open(self.log_path, "ab") as log:
            log.write(b"--- start ---\n")
            log.flush()
            self._log_offset = log.tell()
            self.process = subprocess_module.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess_module.STDOUT,
                stdin=subprocess_module.DEVNULL,
                env=env,
                cwd=str(self.data_dir),
            )
        return self.process

    def wait_ready(self, timeout: float | None = None) -> None:
        """After ``spawn()``: wait until the broker says it started, then until it serves (see
        ``start``); on failure or after ``timeout`` (default ``start_timeout``) the process is
        killed and the error carries the tail of its log."""
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        try:
            self._wait_started(self._log_offset, deadline)
            if self._wait_until_ready:
                self._wait_ready(deadline)
        except BaseException:
            self.kill()
            raise

    def _wait_ready(self, deadline: float) -> None:
        """After "started": wait until the broker's Metadata lists it and a controller (the
        controller has sent it the cluster's metadata) and its admin API accepts connections,
        so that a test's first request is not refused with a retriable error."""
        from . import _ops
        from ._helpers import client_loop

        remaining = max(deadline - time.monotonic(), 1.0)
        try:
            client_loop().run(
                _ops.broker_ready(self.bootstrap_servers, self.broker_id, remaining),
                remaining + 10,
            )
        except TimeoutError as e:
            raise TimeoutError(f"{e}:\n{self.log_tail()}") from None
        if self.admin_port is None:
            return
        while True:
            try:
                socket.create_connection((self._admin_host, self.admin_port), timeout=1.0).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"admin API not accepting on port {self.admin_port} within "
                        f"{self.start_timeout} s:\n{self.log_tail()}"
                    ) from None
            time.sleep(0.01)  # the interval of the connection attempts, not a synchronisation

    def _choose_ports(self) -> None:
        """Ports known before the start, for a broker whose log will not say them."""
        from .proxy import free_port

        if self.port is None:
            self.port = free_port()
        listener = "" if REGISTRY_LISTENERS in self.unset else self.settings()[REGISTRY_LISTENERS]
        if listener.endswith(":0"):
            self._registry_port = free_port()
            listener = self.settings()[REGISTRY_LISTENERS]
        self._registry_url = _registry_url_of(listener) if listener else None
        if not self.admin:
            return
        url = self.overrides.get("admin.listener")
        if url:
            self._admin_scheme = url.split("://", 1)[0] if "://" in url else "http"
            self.admin_port = int(url.rsplit(":", 1)[1])
        elif self.admin_port is None:
            self.admin_port = free_port()

    def _wait_started(self, offset: int, deadline: float) -> None:
        """Read the broker's JSON log lines until it says it started (its ports in them); a
        quiet broker's, until its port answers ApiVersions."""
        if self._quiet:
            from .wire import api_versions_ok

            assert self.process is not None and self.port is not None
            while not api_versions_ok(self.host, self.port):
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"broker exited with status {self.process.returncode} before it "
                        f"started:\n{self.log_tail()}"
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"broker not started within {self.start_timeout} s:\n{self.log_tail()}"
                    )
                time.sleep(0.01)  # the interval of the connection attempts, not a synchronisation
            if self._registry_url is not None:  # it binds after the client port
                port = int(self._registry_url.rsplit(":", 1)[1])
                while True:
                    try:
                        socket.create_connection((self.host, port), timeout=1.0).close()
                        break
                    except OSError:
                        if time.monotonic() > deadline or self.process.poll() is not None:
                            raise TimeoutError(
                                f"schema registry not accepting on port {port}:\n{self.log_tail()}"
                            ) from None
                    time.sleep(0.01)  # the interval of the attempts, not a synchronisation
            return
        buffered = b""
        listening = admin_seen = False
        while True:
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                chunk = log.read()
            offset += len(chunk)
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                event = entry.get("event") if isinstance(entry, dict) else None
                if event == "started":
                    if not self._port_given:
                        listener = entry["listeners"][0]
                        self.port = int(listener.rsplit(":", 1)[1])
                    listening = True
                elif event == "admin API listening":
                    if "://" in entry["url"]:
                        self._admin_scheme = entry["url"].split("://", 1)[0]
                    host, _, port = entry["url"].split("://", 1)[-1].rpartition(":")
                    host = host.strip("[]")
                    self._admin_host = host if host not in ("", "0.0.0.0", "::") else self.host
                    self.admin_port = int(port)
                    admin_seen = True
                elif event == "admin API not started: cannot bind":
                    admin_seen = True
                elif event == "schema registry listening":
                    # logged before "started"
                    self._registry_url = _registry_url_of(entry["url"])
                    self._registry_port = int(self._registry_url.rsplit(":", 1)[1])
            if listening and (admin_seen or not self.admin):
                return
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"broker exited with status {self.process.returncode} before it started:\n"
                    f"{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"broker not started within {self.start_timeout} s:\n{self.log_tail()}"
                )
            time.sleep(0.01)  # the interval of reading the log, not a synchronisation

    def _stop_subprocess(self, timeout: float) -> int | None:
        process = self.process
        if process is None or process.poll() is not None:
            return None if process is None else process.returncode
        process.send_signal(signal.SIGCONT)  # a paused broker cannot handle SIGTERM
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess_module.TimeoutExpired:
            process.kill()
            process.wait()
            raise TimeoutError(
                f"broker ignored SIGTERM for {timeout} s:\n{self.log_tail()}"
            ) from None
        return process.returncode

    def pause(self) -> None:
        """SIGSTOP (subprocess only): frozen, its sockets open; ``resume()`` continues it."""
        if not self.subprocess or self.process is None:
            raise RuntimeError("pause() needs a broker started with subprocess=True")
        self.process.send_signal(signal.SIGSTOP)
        self._wait_for_state(stopped=True)

    def resume(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)
            self._wait_for_state(stopped=False)

    def _wait_for_state(self, *, stopped: bool, timeout: float = 10.0) -> None:
        """Signals are delivered asynchronously: wait until the kernel shows the process
        stopped (or running again). Linux only (/proc); elsewhere returns at once."""
        assert self.process is not None
        stat = Path(f"/proc/{self.process.pid}/stat")
        deadline = time.monotonic() + timeout
        while True:
            try:
                state = stat.read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                return
            if (state in ("T", "t")) == stopped:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker process still in state {state} after {timeout} s")
            time.sleep(0.001)  # the interval of reading the state, not a synchronisation

    def log_text(self) -> str:
        """A subprocess's whole output, every start of it ("" before the first)."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_text()
        if not text:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])
