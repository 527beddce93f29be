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


def test_topics_lifecycle_and_console_tools(broker):
    b = ["--bootstrap-server", broker.bootstrap]
    result = kafkalite(
        "topics", "create", "cli-topic", "--partitions", "3", "--config", "retention.ms=60000", *b
    )
    assert result.returncode == 0, result.stderr
    result = kafkalite("topics", "create", "cli-topic", *b)
    assert result.returncode == 1 and "TOPIC_ALREADY_EXISTS" in result.stderr
    result = kafkalite("topics", "list", *b)
    assert "cli-topic" in result.stdout.split()
    result = kafkalite("topics", "describe", "cli-topic", *b)
    assert result.returncode == 0 and result.stdout.count("cli-topic") == 3
    result = kafkalite(
        "topics", "alter", "cli-topic", "--partitions", "4", "--config", "retention.ms=1000", *b
    )
    assert result.returncode == 0, result.stderr
    result = kafkalite("topics", "describe", "cli-topic", *b)
    assert result.stdout.count("cli-topic") == 4

    lines = "".join(f"k{i}:value-{i}\n" for i in range(1000))
    result = kafkalite(
        "produce", "cli-topic", "--partition", "2", "--key-separator", ":", *b, input=lines
    )
    assert result.returncode == 0, result.stderr
    result = kafkalite(
        "consume",
        "cli-topic",
        "--partition",
        "2",
        "--from-beginning",
        "--max-messages",
        "1000",
        "--print-key",
        "--print-offset",
        *b,
    )
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert rows == [[str(i), f"k{i}", f"value-{i}"] for i in range(1000)]

    result = kafkalite("topics", "delete", "cli-topic", *b)
    assert result.returncode == 0, result.stderr
    result = kafkalite("topics", "describe", "cli-topic", *b)
    assert result.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in result.stderr
