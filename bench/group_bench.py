"""Consumer-group figures against a kafkalite broker subprocess (prints numbers; not a test).

Rebalance time, for groups of 1, 10 and 50 members (each member its own connection, speaking
the protocol directly through the project's client, the way a consumer does: JoinGroup with the
KIP-394 member-id round trip, the leader's SyncGroup carrying every assignment, a rejoin when a
SyncGroup answers REBALANCE_IN_PROGRESS):

- **form**: from the last member's JoinGroup (with its member id) to every member holding its
  assignment of one generation that has all members (the group Stable);
- **rejoin**: a Stable group in which every member rejoins at once (what a subscription change
  or a new member causes): from the last JoinGroup to every member Stable again.

The broker runs with ``group.initial.rebalance.delay.ms=0`` (Kafka's default 3 s delay would
otherwise be the whole figure). Offset commit throughput, on a simple group (generation -1,
no member id: no membership checks), each commit written to ``__consumer_offsets`` with acks=-1:

- sequential: one partition per OffsetCommit, each awaited before the next;
- pipelined: 16 OffsetCommits in flight on one connection;
- batched: 100 partitions per OffsetCommit, sequential (partition offsets/s).

    PYTHONPATH=. .venv/bin/python bench/group_bench.py [--sizes 1,10,50] [--commits 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkalite.client.connection import KafkaConnection, request_builder  # noqa: E402
from kafkalite.client.messages import build_message  # noqa: E402
from kafkalite.protocol.api import ApiKey, request_class  # noqa: E402
from kafkalite.protocol.consumer_protocol import encode_subscription  # noqa: E402
from kafkalite.protocol.errors import ErrorCode  # noqa: E402
from kafkalite.testing import Broker  # noqa: E402

TOPIC = "bench-topic"
TOPIC_PARTITIONS = 100
SUBSCRIPTION = encode_subscription([TOPIC])
SESSION = timedelta(seconds=30)


class Member:
    def __init__(self, conn: KafkaConnection, group: str) -> None:
        self.conn = conn
        self.group = group
        self.member_id = ""
        self.generation = -1
        self.assignment: bytes | None = None
        self.joined_at = 0.0

    async def join(self) -> object:
        self.joined_at = time.perf_counter()
        return await self.conn.send(
            ApiKey.JOIN_GROUP,
            request_builder(
                ApiKey.JOIN_GROUP,
                group_id=self.group,
                session_timeout=SESSION,
                rebalance_timeout=SESSION,
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[{"name": "range", "metadata": SUBSCRIPTION}],
                reason=None,
            ),
        )

    async def get_member_id(self) -> None:
        r = await self.join()
        assert r.error_code == ErrorCode.MEMBER_ID_REQUIRED, r.error_code
        self.member_id = r.member_id

    async def rebalance(self) -> float:
        """Join and sync until this member holds an assignment; returns when it did."""
        while True:
            r = await self.join()
            if r.error_code != ErrorCode.NONE:
                raise RuntimeError(f"JoinGroup: {ErrorCode.of(int(r.error_code)).name}")
            self.generation = r.generation_id
            assignments = []
            if r.leader == self.member_id:
                assignments = [
                    {"member_id": m.member_id, "assignment": m.member_id.encode()}
                    for m in r.members
                ]
            s = await self.conn.send(
                ApiKey.SYNC_GROUP,
                request_builder(
                    ApiKey.SYNC_GROUP,
                    group_id=self.group,
                    generation_id=self.generation,
                    member_id=self.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocol_name="range",
                    assignments=assignments,
                ),
            )
            if s.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if s.error_code != ErrorCode.NONE:
                raise RuntimeError(f"SyncGroup: {ErrorCode.of(int(s.error_code)).name}")
            self.assignment = s.assignment
            return time.perf_counter()


async def connect(broker: Broker, client_id: str) -> KafkaConnection:
    conn = KafkaConnection(broker.host, broker.port, client_id=client_id, request_timeout=120)
    await conn.connect()
    return conn


async def wait_coordinator(broker: Broker, group: str) -> None:
    conn = await connect(broker, "bench-find")
    try:
        deadline = time.monotonic() + 60
        while True:
            r = await conn.send(
                ApiKey.FIND_COORDINATOR,
                request_builder(ApiKey.FIND_COORDINATOR, key=group, key_type=0),
                version=3,
            )
            if r.error_code == ErrorCode.NONE:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("no coordinator")
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


async def rebalance_figures(broker: Broker, size: int, rounds: int) -> dict[str, float]:
    group = f"bench-{size}"
    await wait_coordinator(broker, group)
    members = [Member(await connect(broker, f"m{i}"), group) for i in range(size)]
    try:
        await asyncio.gather(*(m.get_member_id() for m in members))
        done = await asyncio.gather(*(m.rebalance() for m in members))
        form = max(done) - max(m.joined_at for m in members)
        generations = {m.generation for m in members}
        assert len(generations) == 1, generations
        rejoin = []
        for _ in range(rounds):
            done = await asyncio.gather(*(m.rebalance() for m in members))
            rejoin.append(max(done) - max(m.joined_at for m in members))
            assert len({m.generation for m in members}) == 1
        return {"form_ms": form * 1000, "rejoin_ms": statistics.median(rejoin) * 1000}
    finally:
        for m in members:
            await m.conn.close()


def commit_request(group: str, partitions: range, offset: int):
    """An OffsetCommit v8 message, built once per shape (the client's per-send building would
    otherwise be a good part of the measured time)."""
    return build_message(
        request_class(ApiKey.OFFSET_COMMIT, 8),
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "bench",
                    }
                    for p in partitions
                ],
            }
        ],
    )


async def commit_figures(broker: Broker, commits: int) -> dict[str, float]:
    group = "bench-commits"
    await wait_coordinator(broker, group)
    conn = await connect(broker, "bench-commit")
    try:
        requests = {p: commit_request(group, range(p, p + 1), 7) for p in range(TOPIC_PARTITIONS)}
        requests["all"] = commit_request(group, range(TOPIC_PARTITIONS), 7)

        async def one(i: int, partitions: range) -> None:
            key = partitions.start if len(partitions) == 1 else "all"
            r = await conn.send(ApiKey.OFFSET_COMMIT, requests[key])
            errors = {int(p.error_code) for t in r.topics for p in t.partitions}
            assert errors == {0}, errors

        for i in range(50):  # warm-up
            await one(i, range(1))
        t0 = time.perf_counter()
        for i in range(commits):
            await one(i, range(i % TOPIC_PARTITIONS, i % TOPIC_PARTITIONS + 1))
        sequential = commits / (time.perf_counter() - t0)

        in_flight = 16
        t0 = time.perf_counter()
        for start in range(0, commits, in_flight):
            await asyncio.gather(
                *(
                    one(i, range(i % TOPIC_PARTITIONS, i % TOPIC_PARTITIONS + 1))
                    for i in range(start, start + in_flight)
                )
            )
        pipelined = (commits // in_flight * in_flight) / (time.perf_counter() - t0)

        batches = max(1, commits // 20)
        t0 = time.perf_counter()
        for i in range(batches):
            await one(i, range(TOPIC_PARTITIONS))
        batched = batches * TOPIC_PARTITIONS / (time.perf_counter() - t0)
    finally:
        await conn.close()
    return {"sequential": sequential, "pipelined": pipelined, "batched": batched}


async def create_topic(broker: Broker) -> None:
    conn = await connect(broker, "bench-admin")
    try:
        r = await conn.send(
            ApiKey.CREATE_TOPICS,
            request_builder(
                ApiKey.CREATE_TOPICS,
                topics=[
                    {"name": TOPIC, "num_partitions": TOPIC_PARTITIONS, "replication_factor": 1}
                ],
                timeout=timedelta(seconds=30),
            ),
        )
        assert int(r.topics[0].error_code) == 0, r
    finally:
        await conn.close()


async def main_async(args: argparse.Namespace, broker: Broker) -> None:
    await create_topic(broker)
    print(f"broker: {broker.bootstrap}, group.initial.rebalance.delay.ms=0")
    print(f"{'members':>8} {'form (ms)':>10} {'rejoin (ms, median)':>20}")
    for size in args.sizes:
        f = await rebalance_figures(broker, size, args.rounds)
        print(f"{size:>8} {f['form_ms']:>10.1f} {f['rejoin_ms']:>20.1f}")
    c = await commit_figures(broker, args.commits)
    print(f"offset commits, one partition each, sequential: {c['sequential']:,.0f} commits/s")
    print(f"offset commits, one partition each, 16 in flight: {c['pipelined']:,.0f} commits/s")
    print(
        f"offset commits, 100 partitions each, sequential: {c['batched']:,.0f} partition offsets/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,50", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--rounds", default=5, type=int, help="rejoin rounds per size")
    parser.add_argument("--commits", default=3000, type=int)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        broker = Broker(
            data_dir=data_dir,
            config={
                "group.initial.rebalance.delay.ms": "0",
                "offsets.topic.num.partitions": "50",
                "log.level": "WARNING",
            },
            subprocess=True,
            admin=False,
        )
        broker.start()
        try:
            asyncio.run(main_async(args, broker))
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
