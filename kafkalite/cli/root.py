"""The root of the `kafkalite` command: the click group every command and group hangs from
(loaded when used), its own options (``--version``, ``--command-config``), and ``main``, the
entry point (kafkalite/__main__.py calls it for anything but a bare --help or --version).

    kafkalite serve [--config server.properties] [--override key=value]...       serve.py
    kafkalite topics create|list|describe|alter|delete ...                         topics.py
    kafkalite produce TOPIC [--partition P] [--key-separator SEP] [--acks A]       produce.py
    kafkalite consume TOPIC [--partition P] [--from-beginning | --offset N] [--group G]
              [--max-messages N] [--timeout-ms MS]                                 consume.py
    kafkalite cluster ..., groups ..., transactions ...  (the HTTP admin API)      cluster.py,
              groups.py, transactions.py, admin_api.py
    kafkalite users add|list|remove, acls add|list|remove, quotas set|list         security.py
    kafkalite storage verify PATH   (offline check of segments and indexes)        storage.py
    kafkalite --command-config client.properties ...   (TLS / SASL settings of every connection)
    kafkalite --version

The commands on the Kafka protocol speak it to any broker (`--bootstrap-server`, default
127.0.0.1:9092) through the project's async client (kafkalite/client/); the console producer
and consumer are console_producer.py and console_consumer.py, the consumer-group member
group_member.py. Exit status: 0 on success, 1 when the broker answered an error (printed with
Kafka's error name) or the command cannot do what was asked (a missing topic or partition, said
so), 2 on usage or configuration errors (the message names the bad option or key). Anything else
is a bug: one line with the path of a report file holding the traceback, exit 1 (see main).
"""

from __future__ import annotations

import os
import sys

import click

from kafkalite.cli.common import Group, apply_command_config
from kafkalite.cli.overview import (
    COMMAND_CONFIG_HELP,
    COMMANDS,
    HELP,
    VERSION_HELP,
    program_name,
    root_help,
)


def load_command(name: str) -> click.Command:
    """The click command (or group) ``name``, its module imported now."""
    import importlib

    module, attribute, _ = COMMANDS[name]
    command = getattr(importlib.import_module(f"kafkalite.cli.{module}"), attribute)
    command.name = name
    return command


class LazyGroup(Group):
    """The root group: it knows its commands' names and one-line help (overview.COMMANDS) and
    imports a command's module only when that command is used (click's lazy-loading pattern).
    Its help is overview.root_help, which kafkalite/__main__.py prints without importing
    click."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        if cmd_name not in self.commands:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands[cmd_name]

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write(root_help(ctx.command_path))


def show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from kafkalite.cli.overview import version_line

        click.echo(version_line())
        ctx.exit()


@click.group("kafkalite", cls=LazyGroup, help=HELP, no_args_is_help=True)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=show_version,
    help=VERSION_HELP,
)
@click.option("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
def app(command_config: str | None) -> None:
    apply_command_config(command_config)


def write_error_report() -> str:
    """The current exception's traceback, with the command and versions, in a new file; its
    path."""
    import platform
    import tempfile
    import traceback

    from kafkalite import __version__

    fd, path = tempfile.mkstemp(prefix="kafkalite-error-", suffix=".txt")
    with open(fd, "w", encoding="utf-8") as report:
        report.write(f"command: {' '.join(sys.argv)}\n")
        report.write(f"kafkalite {__version__}, Python {platform.python_version()}\n\n")
        report.write(traceback.format_exc())
    return path


def main() -> None:
    """The command line's entry point. The rule: a command explains what it can in one line
    (exit 1 or 2); anything else is a bug, reported in one line with the path of a file holding
    the full traceback (exit 1), never a traceback on the terminal."""
    # kio registers hypothesis strategies for its types whenever hypothesis is importable (a
    # test dependency); building hypothesis' character tables costs seconds per process start
    # (its cache lives in the working directory). The command line never needs it.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    try:
        app.main(prog_name=program_name())
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except BrokenPipeError:  # `kafkalite consume ... | head`: the reader has had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None
    except Exception as e:
        try:
            where = f"full report in {write_error_report()}"
        except OSError as report_error:
            where = f"no report written: {report_error}"
        click.echo(
            f"{click.style('error:', fg='red')} unexpected {type(e).__name__}: {e} ({where})",
            err=True,
        )
        raise SystemExit(1) from None
