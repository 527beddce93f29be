"""The `kafkalite` command line against a real broker subprocess."""

import subprocess
import sys

import pytest


def kafkalite(*args, input=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "kafkalite", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    "override, key",
    [
        ("num.partitions=0", "num.partitions"),
        ("no.such.key=1", "no.such.key"),
        ("listeners=oops", "listeners"),
    ],
)
def test_serve_refuses_a_bad_config_naming_the_key(override, key, tmp_path):
    result = kafkalite("serve", "--override", f"log.dirs={tmp_path}", "--override", override)
    assert result.returncode == 2
    assert key in result.stderr


def test_serve_refuses_an_unreadable_config_file(tmp_path):
    result = kafkalite("serve", "--config", str(tmp_path / "missing.properties"))
    assert result.returncode == 2
    assert "missing.properties" in result.stderr
