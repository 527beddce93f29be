"""`kafkalite produce` (cli/produce.py, cli/console_producer.py) against a real broker
subprocess."""

import subprocess
import sys

from tests.cli.support import consumed_rows, kafkalite, one_line_error


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


def test_produce_to_a_missing_topic_when_the_broker_does_not_create_topics(broker_factory):
    b = broker_factory(overrides={"auto.create.topics.enable": "false"}).start()
    result = kafkalite("produce", "absent", "--bootstrap-server", b.bootstrap, input="x\n")
    one_line_error(result, "'absent' does not exist", "does not create topics")


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
