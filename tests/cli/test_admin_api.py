"""`kafkalite cluster` and `kafkalite groups`, the commands over the admin API (cli/cluster.py,
cli/groups.py, cli/admin_api.py), run by typer's CliRunner against a broker subprocess."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kafkalite.cli import app
from tests.admin.conftest import AdminClient, produce

try:
    from confluent_kafka import Consumer, TopicPartition
except ImportError as e:  # pragma: no cover - the test extras are required
    raise RuntimeError("confluent-kafka is required: pip install -e '.[test]'") from e

runner = CliRunner()


def cli(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture(scope="module")
def committed_group(admin: AdminClient, admin_broker) -> str:
    """Group `cli-group` committed offset 4 of `cli-topic`-0, which holds 10 records."""
    assert admin.post("/topics", {"name": "cli-topic", "partitions": 1}).status == 201
    produce(admin_broker.bootstrap, "cli-topic", 10)
    consumer = Consumer({"bootstrap.servers": admin_broker.bootstrap, "group.id": "cli-group"})
    try:
        consumer.commit(offsets=[TopicPartition("cli-topic", 0, 4)], asynchronous=False)
    finally:
        consumer.close()
    return "cli-group"


def test_cluster(admin: AdminClient) -> None:
    expected = admin.get("/cluster").body
    shown = cli("cluster", "--admin-url", admin.url)
    assert f"cluster id: {expected['cluster_id']}" in shown
    assert "controller: broker 0" in shown
    assert json.loads(cli("cluster", "--admin-url", admin.url, "--json")) == expected
    brokers = json.loads(cli("cluster", "brokers", "--admin-url", admin.url, "--json"))
    assert [b["id"] for b in brokers] == [0]
    assert "PLAINTEXT://127.0.0.1" in cli("cluster", "brokers", "--admin-url", admin.url)


def test_cluster_topics_shows_partition_offsets(admin: AdminClient, committed_group) -> None:
    [topic] = json.loads(cli("cluster", "topics", "cli-topic", "--admin-url", admin.url, "--json"))
    assert topic == admin.get("/topics/cli-topic").body
    [p] = topic["partitions"]
    assert (p["high_watermark"], p["log_end_offset"]) == (10, 10)
    every = json.loads(cli("cluster", "topics", "--admin-url", admin.url, "--json"))
    assert "cli-topic" in {t["name"] for t in every}
    table = cli("cluster", "topics", "cli-topic", "--admin-url", admin.url)
    assert "cli-topic" in table and "10" in table
    missing = cli("cluster", "topics", "nope", "--admin-url", admin.url, code=1)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing


def test_cluster_reassign_and_elect(admin: AdminClient) -> None:
    assert admin.post("/topics", {"name": "cli-moved", "partitions": 1}).status == 201
    out = cli("cluster", "reassign", "cli-moved:0=0", "--admin-url", admin.url)
    assert "reassignment of 1 partition(s) submitted" in out
    status = json.loads(cli("cluster", "reassignments", "--admin-url", admin.url, "--json"))
    assert set(status) == {"pending", "ongoing"}
    out = cli("cluster", "elect-leaders", "cli-moved:0", "--admin-url", admin.url)
    assert "preferred leader election requested for 1 partition(s)" in out
    cli("cluster", "reassign", "cli-moved-0=0", "--admin-url", admin.url, code=2)
    bad = cli("cluster", "reassign", "cli-moved:7=0", "--admin-url", admin.url, code=1)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in bad


def test_groups_list_describe_reset_delete(admin: AdminClient, committed_group: str) -> None:
    url = ("--admin-url", admin.url)
    listed = json.loads(cli("groups", "list", *url, "--json"))
    [mine] = [g for g in listed if g["group_id"] == "cli-group"]
    assert (mine["protocol_type"], mine["state"]) == ("", "Empty")
    assert "cli-group" in cli("groups", "list", *url)

    described = json.loads(cli("groups", "describe", "cli-group", *url, "--json"))
    assert described["offsets"] == [
        {
            "topic": "cli-topic",
            "partition": 0,
            "committed_offset": 4,
            "log_start_offset": 0,
            "high_watermark": 10,
            "lag": 6,
            "member_id": None,
        }
    ]
    table = cli("groups", "describe", "cli-group", *url)
    assert "total lag 6" in table and "cli-topic" in table

    dry = json.loads(
        cli("groups", "reset-offsets", "cli-group", "--to", "latest", "--dry-run", *url, "--json")
    )
    assert dry["offsets"] == [{"topic": "cli-topic", "partition": 0, "offset": 10}]
    assert "dry run" in cli(
        "groups", "reset-offsets", "cli-group", "--to", "earliest", "--dry-run", *url
    )
    out = cli(
        "groups",
        "reset-offsets",
        "cli-group",
        "--to",
        "explicit",
        "--offset",
        "cli-topic:0=7",
        *url,
    )
    assert "committed" in out
    assert admin.get("/groups/cli-group").body["offsets"][0]["lag"] == 3
    cli(
        "groups",
        "reset-offsets",
        "cli-group",
        "--to",
        "explicit",
        "--offset",
        "cli-topic:0",
        *url,
        code=2,
    )

    assert "group cli-group deleted" in cli("groups", "delete", "cli-group", *url)
    missing = cli("groups", "describe", "cli-group", *url, code=1)
    assert "GROUP_ID_NOT_FOUND" in missing


def test_unreachable_admin_api(admin_broker) -> None:
    from tests.harness.broker import free_port

    out = cli("groups", "list", "--admin-url", f"http://127.0.0.1:{free_port()}", code=1)
    assert "cannot reach the admin API" in out


def test_admin_url_from_environment(admin: AdminClient, monkeypatch) -> None:
    monkeypatch.setenv("KAFKALITE_ADMIN_URL", admin.url)
    assert json.loads(cli("cluster", "--json"))["controller"]["broker_id"] == 0


def test_group_options_work_before_or_after_a_subcommand(admin: AdminClient, monkeypatch) -> None:
    """`kafkalite cluster --admin-url URL brokers` is what `--help` offers: it was refused (and
    before that silently used the default URL). Both places work; given twice they must agree;
    the environment variable still applies to subcommands."""
    monkeypatch.setenv("KAFKALITE_ADMIN_URL", "http://127.0.0.1:1")  # nothing listens there
    before = json.loads(cli("cluster", "--admin-url", admin.url, "--json", "brokers"))
    assert [b["id"] for b in before] == [0]
    after = json.loads(cli("cluster", "brokers", "--admin-url", admin.url, "--json"))
    assert after == before
    mixed = cli("cluster", "--admin-url", admin.url, "topics", "--json")
    assert isinstance(json.loads(mixed), list)
    same = cli("cluster", "--admin-url", admin.url, "brokers", "--admin-url", admin.url)
    assert "PLAINTEXT://127.0.0.1" in same
    assert "given twice" in cli(
        "cluster", "--admin-url", admin.url, "brokers", "--admin-url", "http://10.0.0.1:9", code=2
    )
    monkeypatch.setenv("KAFKALITE_ADMIN_URL", admin.url)
    assert [b["id"] for b in json.loads(cli("cluster", "brokers", "--json"))] == [0]


@pytest.mark.parametrize(
    "url",
    ["localhost:9644", "http://127.0.0.1:abc", "http://127.0.0.1:99999", "ftp://h:1", "http://"],
)
def test_admin_url_that_is_not_a_url_is_one_line_naming_the_option(url: str) -> None:
    result = runner.invoke(app, ["groups", "list", "--admin-url", url])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "--admin-url" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
