"""The root of the `kafkalite` command: the typer app every command and group is added to, its
own options (``--version``, ``--command-config``), and ``main``, the entry point.

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
from typing import Annotated

import typer

from kafkalite.cli import (
    cluster,
    consume,
    groups,
    produce,
    security,
    serve,
    storage,
    topics,
    transactions,
)
from kafkalite.cli.common import apply_command_config, err_console

app = typer.Typer(
    help="kafkalite: a Kafka broker in Python",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def show_version(value: bool) -> None:
    if value:
        from kafkalite import __version__

        typer.echo(f"kafkalite {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=show_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
    command_config: Annotated[
        str | None,
        typer.Option(
            "--command-config",
            help="client.properties (security.protocol, ssl.*, sasl.*) for every connection",
        ),
    ] = None,
) -> None:
    """kafkalite: a Kafka broker in Python, and the tools to operate it."""
    apply_command_config(command_config)


# in the order of `kafkalite --help`: the commands, then the groups
app.command("serve")(serve.serve)
app.command("produce")(produce.produce)
app.command("consume")(consume.consume)
app.add_typer(topics.topics_app, name="topics")
app.add_typer(cluster.cluster_app, name="cluster")
app.add_typer(groups.groups_app, name="groups")
app.add_typer(transactions.transactions_app, name="transactions")
app.add_typer(storage.storage_app, name="storage")
app.add_typer(security.users_app, name="users")
app.add_typer(security.acls_app, name="acls")
app.add_typer(security.quotas_app, name="quotas")
app.add_typer(__import__("kafkalite.cli.schemas", fromlist=["_"]).schemas_app, name="schemas")


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
        app()
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
        err_console.print(
            f"[red]error:[/red] unexpected {type(e).__name__}: {e} ({where})",
            markup=True,
            highlight=False,
        )
        raise SystemExit(1) from None
