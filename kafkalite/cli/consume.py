"""`kafkalite consume TOPIC`: the records of a topic, one per line (the consumer is
console_consumer.py)."""

from __future__ import annotations

import sys

import typer

from kafkalite.cli.common import BOOTSTRAP_OPTION, err_console, fail, open_client, run


def consume(
    topic: str,
    partition: int = typer.Option(
        None, "--partition", "-p", help="read only this partition (default: every partition)"
    ),
    from_beginning: bool = typer.Option(
        False, "--from-beginning", help="start at the log start (default: at the end)"
    ),
    offset: int = typer.Option(None, "--offset", help="start at this offset (needs --partition)"),
    group: str = typer.Option(
        None, "--group", "-g", help="join this consumer group and commit offsets"
    ),
    max_messages: int = typer.Option(
        None, "--max-messages", "-n", help="exit after this many records"
    ),
    timeout_ms: int = typer.Option(
        None, "--timeout-ms", help="exit when no record arrives for this long"
    ),
    print_key: bool = typer.Option(False, "--print-key", help="print KEY<TAB>VALUE"),
    print_offset: bool = typer.Option(False, "--print-offset", help="print the offset first"),
    print_partition: bool = typer.Option(
        False, "--print-partition", help="print the partition first"
    ),
    bootstrap: str = BOOTSTRAP_OPTION,
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
    err_console.print(f"{count} records consumed from {where}", highlight=False)
