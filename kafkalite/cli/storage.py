"""`kafkalite storage verify PATH`: check segments offline, in the spirit of Kafka's
`kafka-dump-log --deep-iteration` (see kafkalite/storage/verifier.py for what is checked).

PATH is a log directory (every `<topic>-<partition>` in it), a partition directory or one
`.log` segment file. It reads the files with plain reads (no maps), so it is safe on a broker's
live directory, though a segment being written may show a torn last batch.

Output: one line per finding on stdout (`<file>: <kind> at position <p> [offset <o>]: <detail>`),
a summary on stderr. Exit status: 0 nothing found, 1 corruption found, 2 the path cannot be
checked (missing, not a segment, unreadable).
"""

from __future__ import annotations

import sys

import click

from kafkalite.cli.common import Group


@click.group("storage", cls=Group)
def storage_app() -> None:
    """Check the storage of a stopped or running broker."""


@storage_app.command("verify")
@click.argument("path", metavar="PATH")
def verify(path: str) -> None:
    """Check every batch's CRC and every index entry against its log; one line per finding.

    PATH is a log directory, a partition directory or one .log segment file."""
    from kafkalite.storage.verifier import verify_path

    count = 0
    try:
        for finding in verify_path(path):
            count += 1
            print(finding.line(), flush=True)
    except (OSError, ValueError) as e:
        print(f"kafkalite storage verify: cannot check {path}: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    if count:
        print(f"{count} finding(s) in {path}", file=sys.stderr)
        raise SystemExit(1)
    print(f"no corruption found in {path}", file=sys.stderr)
