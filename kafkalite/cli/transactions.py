"""`kafkalite transactions`: transactions over the HTTP admin API (admin_api.py), hanging ones
over the Kafka protocol.

    kafkalite transactions list                             ids coordinated by that broker
    kafkalite transactions describe TRANSACTIONAL_ID
    kafkalite transactions abort TRANSACTIONAL_ID           fence and abort its open transaction
    kafkalite transactions abort --topic T --partition P --start-offset O [-b HOST:PORT]
              a hanging transaction (KIP-664, as kafka-transactions.sh): the producer whose
              open transaction starts at O in T-P is found with DescribeProducers and an ABORT
              marker is written with WriteTxnMarkers, over the Kafka protocol

Aborting a hanging transaction needs no admin API: it asks the partition's leader.
"""

from __future__ import annotations

import click

from kafkalite.cli.admin_api import (
    admin_url_option,
    console,
    emit_json,
    fail,
    json_option,
    new_table,
    quote,
    run,
)
from kafkalite.cli.common import Group, bootstrap_option


@click.group("transactions", cls=Group)
def transactions_app() -> None:
    """Transactions: list, describe, abort (admin API; hanging ones over the Kafka protocol)."""


@transactions_app.command("list")
@admin_url_option
@json_option
def transactions_list(admin_url: str, as_json: bool) -> None:
    """Transactional ids coordinated by the broker behind --admin-url."""
    answer = run(admin_url, "GET", "/transactions")
    if as_json:
        emit_json(answer)
        return
    table = new_table("transactional id", "producer id", "state")
    for t in answer:
        table.add_row(t["transactional_id"], str(t["producer_id"]), t["state"])
    console().print(table)


@transactions_app.command("describe")
@click.argument("transactional_id", metavar="TRANSACTIONAL_ID")
@admin_url_option
@json_option
def transactions_describe(transactional_id: str, admin_url: str, as_json: bool) -> None:
    """State, producer id and epoch, timeout, start time and partitions of a transaction."""
    answer = run(admin_url, "GET", f"/transactions/{quote(transactional_id)}")
    if as_json:
        emit_json(answer)
        return
    table = new_table(
        "transactional id",
        "coordinator",
        "state",
        "producer id",
        "epoch",
        "timeout ms",
        "start time",
        "partitions",
    )
    table.add_row(
        answer["transactional_id"],
        str(answer["coordinator"]),
        answer["state"],
        str(answer["producer_id"]),
        str(answer["producer_epoch"]),
        str(answer["timeout_ms"]),
        iso_time(answer["start_time_ms"]),
        ",".join(f"{p['topic']}-{p['partition']}" for p in answer["partitions"]) or "-",
    )
    console().print(table)


def iso_time(ms: int | None) -> str:
    """Milliseconds since the epoch as ISO-8601 UTC (``2026-11-27T13:05:09.123Z``); ``-`` for
    none (-1, as Kafka says "no transaction started")."""
    if ms is None or ms < 0:
        return "-"
    import datetime

    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@transactions_app.command("abort")
@click.argument("transactional_id", metavar="[TRANSACTIONAL_ID]", required=False)
@click.option("--topic", help="a hanging transaction's topic")
@click.option("--partition", type=int, help="a hanging transaction's partition")
@click.option("--start-offset", type=int, help="the offset its open transaction starts at")
@bootstrap_option
@admin_url_option
def transactions_abort(
    transactional_id: str | None,
    topic: str | None,
    partition: int | None,
    start_offset: int | None,
    bootstrap: str,
    admin_url: str,
) -> None:
    """Abort an open transaction by id, or a hanging one by topic, partition, start offset.

    By transactional id, its coordinator fences the producer and aborts (admin API); with
    --topic/--partition/--start-offset the partition's leader writes the ABORT marker
    (KIP-664, as kafka-transactions.sh abort)."""
    hanging = (topic, partition, start_offset)
    if transactional_id is not None and any(v is not None for v in hanging):
        fail("give a transactional id or --topic/--partition/--start-offset, not both", 2)
    if transactional_id is not None:
        run(
            admin_url,
            "POST",
            f"/transactions/{quote(transactional_id)}/abort",
        )
        click.echo(f"aborted the open transaction of {transactional_id}")
        return
    if any(v is None for v in hanging):
        fail("give a transactional id, or --topic, --partition and --start-offset", 2)
    import asyncio

    try:
        pid = asyncio.run(abort_hanging(bootstrap, topic, partition, start_offset))  # type: ignore[arg-type]
    except (OSError, ConnectionError) as e:
        fail(f"cannot reach the broker at {bootstrap}: {e}")
    except HangingAbortError as e:
        fail(str(e))
    click.echo(
        f"aborted the transaction of producer {pid} starting at offset {start_offset} "
        f"of {topic}-{partition}"
    )


class HangingAbortError(Exception):
    pass


async def abort_hanging(bootstrap: str, topic: str, partition: int, start_offset: int) -> int:
    """kafka-transactions.sh abort: DescribeProducers on the partition's leader names the
    producer whose open transaction starts at ``start_offset``; WriteTxnMarkers to that leader
    writes an ABORT marker with its id, epoch and coordinator epoch. Returns the producer id."""
    from kafkalite.client.client import KafkaClient
    from kafkalite.protocol.api import ApiKey
    from kafkalite.protocol.errors import ErrorCode
    from kafkalite.protocol.types import TopicPartition

    client = KafkaClient(bootstrap, client_id="kafkalite-cli")
    await client.start()
    try:
        await client.refresh_metadata([topic])
        leader = client.leader_for(TopicPartition(topic, partition))
        if leader < 0:
            raise HangingAbortError(f"{topic}-{partition} has no leader (or does not exist)")
        described = await client.send(
            ApiKey.DESCRIBE_PRODUCERS,
            {"topics": [{"name": topic, "partition_indexes": [partition]}]},
            node_id=leader,
        )
        answer = described.topics[0].partitions[0]
        if answer.error_code != ErrorCode.NONE:
            raise HangingAbortError(f"DescribeProducers: {ErrorCode(answer.error_code).name}")
        found = [p for p in answer.active_producers if p.current_txn_start_offset == start_offset]
        if not found:
            raise HangingAbortError(
                f"no open transaction starts at offset {start_offset} of {topic}-{partition}"
            )
        producer = found[0]
        written = await client.send(
            ApiKey.WRITE_TXN_MARKERS,
            {
                "markers": [
                    {
                        "producer_id": producer.producer_id,
                        "producer_epoch": producer.producer_epoch,
                        "transaction_result": False,
                        "coordinator_epoch": producer.coordinator_epoch,
                        "topics": [{"name": topic, "partition_indexes": [partition]}],
                    }
                ]
            },
            node_id=leader,
        )
        error = written.markers[0].topics[0].partitions[0].error_code
        if error != ErrorCode.NONE:
            raise HangingAbortError(f"WriteTxnMarkers: {ErrorCode(error).name}")
        return producer.producer_id
    finally:
        await client.close()
