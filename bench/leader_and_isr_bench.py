"""A LeaderAndIsr of many new partitions applied in-process (prints JSON; not a test): the
broker's part of creating a topic at scale (Kafka's ReplicaManager.becomeLeaderOrFollower ->
Partition.createLogIfNotExists -> LogManager.getOrCreateLog for each new partition).

One ReplicaManager on the real LogManager in a temporary directory receives one LeaderAndIsr
request naming ``--partitions`` new partitions (RF 3: a third led by this broker, the others
followed, no fetcher attached), as a controller sends it when a topic is created. Printed:
the request's wall time and the time per partition, the process CPU, the event loop's worst
stall meanwhile (a ticker every 5 ms measures how late it runs); then, after a record is
written to each partition led, the same for the two LeaderAndIsr requests of broker 2's failure
(``failover``: the elections of its partitions, then the ISR shrinks of the others at a new
leader epoch, with replica fetchers on a leader endpoint that never answers), for the
broker's part of a shutdown (the replica
manager's and the LogManager's: fetchers, snapshots, closing every log, checkpoints), for
the LogManager's start on those logs (a restart's log loading) and for a StopReplica
deleting them all. ``--baseline-src DIR`` runs the same in a child on another
tree's kafkalite (a ``git archive`` of the base commit) right after, for a comparison in the
same run; ``--repeats`` alternates the two (and which goes first).

    PYTHONPATH=. .venv/bin/python bench/leader_and_isr_bench.py --partitions 10000 \\
        --baseline-src /tmp/base
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


async def _ticker(stalls: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(0.005)
        stalls.append(loop.time() - before - 0.005)


async def _timed(coro) -> dict:
    stalls: list[float] = []
    stop = asyncio.Event()
    ticker = asyncio.ensure_future(_ticker(stalls, stop))
    await asyncio.sleep(0.02)
    wall, cpu = time.perf_counter(), time.process_time()
    result = await coro
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    stop.set()
    await ticker
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "loop_stall_max_ms": round(1000 * max(stalls, default=0.0), 1),
        "loop_stall_p99_ms": round(1000 * sorted(stalls)[int(0.99 * (len(stalls) - 1))], 1)
        if stalls
        else 0.0,
        "result": result,
    }


async def run_once(partitions: int, keep_epoch: bool = False) -> dict:
    from kafkalite.broker.clock import SYSTEM_TIME
    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.broker.types import StopReplicaPartitionState
    from kafkalite.protocol.errors import ErrorCode
    from kafkalite.protocol.records import Record, build_batch
    from kafkalite.protocol.types import TopicPartition
    from kafkalite.storage.config import LogConfig
    from kafkalite.storage.log_manager import LogManager

    with tempfile.TemporaryDirectory(prefix="leader-and-isr-") as root:
        lm = LogManager([os.path.join(root, "logs")], LogConfig())
        lm.startup()
        rm = ReplicaManager(1, lm, None, SYSTEM_TIME)
        record = Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v" * 100)
        batch = bytearray(build_batch([record], base_timestamp=1_000))
        states = new_partition_states(partitions)

        async def apply() -> dict:
            result = await rm.become_leader_or_follower_async(0, 1, states)
            errors = sum(1 for e in result.partition_errors.values() if e is not ErrorCode.NONE)
            return {"errors": errors, "logs": len(lm.all_logs())}

        async def stop() -> dict:
            result = await rm.stop_replicas_async(
                0,
                2,
                [
                    StopReplicaPartitionState("scale", p, -2, delete_partition=True)
                    for p in range(partitions)
                ],
            )
            errors = sum(1 for e in result.partition_errors.values() if e is not ErrorCode.NONE)
            return {"errors": errors, "logs": len(lm.all_logs())}

        async def write() -> dict:
            led = [s for s in states if s.leader == 1]
            for state in led:
                await rm.append_records(0, 1, {TopicPartition(state.topic, state.partition): batch})
            return {"partitions_written": len(led)}

        async def failover() -> dict:
            # Broker 2 dies (the controller's requests of a failure, as broker 1 gets them):
            # first its partitions' elections (each re-led by broker 1 or 3, epoch 1), then
            # the ISR shrinks of the others (leader unchanged, 2 out of the ISR, epoch 1).
            rm.enable_replica_fetchers(lambda leader_id: _SilentLeader())
            followed = {
                TopicPartition(s.topic, s.partition): (s.leader, 0) for s in states if s.leader != 1
            }
            rm.replica_fetcher_manager.add_fetcher_for_partitions(followed)
            elections, shrinks = failover_states(states, keep_epoch)
            elected = await _timed(rm.become_leader_or_follower_async(0, 1, elections))
            shrunk = await _timed(rm.become_leader_or_follower_async(0, 1, shrinks))
            for phase, count in ((elected, len(elections)), (shrunk, len(shrinks))):
                result = phase.pop("result")
                errors = sum(1 for e in result.partition_errors.values() if e is not ErrorCode.NONE)
                phase.update(
                    partitions=count,
                    errors=errors,
                    us_per_partition=round(1e6 * phase["wall_s"] / count, 1),
                )
            return {"elections": elected, "isr_shrinks": shrunk}

        async def close() -> dict:
            await rm.shutdown()
            await lm.shutdown_async()
            return {"logs_open": len(lm.all_logs())}

        async def reopen() -> dict:
            nonlocal lm, rm
            lm = LogManager([os.path.join(root, "logs")], LogConfig())
            await asyncio.to_thread(lm.startup)
            rm = ReplicaManager(1, lm, None, SYSTEM_TIME)
            return {"logs": len(lm.all_logs())}

        try:
            create = await _timed(apply())
            await write()
            failed_over = (await _timed(failover()))["result"]
            shutdown = await _timed(close())
            startup = await _timed(reopen())
            await rm.become_leader_or_follower_async(0, 2, restarted_states(states))
            delete = await _timed(stop())
        finally:
            await rm.shutdown()
            lm.shutdown()
    create["us_per_partition"] = round(1e6 * create["wall_s"] / partitions, 1)
    return {
        "leader_and_isr": create,
        "failover": failed_over,
        "shutdown_replica_and_log_manager": shutdown,
        "log_manager_startup": startup,
        "stop_replica_delete": delete,
    }


def new_partition_states(partitions: int) -> list:
    """A LeaderAndIsr's states for ``partitions`` new partitions of one topic, RF 3 on brokers
    1-3, a third led by each (broker 1 leads every third)."""
    from kafkalite.broker.types import LeaderAndIsrPartitionState

    return [
        LeaderAndIsrPartitionState(
            topic="scale",
            partition=p,
            controller_epoch=1,
            leader=(1, 2, 3)[p % 3],
            leader_epoch=0,
            isr=(1, 2, 3),
            zk_version=0,
            replicas=(1, 2, 3),
            is_new=True,
        )
        for p in range(partitions)
    ]


def failover_states(states, keep_epoch: bool = False) -> tuple[list, list]:
    """The LeaderAndIsr states broker 1 gets when broker 2 fails: the elections of broker 2's
    partitions (alternately led by 1 and 3), then the ISR shrinks of the others (at a new
    leader epoch, or with ``keep_epoch`` at the same one and a new zk version)."""
    import dataclasses

    elections, shrinks = [], []
    for s in states:
        if s.leader == 2:
            leader = 1 if s.partition % 2 else 3
            elections.append(
                dataclasses.replace(s, leader=leader, leader_epoch=1, isr=(1, 3), is_new=False)
            )
        elif keep_epoch:
            # as the controller sends them since decision 0068: the leader epoch kept, the
            # partition epoch (zk version) bumped
            shrinks.append(dataclasses.replace(s, zk_version=1, isr=(1, 3), is_new=False))
        else:
            shrinks.append(dataclasses.replace(s, leader_epoch=1, isr=(1, 3), is_new=False))
    return elections, shrinks


class _SilentLeader:
    """A leader endpoint that never answers: the fetchers are added and removed as in a
    broker, without replicating anything."""

    supports_fetch_sessions = True

    async def _never(self, *args):
        import asyncio

        await asyncio.Event().wait()

    fetch = fetch_session = fetch_epoch_end_offsets = fetch_offset = _never

    async def close(self) -> None:
        pass


def restarted_states(states):
    import dataclasses

    return [
        dataclasses.replace(s, leader_epoch=1, is_new=False, controller_epoch=2) for s in states
    ]


def _child(src: str, partitions: int, shrinks: str) -> dict:
    env = dict(os.environ, PYTHONPATH=src)
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--partitions",
            str(partitions),
            "--shrinks",
            shrinks,
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
    parser.add_argument("--baseline-src", help="also run on this tree's kafkalite (a child)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--shrinks",
        choices=("bumped", "kept"),
        default="bumped",
        help="the failover's ISR shrinks at a new leader epoch, or at the same one with a new "
        "zk version (what the controller sends since decision 0068; a tree before it ignores "
        "those as stale, so compare kept against bumped on this tree)",
    )
    parser.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json_only:
        print(json.dumps(asyncio.run(run_once(args.partitions, args.shrinks == "kept"))))
        return
    here = str(Path(__file__).resolve().parent.parent)
    runs: dict[str, list] = {"this_tree": [], "baseline": []}
    for i in range(args.repeats):
        # Alternated: the files a run leaves for the kernel to clean up slow the next one.
        order = [("this_tree", here)]
        if args.baseline_src:
            order.append(("baseline", args.baseline_src))
        for name, src in order if i % 2 == 0 else order[::-1]:
            runs[name].append(_child(src, args.partitions, args.shrinks))
    print(
        json.dumps(
            {
                "partitions": args.partitions,
                "shrinks": args.shrinks,
                "load_average": os.getloadavg(),
                **runs,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
