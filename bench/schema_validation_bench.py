"""What schema validation on produce costs (prints numbers; not a test).

One in-process broker (kafkalite.testing), two topics: one with
`confluent.value.schema.validation=true`, one without (the baseline, measured in the same run).
confluent-kafka's producer sends the same Avro-framed records (magic byte, the registered id, a
small body) to each, alternating the topics over `--rounds` rounds; each figure is the best
round. The target: validation costs at most 10% of produce throughput. Also printed: the
validator's own check of a 10,000-record batch, per record: the fast path (one regular
expression over a batch of one layout) and the exact walk it falls back to.

    PYTHONPATH=. .venv/bin/python bench/schema_validation_bench.py [--records 200000]
        [--rounds 3] [--value-bytes 13]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from kafkalite.testing import Broker

SCHEMA = {"type": "record", "name": "Reading", "fields": [{"name": "v", "type": "long"}]}


def produce(bootstrap: str, topic: str, value: bytes, records: int) -> tuple[float, float]:
    """Records per second for `records` records (acks=1, default batching), and the process's
    CPU seconds per record (producer and broker share the process: the difference between
    the topics is the broker's extra work, and CPU time is far less disturbed than wall time
    by other processes on a loaded machine)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": records + 1,
        }
    )
    failed = []
    began = time.perf_counter()
    cpu = time.process_time()
    for _ in range(records):
        producer.produce(topic, value=value, on_delivery=lambda e, m: e and failed.append(e))
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - began
    cpu = time.process_time() - cpu
    if failed:
        raise RuntimeError(f"{len(failed)} records refused: {failed[0]}")
    return records / elapsed, cpu / records


def run(records: int, rounds: int, value_bytes: int = 13) -> dict[str, float]:
    """Best records/s per topic ("plain", "validated"), least CPU seconds per record
    ("plain_cpu", "validated_cpu"), and the seconds the broker spent in the validator per
    validated record ("in_validator", timed around each call: short intervals, so far less
    disturbed by a loaded machine than the throughput)."""
    from kafkalite.schema_registry.validation import SchemaValidator

    spent = [0.0]
    validate = SchemaValidator.validate

    async def timed(self: SchemaValidator, topic: str, data: Any) -> Any:
        began = time.perf_counter()
        try:
            return await validate(self, topic, data)
        finally:
            spent[0] += time.perf_counter() - began

    SchemaValidator.validate = timed  # type: ignore[method-assign]  # the bench's probe
    try:
        best = _run(records, rounds, value_bytes)
    finally:
        SchemaValidator.validate = validate  # type: ignore[method-assign]
    return {**best, "in_validator": spent[0] / (records * rounds)}


def _run(records: int, rounds: int, value_bytes: int) -> dict[str, float]:
    with Broker() as broker:
        client = SchemaRegistryClient({"url": broker.schema_registry_url})
        broker.create_topic("plain")
        broker.create_topic("validated", config={"confluent.value.schema.validation": "true"})
        schema_id = client.register_schema("validated-value", Schema(json.dumps(SCHEMA), "AVRO"))
        value = b"\x00" + schema_id.to_bytes(4, "big") + b"\x02" * max(0, value_bytes - 5)
        best = {"plain": 0.0, "validated": 0.0}
        cpu = {"plain": float("inf"), "validated": float("inf")}
        for _ in range(rounds):
            for topic in ("plain", "validated"):
                rate, per_record = produce(broker.bootstrap_servers, topic, value, records)
                best[topic] = max(best[topic], rate)
                cpu[topic] = min(cpu[topic], per_record)
        return {**best, "plain_cpu": cpu["plain"], "validated_cpu": cpu["validated"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--value-bytes", type=int, default=13)
    args = parser.parse_args()
    best = run(args.records, args.rounds, args.value_bytes)
    cost = 1 - best["validated"] / best["plain"]
    cpu_cost = best["validated_cpu"] / best["plain_cpu"] - 1
    print(
        f"produce, {args.records} records of {args.value_bytes} bytes per round, best of "
        f"{args.rounds}: "
        f"baseline {best['plain']:,.0f} records/s, validated {best['validated']:,.0f} records/s "
        f"(same run): validation costs {cost:.1%} (target <= 10%); CPU per record "
        f"{best['plain_cpu'] * 1e6:.2f} us against {best['validated_cpu'] * 1e6:.2f} us "
        f"validated: {cpu_cost:.1%} more; in the broker's validator "
        f"{best['in_validator'] * 1e6:.2f} us per record "
        f"({best['in_validator'] / best['plain_cpu']:.1%} of the plain topic's CPU per record); "
        f"the validator alone per record: "
        f"fast path {fast_us(args.value_bytes):.2f} us, walk {walk_us(args.value_bytes):.2f} us"
    )


def walk_us(value_bytes: int) -> float:
    """The validator's walk over one 10,000-record batch (best of 5), per record."""
    import timeit

    from kafkalite.protocol.records import Record, build_batch
    from kafkalite.schema_registry.validation import record_prefixes

    value = b"\x00\x00\x00\x00\x01" + b"\x02" * max(0, value_bytes - 5)
    buf = build_batch([Record(value=value) for _ in range(10_000)])
    best = min(timeit.repeat(lambda: set(record_prefixes(buf, "value")), number=10, repeat=5))
    return best / 10 / 10_000 * 1e6


def fast_us(value_bytes: int) -> float:
    """The fast path over one 10,000-record batch of one layout (best of 5), per record."""
    import timeit

    from kafkalite.protocol.records import Record, build_batch
    from kafkalite.schema_registry.validation import uniform_prefixes

    value = b"\x00\x00\x00\x00\x01" + b"\x02" * max(0, value_bytes - 5)
    buf = build_batch([Record(offset_delta=i, value=value) for i in range(10_000)])
    assert uniform_prefixes(buf, "value") is not None
    best = min(timeit.repeat(lambda: uniform_prefixes(buf, "value"), number=10, repeat=5))
    return best / 10 / 10_000 * 1e6


if __name__ == "__main__":
    main()
