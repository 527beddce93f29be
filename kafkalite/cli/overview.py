"""What ``kafkalite --help`` and ``kafkalite --version`` print, built with nothing imported: the
commands' names, modules and one-line help, and the root's options.

kafkalite/__main__.py answers a bare ``--help``, ``--version`` or no argument from here without
importing click (the command line's largest import); the root group (root.py) lists its commands
and renders its own help from the same table, so both ways print the same text
(docs/decisions/0021-a-command-line-that-imports-what-it-uses.md). This module imports nothing
beyond the standard library modules every Python process has loaded.
"""

from __future__ import annotations

import os
import sys

# name -> (module of kafkalite.cli, its attribute: a click command or group, the
# one-line help `kafkalite --help` shows), in the order of `kafkalite --help`. A command's module
# is imported only when that command runs or its own help is asked for. tests/cli/test_help.py
# checks each line against the command's own help.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "serve": ("serve", "serve", "Run a broker until SIGTERM/SIGINT."),
    "produce": ("produce", "produce", "Send each line of stdin as one record."),
    "consume": ("consume", "consume", "Print the records of a topic, one per line."),
    "topics": ("topics", "topics_app", "Create, list, describe, alter and delete topics."),
    "cluster": (
        "cluster",
        "cluster_app",
        "Cluster, brokers, reassignment and leader elections (admin API).",
    ),
    "groups": (
        "groups",
        "groups_app",
        "Groups (classic, consumer, share): list, describe (lag), reset offsets, delete.",
    ),
    "transactions": (
        "transactions",
        "transactions_app",
        "Transactions: list, describe, abort (admin API; hanging ones over the Kafka protocol).",
    ),
    "storage": ("storage", "storage_app", "Check the storage of a stopped or running broker."),
    "users": ("security", "users_app", "SCRAM users (credentials in /config/users)."),
    "acls": ("security", "acls_app", "ACLs of the ACL authorizer."),
    "quotas": ("security", "quotas_app", "Client quotas of users and client ids."),
    "configs": ("configs", "configs_app", "Describe or alter broker and topic configs."),
    "schemas": (
        "schemas",
        "schemas_app",
        "Schema Registry: subjects, versions, register, check, delete, config.",
    ),
}

HELP = "kafkalite: a Kafka broker in Python, and the tools to operate it."
VERSION_HELP = "print the version and exit"
COMMAND_CONFIG_HELP = "client.properties (security.protocol, ssl.*, sasl.*) for every connection"
OPTIONS: list[tuple[str, str]] = [
    ("--version", VERSION_HELP),
    ("--command-config FILE", COMMAND_CONFIG_HELP),
    ("--help", "Show this message and exit."),
]
WIDTH = 80


def version_line() -> str:
    from kafkalite import __version__

    return f"kafkalite {__version__}"


def program_name() -> str:
    """The command as the user typed it: ``kafkalite``, or ``python -m kafkalite``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "kafkalite"
    if name in ("__main__.py", "-c") or name.startswith("__main__"):
        return "python -m kafkalite"
    return name


def definitions(rows: list[tuple[str, str]], width: int = WIDTH) -> list[str]:
    """Two columns, the second wrapped at ``width`` (the layout of click's help)."""
    import textwrap

    first = min(max(len(term) for term, _ in rows), 30) + 2
    lines = []
    for term, text in rows:
        wrapped = textwrap.wrap(text, width - 2 - first) or [""]
        if len(term) + 2 > first:
            lines.append(f"  {term}")
            lines.extend(" " * (2 + first) + line for line in wrapped)
            continue
        lines.append(f"  {term.ljust(first)}{wrapped[0]}")
        lines.extend(" " * (2 + first) + line for line in wrapped[1:])
    return lines


def root_help(program: str) -> str:
    lines = [f"Usage: {program} [OPTIONS] COMMAND [ARGS]...", "", f"  {HELP}", "", "Options:"]
    lines += definitions(OPTIONS)
    lines += ["", "Commands:"]
    lines += definitions([(name, text) for name, (_, _, text) in COMMANDS.items()])
    return "\n".join(lines) + "\n"
