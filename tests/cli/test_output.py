"""How the commands print (cli/common.py, cli/transactions.py, cli/cluster.py): whole error
names in tables, ISO-8601 times, an error's name once, an empty list as a sentence. Pure or
through click's CliRunner with the admin API's answer given, no broker."""

import io

import pytest
from click.testing import CliRunner
from rich.console import Console

from kafkalite.cli import app
from kafkalite.cli.common import error_text, new_table, without_error_name
from kafkalite.cli.transactions import iso_time


def test_a_table_in_a_narrow_terminal_folds_an_error_name_instead_of_cutting_it():
    table = new_table("topic", "partition", "error")
    table.add_row("a-rather-long-topic-name", "0", "UNKNOWN_TOPIC_OR_PARTITION")
    out = io.StringIO()
    Console(file=out, width=30).print(table)
    text = out.getvalue()
    assert "…" not in text
    cells = "".join(line.split("│")[3].strip() for line in text.splitlines() if "│" in line)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in cells


@pytest.mark.parametrize(
    "ms, expected",
    [
        (1_764_248_709_123, "2025-11-27T13:05:09.123Z"),
        (0, "1970-01-01T00:00:00.000Z"),
        (-1, "-"),
        (None, "-"),
    ],
)
def test_times_are_iso_8601_utc(ms, expected):
    assert iso_time(ms) == expected


@pytest.mark.parametrize(
    "message",
    [
        "[Error 36] TOPIC_ALREADY_EXISTS: Topic 't' already exists.",
        "TOPIC_ALREADY_EXISTS: Topic 't' already exists.",
        "Topic 't' already exists.",
    ],
)
def test_an_error_names_its_code_once(message):
    text = error_text(36, message)
    assert text == "TOPIC_ALREADY_EXISTS: Topic 't' already exists."


def test_an_error_without_a_message_gets_kafkas():
    assert without_error_name("[Error 36] TOPIC_ALREADY_EXISTS", "TOPIC_ALREADY_EXISTS") is None
    assert error_text(36, None).startswith("TOPIC_ALREADY_EXISTS: ")
    assert error_text(3, None, "t") == "UNKNOWN_TOPIC_OR_PARTITION: topic 't' does not exist"


def answering(monkeypatch, module: str, answer) -> None:
    import importlib

    monkeypatch.setattr(importlib.import_module(module), "run", lambda *a, **k: answer)


def test_transactions_describe_prints_the_start_time_as_iso_8601(monkeypatch):
    answering(
        monkeypatch,
        "kafkalite.cli.transactions",
        {
            "transactional_id": "tx",
            "coordinator": 0,
            "state": "Ongoing",
            "producer_id": 7,
            "producer_epoch": 0,
            "timeout_ms": 60000,
            "start_time_ms": 1_764_248_709_123,
            "partitions": [{"topic": "t", "partition": 0}],
        },
    )
    result = CliRunner().invoke(app, ["transactions", "describe", "tx"])
    assert result.exit_code == 0, result.output
    assert "2025-11-27T13:05:09.123Z" in result.output
    assert "1764248709123" not in result.output


def test_no_reassignment_is_a_sentence_not_an_empty_table(monkeypatch):
    answering(monkeypatch, "kafkalite.cli.cluster", {"pending": [], "ongoing": []})
    result = CliRunner().invoke(app, ["cluster", "reassignments"])
    assert result.exit_code == 0, result.output
    assert result.output == "No partition reassignment is pending or in progress.\n"


def test_cluster_topics_exclude_internal(monkeypatch):
    def topic(name, internal):
        partition = {
            "partition": 0, "leader": 0, "leader_epoch": 0, "replicas": [0], "isr": [0],
            "log_start_offset": 0, "high_watermark": 0, "log_end_offset": 0, "size_bytes": 0,
        }  # fmt: skip
        return {"name": name, "internal": internal, "partitions": [partition]}

    topics = {"__consumer_offsets": topic("__consumer_offsets", True), "t": topic("t", False)}

    def run(url, method, path, body=None):
        if path == "/topics":
            return [{"name": n, "internal": t["internal"]} for n, t in topics.items()]
        return topics[path.rsplit("/", 1)[1]]

    monkeypatch.setattr("kafkalite.cli.cluster.run", run)
    every = CliRunner().invoke(app, ["cluster", "topics"]).output
    # user topics first: an operator reads them without scrolling past 50 internal partitions
    assert every.index("│ t ") < every.index("__consumer_offsets")
    user = CliRunner().invoke(app, ["cluster", "topics", "--exclude-internal"]).output
    assert "__consumer_offsets" not in user and "│ t " in user


@pytest.mark.parametrize(
    "text, ms",
    [
        ("1764248709123", 1_764_248_709_123),
        ("2025-11-27T13:05:09.123Z", 1_764_248_709_123),
        ("2025-11-27T13:05:09.123", 1_764_248_709_123),
        ("2025-11-27T14:05:09.123+01:00", 1_764_248_709_123),
    ],
)
def test_a_reset_timestamp_is_iso_8601_or_epoch_ms(text, ms):
    from kafkalite.cli.groups import epoch_ms

    assert epoch_ms(text) == ms


def test_a_bad_reset_timestamp_is_a_usage_error(monkeypatch):
    answering(monkeypatch, "kafkalite.cli.groups", {"offsets": [], "dry_run": True})
    result = CliRunner().invoke(
        app, ["groups", "reset-offsets", "g", "--to", "timestamp", "--timestamp", "yesterday"]
    )
    assert result.exit_code == 2 and "--timestamp" in result.output


def test_an_assigned_partition_never_committed_shows_a_dash(monkeypatch):
    answering(
        monkeypatch,
        "kafkalite.cli.groups",
        {
            "group_id": "g",
            "state": "Stable",
            "protocol": "range",
            "coordinator": 0,
            "total_lag": 5,
            "members": [
                {
                    "client_id": "c",
                    "member_id": "m-1",
                    "client_host": "/127.0.0.1",
                    "assignment": [{"topic": "t", "partitions": [0]}],
                }
            ],
            "offsets": [
                {
                    "topic": "t",
                    "partition": 0,
                    "committed_offset": None,
                    "log_start_offset": 0,
                    "high_watermark": 5,
                    "lag": 5,
                    "member_id": "m-1",
                }
            ],
        },
    )
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["groups", "describe", "g"])
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.output.splitlines() if " 0 " in line and "m-1" in line]
    assert "None" not in row and " - " in row, row
