"""`kafkalite groups reset-offsets`, `delete-offsets` and `delete` of a share group (as
kafka-share-groups.sh --reset-offsets, --delete-offsets and --delete) on one in-process broker,
real confluent-kafka ShareConsumers reading before and after (tests/admin/share_offsets.py);
and `delete-offsets` of a consumer group (OffsetDelete)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, TopicPartition

from kafkalite.cli import app
from kafkalite.testing import Broker
from kafkalite.testing.waiting import wait_for
from tests.admin.share_offsets import active_member, receive

pytestmark = pytest.mark.integration

TOPIC = "cli-share-reset"
RECORDS = 5
ALL = {(0, o) for o in range(RECORDS)}
runner = CliRunner(env={"COLUMNS": "250"})


@pytest.fixture(scope="module")
def broker():
    with Broker(
        {
            "share.auto.offset.reset": "earliest",
            "offsets.topic.num.partitions": 1,
            "share.coordinator.state.topic.num.partitions": 1,
        }
    ) as b:
        b.create_topic(TOPIC)
        b.produce(TOPIC, [f"r{i}".encode() for i in range(RECORDS)])
        yield b


def cli(*args: str, ok: bool = True) -> str:
    result = runner.invoke(app, list(args))
    assert (result.exit_code == 0) is ok, result.output
    return result.output


def starts(broker, group: str) -> dict[int, int | None]:
    answer = json.loads(cli("groups", "describe", group, "--admin-url", broker.admin_url, "--json"))
    return {r["partition"]: r["start_offset"] for r in answer["share_offsets"]}


def read_everything(broker, group: str) -> None:
    assert receive(broker.bootstrap_servers, group, TOPIC, ALL) == ALL
    wait_for(lambda: starts(broker, group) == {0: RECORDS}, "the group's state at the end")


def test_reset_offsets_of_a_share_group(broker):
    group, url = "cli-reset", ("--admin-url", broker.admin_url)
    read_everything(broker, group)
    out = cli("groups", "reset-offsets", group, "--to", "earliest", "--dry-run", *url)
    assert "dry run: nothing altered" in out and TOPIC in out
    assert starts(broker, group) == {0: RECORDS}
    out = cli(
        "groups", "reset-offsets", group, "--to", "explicit", "--offset", f"{TOPIC}:0=3", *url
    )
    assert "start offsets altered" in out
    assert starts(broker, group) == {0: 3}
    later = {(0, 3), (0, 4)}
    assert receive(broker.bootstrap_servers, group, TOPIC, later) == later
    answer = json.loads(
        cli("groups", "reset-offsets", group, "--to", "earliest", "--topic", TOPIC, *url, "--json")
    )
    assert answer["group_type"] == "share" and answer["offsets"][0]["offset"] == 0
    assert receive(broker.bootstrap_servers, group, TOPIC, ALL) == ALL


def test_delete_offsets_then_delete_the_share_group(broker):
    group, url = "cli-delete", ("--admin-url", broker.admin_url)
    read_everything(broker, group)
    out = cli("groups", "delete-offsets", group, "--topic", TOPIC, *url)
    assert f"share group {group}: offsets of {TOPIC} deleted" in out
    assert starts(broker, group) == {0: None}
    # share.auto.offset.reset=earliest
    assert receive(broker.bootstrap_servers, group, TOPIC, ALL) == ALL
    cli("groups", "reset-offsets", group, "--to", "latest", *url)
    assert f"group {group} deleted" in cli("groups", "delete", group, *url)
    out = cli("groups", "describe", group, *url, ok=False)
    assert "GROUP_ID_NOT_FOUND" in out
    # its state went with it: a group of that name starts at share.auto.offset.reset again
    assert receive(broker.bootstrap_servers, group, TOPIC, ALL) == ALL


def test_a_share_group_with_a_member_is_refused(broker):
    group, url = "cli-busy", ("--admin-url", broker.admin_url)
    read_everything(broker, group)

    def joined() -> bool:
        answer = json.loads(cli("groups", "describe", group, *url, "--json"))
        return bool(answer["members"])

    with active_member(broker.bootstrap_servers, group, TOPIC, joined):
        for args in (
            ("reset-offsets", group, "--to", "earliest"),
            ("delete-offsets", group, "--topic", TOPIC),
            ("delete", group),
        ):
            out = cli("groups", *args, *url, ok=False)
            assert "NON_EMPTY_GROUP (HTTP 409)" in out, out
    assert starts(broker, group) == {0: RECORDS}


def test_delete_offsets_of_a_consumer_group_is_offset_delete(broker):
    group, url = "cli-classic", ("--admin-url", broker.admin_url)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 2)], asynchronous=False)
    finally:
        consumer.close()
    answer = json.loads(cli("groups", "describe", group, *url, "--json"))
    assert [o["committed_offset"] for o in answer["offsets"]] == [2]
    out = cli("groups", "delete-offsets", group, "--topic", TOPIC, *url)
    assert f"offsets of {TOPIC} deleted" in out
    result = runner.invoke(app, ["groups", "describe", group, *url, "--json"])
    if result.exit_code == 0:  # an Empty group without offsets
        assert [o["committed_offset"] for o in json.loads(result.output)["offsets"]] == []
    else:  # a group with nothing left is gone
        assert "GROUP_ID_NOT_FOUND" in result.output, result.output
