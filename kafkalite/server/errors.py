"""Why a broker does not start."""

from __future__ import annotations

from pathlib import Path


class StartupError(Exception):
    """The broker cannot start (data dir in use, bad config value, store unreachable)."""


def log_dir_problem(log_dir: str, error: OSError) -> str:
    """Why a log.dirs entry cannot be used, in one line naming the key."""
    if Path(log_dir).exists() and not Path(log_dir).is_dir():
        return f"log.dirs: {log_dir} is a file, not a directory"
    return f"log.dirs: cannot create {log_dir}: {error.strerror or error}"
