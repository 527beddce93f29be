"""`kafkalite groups list|describe` with the three kinds of group (classic, consumer of the
KIP-848 protocol, share), made by real clients (tests/admin/test_group_types.py's groups: each
read 20 records of both partitions of `kinds`; the classic and consumer groups committed 15 of
each, a lag of 10). Shown as kafka-consumer-groups.sh / kafka-share-groups.sh show them."""

# ruff: noqa: F811 - the fixtures imported below are the tests' arguments

from __future__ import annotations

import json

from click.testing import CliRunner

from kafkalite.cli import app
from tests.admin.group_kinds import (  # noqa: F401 - fixtures, found by name
    TOPIC,
    admin,
    admin_broker,
    groups,
)

runner = CliRunner(env={"COLUMNS": "250"})


def cli(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.output


def rows(table: str) -> dict[str, list[str]]:
    """A rich table's body rows keyed by their first cell."""
    out = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃|").split("│")]
        if len(cells) > 1 and cells[0]:
            out[cells[0]] = cells
    return out


def test_list_shows_each_groups_type_and_state_and_filters_by_type(admin, groups):
    url = ("--admin-url", admin.url)
    admin.wait_for(
        lambda: set(groups.values()) <= {g["group_id"] for g in admin.get("/groups").body},
        "the three groups to be listed",
    )
    listed = {g["group_id"]: g for g in json.loads(cli("groups", "list", *url, "--json"))}
    assert {listed[g]["group_type"] for g in groups.values()} == {"classic", "consumer", "share"}
    table = rows(cli("groups", "list", *url))
    classic, consumer, share = (table[groups[k]] for k in ("classic", "consumer", "share"))
    assert classic[1:3] == ["classic", "Stable"]
    assert consumer[1:3] == ["consumer", "Stable"]
    assert consumer[4:] == ["1", "10"]  # one member, lag 10
    assert share[1:3] == ["share", "Stable"]
    assert share[5] == "-"  # a share group has no lag
    for kind, group_id in groups.items():
        only = rows(cli("groups", "list", "--type", kind, *url))
        assert group_id in only
        assert {r[1] for r in only.values() if r[0] != "group"} == {kind}
    cli("groups", "list", "--type", "bogus", *url, code=2)


def test_describe_a_consumer_group_shows_epochs_members_and_lag(admin, groups):
    url = ("--admin-url", admin.url)
    described = json.loads(cli("groups", "describe", groups["consumer"], *url, "--json"))
    out = cli("groups", "describe", groups["consumer"], *url)
    epoch = described["group_epoch"]
    assert out.splitlines()[0].startswith(
        f"consumer group {groups['consumer']}: Stable (group epoch {epoch}, assignment epoch "
        f"{described['assignment_epoch']}, assignor {described['assignor']}"
    )
    assert out.splitlines()[0].endswith("total lag 10")
    (member,) = described["members"]
    table = rows(out)
    assert table[member["member_id"]][3:] == [str(epoch), "2"] + [
        f"{TOPIC}:0,1",
        f"{TOPIC}:0,1",
    ]


def test_describe_a_share_group_shows_start_offsets_and_members(admin, groups):
    url = ("--admin-url", admin.url)
    described = json.loads(cli("groups", "describe", groups["share"], *url, "--json"))
    assert described["group_type"] == "share"
    out = cli("groups", "describe", groups["share"], *url)
    assert out.splitlines()[0].startswith(f"share group {groups['share']}: Stable (group epoch")
    assert "lag" not in out.splitlines()[0]
    starts = {(o["topic"], o["partition"]): o["start_offset"] for o in described["share_offsets"]}
    assert set(starts) == {(TOPIC, 0), (TOPIC, 1)}
    cells = [[c.strip() for c in line.strip("│").split("│")] for line in out.splitlines()]
    # topic, partition, start offset, end offset, view, in flight
    shown = {(c[0], int(c[1])): c[2] for c in cells if len(c) == 6 and c[0] == TOPIC}
    assert shown == {tp: str(start) for tp, start in starts.items()}
    (member,) = described["members"]
    row = rows(out)[member["member_id"]]
    assert row[3] == str(member["member_epoch"])
    assert row[4:] == ["2", f"{TOPIC}:0,1"]


def test_describe_a_classic_group_keeps_its_protocol_line(admin, groups):
    url = ("--admin-url", admin.url)
    out = cli("groups", "describe", groups["classic"], *url)
    assert out.splitlines()[0].startswith(f"classic group {groups['classic']}: Stable (protocol ")
    described = json.loads(cli("groups", "describe", groups["classic"], *url, "--json"))
    (member,) = described["members"]
    assert rows(out)[member["member_id"]][3:] == ["2", f"{TOPIC}:0,1"]  # no epoch column
