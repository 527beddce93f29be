"""Where the command line follows Kafka's tools (cli/topics.py, cli/produce.py, common.py):
describe with no topic or several, --exclude-internal, an error's name said once, ``--acks``
as Kafka's producer takes it. Against a real broker subprocess."""

from confluent_kafka import Consumer

from tests.cli.support import kafkalite, one_line_error


def internal_topic_made(bootstrap: str) -> None:
    """A consumer group's commit creates __consumer_offsets."""
    from confluent_kafka import TopicPartition

    assert kafkalite("topics", "create", "sem-commit", "-b", bootstrap).returncode == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sem-group"})
    try:
        consumer.commit(offsets=[TopicPartition("sem-commit", 0, 0)], asynchronous=False)
    finally:
        consumer.close()


def test_describe_every_topic_several_topics_and_exclude_internal(shared_broker):
    b = ["-b", shared_broker.bootstrap]
    for name in ("sem-a", "sem-b"):
        assert kafkalite("topics", "create", name, "--partitions", "2", *b).returncode == 0
    internal_topic_made(shared_broker.bootstrap)

    every = kafkalite("topics", "describe", *b)
    assert every.returncode == 0, every.stderr
    for name in ("sem-a", "sem-b", "sem-commit", "__consumer_offsets"):
        assert f"Topic: {name}\t" in every.stdout

    two = kafkalite("topics", "describe", "sem-a", "sem-b", *b)
    assert two.returncode == 0, two.stderr
    assert [
        line.split("\t")[0] for line in two.stdout.splitlines() if line.startswith("Topic:")
    ] == [
        "Topic: sem-a",
        "Topic: sem-b",
    ]

    user_only = kafkalite("topics", "describe", "--exclude-internal", *b)
    assert "__consumer_offsets" not in user_only.stdout and "Topic: sem-a\t" in user_only.stdout

    listed = kafkalite("topics", "list", *b).stdout.split()
    assert "__consumer_offsets" in listed and "sem-a" in listed
    listed = kafkalite("topics", "list", "--exclude-internal", *b).stdout.split()
    assert "__consumer_offsets" not in listed and "sem-a" in listed

    one_missing = kafkalite("topics", "describe", "sem-a", "sem-nope", *b)
    assert one_missing.returncode == 1 and "Topic: sem-a\t" in one_missing.stdout
    assert "UNKNOWN_TOPIC_OR_PARTITION: topic 'sem-nope' does not exist" in one_missing.stderr


def test_an_error_says_its_name_once(shared_broker):
    b = ["-b", shared_broker.bootstrap]
    assert kafkalite("topics", "create", "sem-twice", *b).returncode == 0
    again = kafkalite("topics", "create", "sem-twice", *b)
    one_line_error(again, "TOPIC_ALREADY_EXISTS")
    assert again.stderr.count("TOPIC_ALREADY_EXISTS") == 1, again.stderr
    assert "[Error" not in again.stderr
    assert "sem-twice" in again.stderr


def test_acks_as_kafkas_producer_takes_it(shared_broker):
    b = ["-b", shared_broker.bootstrap]
    assert kafkalite("topics", "create", "sem-acks", *b).returncode == 0
    for acks in ("all", "-1", "1", "0"):
        sent = kafkalite("produce", "sem-acks", "--acks", acks, *b, input=f"acks-{acks}\n")
        assert sent.returncode == 0, (acks, sent.stderr)
    got = kafkalite(
        "consume",
        "sem-acks",
        "--from-beginning",
        "--max-messages",
        "4",
        "--timeout-ms",
        "10000",
        *b,
    )
    assert sorted(got.stdout.split()) == ["acks--1", "acks-0", "acks-1", "acks-all"]
    bad = kafkalite("produce", "sem-acks", "--acks", "most", *b, input="x\n")
    assert bad.returncode == 2 and "--acks" in bad.stderr and "Traceback" not in bad.stderr
