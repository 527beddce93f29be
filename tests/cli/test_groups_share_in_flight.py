"""`kafkalite groups describe` of a share group holding records (tests/admin/share_in_flight.py:
a real confluent-kafka ShareConsumer holds offsets 0 and 3-5, rejected 1, released 2) on one
in-process broker, which leads the partition: the share-partition's window and its in-flight
ranges with their states, delivery counts, holding member and lock expiry."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kafkalite.cli import app
from kafkalite.testing import Broker
from kafkalite.testing.waiting import wait_for
from tests.admin.share_in_flight import LIVE, LOCK_MS, RECORDS, hold_records, states

pytestmark = pytest.mark.integration

TOPIC = "cli-in-flight"
GROUP = "cli-in-flight-share"
runner = CliRunner(env={"COLUMNS": "250"})


@pytest.fixture(scope="module")
def broker():
    with Broker(
        {
            "group.share.record.lock.duration.ms": LOCK_MS,
            "group.share.max.record.lock.duration.ms": LOCK_MS,
            "share.auto.offset.reset": "earliest",
            "offsets.topic.num.partitions": 1,
            "share.coordinator.state.topic.num.partitions": 1,
        }
    ) as b:
        b.create_topic(TOPIC)
        b.produce(TOPIC, [f"r{i}".encode() for i in range(RECORDS)])
        consumer = hold_records(b.bootstrap_servers, TOPIC, GROUP)
        yield b
        consumer.close()


def cli(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def cells(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("│").split("│")] for line in out.splitlines()]


def test_describe_shows_the_window_and_the_in_flight_ranges(broker):
    url = ("--admin-url", broker.admin_url)

    def described():
        answer = json.loads(cli("groups", "describe", GROUP, *url, "--json"))
        rows = answer.get("share_offsets") or []
        return answer if rows and rows[0]["view"] == "live" and answer["members"] else None

    answer = wait_for(described, "the live view of the share-partition", timeout=30)
    (row,) = answer["share_offsets"]
    assert states(row) == LIVE
    (member,) = answer["members"]
    out = cli("groups", "describe", GROUP, *url)
    # topic, partition, start offset, end offset, view, in flight
    (window,) = [c for c in cells(out) if len(c) == 6 and c[0] == TOPIC]
    assert window[1:5] == ["0", "0", str(RECORDS), f"live (leader {broker.broker_id})"]
    assert window[5] == "4 ACQUIRED, 1 ARCHIVED, 1 AVAILABLE"
    # topic, partition, offsets, state, deliveries, member, lock expires
    ranges = [c for c in cells(out) if len(c) == 7 and c[0] == TOPIC]
    shown: dict[int, str] = {}
    for c in ranges:
        first, _, last = c[2].partition("-")
        shown.update({o: c[3] for o in range(int(first), int(last or first) + 1)})
        assert c[4] == "1"
        if c[3] == "ACQUIRED":
            assert c[5].endswith(member["member_id"]) and "UTC" in c[6]
        else:
            assert (c[5], c[6]) == ("-", "-")
    assert shown == LIVE
