"""`kafkalite topics` (cli/topics.py) against a real broker subprocess."""

from tests.cli.support import kafkalite, one_line_error


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
