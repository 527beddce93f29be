"""Drive GroupCoordinatorCore by hand: a fake clock, an in-memory __consumer_offsets, and
helpers that play the client side of JoinGroup/SyncGroup."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from kafkalite.group.config import GroupConfig, OffsetConfig
from kafkalite.group.core import Effects, GroupCoordinatorCore, JoinGroupResult, SyncGroupResult
from kafkalite.protocol.consumer_protocol import encode_subscription
from kafkalite.protocol.errors import ErrorCode

NUM_PARTITIONS = 4


class FakeClock:
    def __init__(self, start_ms: int = 1_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now


@dataclass
class MemoryLog:
    """Partition -> list of (offset, key, value); appends may be held back to simulate a slow
    or failing write."""

    partitions: dict[int, list[tuple[int, bytes, bytes | None]]] = field(default_factory=dict)

    def append(self, partition: int, records) -> int:
        log = self.partitions.setdefault(partition, [])
        base = len(log)
        for i, (k, v) in enumerate(records):
            log.append((base + i, k, v))
        return base


class Harness:
    def __init__(
        self,
        *,
        initial_delay_ms: int = 0,
        group_config: GroupConfig | None = None,
        offset_config: OffsetConfig | None = None,
        log: MemoryLog | None = None,
        clock: FakeClock | None = None,
        load: bool = True,
    ) -> None:
        self.clock = clock or FakeClock()
        self.log = log or MemoryLog()
        self.core = GroupCoordinatorCore(
            0,
            group_config or GroupConfig(group_initial_rebalance_delay_ms=initial_delay_ms),
            offset_config or OffsetConfig(offsets_topic_num_partitions=NUM_PARTITIONS),
            time_ms=self.clock,
        )
        self.responses: dict[object, object] = {}
        self.hold_writes = False
        self.fail_writes: ErrorCode | None = None
        self.held: list = []
        self._tokens = itertools.count()
        self.core.startup()
        if load:
            for p in range(self.core.offset_config.offsets_topic_num_partitions):
                self.load(p, epoch=0)

    # -------------------------------------------------------------- plumbing

    def load(self, partition: int, epoch: int) -> None:
        self.apply(self.core.begin_loading(partition, epoch))
        for offset, k, v in self.log.partitions.get(partition, []):
            self.core.load_record(partition, offset, k, v)
        self.apply(self.core.complete_loading(partition, epoch))

    def token(self) -> int:
        return next(self._tokens)

    def apply(self, effects: Effects) -> None:
        for token, response in effects.responses:
            assert token not in self.responses, f"token {token} answered twice"
            self.responses[token] = response
        for append in effects.appends:
            if self.hold_writes:
                self.held.append(append)
            else:
                self._write(append)

    def _write(self, append, error: ErrorCode | None = None) -> None:
        error = error if error is not None else self.fail_writes
        if error is None or error is ErrorCode.NONE:
            base = self.log.append(append.partition, append.records)
            self.apply(self.core.on_append_complete(append.append_id, ErrorCode.NONE, base))
        else:
            self.apply(self.core.on_append_complete(append.append_id, error, None))

    def release_writes(self, error: ErrorCode | None = None) -> None:
        held, self.held = self.held, []
        for append in held:
            self._write(append, error)

    def advance(self, ms: int) -> None:
        """Move the clock forward, firing timers in deadline order as a real shell would."""
        target = self.clock.now + ms
        while True:
            deadline = self.core.next_deadline()
            if deadline is None or deadline > target:
                break
            self.clock.now = max(self.clock.now, deadline)
            self.apply(self.core.tick())
        self.clock.now = target
        self.apply(self.core.tick())

    def response(self, token):
        return self.responses.get(token)

    # -------------------------------------------------------------- client side

    def join(
        self,
        group: str,
        member_id: str = "",
        *,
        instance_id: str | None = None,
        protocols=None,
        protocol_type: str = "consumer",
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        require_known: bool = True,
        client_id: str = "client",
        skip_assignment: bool = False,
    ):
        if protocols is None:
            protocols = [("range", encode_subscription(["t"]))]
        t = self.token()
        self.apply(
            self.core.join_group(
                t,
                group,
                member_id,
                instance_id,
                require_known,
                client_id,
                "/127.0.0.1",
                rebalance_ms,
                session_ms,
                protocol_type,
                protocols,
                None,
                skip_assignment,
            )
        )
        return t

    def join_new_member(self, group: str, **kw) -> tuple[str, int]:
        """KIP-394 round trip: first JoinGroup gets MEMBER_ID_REQUIRED and an id, the second
        one (returned token) enters the group."""
        t = self.join(group, **kw)
        r = self.response(t)
        assert isinstance(r, JoinGroupResult) and r.error is ErrorCode.MEMBER_ID_REQUIRED, r
        assert r.member_id
        return r.member_id, self.join(group, r.member_id, **kw)

    def sync(
        self,
        group: str,
        member_id: str,
        generation: int,
        assignments=None,
        instance_id=None,
        protocol_type=None,
        protocol_name=None,
    ):
        t = self.token()
        self.apply(
            self.core.sync_group(
                t,
                group,
                generation,
                member_id,
                instance_id,
                protocol_type,
                protocol_name,
                assignments or {},
            )
        )
        return t

    def heartbeat(self, group: str, member_id: str, generation: int, instance_id=None) -> ErrorCode:
        t = self.token()
        self.apply(self.core.heartbeat(t, group, member_id, instance_id, generation))
        return self.responses[t]

    def leave(self, group: str, members):
        t = self.token()
        self.apply(self.core.leave_group(t, group, members))
        return self.responses.get(t)

    def commit(self, group: str, member_id: str, generation: int, offsets, instance_id=None):
        t = self.token()
        self.apply(self.core.commit_offsets(t, group, member_id, instance_id, generation, offsets))
        return t

    def form_group(self, group: str, n: int, **kw) -> tuple[list[str], int, str]:
        """n dynamic members join and sync; returns (member ids, generation, leader id)."""
        ids, tokens = [], []
        for _ in range(n):
            mid, t = self.join_new_member(group, **kw)
            ids.append(mid)
            tokens.append(t)
        # newcomers extend the initial delay (up to the rebalance timeout): wait it out
        for _ in range(100):
            if all(self.response(t) is not None for t in tokens):
                break
            self.advance(self.core.group_config.group_initial_rebalance_delay_ms + 1)
        results = [self.response(t) for t in tokens]
        assert all(isinstance(r, JoinGroupResult) and r.error is ErrorCode.NONE for r in results), (
            results
        )
        generation = results[0].generation_id
        leader = results[0].leader_id
        syncs = {}
        for mid in ids:
            if mid != leader:
                syncs[mid] = self.sync(group, mid, generation)
        syncs[leader] = self.sync(
            group, leader, generation, {m: f"{m}:{generation}".encode() for m in ids}
        )
        for mid in ids:
            r = self.response(syncs[mid])
            assert isinstance(r, SyncGroupResult) and r.error is ErrorCode.NONE, r
            assert r.assignment == f"{mid}:{generation}".encode()
        return ids, generation, leader
