"""`kafkalite consume TOPIC`: the records of a topic, one per line (the consumer is
console_consumer.py)."""

from __future__ import annotations

import sys

import click

from kafkalite.cli.common import bootstrap_option, fail, open_client, run


@click.command("consume")
@click.argument("topic")
@click.option(
    "--partition", "-p", type=int, help="read only this partition (default: every partition)"
)
@click.option("--from-beginning", is_flag=True, help="start at the log start (default: at the end)")
@click.option("--offset", type=int, help="start at this offset (needs --partition)")
@click.option("--group", "-g", help="join this consumer group and commit offsets")
@click.option("--max-messages", "-n", type=int, help="exit after this many records")
@click.option("--timeout-ms", type=int, help="exit when no record arrives for this long")
@click.option("--print-key", is_flag=True, help="print KEY<TAB>VALUE")
@click.option("--print-offset", is_flag=True, help="print the offset first")
@click.option("--print-partition", is_flag=True, help="print the partition first")
@bootstrap_option
def consume(
    topic: str,
    partition: int | None,
    from_beginning: bool,
    offset: int | None,
    group: str | None,
    max_messages: int | None,
    timeout_ms: int | None,
    print_key: bool,
    print_offset: bool,
    print_partition: bool,
    bootstrap: str,
) -> None:
    """Print the records of a topic, one per line.

    Every partition is read unless --partition names one. With --group the tool joins that
    consumer group: it starts at the group's committed offsets and commits what it printed."""
    from kafkalite.cli.console_consumer import ConsoleConsumer, ConsumedRecord, ConsumeOptions

    if offset is not None and partition is None:
        fail("--offset needs --partition (offsets are per partition)", 2)
    if offset is not None and group is not None:
        fail("--offset and --group exclude each other: a group starts at its committed offsets", 2)

    def emit(record: ConsumedRecord) -> None:
        fields = []
        if print_partition:
            fields.append(str(record.partition))
        if print_offset:
            fields.append(str(record.offset))
        if print_key:
            fields.append((record.key or b"").decode(errors="replace"))
        fields.append((record.value or b"").decode(errors="replace"))
        sys.stdout.write("\t".join(fields) + "\n")
        sys.stdout.flush()

    options = ConsumeOptions(
        partition=partition,
        from_beginning=from_beginning,
        offset=offset,
        group=group,
        max_messages=max_messages,
        timeout_ms=timeout_ms,
    )

    async def go() -> int:
        client = await open_client(bootstrap)
        try:
            return await ConsoleConsumer(client, topic, options, emit).run()
        finally:
            await client.close()

    count = run(go())
    where = f"{topic}-{partition}" if partition is not None else topic
    click.echo(f"{count} records consumed from {where}", err=True)
