"""What ``kafkalite --help`` and ``--version`` import, and how every command's help renders
(kafkalite/__main__.py, cli/overview.py, cli/root.py; decision 0021). In the test process: the
unit tier starts no process, so the imports are watched with a meta-path finder rather than
``python -X importtime``. Nothing here is timed (bench/cli.py measures)."""

import contextlib
import importlib
import io
import sys

import pytest

# modules a bare --help or --version must not import: the broker, its client and config, the
# Kafka clients and Spark, the HTTP stack, and the command line's own frameworks
HEAVY = (
    "asyncio",
    "confluent_kafka",
    "pyspark",
    "aiohttp",
    "structlog",
    "urllib.request",
    "typer",
    "click",
    "pydantic",
    "rich",
    "kafkalite.server",
    "kafkalite.config",
    "kafkalite.client",
    "kafkalite.protocol",
    "kafkalite.storage",
    "kafkalite.admin",
    "kafkalite.cli.root",
    "kafkalite.cli.common",
)
# a command's help may import click and its own module, still none of these
HEAVY_FOR_A_COMMAND = tuple(
    m for m in HEAVY if m not in ("click", "kafkalite.cli.root", "kafkalite.cli.common")
)


def heavy(name: str, forbidden: tuple[str, ...]) -> bool:
    return any(name == m or name.startswith(m + ".") for m in forbidden)


class Watch:
    """Imports of forbidden modules, recorded (and refused) while it is installed."""

    def __init__(self, forbidden: tuple[str, ...]) -> None:
        self.forbidden = forbidden
        self.attempted: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if heavy(name, self.forbidden):
            self.attempted.append(name)
            raise ImportError(f"{name} imported by a help command")
        return None


@contextlib.contextmanager
def watched_imports(forbidden: tuple[str, ...]):
    """Run with the forbidden modules and kafkalite's command line out of sys.modules (so an
    import of them reaches the finder), everything restored afterwards."""
    saved = dict(sys.modules)
    for name in list(sys.modules):
        if heavy(name, forbidden) or name.startswith("kafkalite.cli") or name == "kafkalite":
            del sys.modules[name]
    watch = Watch(forbidden)
    sys.meta_path.insert(0, watch)
    try:
        yield watch
    finally:
        sys.meta_path.remove(watch)
        sys.modules.clear()
        sys.modules.update(saved)


def run_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old_argv = sys.argv
    sys.argv = ["kafkalite", *argv]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main = importlib.import_module("kafkalite.__main__").main
            try:
                main()
                status = 0
            except SystemExit as e:
                status = int(e.code or 0)
    finally:
        sys.argv = old_argv
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv", [["--help"], ["--version"], []])
def test_help_and_version_import_nothing_heavy(argv):
    with watched_imports(HEAVY) as watch:
        status, out, err = run_main(argv)
    assert watch.attempted == [], f"kafkalite {' '.join(argv)} imported {watch.attempted}"
    assert status == (2 if not argv else 0), err
    assert ("kafkalite 0.1.0" if argv == ["--version"] else "Commands:") in out + err


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "--help"],
        ["topics", "describe", "--help"],
        ["cluster", "topics", "--help"],
        ["groups", "describe", "--help"],
        ["transactions", "--help"],
        ["produce", "--help"],
        ["consume", "--help"],
        ["serve", "--help"],
        ["storage", "verify", "--help"],
        ["acls", "add", "--help"],
    ],
)
def test_a_commands_help_imports_click_and_its_module_only(argv):
    with watched_imports(HEAVY_FOR_A_COMMAND) as watch:
        status, out, err = run_main(argv)
    assert watch.attempted == [], f"kafkalite {' '.join(argv)} imported {watch.attempted}"
    assert status == 0 and "Usage:" in out, err


def test_the_full_command_line_prints_the_same_overview():
    from kafkalite.cli.overview import root_help

    status, out, _ = run_main(["--command-config", "/dev/null", "--help"])
    assert status == 0
    assert out == root_help("kafkalite")


def every_command():
    from kafkalite.cli import app

    def walk(command, path):
        yield path, command
        if hasattr(command, "list_commands"):
            ctx = type(command).context_class(command)
            for name in command.list_commands(ctx):
                yield from walk(command.get_command(ctx, name), [*path, name])

    return list(walk(app, []))


def test_the_overview_line_of_a_command_is_its_own_help():
    from kafkalite.cli.common import first_sentence
    from kafkalite.cli.overview import COMMANDS
    from kafkalite.cli.root import load_command

    for name, (_, _, line) in COMMANDS.items():
        assert first_sentence(load_command(name).help) == line, name


def test_help_shows_no_type_labels_and_no_hard_wrapped_lines():
    """Options show a metavar (HOST:PORT, FILE) or click's type name, flags no label (typer
    0.29 printed <bool>, <list[str]>, {topic}); docstrings are re-wrapped to the width."""
    for path, _ in every_command():
        status, out, err = run_main([*path, "--help"])
        assert status == 0, (path, err)
        for bad in ("<bool>", "<str>", "<int>", "<list", "<float>", "{", "}"):
            assert bad not in out, (path, bad, out)
        assert "--install-completion" not in out, path
        for line in out.splitlines():
            assert len(line) <= 80, (path, line)


# modules a command talking to a PLAINTEXT broker must not import: the broker and its config,
# storage and admin API, the security package (TLS, OAuth's HTTP client, SASL), the frameworks
# it does not use, and kio's messages of APIs the command does not send
HEAVY_FOR_A_CLIENT = (
    "pydantic",
    "structlog",
    "aiohttp",
    "confluent_kafka",
    "pyspark",
    "typer",
    "urllib.request",
    "http.client",
    "email",
    "kafkalite.config",
    "kafkalite.server",
    "kafkalite.storage",
    "kafkalite.admin",
    "kafkalite.security",
    "kafkalite.broker",
    "kafkalite.controller",
    "kafkalite.group",
    "kafkalite.observability",
    "kio.schema.api_versions.v0",
    "kio.schema.produce",
    "kio.schema.fetch",
    "kio.schema.create_topics",
    "kio.schema.list_offsets",
    "kio.schema.find_coordinator",
    "kio.schema.describe_configs",
)


class ScriptedBroker:
    """A listener in a thread answering ApiVersions v4 and Metadata v12 with frames encoded
    before the command runs (the command's process must not have imported the encoder for it),
    each with the request's correlation id. Every connection gets the same answers: the
    metadata names this listener as broker 0."""

    def __init__(self) -> None:
        import socket
        import threading

        from kafkalite.protocol.api import ApiKey, response_class
        from kafkalite.protocol.frames import (
            RequestHeader,
            api_versions_response,
            encode_response,
        )

        self.server = socket.create_server(("127.0.0.1", 0))
        port = self.server.getsockname()[1]
        meta = response_class(ApiKey.METADATA, 12)
        module = sys.modules[meta.__module__]
        metadata = meta(
            throttle_time=__import__("datetime").timedelta(0),
            brokers=(module.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=port),),
            cluster_id="canned",
            controller_id=0,
            topics=(
                module.MetadataResponseTopic(
                    error_code=0,
                    name="canned-topic",
                    topic_id=__import__("uuid").uuid4(),
                    partitions=(
                        module.MetadataResponsePartition(
                            error_code=0,
                            partition_index=0,
                            leader_id=0,
                            leader_epoch=0,
                            replica_nodes=(0,),
                            isr_nodes=(0,),
                        ),
                    ),  # fmt: skip
                ),
            ),
        )
        versions = {ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 12)}
        self.answers = {
            ApiKey.API_VERSIONS: encode_response(
                RequestHeader(ApiKey.API_VERSIONS, 4, 0, None), api_versions_response(4, versions)
            ),
            ApiKey.METADATA: encode_response(RequestHeader(ApiKey.METADATA, 12, 0, None), metadata),
        }
        self.address = f"127.0.0.1:{port}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        import threading

        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn) -> None:
        import struct

        with conn:
            stream = conn.makefile("rb")
            while True:
                size = stream.read(4)
                if len(size) < 4:
                    return
                frame = stream.read(struct.unpack(">i", size)[0])
                api_key, _version, correlation_id = struct.unpack(">hhi", frame[:8])
                answer = bytearray(self.answers[api_key])
                answer[4:8] = struct.pack(">i", correlation_id)
                conn.sendall(answer)

    def close(self) -> None:
        self.server.close()


def test_a_command_against_a_plaintext_broker_imports_only_what_it_uses():
    """``topics list`` (connection, ApiVersions, Metadata, output) imports neither the broker's
    side, nor security, nor kio's messages of other APIs (bench/cli.py measures the time)."""
    broker = ScriptedBroker()
    try:
        with watched_imports(HEAVY_FOR_A_CLIENT) as watch:
            status, out, err = run_main(["topics", "list", "-b", broker.address])
            loaded = set(sys.modules)
    finally:
        broker.close()
    assert watch.attempted == [], f"topics list imported {watch.attempted}"
    assert status == 0 and out == "canned-topic\n", err
    assert "kio.schema.metadata.v12.response" in loaded  # what it uses was imported here
