"""A tiny tmpfs for real filesystem faults (ENOSPC), and a filler that makes it full.

`mounted_tmpfs(path, size)` mounts a tmpfs of `size` (e.g. "2m") on `path` and unmounts it when
the block ends (lazily, so a broker still holding files open cannot make the teardown fail).
Mounting needs root: a refused mount fails the test with the reason, it never skips.

`fill(path, leave_bytes)` writes a filler file until the filesystem has at most `leave_bytes`
free; `free_bytes(path)` says how much is left.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

FILLER = "filler"


@contextmanager
def mounted_tmpfs(path: str | os.PathLike[str], size: str = "2m") -> Iterator[Path]:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.fail(
            f"cannot mount a tmpfs on {path} (this test needs root to make a real full "
            f"filesystem): {result.stderr.strip() or result.returncode}"
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def free_bytes(path: str | os.PathLike[str]) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def fill(path: str | os.PathLike[str], leave_bytes: int = 0) -> Path:
    """Write ``<path>/filler`` until at most ``leave_bytes`` are free; returns the filler."""
    filler = Path(path) / FILLER
    chunk = b"\0" * 65536
    with open(filler, "ab", buffering=0) as f:
        while (room := free_bytes(path) - leave_bytes) > 0:
            try:
                f.write(chunk[: min(len(chunk), room)])
            except OSError:
                break
    return filler
