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


def test_produce_sends_each_line_as_it_arrives_and_passes_bytes_through(broker):
    """A line is sent without waiting for more input (tail -f | kafkalite produce), values are
    the bytes read (not decoded: invalid UTF-8 used to crash the command), and bad bootstrap
    addresses are a one-line error with exit code 2, not a traceback."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from tests.integration.common import wait_for

    b = ["--bootstrap-server", broker.bootstrap]
    assert kafkalite("topics", "create", "live", "--partitions", "1", *b).returncode == 0
    producer = subprocess.Popen(
        [sys.executable, "-m", "kafkalite", "produce", "live", *b],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cli-live"})
    consumer.assign([TopicPartition("live", 0, OFFSET_BEGINNING)])
    got = []

    def received(count):
        def poll():
            got.extend(m.value() for m in consumer.consume(10, 0.2) if m.error() is None)
            return len(got) >= count

        return poll

    try:
        producer.stdin.write(b"first\n")
        producer.stdin.flush()  # and the pipe stays open: no end of input yet
        wait_for(received(1), "the first line while stdin is still open")
        producer.stdin.write(b"\xff\xfe not utf-8\n")
        producer.stdin.close()
        assert producer.wait(60) == 0, producer.stderr.read()
        wait_for(received(2), "the second line")
    finally:
        consumer.close()
        if producer.poll() is None:
            producer.kill()
    assert got == [b"first", b"\xff\xfe not utf-8"]
    bad = kafkalite("produce", "live", "--bootstrap-server", "127.0.0.1:abc", input="x\n")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "error:" in bad.stderr
