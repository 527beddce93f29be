"""Metadata answers of many partitions, in-process (prints JSON; not a test): what a broker's
loop spends answering a client (or a benchmark's poll) that asks for every partition.

One MetadataCache is filled by an UpdateMetadata (3 live brokers, RF 3, leaders spread) and a
dispatcher answers Metadata requests for all topics, frame in, frame out, as the network layer
calls it. Two shapes: one topic of ``--partitions`` partitions, and ``--partitions`` topics of
one partition. Printed per shape and request version: the wall time and CPU of one answer
(median and worst of ``--answers``), the first answer (nothing encoded yet), and the first
answer after an UpdateMetadata re-led a third of the partitions (a broker failed) and after
one restated every partition unchanged (a new controller's full UpdateMetadata).
``--baseline-src DIR`` runs the same in a child on another tree's kafkalite (a ``git archive``
of the base commit) right after, for a comparison in the same run; ``--repeats`` alternates
the two (and which goes first).

    git archive 5eedc91 | tar -x -C /tmp/base_meta
    PYTHONPATH=. .venv/bin/python bench/metadata_bench.py --partitions 10000 \\
        --baseline-src /tmp/base_meta --repeats 2
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any


def _update(controller_epoch: int, topics: dict, leader_shift: int = 0):
    from kafkalite.apis.base import build
    from kafkalite.protocol.api import ApiKey, request_class

    return build(
        request_class(ApiKey.UPDATE_METADATA, 7),
        {
            "controller_id": 1,
            "controller_epoch": controller_epoch,
            "broker_epoch": -1,
            "topic_states": [
                {
                    "topic_name": name,
                    "topic_id": topic_id,
                    "partition_states": [
                        {
                            "topic_name": name,
                            "partition_index": p,
                            "controller_epoch": controller_epoch,
                            "leader": leader,
                            "leader_epoch": epoch,
                            "isr": isr,
                            "zk_version": 0,
                            "replicas": (1, 2, 3),
                            "offline_replicas": (),
                        }
                        for p, leader, epoch, isr in partitions
                    ],
                }
                for name, (topic_id, partitions) in topics.items()
            ],
            "live_brokers": [
                {
                    "id": i,
                    "endpoints": [
                        {"port": 9090 + i, "host": f"broker-{i}", "listener": "PLAINTEXT"}
                    ],
                    "rack": None,
                }
                for i in (1, 2, 3)
            ],
        },
    )


def _shape(name: str, partitions: int) -> dict:
    """topic -> (id, [(partition, leader, epoch, isr)])."""
    if name == "one_topic":
        states = [(p, (1, 2, 3)[p % 3], 0, (1, 2, 3)) for p in range(partitions)]
        return {"scale": (uuid.UUID(int=1), states)}
    return {
        f"t{i:05d}": (uuid.UUID(int=i + 1), [(0, (1, 2, 3)[i % 3], 0, (1, 2, 3))])
        for i in range(partitions)
    }


def _re_led(topics: dict) -> dict:
    """Broker 3 failed: its partitions led by broker 1 with a new epoch, ISR without it."""
    out = {}
    for name, (topic_id, states) in topics.items():
        changed = [(p, 1, epoch + 1, (1, 2)) for p, leader, epoch, isr in states if leader == 3]
        if changed:
            out[name] = (topic_id, changed)
    return out


def _kept_bytes(cache: Any, version: int, partitions: int) -> float | None:
    """Memory of the view this version's answers use, per partition (None: no such view)."""
    encoded = getattr(cache, "encoded", None)
    if encoded is None:
        return None
    from kafkalite.protocol.metadata_response import FAMILY_OF_VERSION

    view = encoded.views.get(("PLAINTEXT", FAMILY_OF_VERSION[version].index))
    if view is None:
        return None
    size = sys.getsizeof(view.topics) + sys.getsizeof(view.partitions)
    size += sum(sys.getsizeof(b) for b in view.topics.values())
    for entries in view.partitions.values():
        size += sys.getsizeof(entries) + sum(sys.getsizeof(b) for b in entries.values())
    return round(size / partitions, 1)


async def _answer(dispatcher: Any, frame: bytes, connection: Any) -> tuple[float, float, int]:
    """One request through the dispatcher: (wall s, CPU s, response bytes)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = dispatcher.dispatch(bytearray(frame), connection)
    if inspect.isawaitable(result):
        result = await result
    size = sum(len(b) for b in result) if isinstance(result, list) else len(result)
    return time.perf_counter() - wall, time.process_time() - cpu, size


async def run_once(partitions: int, answers: int, versions: list[int]) -> dict:
    from kafkalite.apis import load_handlers
    from kafkalite.apis.base import BrokerServices, build
    from kafkalite.apis.dispatcher import ApiDispatcher
    from kafkalite.broker.metadata_cache import MetadataCache
    from kafkalite.config import BrokerConfig
    from kafkalite.network.connection import ConnectionInfo
    from kafkalite.protocol import frames
    from kafkalite.protocol.api import ApiKey, request_class

    load_handlers()
    out: dict = {}
    for shape in ("one_topic", "many_topics"):
        topics = _shape(shape, partitions)
        cache = MetadataCache(1)
        cache.update_metadata(_update(1, topics))
        services = BrokerServices(
            config=BrokerConfig.load(environ={}),
            broker_id=1,
            metadata_cache=cache,
            cluster_id="bench-cluster",
        )
        dispatcher = ApiDispatcher(services)
        dispatcher.ready.set()
        connection = ConnectionInfo("127.0.0.1", 5555, "PLAINTEXT")
        results: dict = {}
        epoch = 1
        for version in versions:
            request = build(
                request_class(ApiKey.METADATA, version),
                {"topics": None if version else [], "allow_auto_topic_creation": False},
            )
            frame = frames.encode_request(ApiKey.METADATA, version, 1, "bench", request)[4:]

            def answer() -> Any:
                return _answer(dispatcher, frame, connection)  # noqa: B023 (called at once)

            first = await answer()
            steady = [await answer() for _ in range(answers)]
            epoch += 1
            cache.update_metadata(_update(epoch, _re_led(topics)))
            after_failure = await answer()
            epoch += 1
            cache.update_metadata(_update(epoch, topics))  # back as they were: re-led again
            await answer()
            epoch += 1
            cache.update_metadata(_update(epoch, topics))  # the same state restated
            after_restatement = await answer()
            results[f"v{version}"] = {
                "kept_bytes_per_partition": _kept_bytes(cache, version, partitions),
                "response_bytes": first[2],
                "first_ms": round(1000 * first[0], 2),
                "answer_ms_median": round(1000 * statistics.median(s[0] for s in steady), 2),
                "answer_ms_max": round(1000 * max(s[0] for s in steady), 2),
                "answer_cpu_ms_median": round(1000 * statistics.median(s[1] for s in steady), 2),
                "after_a_third_re_led_ms": round(1000 * after_failure[0], 2),
                "after_full_restatement_ms": round(1000 * after_restatement[0], 2),
            }
        out[shape] = results
    return out


def _child(src: str, args: argparse.Namespace) -> dict:
    env = dict(os.environ, PYTHONPATH=src)
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--partitions",
            str(args.partitions),
            "--answers",
            str(args.answers),
            "--versions",
            args.versions,
            "--json-only",
        ],
        env=env,
        cwd=src,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"the run on {src} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10000)
    parser.add_argument("--answers", type=int, default=20, help="steady answers per version")
    parser.add_argument("--versions", default="12,9,1", help="Metadata versions, comma-separated")
    parser.add_argument("--baseline-src", help="also run on this tree's kafkalite (a child)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json_only:
        versions = [int(v) for v in args.versions.split(",")]
        print(json.dumps(asyncio.run(run_once(args.partitions, args.answers, versions))))
        return
    here = str(Path(__file__).resolve().parent.parent)
    runs: dict[str, list] = {"this_tree": [], "baseline": []}
    load_before = os.getloadavg()
    for i in range(args.repeats):
        order = [("this_tree", here)]
        if args.baseline_src:
            order.append(("baseline", args.baseline_src))
        for name, src in order if i % 2 == 0 else order[::-1]:
            runs[name].append(_child(src, args))
    print(
        json.dumps(
            {
                "partitions": args.partitions,
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
                **runs,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
