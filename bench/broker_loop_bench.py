"""What holds one broker's event loop at many partitions, in-process (prints JSON; not a test).

Three pieces of a broker's work on its loop, each measured by the **longest single callback**
the loop ran meanwhile (every `asyncio.Handle` run is timed; the callback's task or function is
named) and by a ticker's worst lateness (a 5 ms timer, as the loop-lag probe):

1. ``leader_and_isr``: a LeaderAndIsr (v5) of ``--partitions`` new partitions (RF 3, a third
   led here) as its frame arrives: decoded, handled by the broker's handler on a real
   ReplicaManager and LogManager in a temporary directory, its answer encoded. Meanwhile an
   ApiVersions is dispatched every millisecond; printed is how many were answered before the
   LeaderAndIsr's answer.
2. ``metrics_scrape``: the admin API's ``/metrics`` text for that broker, ``--scrapes`` times
   (one record written to each led partition before), rendered as the route does.
3. ``scheduler_rounds``: the LogManager's scheduler for ``--rounds`` ticks with every periodic
   task due on every tick (retention, flush, checkpoints, idle-log release, directory check).

The garbage collector: every pass is timed by generation (wall time and the main thread's
CPU time of the full ones); after the LeaderAndIsr the tracked objects are counted (those a
full pass walks, ``gc.get_objects()``, and the frozen ones) and, when nothing is frozen, by
type, per partition. ``--gc`` chooses the collector's set-up of this tree's run, one run each
(repeatable): ``none``; ``freeze=N`` (the freezer ``kafkalite serve`` installs, with
``gc.freeze.min.objects=N``; the default, 50000); ``freeze-after-lair`` (``gc.freeze()`` once
the LeaderAndIsr is answered); ``threshold=a,b,c``; joined by ``+``. ``--delete`` adds a
StopReplica deleting every partition. At the end the collector runs, then again after
``gc.unfreeze()``: what only the second finds (``kept_by_freeze``) is cyclic garbage a freeze
kept.

``--baseline-src DIR`` runs the same in a child on another tree's kafkalite (a ``git archive``
of the base commit) right after, for a comparison in the same run; ``--repeats`` alternates
the two (and which goes first).

    git archive 5eedc91 | tar -x -C /tmp/base_brk
    PYTHONPATH=. .venv/bin/python bench/broker_loop_bench.py --partitions 10000 \\
        --baseline-src /tmp/base_brk --gc none --gc freeze=50000 --delete
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path


class CallbackTimer:
    """Times every callback the (pure-Python) asyncio loop runs: the longest, and what it was;
    by wall time (what the loop waited for it, including waits for the GIL while a worker thread
    ran), by wall time less the garbage collector's passes inside it, and by the main thread's
    own CPU time (the callback's work alone)."""

    def __init__(self, gc_pauses: GcPauses) -> None:
        self.gc_pauses = gc_pauses
        self.longest_without_gc = 0.0
        self.what_without_gc = ""
        self.longest = 0.0
        self.what = ""
        self.longest_cpu = 0.0
        self.what_cpu = ""
        self.count = 0
        self.over_20ms = 0
        self._original = None

    def __enter__(self) -> CallbackTimer:
        handle_class = asyncio.events.Handle
        original = self._original = handle_class._run
        timer = self

        def _run(handle):  # type: ignore[no-untyped-def]
            start, start_cpu = time.perf_counter(), time.thread_time()
            start_gc = timer.gc_pauses.total
            try:
                return original(handle)
            finally:
                took = time.perf_counter() - start
                cpu = time.thread_time() - start_cpu
                timer.count += 1
                if took > timer.longest:
                    timer.longest = took
                    timer.what = _describe(handle)
                if cpu > timer.longest_cpu:
                    timer.longest_cpu = cpu
                    timer.what_cpu = _describe(handle)
                without_gc = took - (timer.gc_pauses.total - start_gc)
                if without_gc > timer.longest_without_gc:
                    timer.longest_without_gc = without_gc
                    timer.what_without_gc = _describe(handle)
                if took > 0.02:
                    timer.over_20ms += 1

        handle_class._run = _run  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]


def _describe(handle) -> str:  # type: ignore[no-untyped-def]
    callback = handle._callback
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        return f"task {getattr(coro, '__qualname__', coro)!s}"
    return getattr(callback, "__qualname__", repr(callback))[:120]


async def _ticker(lateness: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(0.005)
        lateness.append(loop.time() - before - 0.005)


class GcPauses:
    """The cyclic garbage collector's passes meanwhile (they run inside whatever callback
    allocated last, and a full pass walks every tracked object of the process that is not
    frozen): by generation, how many, the longest and the total (wall time, and the main
    thread's CPU time)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.total = 0.0
        self.full = 0
        self.by_generation = {g: {"passes": 0, "max_ms": 0.0, "total_ms": 0.0} for g in range(3)}
        self.longest_full_cpu = 0.0
        self._start = 0.0
        self._start_cpu = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start, self._start_cpu = time.perf_counter(), time.thread_time()
            return
        took = time.perf_counter() - self._start
        self.total += took
        self.longest = max(self.longest, took)
        generation = self.by_generation[info.get("generation", 0)]
        generation["passes"] += 1
        generation["max_ms"] = round(max(generation["max_ms"], 1000 * took), 1)
        generation["total_ms"] = round(generation["total_ms"] + 1000 * took, 1)
        if info.get("generation") == 2:
            self.full += 1
            self.longest_full_cpu = max(self.longest_full_cpu, time.thread_time() - self._start_cpu)

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self._callback)


def _tracked() -> dict:
    """The tracked objects now: those a full pass walks (``gc.get_objects()``: the frozen
    ones are not listed) and the frozen ones."""
    return {"unfrozen": len(gc.get_objects()), "frozen": gc.get_freeze_count()}


def _census() -> Counter:
    return Counter(type(o).__qualname__ for o in gc.get_objects())


async def _measured(coro) -> dict:  # type: ignore[no-untyped-def]
    lateness: list[float] = []
    stop = asyncio.Event()
    ticker = asyncio.ensure_future(_ticker(lateness, stop))
    await asyncio.sleep(0.02)
    with GcPauses() as gc_pauses, CallbackTimer(gc_pauses) as timer:
        await asyncio.sleep(0)  # from here on every step of this task is a timed callback too
        wall, cpu = time.perf_counter(), time.process_time()
        result = await coro
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    stop.set()
    await ticker
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "longest_callback_ms": round(1000 * timer.longest, 1),
        "longest_callback": timer.what,
        "longest_callback_without_gc_ms": round(1000 * timer.longest_without_gc, 1),
        "longest_callback_without_gc": timer.what_without_gc,
        "longest_callback_cpu_ms": round(1000 * timer.longest_cpu, 1),
        "longest_callback_by_cpu": timer.what_cpu,
        "callbacks": timer.count,
        "callbacks_over_20ms": timer.over_20ms,
        "ticker_late_max_ms": round(1000 * max(lateness, default=0.0), 1),
        "gc_pause_max_ms": round(1000 * gc_pauses.longest, 1),
        "gc_full_passes": gc_pauses.full,
        "gc_full_pass_max_cpu_ms": round(1000 * gc_pauses.longest_full_cpu, 1),
        "gc_by_generation": gc_pauses.by_generation,
        "result": result,
    }


def _leader_and_isr_frame(partitions: int) -> bytearray:
    from kafkalite.apis.base import build
    from kafkalite.protocol import frames
    from kafkalite.protocol.api import ApiKey, request_class

    request = build(
        request_class(ApiKey.LEADER_AND_ISR, 5),
        {
            "controller_id": 2,
            "controller_epoch": 1,
            "broker_epoch": -1,
            "type": 0,
            "topic_states": [
                {
                    "topic_name": "scale",
                    "topic_id": uuid.uuid4(),
                    "partition_states": [
                        {
                            "partition_index": p,
                            "controller_epoch": 1,
                            "leader": (1, 2, 3)[p % 3],
                            "leader_epoch": 0,
                            "isr": [1, 2, 3],
                            "zk_version": 0,
                            "replicas": [1, 2, 3],
                            "is_new": True,
                        }
                        for p in range(partitions)
                    ],
                }
            ],
            "live_leaders": [],
        },
    )
    return bytearray(frames.encode_request(ApiKey.LEADER_AND_ISR, 5, 7, "bench", request)[4:])


class _Server:
    """What the admin API's metrics collector reads of a KafkaServer."""

    def __init__(self, services, replica_manager, log_manager) -> None:  # type: ignore[no-untyped-def]
        self.services = services
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.metadata_cache = None
        self.controller = None
        self.socket_server = None
        self.broker_id = 1


async def _render(registry) -> bytes:  # type: ignore[no-untyped-def]
    """The /metrics body as the route makes it (any tree: the route's function, awaited if it
    is a coroutine)."""
    from kafkalite.admin import metrics

    visible = lambda labels: True  # noqa: E731 - what Access.labels() gives without an authorizer
    render_async = getattr(metrics, "render_async", None)
    if render_async is not None:
        return await render_async(registry, visible)
    body = metrics.render(registry, visible)
    if inspect.isawaitable(body):
        body = await body
    return body


def _apply_gc_config(config: str) -> dict:
    """``none``; ``freeze=N`` (the process's freezer, as ``kafkalite serve`` installs it, with
    ``gc.freeze.min.objects=N``); ``freeze-after-lair`` (``gc.freeze()`` once the LeaderAndIsr
    is answered); ``threshold=a,b,c`` (``gc.set_threshold``). Several joined by ``+``."""
    options: dict = {"freeze_after_lair": False}
    for part in filter(None, config.split("+")):
        name, _, value = part.partition("=")
        if name == "none":
            continue
        if name == "freeze":
            from kafkalite.observability.gc_freeze import install_gc_freezer

            install_gc_freezer(int(value))
        elif name == "freeze-after-lair":
            options["freeze_after_lair"] = True
        elif name == "threshold":
            gc.set_threshold(*(int(v) for v in value.split(",")))
        else:
            raise SystemExit(f"unknown gc config {part!r}")
    return options


async def run_once(
    partitions: int, scrapes: int, rounds: int, gc_config: str = "none", delete: bool = False
) -> dict:
    from kafkalite.admin.metrics import new_registry
    from kafkalite.apis import load_handlers
    from kafkalite.apis.base import BrokerServices, build
    from kafkalite.apis.dispatcher import ApiDispatcher
    from kafkalite.broker.clock import SYSTEM_TIME
    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.config import BrokerConfig
    from kafkalite.network.connection import ConnectionInfo
    from kafkalite.observability import RequestStats, TopicStats
    from kafkalite.protocol import frames
    from kafkalite.protocol.api import ApiKey, request_class
    from kafkalite.protocol.records import Record, build_batch
    from kafkalite.protocol.types import TopicPartition
    from kafkalite.storage.config import LogConfig
    from kafkalite.storage.log_manager import LogManager

    load_handlers()
    out: dict = {"gc_config": gc_config}
    gc_options = _apply_gc_config(gc_config)
    with tempfile.TemporaryDirectory(prefix="broker-loop-") as root:
        lm = LogManager([os.path.join(root, "logs")], LogConfig())
        lm.startup()
        rm = ReplicaManager(1, lm, None, SYSTEM_TIME)
        services = BrokerServices(
            config=BrokerConfig.load(environ={}), broker_id=1, replica_manager=rm, log_manager=lm
        )
        dispatcher = ApiDispatcher(services)
        dispatcher.ready.set()
        conn = ConnectionInfo("127.0.0.1", 5555, "PLAINTEXT")
        frame = _leader_and_isr_frame(partitions)
        versions = bytes(
            frames.encode_request(
                ApiKey.API_VERSIONS,
                3,
                8,
                "bench",
                build(
                    request_class(ApiKey.API_VERSIONS, 3),
                    {"client_software_name": "kafkalite-test", "client_software_version": "1.0"},
                ),
            )[4:]
        )
        gc.collect()
        tracked_before = _tracked()
        census_before = _census() if not tracked_before["frozen"] else None
        try:

            async def leader_and_isr() -> dict:
                done = asyncio.Event()
                answered_before = 0

                async def other_requests() -> None:
                    nonlocal answered_before
                    while not done.is_set():
                        result = dispatcher.dispatch(bytearray(versions), conn)
                        if inspect.isawaitable(result):
                            await result
                        if not done.is_set():
                            answered_before += 1
                        await asyncio.sleep(0.001)

                others = asyncio.ensure_future(other_requests())

                async def request() -> bytes:
                    result = dispatcher.dispatch(frame, conn)
                    if inspect.isawaitable(result):
                        result = await result
                    if isinstance(result, list):
                        return b"".join(bytes(b) for b in result)
                    return bytes(result)

                answer = await asyncio.ensure_future(request())
                if gc_options["freeze_after_lair"]:
                    gc.freeze()
                done.set()
                await others
                return {"answer": answer, "api_versions_answered_meanwhile": answered_before}

            measured = await _measured(leader_and_isr())
            # the answer is decoded after the measurement (a client's work, not the broker's)
            answer = measured["result"].pop("answer")
            _, response = frames.decode_response(ApiKey.LEADER_AND_ISR, 5, answer[4:])
            measured["result"]["errors"] = sum(
                1 for t in response.topics for p in t.partition_errors if p.error_code != 0
            )
            measured["result"]["logs"] = len(lm.all_logs())
            out["leader_and_isr"] = measured
            gc.collect()  # what is left (a full pass: it may freeze, as a broker's next would)
            tracked_after = _tracked()
            grown = sum(tracked_after.values()) - sum(tracked_before.values())
            out["tracked_objects"] = {
                "before": tracked_before,
                "after_leader_and_isr": tracked_after,
                "per_partition": round(grown / partitions, 2),
            }
            if census_before is not None and not tracked_after["frozen"]:
                census = _census()
                census.subtract(census_before)
                out["tracked_objects"]["per_partition_by_type"] = {
                    name: round(count / partitions, 2) for name, count in census.most_common(16)
                }
            record = Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v" * 100)
            batch = bytearray(build_batch([record], base_timestamp=1_000))
            for p in range(0, partitions, 3):
                await rm.append_records(0, 1, {TopicPartition("scale", p): batch})
            registry = new_registry(_Server(services, rm, lm), RequestStats(), TopicStats())

            async def scrape() -> dict:
                size = 0
                for _ in range(scrapes):
                    size = len(await _render(registry))
                    await asyncio.sleep(0)  # one scrape per callback, as the route serves them
                return {"bytes": size}

            out["metrics_scrape"] = await _measured(scrape())

            async def scheduler() -> dict:
                for name in (
                    "retention_check_interval_ms",
                    "flush_check_interval_ms",
                    "high_watermark_checkpoint_interval_ms",
                    "flush_recovery_offset_checkpoint_interval_ms",
                    "flush_start_offset_checkpoint_interval_ms",
                    "idle_release_interval_ms",
                    "log_dir_check_interval_ms",
                ):
                    setattr(lm, name, 0)
                task = asyncio.ensure_future(lm.run_scheduler(tick_seconds=0.05))
                await asyncio.sleep(0.05 * rounds + 0.2)
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                return {"logs": len(lm.all_logs())}

            out["scheduler_rounds"] = await _measured(scheduler())
            if delete:

                async def delete_all() -> dict:
                    from kafkalite.broker.types import StopReplicaPartitionState

                    result = await rm.stop_replicas_async(
                        2,
                        1,
                        [
                            StopReplicaPartitionState("scale", p, -2, True)
                            for p in range(partitions)
                        ],
                    )
                    return {"errors": sum(1 for e in result.partition_errors.values() if e)}

                out["stop_replica_delete"] = await _measured(delete_all())
            # The cost of freezing: cyclic garbage among frozen objects is never collected.
            # Collected normally first, then what only an unfreeze lets the collector find.
            collectable = gc.collect()
            frozen = gc.get_freeze_count()
            gc.unfreeze()
            out["garbage"] = {
                "collected_normally": collectable,
                "frozen_at_end": frozen,
                "kept_by_freeze": gc.collect(),
            }
        finally:
            await rm.shutdown()
            await lm.shutdown_async()
    return out


def _child(src: str, args: argparse.Namespace, gc_config: str) -> dict:
    env = dict(os.environ, PYTHONPATH=src)
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--partitions",
            str(args.partitions),
            "--scrapes",
            str(args.scrapes),
            "--rounds",
            str(args.rounds),
            "--gc",
            gc_config,
            *(["--delete"] if args.delete else []),
            "--json-only",
        ],
        env=env,
        cwd=src,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10000)
    parser.add_argument("--scrapes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--baseline-src", help="also run on this tree's kafkalite (a child)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--gc",
        action="append",
        help="a garbage-collector set-up for this tree's run (repeatable, each a run): none, "
        "freeze=N, freeze-after-lair, threshold=a,b,c, joined by +; default freeze=50000 "
        "(what kafkalite serve installs); the baseline runs with none",
    )
    parser.add_argument("--delete", action="store_true", help="also StopReplica-delete them all")
    parser.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    configs = args.gc or ["freeze=50000"]
    if args.json_only:
        print(
            json.dumps(
                asyncio.run(
                    run_once(args.partitions, args.scrapes, args.rounds, configs[0], args.delete)
                )
            )
        )
        return
    here = str(Path(__file__).resolve().parent.parent)
    runs: dict[str, list] = {f"this_tree {c}": [] for c in configs}
    if args.baseline_src:
        runs["baseline"] = []
    for i in range(args.repeats):
        order = [(f"this_tree {c}", here, c) for c in configs]
        if args.baseline_src:
            order.append(("baseline", args.baseline_src, "none"))
        for name, src, config in order if i % 2 == 0 else order[::-1]:
            runs[name].append(_child(src, args, config))
    print(
        json.dumps(
            {"partitions": args.partitions, "load_average": os.getloadavg(), **runs}, indent=2
        )
    )


if __name__ == "__main__":
    main()
