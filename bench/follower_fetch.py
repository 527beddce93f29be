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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--writes", type=int, default=2, help="records written per ms")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", help="also write the JSON there (the brokers log to stdout)")
    args = parser.parse_args()
    figures = asyncio.run(run(args.partitions, args.seconds, args.writes, args.repeats))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
