"""`kafkalite produce TOPIC`: each line of stdin as one record (the producer is
console_producer.py)."""

from __future__ import annotations

import sys
from typing import Any

import click

from kafkalite.cli.common import bootstrap_option, open_client, run


def checked_acks(ctx: Any, param: Any, value: str) -> int:
    """``--acks`` as Kafka's producer takes it: all, -1, 0 or 1."""
    from kafkalite.client.acks import normalize_acks

    try:
        return normalize_acks(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@click.command("produce")
@click.argument("topic")
@click.option(
    "--partition",
    "-p",
    type=int,
    help="send every record here (default: Kafka's partitioner)",
)
@click.option("--key-separator", "-K", metavar="SEP", help="split each line into key and value")
@click.option(
    "--acks",
    default="all",
    show_default=True,
    metavar="all|-1|0|1",
    callback=checked_acks,
    help="acknowledgements the leader waits for",
)
@click.option(
    "--batch-size", type=int, default=500, show_default=True, help="records per produce request"
)
@bootstrap_option
def produce(
    topic: str,
    partition: int | None,
    key_separator: str | None,
    acks: int,
    batch_size: int,
    bootstrap: str,
) -> None:
    """Send each line of stdin as one record.

    Keyed records go to Kafka's murmur2 partition of their key (the partition Kafka's and
    librdkafka's default partitioners choose); unkeyed ones fill one partition per batch in
    turn. A missing topic is created if the broker creates topics on first use."""
    import asyncio
    import threading

    from kafkalite.cli.console_producer import ConsoleProducer, partitions_of

    separator = key_separator.encode() if key_separator is not None else None

    def record(line: bytes) -> tuple[bytes | None, bytes]:
        if separator is not None and separator in line:
            key, _, value = line.partition(separator)
            return key, value
        return None, line

    async def go() -> ConsoleProducer:
        # stdin is read (as bytes: values pass through undecoded) by a thread, and whatever
        # has arrived is sent at once, up to --batch-size records a request: piped bursts are
        # batched, and a line typed or tailed in is sent without waiting for more.
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[bytes | None] = asyncio.Queue()

        def read_stdin() -> None:
            for raw in sys.stdin.buffer:
                loop.call_soon_threadsafe(lines.put_nowait, raw.rstrip(b"\r\n"))
            loop.call_soon_threadsafe(lines.put_nowait, None)

        client = await open_client(bootstrap)
        try:
            count = await partitions_of(client, topic, create=True)
            producer = ConsoleProducer(client, topic, count, partition=partition, acks=acks)
            threading.Thread(target=read_stdin, name="stdin", daemon=True).start()
            done = False
            while not done:
                line = await lines.get()
                if line is None:
                    break
                batch = [record(line)]
                while len(batch) < batch_size and not lines.empty():
                    more = lines.get_nowait()
                    if more is None:
                        done = True
                        break
                    batch.append(record(more))
                await producer.send(batch)
        finally:
            await client.close()
        return producer

    producer = run(go())
    sent = sum(producer.sent_per_partition.values())
    where = ", ".join(f"{topic}-{p}: {n}" for p, n in sorted(producer.sent_per_partition.items()))
    click.echo(f"{sent} records sent" + (f" ({where})" if where else ""), err=True)
