"""What the commands speaking the Kafka protocol share.

The consoles; ``--bootstrap-server`` and its check; ``--command-config`` (a client.properties
file whose security settings every connection of the process uses); Kafka's error names; and
``run``, which runs a command's coroutine and turns what can go wrong into one line on stderr:
exit 1 when the broker answered an error or the command cannot do what was asked, 2 on usage
or configuration errors (``fail``).
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True, soft_wrap=True)


def checked_bootstrap(value: str) -> str:
    """``--bootstrap-server`` as host:port[,host:port...]; a bad entry is a usage error naming
    the option and the entry (int() said "invalid literal for int() with base 10")."""
    entries = [e.strip() for e in value.split(",")]
    if not any(entries):
        fail("--bootstrap-server: no address given (expected host:port[,host:port...])", 2)
    for entry in entries:
        if entry.startswith("["):
            host, _, rest = entry[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else "9092"
        elif entry.count(":") == 1:
            host, port = entry.split(":")
        else:
            host, port = entry, "9092"
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            fail(
                f"--bootstrap-server: {entry!r} is not host:port "
                f"(the port must be a number from 1 to 65535)",
                2,
            )
    return value


BOOTSTRAP_OPTION = typer.Option(
    "127.0.0.1:9092",
    "--bootstrap-server",
    "-b",
    help="host:port[,host:port...] of any broker",
    callback=checked_bootstrap,
)


def error_name(code: int) -> str:
    from kafkalite.protocol.errors import ErrorCode

    return ErrorCode.of(int(code)).name


def error_text(code: int, message: str | None, topic: str | None = None) -> str:
    """Kafka's error name and the broker's message, else one that says what happened."""
    from kafkalite.protocol.errors import ErrorCode

    error = ErrorCode.of(int(code))
    if not message and topic is not None and error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        message = f"topic {topic!r} does not exist"
    return f"{error.name}: {message or error.message}"


def fail(message: str, code: int = 1) -> None:
    err_console.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


def parse_pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"{what} expects key=value, got {item!r}", 2)
        out[key.strip()] = value.strip()
    return out


def run(coro: Any) -> Any:
    """Run a command's coroutine; what goes wrong is a one-line error, never a traceback."""
    from kafkalite.cli.console_producer import TopicProblem
    from kafkalite.client.errors import KafkaConnectionError
    from kafkalite.protocol.errors import KafkaError

    try:
        return asyncio.run(coro)
    except BrokenPipeError:  # stdout, not the broker: see main
        raise
    except (KafkaConnectionError, ConnectionError, socket.gaierror) as e:
        fail(f"cannot reach the broker: {e}")
    except TopicProblem as e:  # a missing topic or partition, an illegal name...
        fail(str(e))
    except KafkaError as e:  # an answer the command cannot use (unsupported version, ...)
        fail(str(e))


async def open_client(bootstrap: str) -> Any:
    from kafkalite.client.client import KafkaClient

    client = KafkaClient(bootstrap, client_id="kafkalite-cli")
    await client.start()
    return client


# ---------------------------------------------------------------------- serve


def load_command_config(path: str | None) -> Any:
    """The ClientSecurity of a client.properties file; a bad file or key exits 2 naming it."""
    if not path:
        return None
    from kafkalite.config import read_properties
    from kafkalite.security.listeners import client_security_from_properties
    from kafkalite.security.tls import TlsConfigError

    try:
        props = read_properties(path)
    except (OSError, UnicodeDecodeError) as e:
        fail(f"--command-config: cannot read {path}: {e}", 2)
    try:
        return client_security_from_properties(props)
    except (TlsConfigError, ValueError) as e:
        key = getattr(e, "key", "sasl.jaas.config")
        fail(f"--command-config {path}: {key}: {e}", 2)


def apply_command_config(path: str | None) -> None:
    """Every connection of this process uses the file's security settings."""
    security = load_command_config(path)
    if security is not None:
        from kafkalite.client.connection import set_default_security

        set_default_security(security)
