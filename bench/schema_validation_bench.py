"""What schema validation on produce costs the broker (prints numbers; not a test).

One broker as a subprocess (`kafkalite.testing.Broker(subprocess=True)`: client and broker on
separate processes, as in a deployment), two topics: `validated`
(`confluent.value.schema.validation=true`) and `plain` (the baseline, measured in the same run).
confluent-kafka's producer, in this process, sends the same records to each, the topics taking
turns over `--rounds` rounds (which goes first alternates). Per topic: the broker process's CPU
per record (every thread's schedstat in /proc, ns resolution: far less disturbed by a loaded
machine than wall time) and the throughput (records acknowledged per second). The target: the
validated topic costs at most 10% more than the plain one.

Workloads (`--workload`, default both):
- `mixed`, the realistic case: Avro-framed values of the record
  `{"v": long, "note": string}` with a note of 10-300 bytes, a key on two records in three
  (4-40 bytes), a header on one in ten;
- `uniform`: one 13-byte framed value, no key, no header (what a fixed-size schema sends).

Also printed, per tree: the CPU the broker spent inside `SchemaValidator.validate`, per
validated record ("in the broker's validator": a `sitecustomize` the bench puts on the
brokers' path wraps the method and times each call with the loop thread's CPU clock), beside
the plain topic's whole CPU per record, the figure a loaded machine disturbs least.

Also printed: the validator alone (over one 10,000-record batch of the workload, a stub
registry that knows the id, as the produce path calls it: `known_to_pass` where the tree has
it, then `SchemaValidator.validate` on one event loop when that says no) per record, best of 5. `--baseline-src DIR`
(e.g. `git archive` of the commit before) runs a second broker from DIR's kafkalite beside this
tree's, the four (broker, topic) pairs taking turns in each round, and times DIR's validator
(its validation.py loaded beside this tree's) in turns with this tree's in this process:
before and after in one run. `--validator-only` prints the validator-alone figures only. This
tree's validator is timed twice: on its C walk (the optional extension, when built) and as
KAFKALITE_NO_NATIVE=1 makes it (the regular expressions and the Python walk); this tree's
broker gets the bench's KAFKALITE_NO_NATIVE when it is set.

`--callgrind` prints instead a count no load disturbs: callgrind's instructions per Produce
request (one batch of `--batch-records` records of the workload, acks=1) on the plain and the
validated topic of an in-process broker, the requests handed to its dispatcher on its loop
(decoding, validation, append, response), for this tree and DIR's: what validation adds per
request and per record, as a share of the plain request's instructions (a share of
instructions, not of time: a cache miss costs no instruction).

    PYTHONPATH=. .venv/bin/python bench/schema_validation_bench.py [--records 100000]
        [--rounds 5] [--workload mixed|uniform|both] [--baseline-src DIR] [--validator-only]
        [--callgrind [--batch-records 2500]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
import timeit
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

SCHEMA = {
    "type": "record",
    "name": "Reading",
    "fields": [{"name": "v", "type": "long"}, {"name": "note", "type": "string"}],
}
POOL = 4096
"""Distinct records per workload, produced round-robin."""

Item = tuple[bytes | None, bytes, list[tuple[str, bytes]] | None]


def _zigzag_varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def workload(kind: str, schema_id: int, seed: int = 26) -> list[Item]:
    """`POOL` (key, value, headers) triples of the workload, values framed with `schema_id`."""
    rng = random.Random(seed)
    frame = b"\x00" + schema_id.to_bytes(4, "big")
    if kind == "uniform":
        return [(None, frame + b"\x02" * 8, None)] * POOL
    items: list[Item] = []
    for _ in range(POOL):
        note = bytes(
            rng.choice(b"abcdefghijklmnopqrstuvwxyz ") for _ in range(rng.randint(10, 300))
        )
        value = frame + _zigzag_varint(rng.randint(0, 2**40)) + _zigzag_varint(len(note)) + note
        key = None if rng.random() < 1 / 3 else rng.randbytes(rng.randint(4, 40))
        headers = [("trace-id", rng.randbytes(16))] if rng.random() < 0.1 else None
        items.append((key, value, headers))
    return items


def workload_batch(kind: str, schema_id: int, records: int) -> bytes:
    """One batch of `records` records of the workload, its items in turn."""
    from kafkalite.protocol.records import Header, Record, build_batch

    items = workload(kind, schema_id)
    return build_batch(
        Record(
            offset_delta=i,
            timestamp_delta=i // 50,
            key=key,
            value=value,
            headers=tuple(Header(k, v) for k, v in headers or ()),
        )
        for i, (key, value, headers) in enumerate(items[i % len(items)] for i in range(records))
    )


def cpu_seconds(pid: int) -> dict[str, float]:
    """CPU time of each thread of `pid`, ns resolution (/proc/<pid>/task/*/schedstat)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[task.name] = int((task / "schedstat").read_text().split()[0]) / 1e9
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that just ended
    return out


def cpu_since(before: dict[str, float], after: dict[str, float]) -> float:
    """The CPU the threads spent between two readings: a thread gone by the second (a pattern
    compiled on a thread, say) is left out rather than subtracted, a new one counted whole."""
    return sum(seconds - before.get(tid, 0.0) for tid, seconds in after.items())


HOOK = """
import os, threading, time

def _install():
    from kafkalite.schema_registry import validation

    original = validation.SchemaValidator.validate
    quick = getattr(validation.SchemaValidator, "known_to_pass", None)
    totals = [0, 0]

    async def validate(self, topic, records):
        began = time.thread_time_ns()
        try:
            return await original(self, topic, records)
        finally:
            totals[0] += quick is None  # else counted by the check before it
            totals[1] += time.thread_time_ns() - began

    validation.SchemaValidator.validate = validate
    if quick is not None:  # the produce path's synchronous check, before validate

        def known_to_pass(self, topic, records):
            began = time.thread_time_ns()
            try:
                return quick(self, topic, records)
            finally:
                totals[0] += 1
                totals[1] += time.thread_time_ns() - began

        validation.SchemaValidator.known_to_pass = known_to_pass
    path = os.environ["SCHEMA_VALIDATION_BENCH_TIMES"]

    def write():
        said = None
        while True:
            now = f"{totals[0]} {totals[1]}"
            if now != said:
                with open(path + ".tmp", "w") as f:
                    f.write(now)
                os.replace(path + ".tmp", path)
                said = now
            time.sleep(0.02)

    threading.Thread(target=write, daemon=True).start()

if os.environ.get("SCHEMA_VALIDATION_BENCH_TIMES"):
    _install()
"""
"""The brokers' sitecustomize: the calls of SchemaValidator.validate and the loop thread's CPU
they took (ns), written to $SCHEMA_VALIDATION_BENCH_TIMES when they change."""


def validator_ns(path: Path) -> tuple[int, int]:
    """(calls, CPU ns) of the broker's validator so far, once its writer caught up."""
    said = None
    for _ in range(50):
        time.sleep(0.05)
        now = path.read_text() if path.exists() else "0 0"
        if now == said:
            break
        said = now
    calls, ns = (said or "0 0").split()
    return int(calls), int(ns)


def produce(bootstrap: str, topic: str, items: list[Item], records: int, pid: int) -> tuple:
    """(records/s, broker CPU seconds per record) for `records` records (acks=1, 5 ms linger,
    up to 10,000 records a batch)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": records + 1,
            "queue.buffering.max.kbytes": 2**21,
        }
    )
    failed: list[Any] = []
    producer.list_topics(topic, timeout=30)  # connected before the clock starts
    began = time.perf_counter()
    cpu = cpu_seconds(pid)
    n = len(items)
    for i in range(records):
        key, value, headers = items[i % n]
        producer.produce(
            topic,
            value=value,
            key=key,
            headers=headers,
            on_delivery=lambda e, m: e and failed.append(e),
        )
        producer.poll(0)
    producer.flush(300)
    cpu = cpu_since(cpu, cpu_seconds(pid))
    elapsed = time.perf_counter() - began
    if failed:
        raise RuntimeError(f"{len(failed)} records refused on {topic}: {failed[0]}")
    return records / elapsed, cpu / records


def run(
    records: int,
    rounds: int,
    kind: str = "mixed",
    baseline_src: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Per (tree, topic), e.g. "this/plain", "baseline/validated": best records/s ("rate"),
    broker CPU seconds per record per round ("cpu": a list, least first); per validated topic
    also the CPU seconds per record inside the validator per round ("in_validator")."""
    import tempfile

    import kafkalite
    from kafkalite.testing import Broker

    hook = Path(tempfile.mkdtemp(prefix="schema-validation-bench-"))
    (hook / "sitecustomize.py").write_text(HOOK)
    here = str(Path(kafkalite.__file__).resolve().parent.parent)
    srcs = {"this": here}
    if baseline_src:
        srcs["baseline"] = str(Path(baseline_src).resolve())
    times = {t: hook / f"{t}.times" for t in srcs}
    trees = {}
    for t, src in srcs.items():
        env = {
            "PYTHONPATH": os.pathsep.join([str(hook), src]),
            "SCHEMA_VALIDATION_BENCH_TIMES": str(times[t]),
        }
        if t == "this" and os.environ.get("KAFKALITE_NO_NATIVE"):
            env["KAFKALITE_NO_NATIVE"] = os.environ["KAFKALITE_NO_NATIVE"]
        trees[t] = Broker(subprocess=True, config={"log.level": "WARNING"}, env=env)
    for broker in trees.values():
        broker.start()
    try:
        pools = {}
        for name, broker in trees.items():
            broker.create_topic("plain")
            broker.create_topic("validated", config={"confluent.value.schema.validation": "true"})
            client = SchemaRegistryClient({"url": broker.schema_registry_url})
            schema_id = client.register_schema(
                "validated-value", Schema(json.dumps(SCHEMA), "AVRO")
            )
            pools[name] = workload(kind, schema_id)
        out: dict[str, dict[str, Any]] = {
            f"{t}/{topic}": {"rate": 0.0, "cpu": [], "in_validator": []}
            for t in trees
            for topic in ("plain", "validated")
        }
        for round_ in range(rounds):
            pairs = [(t, topic) for topic in ("plain", "validated") for t in trees]
            if round_ % 2:
                pairs.reverse()
            for t, topic in pairs:
                broker = trees[t]
                assert broker.process is not None
                calls, inside = validator_ns(times[t])
                rate, cpu = produce(
                    broker.bootstrap_servers, topic, pools[t], records, broker.process.pid
                )
                calls_after, inside_after = validator_ns(times[t])
                row = out[f"{t}/{topic}"]
                row["rate"] = max(row["rate"], rate)
                row["cpu"].append(cpu)
                row["in_validator"].append((inside_after - inside) / 1e9 / records)
                row["calls"] = row.get("calls", 0) + calls_after - calls
        for row in out.values():
            row["cpu"].sort()
            row["in_validator"].sort()
        return out
    finally:
        for broker in trees.values():
            broker.close()
        import shutil

        shutil.rmtree(hook, ignore_errors=True)


# ------------------------------------------------------------------ the validator alone


def validator_us(
    kind: str, batch_records: int = 10_000, src: str | None = None, native: bool = True
) -> float:
    """The validator as the produce path calls it (`known_to_pass`, where the tree has it,
    then `SchemaValidator.validate` on one event loop) over one batch of the workload (id 1,
    registered under `t-value`), per record in µs, best of 5: this tree's validator, or with `src` the one in
    DIR/kafkalite/schema_registry/validation.py (loaded beside it, on this tree's protocol
    modules, with DIR's build of the C walk when it has one), so that both are timed in one
    process, in turns; `native` False: this tree's without its C walk."""
    from kafkalite.schema_registry import validation

    module: Any = validation
    if src is not None:
        import importlib.util

        path = Path(src) / "kafkalite" / "schema_registry" / "validation.py"
        spec = importlib.util.spec_from_file_location("baseline_validation", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        # DIR's own C walk (its build), not this tree's, which its import found
        built = sorted((Path(src) / "kafkalite" / "schema_registry").glob("_walk.*.so"))
        if built and getattr(module, "_walk", None) is not None:
            walk_spec = importlib.util.spec_from_file_location(
                "kafkalite.schema_registry._walk", built[0]
            )
            assert walk_spec is not None and walk_spec.loader is not None
            module._walk = importlib.util.module_from_spec(walk_spec)
            walk_spec.loader.exec_module(module._walk)
    if hasattr(module, "mixed_pattern"):  # the produce path compiles it on a thread
        module.mixed_pattern("value")
    buf = memoryview(bytearray(workload_batch(kind, 1, batch_records)))
    view = SimpleNamespace(
        schemas={1: object()},
        subjects={"t-value": {1: SimpleNamespace(id=1, deleted=False)}},
        next_offset=0,
    )

    async def started() -> None:
        return None

    registry = SimpleNamespace(store=SimpleNamespace(view=view, start=started))
    config = SimpleNamespace(
        confluent_value_schema_validation=True,
        confluent_key_schema_validation=False,
        confluent_value_subject_name_strategy="io.confluent.kafka.serializers.subject."
        "TopicNameStrategy",
    )
    validator = module.SchemaValidator(registry, lambda topic: config)
    quick = getattr(validator, "known_to_pass", None)
    walk = getattr(module, "_walk", None)
    if not native:
        module._walk = None
    loop = asyncio.new_event_loop()

    def once() -> None:
        # as the produce path calls it: the synchronous check first, where there is one
        if quick is not None and quick("t", buf):
            return
        errors = loop.run_until_complete(validator.validate("t", buf))
        assert not errors, errors

    try:
        once()
        best = min(timeit.repeat(once, number=20, repeat=5)) / 20
    finally:
        loop.close()
        if walk is not None:
            module._walk = walk
    return best / batch_records * 1e6


def validator_pair(kind: str, src: str | None, turns: int = 3) -> tuple[float, float, float | None]:
    """(this tree's, this tree's without its C walk, DIR's or None) validator per record, the
    best of `turns` turns each."""
    mine, python, theirs = [], [], []
    for _ in range(turns):
        mine.append(validator_us(kind))
        python.append(validator_us(kind, native=False))
        if src is not None:
            theirs.append(validator_us(kind, src=src))
    return min(mine), min(python), (min(theirs) if theirs else None)


# ------------------------------------------------------- instructions (callgrind), in-process

CALLGRIND_REQUESTS = 20
"""Produce requests per topic in the counted interval."""


def callgrind_inner(kind: str, batch_records: int) -> None:
    """Run under callgrind by `callgrind_counts`: an in-process broker, a plain and a validated
    topic; per topic a few warm-up Produce requests (one batch of `batch_records` records of
    the workload, acks=1) through the broker's dispatcher on its loop, then
    `CALLGRIND_REQUESTS` more between two calls of os.getppid(), which callgrind is told to
    dump before: the dump between them holds what those requests cost (the loop thread's work,
    the other threads idle or nearly)."""
    import datetime
    import inspect

    from kio.schema.produce.v9.request import (
        PartitionProduceData,
        ProduceRequest,
        TopicProduceData,
    )

    from kafkalite.network.connection import ConnectionInfo
    from kafkalite.protocol import frames
    from kafkalite.protocol.api import ApiKey
    from kafkalite.testing import Broker

    slow = 1800.0  # everything runs some 50 times slower under callgrind
    broker = Broker(config={"log.level": "WARNING"}).start(timeout=slow)
    try:
        broker.create_topic("plain", timeout=slow)
        broker.create_topic(
            "validated", config={"confluent.value.schema.validation": "true"}, timeout=slow
        )
        client = SchemaRegistryClient({"url": broker.schema_registry_url, "timeout": slow})
        schema_id = client.register_schema("validated-value", Schema(json.dumps(SCHEMA), "AVRO"))
        batch = workload_batch(kind, schema_id, batch_records)
        server: Any = broker.server
        dispatcher = server.dispatcher
        connection = ConnectionInfo("127.0.0.1", 1, "PLAINTEXT")

        def frame(topic: str) -> bytearray:
            request = ProduceRequest(
                transactional_id=None,
                acks=1,
                timeout=datetime.timedelta(seconds=30),
                topic_data=(
                    TopicProduceData(
                        name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)
                    ),
                ),
            )
            return bytearray(frames.encode_request(ApiKey.PRODUCE, 9, 1, "bench", request)[4:])

        async def produce(frames_: list[bytearray], count: bool) -> None:
            if count:
                os.getppid()  # callgrind dumps: what came before
            result: Any = None
            for f in frames_:
                result = dispatcher.dispatch(f, connection)
                if inspect.isawaitable(result):
                    result = await result
            if count:
                os.getppid()  # callgrind dumps: these requests
            encoded = b"".join(bytes(p) for p in result) if isinstance(result, list) else result
            _, response = frames.decode_response(ApiKey.PRODUCE, 9, bytes(encoded)[4:])
            answer = response.responses[0].partition_responses[0]
            assert answer.error_code == 0, answer

        thread: Any = broker._thread
        for topic in ("plain", "validated"):
            thread.run(produce([frame(topic) for _ in range(3)], False), 600)
            thread.run(produce([frame(topic) for _ in range(CALLGRIND_REQUESTS)], True), 600)
        assert broker.server is not None
    finally:
        broker.close()


def callgrind_counts(kind: str, src: str, batch_records: int) -> dict[str, float]:
    """Instructions (callgrind's Ir, load-independent) per produce request on the plain and
    the validated topic, from `callgrind_inner` run under valgrind with `src`'s kafkalite."""
    import subprocess
    import sys
    import tempfile

    out = Path(tempfile.mkdtemp(prefix="schema-validation-callgrind-"))
    env = {**os.environ, "PYTHONPATH": src}
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--dump-before=getppid",
            f"--callgrind-out-file={out}/cg.out",
            sys.executable,
            __file__,
            "--callgrind-inner",
            kind,
            "--batch-records",
            str(batch_records),
        ],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    totals = []
    for dump in sorted(out.glob("cg.out.*"), key=lambda p: int(p.name.rsplit(".", 1)[1])):
        for line in dump.read_text().splitlines():
            if line.startswith("totals:") or line.startswith("summary:"):
                totals.append(int(line.split()[1]))
                break
    # dumps: before plain, plain's requests, before validated, validated's requests
    plain, validated = totals[1], totals[3]
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    return {"plain": plain / CALLGRIND_REQUESTS, "validated": validated / CALLGRIND_REQUESTS}


def walk_in_use() -> str:
    from kafkalite.schema_registry import validation

    if validation._walk is not None:
        return "the C walk"
    return "no C walk (not built, or KAFKALITE_NO_NATIVE set): the patterns and the Python walk"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workload", choices=["mixed", "uniform", "both"], default="both")
    parser.add_argument("--baseline-src", help="also a broker and the validator of this tree")
    parser.add_argument(
        "--validator-only", action="store_true", help="only the validator alone, no broker"
    )
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="only the instructions per produce request, in-process under callgrind",
    )
    parser.add_argument("--batch-records", type=int, default=2500, help="for --callgrind")
    parser.add_argument("--callgrind-inner", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.callgrind_inner:
        callgrind_inner(args.callgrind_inner, args.batch_records)
        return
    kinds = ["mixed", "uniform"] if args.workload == "both" else [args.workload]
    print(f"load average at start: {os.getloadavg()}; this tree's validator: {walk_in_use()}")
    for kind in kinds:
        if args.callgrind:
            import kafkalite

            trees = {"this": str(Path(kafkalite.__file__).resolve().parent.parent)}
            if args.baseline_src:
                trees["baseline"] = str(Path(args.baseline_src).resolve())
            for tree, src in trees.items():
                counts = callgrind_counts(kind, src, args.batch_records)
                added = counts["validated"] - counts["plain"]
                print(
                    f"{kind}, {tree + ' tree':13} instructions per produce request of "
                    f"{args.batch_records:,} records (callgrind, in-process): plain "
                    f"{counts['plain']:,.0f}, validated {counts['validated']:,.0f}: validation "
                    f"adds {added:+,.0f} ({added / counts['plain']:+.1%}; "
                    f"{added / args.batch_records:+.1f} per record)"
                )
            continue
        if args.validator_only:
            mine, python, theirs = validator_pair(kind, args.baseline_src, turns=5)
            baseline = "" if theirs is None else f", baseline tree {theirs:.4f}"
            print(
                f"{kind}: the validator alone {mine:.4f} us per record (without the C walk "
                f"{python:.3f}){baseline}"
            )
            continue
        out = run(args.records, args.rounds, kind, args.baseline_src)
        print(
            f"\n{kind}: {args.records:,} records per round and topic, {args.rounds} rounds, "
            f"broker in a subprocess (load average now {os.getloadavg()[0]:.1f})"
        )
        for tree in ("this", "baseline"):
            if f"{tree}/plain" not in out:
                continue
            plain, validated = out[f"{tree}/plain"], out[f"{tree}/validated"]
            p_min, v_min = plain["cpu"][0], validated["cpu"][0]
            p_med, v_med = statistics.median(plain["cpu"]), statistics.median(validated["cpu"])
            print(
                f"  {tree + ' tree':13} broker CPU per record: plain {p_min * 1e6:.3f} us "
                f"(median {p_med * 1e6:.3f}), validated {v_min * 1e6:.3f} us "
                f"(median {v_med * 1e6:.3f}): validation costs {v_min / p_min - 1:+.1%} "
                f"(medians {v_med / p_med - 1:+.1%}; target <= 10%); throughput plain "
                f"{plain['rate']:,.0f} records/s, validated {validated['rate']:,.0f} "
                f"({validated['rate'] / plain['rate'] - 1:+.1%})"
            )
            inside = validated["in_validator"]
            print(
                f"  {'':13} in the broker's validator: {statistics.median(inside) * 1e6:.4f} us "
                f"per record (median of the rounds; least {inside[0] * 1e6:.4f}, most "
                f"{inside[-1] * 1e6:.4f}): {statistics.median(inside) / p_min:.1%} of the plain "
                f"topic's least broker CPU per record, {statistics.median(inside) / p_med:.1%} "
                f"of its median; {args.records * len(inside) / max(validated['calls'], 1):,.0f} "
                "records per call"
            )
        mine, python, theirs = validator_pair(kind, args.baseline_src)
        line = (
            f"  the validator alone, 10,000-record batch: {mine:.4f} us per record (without "
            f"the C walk {python:.3f})"
        )
        if theirs is not None:
            line += f" (baseline tree {theirs:.4f} us, in turns in this process)"
        print(line)


if __name__ == "__main__":
    main()
