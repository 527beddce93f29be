"""`kafkalite configs` (cli/configs.py) against a real broker subprocess: describe and alter a
broker's own level, the cluster defaults and a topic, as kafka-configs.sh does."""

from tests.cli.support import kafkalite, one_line_error


def test_configs_describe_and_alter(broker):
    b = ["--bootstrap-server", broker.bootstrap]
    brokers = ["configs", "--entity-type", "brokers"]
    result = kafkalite(
        *brokers,
        "--entity-name",
        "0",
        "--alter",
        "--add-config",
        "log.retention.ms=3600000,log.cleanup.policy=[delete,compact]",
        *b,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Completed updating config for broker 0."
    result = kafkalite(
        *brokers, "--entity-default", "--alter", "--add-config", "log.retention.ms=7200000", *b
    )
    assert result.stdout.strip() == "Completed updating default config for brokers in the cluster."

    result = kafkalite(*brokers, "--entity-name", "0", "--describe", *b)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Dynamic configs for broker 0 are:"
    assert (
        "  log.retention.ms=3600000 sensitive=false synonyms={"
        "DYNAMIC_BROKER_CONFIG:log.retention.ms=3600000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000, "
        "DEFAULT_CONFIG:log.retention.hours=168}"
    ) in lines
    assert any(line.startswith("  log.cleanup.policy=delete,compact ") for line in lines)
    result = kafkalite(*brokers, "--entity-default", "--describe", *b)
    assert result.stdout.splitlines()[0] == "Default configs for brokers in the cluster are:"
    assert "log.retention.ms=7200000" in result.stdout
    result = kafkalite(*brokers, "--entity-name", "0", "--describe", "--all", *b)
    assert "  broker.id=0 sensitive=false" in result.stdout

    result = kafkalite(
        *brokers,
        "--entity-name",
        "0",
        "--alter",
        "--delete-config",
        "log.retention.ms,log.cleanup.policy",
        *b,
    )
    assert result.returncode == 0, result.stderr
    result = kafkalite(*brokers, "--entity-name", "0", "--describe", *b)
    assert "log.retention.ms=7200000" in result.stdout  # the default level shows through
    assert "DYNAMIC_BROKER_CONFIG" not in result.stdout

    one_line_error(
        kafkalite(*brokers, "--entity-name", "0", "--alter", "--add-config", "broker.id=4", *b),
        "INVALID_CONFIG",
        "Cannot update these configs dynamically",
    )
    one_line_error(kafkalite(*brokers, "--describe", *b), "--entity-name")

    result = kafkalite("topics", "create", "cfg-topic", *b)
    assert result.returncode == 0, result.stderr
    topics = ["configs", "--entity-type", "topics", "--entity-name", "cfg-topic"]
    result = kafkalite(*topics, "--alter", "--add-config", "retention.ms=1000", *b)
    assert result.stdout.strip() == "Completed updating config for topic cfg-topic."
    result = kafkalite(*topics, "--describe", *b)
    assert (
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000"
        in result.stdout
    )
