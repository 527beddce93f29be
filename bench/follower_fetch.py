"""The cost of a follower's fetch round at scale (prints JSON; not a test): sessionless full
fetches against one incremental fetch session (KIP-227) per leader, the leader reading every
partition of the session each round ("session") or only those with news ("parked", the
others parked until their LEO, HW or log start moves; what the broker runs).

Two brokers in this process, each a ReplicaManager behind the project's socket server; broker 1
leads ``--partitions`` partitions (a few records each), broker 2 follows them all through its
replica fetcher (RemoteLeaderEndPoint: Fetch v12 over loopback, the leader's real Fetch handler
and FetchSessionCache). Once the follower has caught up, its fetcher runs with
``replica.fetch.wait.max.ms=0`` (each round answered at once) for ``--seconds`` per mode, and
the figures are the event-loop milliseconds per round (both brokers share the loop: the leader's
serving and the follower's building and decoding), and the rounds with a few partitions
written to meanwhile (``--writes`` per round), each mode measured in the same run, alternately.

    PYTHONPATH=. .venv/bin/python bench/follower_fetch.py [--partitions 3000] [--seconds 3]

``--leader-only`` measures instead what one large follower fetch holds the leader's loop for
(decision 0057): one broker in this process leads ``--partitions`` partitions (a record each)
and its dispatcher is handed Fetch v12 frames of a follower's first fetch of a session (every
partition, session id 0, epoch 0), as its connection would hand them: ``records`` (the follower
at offset 0: every partition answers its record, max wait 0) and ``wake`` (the follower caught
up at offset 1, max wait 5 s: the fetch waits; once it waits, a record is appended to one
partition, which answers it). Printed per case: the longest callback the loop ran (every
``asyncio.Handle`` run is timed, named by its task or function) and the callbacks over 20 ms,
the fetch's wall time (for ``wake``, from the append to the answer) and the process CPU. Each
round starts with a fresh session (the last one's is closed). ``--baseline-src DIR`` runs the
same in a child on another tree's kafkalite (a ``git archive`` of the base commit), alternating.

    PYTHONPATH=. .venv/bin/python bench/follower_fetch.py --leader-only --partitions 3333 \\
        --repeats 3 --baseline-src /tmp/base_held

``--request-only`` measures the follower's side of that first fetch: its Fetch v12 of every
partition built and encoded as ``RemoteLeaderEndPoint`` does, for one topic of ``--partitions``
partitions and for as many one-partition topics (the least CPU of ``--repeats``, and the
frame's size), with ``--baseline-src`` and ``--rounds`` as above.

    PYTHONPATH=. .venv/bin/python bench/follower_fetch.py --request-only --partitions 10000 \\
        --repeats 5 --rounds 2 --baseline-src /tmp/base
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The tree whose kafkalite is measured: this one, or a baseline's (--baseline-src's child).
sys.path.insert(
    0, os.environ.get("FOLLOWER_FETCH_SRC") or str(Path(__file__).resolve().parent.parent)
)

from kafkalite.apis import load_handlers  # noqa: E402
from kafkalite.apis.base import BrokerServices  # noqa: E402
from kafkalite.apis.dispatcher import ApiDispatcher  # noqa: E402
from kafkalite.broker.clock import SYSTEM_TIME  # noqa: E402
from kafkalite.broker.fetch_session import FetchSessionCache, FetchSessionHandler  # noqa: E402
from kafkalite.broker.metadata_cache import (  # noqa: E402
    BrokerEndpoint,
    MetadataBroker,
    MetadataCache,
)
from kafkalite.broker.replica_fetcher import (  # noqa: E402
    ReplicaFetcherConfig,
    remote_leader_endpoints,
)
from kafkalite.broker.replica_manager import ReplicaManager  # noqa: E402
from kafkalite.broker.types import LeaderAndIsrPartitionState  # noqa: E402
from kafkalite.config import BrokerConfig, Endpoint  # noqa: E402
from kafkalite.network.server import SocketServer  # noqa: E402
from kafkalite.protocol.records import Record, build_batch  # noqa: E402
from kafkalite.protocol.types import TopicPartition  # noqa: E402
from kafkalite.storage.config import LogConfig  # noqa: E402
from kafkalite.storage.log_manager import LogManager  # noqa: E402


def one_batch() -> bytearray:
    record = Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v" * 100)
    return bytearray(build_batch([record], base_timestamp=1_000))


async def start_brokers(root: str):
    load_handlers()
    brokers, servers, managers, caches, sessions = {}, [], [], {}, {}
    for broker_id in (1, 2):
        lm = LogManager([os.path.join(root, f"b{broker_id}")], LogConfig())
        lm.startup()
        cache = MetadataCache(broker_id)
        rm = ReplicaManager(broker_id, lm, None, SYSTEM_TIME, metadata_cache=cache)
        services = BrokerServices(
            config=BrokerConfig.load(environ={}),
            broker_id=broker_id,
            replica_manager=rm,
            metadata_cache=cache,
            fetch_sessions=FetchSessionCache(1000, park=rm.park_idle_partition),
            log_manager=lm,
        )
        sessions[broker_id] = services.fetch_sessions
        dispatcher = ApiDispatcher(services)
        dispatcher.ready.set()
        server = SocketServer(
            [Endpoint("PLAINTEXT", "127.0.0.1", 0)], dispatcher, max_request_bytes=100 << 20
        )
        await server.start()
        servers.append(server)
        managers.append(lm)
        brokers[broker_id] = rm
        caches[broker_id] = cache
    live = [
        MetadataBroker(
            i,
            {
                "PLAINTEXT": BrokerEndpoint(
                    "PLAINTEXT", "127.0.0.1", servers[i - 1].bound_endpoints[0].port
                )
            },
        )
        for i in (1, 2)
    ]
    for broker_id, rm in brokers.items():
        caches[broker_id].set_alive_brokers(live)
        rm.enable_replica_fetchers(
            remote_leader_endpoints(caches[broker_id], "PLAINTEXT", broker_id),
            ReplicaFetcherConfig(replica_fetch_wait_max_ms=0, replica_fetch_backoff_ms=50),
        )
    return brokers, servers, managers, sessions


async def measure(fetcher, seconds: float, writes: int, leader, tps) -> dict:
    """Rounds of the running fetcher in ``seconds`` (and per round: loop ms, CPU ms)."""
    start_rounds = fetcher.rounds
    wall, cpu = time.perf_counter(), time.process_time()
    deadline = wall + seconds
    i = 0
    while time.perf_counter() < deadline:
        if writes:
            for _ in range(writes):
                await leader.append_records(0, 1, {tps[i % len(tps)]: one_batch()})
                i += 1
        await asyncio.sleep(0.001 if writes else 0.05)
    rounds = fetcher.rounds - start_rounds
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    return {
        "rounds": rounds,
        "ms_per_round": round(1000 * wall / max(rounds, 1), 3),
        "cpu_ms_per_round": round(1000 * cpu / max(rounds, 1), 3),
    }


async def run(partitions: int, seconds: float, writes: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="follower-fetch-") as root:
        brokers, servers, managers, sessions = await start_brokers(root)
        b1, b2 = brokers[1], brokers[2]
        tps = [TopicPartition("scale", p) for p in range(partitions)]
        states = [
            LeaderAndIsrPartitionState(
                topic=tp.topic,
                partition=tp.partition,
                controller_epoch=1,
                leader=1,
                leader_epoch=0,
                isr=(1, 2),
                zk_version=0,
                replicas=(1, 2),
            )
            for tp in tps
        ]
        try:
            await b1.become_leader_or_follower_async(0, 1, states)
            for tp in tps:
                await b1.append_records(0, 1, {tp: one_batch()})
            started = time.perf_counter()
            await b2.become_leader_or_follower_async(0, 1, states)

            def caught_up() -> bool:
                return all(
                    (log := b2.log_manager.get_log(tp.topic, tp.partition)) is not None
                    and log.log_end_offset == 1
                    and log.high_watermark == 1
                    for tp in tps
                )

            while not caught_up():
                await asyncio.sleep(0.05)
            catch_up_s = time.perf_counter() - started
            (fetcher,) = b2.replica_fetcher_manager.fetchers.values()
            figures: dict[str, list[dict]] = {"sessionless": [], "session": [], "parked": []}
            for _ in range(repeats):
                for mode in ("sessionless", "session", "parked"):
                    sessions[1].park = b1.park_idle_partition if mode == "parked" else None
                    fetcher.session = FetchSessionHandler() if mode != "sessionless" else None
                    await asyncio.sleep(0.2)  # the first (full) round of a new session
                    figures[mode].append(await measure(fetcher, seconds, 0, b1, tps))
                    figures[mode + "_writes"] = figures.get(mode + "_writes", [])
                    figures[mode + "_writes"].append(
                        await measure(fetcher, seconds, writes, b1, tps)
                    )
            return {
                "partitions": partitions,
                "writes_per_ms": writes,
                "catch_up_s": round(catch_up_s, 2),
                "load_average": os.getloadavg(),
                **{
                    mode: {
                        "ms_per_round_median": statistics.median(r["ms_per_round"] for r in runs),
                        "cpu_ms_per_round_median": statistics.median(
                            r["cpu_ms_per_round"] for r in runs
                        ),
                        "runs": runs,
                    }
                    for mode, runs in figures.items()
                },
            }
        finally:
            for rm in brokers.values():
                await rm.shutdown()
            for server in servers:
                await server.stop_accepting()
                server.close_connections()
            for lm in managers:
                lm.shutdown()


class CallbackTimer:
    """Times every callback the (pure-Python) asyncio loop runs: the longest (and what it was),
    the longest less the garbage collector's passes inside it (a full pass runs in whatever
    callback allocated last, whoever made the garbage), and how many took over 20 ms."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.longest_without_gc = 0.0
        self.what = ""
        self.over_20ms = 0
        self.count = 0
        self.gc_s = 0.0
        self.gc_full = 0
        self._gc_start = 0.0
        self._original = asyncio.events.Handle._run

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
            return
        self.gc_s += time.perf_counter() - self._gc_start
        self.gc_full += info.get("generation") == 2

    def __enter__(self) -> CallbackTimer:
        timer, original = self, self._original
        gc.callbacks.append(self._gc)

        def _run(handle):  # type: ignore[no-untyped-def]
            start, gc_before = time.perf_counter(), timer.gc_s
            try:
                return original(handle)
            finally:
                took = time.perf_counter() - start
                timer.count += 1
                if took > 0.02:
                    timer.over_20ms += 1
                timer.longest_without_gc = max(
                    timer.longest_without_gc, took - (timer.gc_s - gc_before)
                )
                if took > timer.longest:
                    timer.longest = took
                    callback = handle._callback
                    owner = getattr(callback, "__self__", None)
                    if isinstance(owner, asyncio.Task):
                        coro = owner.get_coro()
                        timer.what = f"task {getattr(coro, '__qualname__', coro)!s}"
                    else:
                        timer.what = getattr(callback, "__qualname__", repr(callback))[:120]

        asyncio.events.Handle._run = _run  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]
        gc.callbacks.remove(self._gc)


def fetch_frame(correlation_id: int, offset: int, partitions: int, max_wait_ms: int) -> bytearray:
    """A follower's (replica 2) first Fetch v12 of a session over every partition."""
    import datetime

    from kafkalite.client.messages import build_message
    from kafkalite.protocol.api import ApiKey, request_class
    from kafkalite.protocol.frames import encode_request

    message = build_message(
        request_class(ApiKey.FETCH, 12),
        replica_id=2,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=0,
        topics=[
            {
                "topic": "scale",
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": 0,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": 0,
                        "partition_max_bytes": 1 << 20,
                    }
                    for p in range(partitions)
                ],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    return bytearray(encode_request(ApiKey.FETCH, 12, correlation_id, "replica-2", message)[4:])


async def leader_only(partitions: int, repeats: int) -> dict:
    """See ``--leader-only`` in the module docstring."""
    import resource

    from kafkalite.network.connection import ConnectionInfo

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a segment file open per partition
    load_handlers()
    out: dict[str, list[dict]] = {"records": [], "wake": []}
    with tempfile.TemporaryDirectory(prefix="follower-fetch-leader-") as root:
        lm = LogManager([root], LogConfig())
        lm.startup()
        rm = ReplicaManager(1, lm, None, SYSTEM_TIME)
        sessions = FetchSessionCache(1000, park=rm.park_idle_partition)
        services = BrokerServices(
            config=BrokerConfig.load(environ={}),
            broker_id=1,
            replica_manager=rm,
            fetch_sessions=sessions,
            log_manager=lm,
        )
        dispatcher = ApiDispatcher(services)
        dispatcher.ready.set()
        connection = ConnectionInfo("127.0.0.1", 5555, "PLAINTEXT")
        tps = [TopicPartition("scale", p) for p in range(partitions)]
        states = [
            LeaderAndIsrPartitionState(
                topic=tp.topic,
                partition=tp.partition,
                controller_epoch=1,
                leader=1,
                leader_epoch=0,
                isr=(1, 2),
                zk_version=0,
                replicas=(1, 2),
            )
            for tp in tps
        ]
        await rm.become_leader_or_follower_async(0, 1, states)
        for tp in tps:
            await rm.append_records(0, 1, {tp: one_batch()})

        async def serve(frame: bytearray):  # type: ignore[no-untyped-def]
            result = dispatcher.dispatch(frame, connection)
            if inspect.isawaitable(result):
                result = await result
            return result

        try:
            for i in range(repeats):
                # records: the follower at offset 0 (a first fetch after a restart or a new
                # leader: every partition has a record for it); answered at once.
                sessions.sessions.clear()
                frame = fetch_frame(2 * i + 1, 0, partitions, 0)
                cpu, wall = time.process_time(), time.perf_counter()
                with CallbackTimer() as timer:
                    await asyncio.ensure_future(serve(frame))
                out["records"].append(_figures(timer, time.perf_counter() - wall, cpu))
                # wake: caught up (offset 1, the HW already 1), the fetch waits; a record on
                # the middle partition answers it.
                sessions.sessions.clear()
                frame = fetch_frame(2 * i + 2, 1 + i, partitions, 5_000)
                cpu = time.process_time()
                with CallbackTimer() as timer:
                    waiting = asyncio.ensure_future(serve(frame))
                    while rm.fetch_purgatory.delayed == 0:
                        if waiting.done():  # answered at once: an error (e.g. out of files)
                            raise RuntimeError(
                                f"the fetch did not wait: {waiting.result()!r}"[:300]
                            )
                        await asyncio.sleep(0)
                    wall = time.perf_counter()
                    await rm.append_records(0, 1, {tps[partitions // 2]: one_batch()})
                    await waiting
                out["wake"].append(_figures(timer, time.perf_counter() - wall, cpu))
                for tp in tps:  # every partition at LEO i + 2 for the next round
                    if tp != tps[partitions // 2]:
                        await rm.append_records(0, 1, {tp: one_batch()})
        finally:
            await rm.shutdown()
            lm.shutdown()
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return out


REQUEST_VALUES = {
    "replica_id": 2,
    "max_wait": datetime.timedelta(milliseconds=500),
    "min_bytes": 1,
    "max_bytes": 10 << 20,
    "isolation_level": 0,
    "session_id": 0,
    "session_epoch": 0,
    "rack_id": "",
}
"""The fields of the ``--request-only`` Fetch besides its topics (a new session's first)."""


def full_fetch_topics(count: int, each: int) -> dict:
    """``count`` topics of ``each`` partitions, each at its own fetch position, grouped by
    topic as ``RemoteLeaderEndPoint`` groups them for ``_fetch_request_v12``."""
    from kafkalite.broker.types import FetchInfo
    from kafkalite.protocol.types import TopicPartition

    topics = {}
    for t in range(count):
        name = f"scale-{t:05d}"
        topics[name] = [
            (TopicPartition(name, p), FetchInfo(100 * p, 1 << 20, 0, 5, 4)) for p in range(each)
        ]
    return topics


def request_only(partitions: int, repeats: int) -> dict:
    """See the module docstring (``--request-only``)."""
    from kafkalite.broker.replica_fetcher import _fetch_request_v12
    from kafkalite.protocol.frames import encode_request

    out = {}
    for shape, count, each in (("one_topic", 1, partitions), ("topics_of_one", partitions, 1)):
        topics = full_fetch_topics(count, each)
        best, size = float("inf"), 0
        for _ in range(repeats):
            gc.collect()
            cpu = time.process_time()
            message = _fetch_request_v12(REQUEST_VALUES, topics, {})
            frame = encode_request(1, 12, 7, "follower", message)
            best = min(best, time.process_time() - cpu)
            size = len(frame)
        out[shape] = {"cpu_ms": round(1000 * best, 2), "bytes": size}
    return out


def _figures(timer: CallbackTimer, wall: float, cpu_start: float) -> dict:
    return {
        "longest_callback_ms": round(1000 * timer.longest, 1),
        "longest_callback": timer.what,
        "longest_callback_without_gc_ms": round(1000 * timer.longest_without_gc, 1),
        "gc_ms": round(1000 * timer.gc_s, 1),
        "gc_full_passes": timer.gc_full,
        "callbacks_over_20ms": timer.over_20ms,
        "callbacks": timer.count,
        "wall_ms": round(1000 * wall, 1),
        "cpu_ms": round(1000 * (time.process_time() - cpu_start), 1),
    }


def _leader_only_child(src: str, args: argparse.Namespace) -> dict:
    env = dict(os.environ, FOLLOWER_FETCH_SRC=src, PYTHONPATH=src)
    mode = "--request-only" if args.request_only else "--leader-only"
    command = [sys.executable, __file__, mode, "--json-only"]
    command += ["--partitions", str(args.partitions), "--repeats", str(args.repeats)]
    done = subprocess.run(command, env=env, cwd=src, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--writes", type=int, default=2, help="records written per ms")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", help="also write the JSON there (the brokers log to stdout)")
    parser.add_argument("--leader-only", action="store_true", help="see the module docstring")
    parser.add_argument("--request-only", action="store_true", help="see the module docstring")
    parser.add_argument(
        "--baseline-src", help="--leader-only, --request-only: also on this tree's kafkalite"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="--leader-only, --request-only: alternations"
    )
    parser.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.leader_only or args.request_only:
        if args.json_only:
            if args.request_only:
                print(json.dumps(request_only(args.partitions, args.repeats)))
            else:
                print(json.dumps(asyncio.run(leader_only(args.partitions, args.repeats))))
            return
        here = str(Path(__file__).resolve().parent.parent)
        order = [("this_tree", here)] + (
            [("baseline", args.baseline_src)] if args.baseline_src else []
        )
        runs: dict[str, list] = {name: [] for name, _ in order}
        for i in range(args.rounds):
            for name, src in order if i % 2 == 0 else order[::-1]:
                runs[name].append(_leader_only_child(src, args))
        figures = {"partitions": args.partitions, "load_average": os.getloadavg(), **runs}
        print(json.dumps(figures, indent=2))
        return
    figures = asyncio.run(run(args.partitions, args.seconds, args.writes, args.repeats))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
