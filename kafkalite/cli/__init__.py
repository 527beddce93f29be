"""The `kafkalite` command line (see root.py)."""

from kafkalite.cli.root import app, main

__all__ = ["app", "main"]
