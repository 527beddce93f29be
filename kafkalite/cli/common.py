"""What the commands speaking the Kafka protocol share.

Nothing here imports more than click when the module is imported: the consoles are made (and
rich imported) at their first use, asyncio and the client when a command runs, so that a
command's ``--help`` stays fast (docs/decisions/0021-a-command-line-that-imports-what-it-uses.md).

``Group``, the click group every command group is; the consoles; tables that never cut a cell
(``new_table``); ``--bootstrap-server`` and its check; ``--command-config`` (a client.properties
file whose security settings every connection of the process uses); Kafka's error names; and
``run``, which runs a command's coroutine and turns what can go wrong into one line on stderr:
exit 1 when the broker answered an error or the command cannot do what was asked, 2 on usage
or configuration errors (``fail``).
"""

from __future__ import annotations

from typing import Any

import click


class Group(click.Group):
    """A click group that lists its commands in the order they were added, each with its first
    sentence whole and wrapped (click sorts them, and cuts the line at 45 characters)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            rows.append((name, first_sentence(command.short_help or command.help or "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def first_sentence(text: str) -> str:
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


PIPE_WIDTH = 250
"""Width of output written to a pipe or file: as wide as its content, never wrapped at 80."""


class LazyConsole:
    """A rich Console made at its first use: importing rich costs a command that prints nothing
    through it (``--help``, a usage error) tens of milliseconds."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            import sys

            from rich.console import Console

            stream = sys.stderr if self._options.get("stderr") else sys.stdout
            width = None if stream.isatty() else PIPE_WIDTH
            self._console = Console(width=width, **self._options)
        return getattr(self._console, name)


console = LazyConsole()


def new_table(*headers: str) -> Any:
    """A rich Table whose cells wrap (folding a long word such as an error name) instead of
    being cut with an ellipsis: an error code or message is always printed whole."""
    from rich.table import Column, Table

    return Table(*(Column(h, overflow="fold") for h in headers))


def checked_bootstrap(ctx: Any, param: Any, value: str) -> str:
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


bootstrap_option = click.option(
    "--bootstrap-server",
    "-b",
    "bootstrap",
    default="127.0.0.1:9092",
    show_default=True,
    metavar="HOST:PORT",
    help="host:port[,host:port...] of any broker",
    callback=checked_bootstrap,
)
"""``--bootstrap-server``, checked (a decorator: ``@bootstrap_option``)."""


def error_name(code: int) -> str:
    from kafkalite.protocol.errors import ErrorCode

    return ErrorCode.of(int(code)).name


def error_text(code: int, message: str | None, topic: str | None = None) -> str:
    """Kafka's error name and the broker's message, else one that says what happened: the name
    once, even when the message repeats it (``[Error 36] TOPIC_ALREADY_EXISTS: ...``, the text
    of an exception raised with that code)."""
    from kafkalite.protocol.errors import ErrorCode

    error = ErrorCode.of(int(code))
    if not message and topic is not None and error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        message = f"topic {topic!r} does not exist"
    return f"{error.name}: {without_error_name(message, error.name) or error.message}"


def without_error_name(message: str | None, name: str) -> str | None:
    """``message`` less a leading ``[Error N] NAME:`` or ``NAME:`` (the error's name, which the
    caller prints itself)."""
    if not message:
        return message
    text = message.strip()
    if text.startswith("[Error "):
        _, sep, rest = text.partition("] ")
        if sep:
            text = rest
    for prefix in (f"{name}: ", f"{name}:", name):
        if text.startswith(prefix):
            text = text[len(prefix) :].strip()
            break
    return text or None


def fail(message: str, code: int = 1) -> None:
    """One line on stderr, ``error: ...`` (red on a terminal), and exit ``code``."""
    click.echo(f"{click.style('error:', fg='red')} {message}", err=True)
    raise SystemExit(code)


def parse_pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"{what} expects key=value, got {item!r}", 2)
        out[key.strip()] = value.strip()
    return out


class TopicProblem(Exception):
    """What the console tools cannot do (a missing topic or partition, an illegal name...), in
    one line for the operator."""


def run(coro: Any) -> Any:
    """Run a command's coroutine; what goes wrong is a one-line error, never a traceback."""
    import asyncio
    import socket

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
        fail(error_text(e.error_code, e.args[0] if e.args else None))


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
