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
    assert result.returncode == 0 and result.stdout.count("cli-topic") == 1 + 3
    assert "Configs: retention.ms=60000" in result.stdout
    result = kafkalite(
        "topics", "alter", "cli-topic", "--partitions", "4", "--config", "retention.ms=1000", *b
    )
    assert result.returncode == 0, result.stderr
    result = kafkalite("topics", "describe", "cli-topic", *b)
    assert result.stdout.count("cli-topic") == 1 + 4
    assert "Configs: retention.ms=1000" in result.stdout

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


# ---------------------------------------------------------------------- operator errors


def one_line_error(result, *needles: str) -> None:
    """The command failed with one clear line naming the problem, never a traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    assert "cannot reach the broker" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], result.stderr


def one_error_line_among_the_logs(result, *needles: str) -> None:
    """`serve` logs as it starts; its failure is one log line naming the problem."""
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if '"level": "error"' in line]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle in errors[0], result.stderr


def serve_args(tmp_path, *overrides: str) -> list[str]:
    from tests.harness.broker import free_port

    settings = {
        "log.dirs": str(tmp_path / "logs"),
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "admin.listener": "",
    }
    settings.update(item.split("=", 1) for item in overrides)
    return ["serve", *(a for k, v in settings.items() for a in ("--override", f"{k}={v}"))]


def test_serve_refuses_a_listener_port_in_use_in_one_line(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = kafkalite(*serve_args(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{port}"))
    one_error_line_among_the_logs(result, "listeners", "address already in use")


@pytest.mark.parametrize("where", ["file", "below-a-file"])
def test_serve_refuses_a_log_dir_that_is_a_file_in_one_line(tmp_path, where):
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    log_dir = afile if where == "file" else afile / "logs"
    result = kafkalite(*serve_args(tmp_path, f"log.dirs={log_dir}"))
    one_error_line_among_the_logs(result, "log.dirs", str(log_dir))


def test_serve_refuses_a_config_file_that_is_not_utf8_in_one_line(tmp_path):
    config = tmp_path / "latin1.properties"
    config.write_bytes(f"log.dirs={tmp_path}/logs\n# caf\xe9\n".encode("latin-1"))
    result = kafkalite("serve", "--config", str(config))
    assert result.returncode == 2
    one_line_error(result, "--config", "latin1.properties", "UTF-8")


def test_an_unexpected_failure_is_one_line_with_the_path_of_a_full_report():
    """The rule: what the CLI cannot explain is a bug, reported in one line that names a file
    holding the traceback."""
    boom = (
        "import sys, kafkalite.cli.root as cli\n"
        "async def broken(bootstrap):\n"
        "    raise RuntimeError('boom in the client')\n"
        "cli._client = broken\n"
        "sys.argv = ['kafkalite', 'topics', 'list']\n"
        "cli.main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", boom], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "unexpected RuntimeError: boom in the client" in lines[0]
    report = lines[0].rsplit("full report in ", 1)[1].rstrip(")")
    try:
        with open(report) as f:
            text = f.read()
        assert "Traceback" in text and "boom in the client" in text and "topics list" in text
    finally:
        import os

        os.unlink(report)


@pytest.mark.parametrize("bootstrap", ["127.0.0.1:abc", "127.0.0.1:70000", ":9092", " , "])
def test_a_bad_bootstrap_server_names_the_option(bootstrap):
    result = kafkalite("topics", "list", "--bootstrap-server", bootstrap)
    assert result.returncode == 2
    one_line_error(result, "--bootstrap-server")
    assert "invalid literal" not in result.stderr


def test_missing_topics_partitions_and_illegal_names_are_named(shared_broker):
    """These said "cannot reach the broker" (and deleting a missing topic printed an empty
    message)."""
    b = ["--bootstrap-server", shared_broker.bootstrap]
    assert kafkalite("topics", "create", "three", "--partitions", "3", *b).returncode == 0
    result = kafkalite("produce", "three", "--partition", "7", *b, input="x\n")
    one_line_error(result, "partition 7", "'three'", "3 partitions")
    result = kafkalite("consume", "three", "--partition", "3", "-n", "1", *b)
    one_line_error(result, "partition 3", "'three'", "3 partitions")
    for command in (["produce"], ["consume", "-n", "1"]):
        result = kafkalite(*command, "bad name!", *b, input="x\n")
        one_line_error(result, "'bad name!'", "not a legal topic name")
    result = kafkalite("consume", "never-made", "-n", "1", *b)
    one_line_error(result, "'never-made'", "does not exist")
    result = kafkalite("topics", "delete", "never-made", *b)
    one_line_error(result, "UNKNOWN_TOPIC_OR_PARTITION", "'never-made' does not exist")


def test_produce_to_a_missing_topic_when_the_broker_does_not_create_topics(broker_factory):
    b = broker_factory(overrides={"auto.create.topics.enable": "false"}).start()
    result = kafkalite("produce", "absent", "--bootstrap-server", b.bootstrap, input="x\n")
    one_line_error(result, "'absent' does not exist", "does not create topics")


# ---------------------------------------------------------------------- what Kafka users expect


def test_version_and_help_text_of_every_subcommand():
    import typer.main

    from kafkalite import __version__
    from kafkalite.cli import app

    result = kafkalite("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"kafkalite {__version__}"

    def walk(command, path):
        yield path, command
        if hasattr(command, "list_commands"):  # a group (typer may carry its own click)
            ctx = type(command).context_class(command)
            for name in command.list_commands(ctx):
                yield from walk(command.get_command(ctx, name), [*path, name])

    commands = list(walk(typer.main.get_command(app), []))
    assert len(commands) > 15
    for path, command in commands:
        assert (command.help or "").strip(), f"kafkalite {' '.join(path)} has no help text"


def consumed_rows(result) -> list[list[str]]:
    assert result.returncode == 0, result.stderr
    return [line.split("\t") for line in result.stdout.splitlines()]


def test_produce_partitions_keys_as_kafka_does_and_consume_reads_every_partition(shared_broker):
    """The same key lands on the same partition as librdkafka's murmur2_random (= Kafka's
    DefaultPartitioner) puts it; everything went to partition 0 before."""
    from confluent_kafka import Producer

    b = ["--bootstrap-server", shared_broker.bootstrap]
    assert kafkalite("topics", "create", "keyed", "--partitions", "7", *b).returncode == 0
    keys = [f"key-{i}" for i in range(120)] + ["", "21", "foobar", "ünï"]
    lines = "".join(f"{k}:value-{k}\n" for k in keys)
    result = kafkalite("produce", "keyed", "-K", ":", *b, input=lines)
    assert result.returncode == 0, result.stderr

    expected = {}
    producer = Producer(
        {"bootstrap.servers": shared_broker.bootstrap, "partitioner": "murmur2_random"}
    )

    def delivered(err, msg):
        assert err is None, err
        expected[msg.key().decode()] = msg.partition()

    for k in keys:
        producer.produce("keyed", key=k.encode(), value=b"from librdkafka", on_delivery=delivered)
    assert producer.flush(30) == 0

    args = ["--from-beginning", "--print-partition", "--print-key", "--timeout-ms", "3000"]
    rows = consumed_rows(kafkalite("consume", "keyed", *args, "-n", str(2 * len(keys)), *b))
    ours = {key: int(p) for p, key, value in rows if value.startswith("value-")}
    assert ours == expected
    assert len(set(ours.values())) == 7  # and every partition was read
    assert sorted(value for _, _, value in rows if value.startswith("value-")) == sorted(
        f"value-{k}" for k in keys
    )


def test_produce_spreads_unkeyed_records_and_creates_a_missing_topic(shared_broker):
    b = ["--bootstrap-server", shared_broker.bootstrap]
    assert kafkalite("topics", "create", "unkeyed", "--partitions", "4", *b).returncode == 0
    lines = "".join(f"v{i}\n" for i in range(100))
    result = kafkalite("produce", "unkeyed", "--batch-size", "10", *b, input=lines)
    assert result.returncode == 0, result.stderr
    rows = consumed_rows(
        kafkalite("consume", "unkeyed", "--from-beginning", "--print-partition", "-n", "100", *b)
    )
    assert sorted(v for _, v in rows) == sorted(f"v{i}" for i in range(100))
    assert {p for p, _ in rows} == {"0", "1", "2", "3"}

    result = kafkalite("produce", "made-on-first-use", *b, input="hello\n")
    assert result.returncode == 0, result.stderr
    rows = consumed_rows(
        kafkalite("consume", "made-on-first-use", "--from-beginning", "-n", "1", *b)
    )
    assert rows == [["hello"]]


def test_consume_with_a_group_commits_and_a_second_run_continues(shared_broker):
    from confluent_kafka import Consumer, TopicPartition

    b = ["--bootstrap-server", shared_broker.bootstrap]
    assert kafkalite("topics", "create", "grouped", "--partitions", "2", *b).returncode == 0
    lines = "".join(f"k{i}:v{i}\n" for i in range(20))
    assert kafkalite("produce", "grouped", "-K", ":", *b, input=lines).returncode == 0
    first = consumed_rows(
        kafkalite("consume", "grouped", "--group", "cli-g", "--from-beginning", "-n", "8", *b)
    )
    assert len(first) == 8
    second = consumed_rows(
        kafkalite(
            "consume", "grouped", "--group", "cli-g", "--from-beginning", "--timeout-ms", "3000",
            *b,
        )
    )  # fmt: skip
    values = [v for (v,) in first + second]
    assert sorted(values) == sorted(f"v{i}" for i in range(20))  # each exactly once

    kafka = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": "cli-g"})
    try:
        committed = kafka.committed([TopicPartition("grouped", p) for p in (0, 1)], timeout=30)
        ends = [kafka.get_watermark_offsets(tp, timeout=30)[1] for tp in committed]
    finally:
        kafka.close()
    assert [tp.offset for tp in committed] == ends and sum(ends) == 20


def test_consume_group_member_rebalances_with_a_kafka_consumer(shared_broker):
    """A second member (librdkafka, range assignor) joins: the CLI member commits what it printed
    before it rejoins, the range assignor splits the partitions (member ids sort 'kafkalite-cli'
    before 'rdkafka': the CLI gets partition 0), and nothing is read twice."""
    import threading

    from confluent_kafka import Consumer

    from tests.integration.common import wait_for

    b = ["--bootstrap-server", shared_broker.bootstrap]
    assert kafkalite("topics", "create", "shared", "--partitions", "2", *b).returncode == 0
    for p in (0, 1):
        lines = "".join(f"first-{p}-{i}\n" for i in range(10))
        assert kafkalite("produce", "shared", "-p", str(p), *b, input=lines).returncode == 0
    member = subprocess.Popen(
        [sys.executable, "-m", "kafkalite", "consume", "shared", "--group", "rebalanced"]
        + ["--from-beginning", "--print-partition", "-n", "30", *b],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    printed: list[list[str]] = []
    reader = threading.Thread(
        target=lambda: printed.extend(line.rstrip("\n").split("\t") for line in member.stdout),
        daemon=True,
    )
    reader.start()
    kafka = Consumer(
        {
            "bootstrap.servers": shared_broker.bootstrap,
            "group.id": "rebalanced",
            "partition.assignment.strategy": "range",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got = []
    try:
        wait_for(lambda: len(printed) >= 20, "the CLI member's first 20", timeout=60)
        kafka.subscribe(["shared"])

        def assigned():
            got.extend(m for m in kafka.consume(10, 0.2) if m.error() is None)
            return kafka.assignment()

        wait_for(assigned, "the second member's assignment", timeout=60)
        assert [tp.partition for tp in kafka.assignment()] == [1]
        for p in (0, 1):
            lines = "".join(f"second-{p}-{i}\n" for i in range(10))
            assert kafka_ok(kafkalite("produce", "shared", "-p", str(p), *b, input=lines))

        def second_batch():
            got.extend(m for m in kafka.consume(10, 0.2) if m.error() is None)
            return len(got) >= 10

        wait_for(second_batch, "partition 1's second batch at librdkafka", timeout=60)
        assert member.wait(60) == 0, member.stderr.read()
        reader.join(10)
    finally:
        kafka.close()
        if member.poll() is None:
            member.kill()
    mine = sorted(value for _, value in printed)
    assert mine == sorted(
        [f"first-{p}-{i}" for p in (0, 1) for i in range(10)] + [f"second-0-{i}" for i in range(10)]
    )
    assert sorted(m.value().decode() for m in got) == sorted(f"second-1-{i}" for i in range(10))


def kafka_ok(result) -> bool:
    assert result.returncode == 0, result.stderr
    return True
