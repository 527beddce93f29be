"""`kafkalite consume` (cli/consume.py, cli/console_consumer.py, cli/group_member.py) against a
real broker subprocess."""

import subprocess
import sys

from tests.cli.support import consumed_rows, kafka_ok, kafkalite


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
