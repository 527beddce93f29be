"""Running the `kafkalite` command as a user does (``python -m kafkalite``) and checking what it
says."""

import subprocess
import sys


def kafkalite(*args, input=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "kafkalite", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line_error(result, *needles: str) -> None:
    """The command failed with one clear line naming the problem, never a traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    assert "cannot reach the broker" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], result.stderr


def consumed_rows(result) -> list[list[str]]:
    assert result.returncode == 0, result.stderr
    return [line.split("\t") for line in result.stdout.splitlines()]


def kafka_ok(result) -> bool:
    assert result.returncode == 0, result.stderr
    return True
