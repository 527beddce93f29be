"""The controller decides broker failures, preferred elections and controlled shutdowns from
its cached leadership and writes with compare-and-set on the cached versions. These tests
change partition states behind its back (as a leader changing its ISR does, right between the
controller's decision and its write) and check that a stale cache never yields a wrong leader:
the lost compare-and-set is re-read for those partitions alone and decided again, and the
cluster converges to a live leader from the ISR wherever the ISR has a live member."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.controller import kafka_controller
from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk import admin
from kafkalite.zk import client as zk_data
from kafkalite.zk.types import LeaderAndIsr, LeaderIsrAndControllerEpoch
from kafkalite.zk.writes import UpdatePartitionState

from .shell_support import FakeCluster, eventually, settle, start_node

pytestmark = pytest.mark.timeout(120)
BROKERS = (0, 1, 2)
PARTITIONS = 6


def config():
    return SimpleNamespace(
        delete_topic_enable=True,
        unclean_leader_election_enable=False,
        auto_leader_rebalance_enable=False,
        leader_imbalance_check_interval_seconds=300,
    )


class Racer:
    """Leader ISR changes applied right before the controller's next partition state write
    (after it decided from its cache), through the leaders' own path: compare-and-set plus an
    ISR change notification, as a partition leader writes them."""

    def __init__(self, reader, nodes: dict) -> None:
        self.reader = reader
        self.nodes = nodes
        self.pending: list[tuple[int, int]] = []  # (partition, seed of the new ISR)
        self.applied = 0
        self.real = zk_data.apply_partition_state_writes

    async def apply_pending(self) -> None:
        pending, self.pending = self.pending, []
        for partition, seed in pending:
            self.applied += await leader_changes_isr(
                self.reader, self.nodes, partition, seed, late=True
            )

    async def __call__(self, session, writes, version, *args, **kwargs):
        if any(isinstance(w, UpdatePartitionState) for w in writes):
            await self.apply_pending()
        return await self.real(session, writes, version, *args, **kwargs)


async def leader_changes_isr(
    reader, nodes: dict, partition: int, seed: int, late: bool = False
) -> bool:
    """The partition's leader sets a new ISR: itself plus a random subset of the other live
    replicas (a leader never takes a broker that does not fetch into its ISR). ``late``: the
    write of a leader that was alive when it sent it, landing now (right before the
    controller's write), even if the leader has died since; its ISR may then name brokers
    that died since too."""
    tp = TopicPartition("t", partition)
    current = await zk_data.get_partition_state(reader, tp)
    if current is None:
        return False
    lai = current.leader_and_isr
    if lai.leader == -1 or (lai.leader not in nodes and not late):
        return False
    rng = random.Random(seed)
    others = [b for b in (BROKERS if late else sorted(nodes)) if b != lai.leader]
    isr = (lai.leader, *sorted(rng.sample(others, rng.randint(0, len(others)))))
    new_version = await zk_data.update_leader_and_isr(
        reader,
        tp,
        LeaderIsrAndControllerEpoch(
            LeaderAndIsr(lai.leader, lai.leader_epoch, isr, lai.zk_version),
            current.controller_epoch,
        ),
    )
    return new_version is not None


READ_STATES = zk_data.get_partition_states  # the tests' own reads, not counted when patched


async def stored_states(reader) -> dict[int, LeaderAndIsr]:
    states = await READ_STATES(reader, [TopicPartition("t", p) for p in range(PARTITIONS)])
    return {tp.partition: info.leader_and_isr for tp, info in states.items() if info is not None}


def problems(states: dict[int, LeaderAndIsr], live: set[int]) -> list[str]:
    """What is wrong with the stored leaderships, given the live brokers: a leader outside its
    ISR, or no live leader although the ISR has a live member (no unclean election here)."""
    out = []
    for p, lai in sorted(states.items()):
        if lai.leader != -1 and lai.leader not in lai.isr:
            out.append(f"t-{p}: leader {lai.leader} not in ISR {lai.isr}")
        if live.intersection(lai.isr) and lai.leader not in live:
            out.append(f"t-{p}: leader {lai.leader} not live, ISR {lai.isr}, live {sorted(live)}")
    return out


async def converged(nodes: dict, reader) -> None:
    async def ok() -> bool:
        await settle(*(n.controller for n in nodes.values()))
        return not problems(await stored_states(reader), set(nodes))

    try:
        await eventually(ok, timeout=20, message="a live ISR leader for every partition")
    except AssertionError:
        raise AssertionError(problems(await stored_states(reader), set(nodes))) from None


step = st.one_of(
    st.tuples(st.just("isr"), st.integers(0, PARTITIONS - 1), st.integers(0, 2**16)),
    st.tuples(st.just("race"), st.integers(0, PARTITIONS - 1), st.integers(0, 2**16)),
    st.tuples(st.just("race_all"), st.integers(0, 2**16)),
    st.tuples(st.just("race_then_kill"), st.integers(0, 2**16), st.sampled_from(BROKERS)),
    st.tuples(st.just("race_then_elect"), st.integers(0, 2**16)),
    st.tuples(st.just("kill"), st.sampled_from(BROKERS)),
    st.tuples(st.just("restart"), st.sampled_from(BROKERS)),
    st.tuples(st.just("elect")),
    st.tuples(st.just("shutdown"), st.sampled_from(BROKERS)),
)


async def scenario(assignment: dict[int, list[int]], steps: list[tuple]) -> int:
    store = EmbeddedStore(None)
    cluster = FakeCluster(store)
    cluster.reader = reader = await store.open_session()
    nodes = {b: await start_node(store, cluster, b, config=config()) for b in BROKERS}
    racer = Racer(reader, nodes)
    kafka_controller.zk_data.apply_partition_state_writes = racer
    try:
        await admin.create_topic(reader, "t", PARTITIONS, 3, replica_assignment=assignment)
        await converged(nodes, reader)
        for action, *args in steps:
            if action.startswith("race_then_"):
                racer.pending.extend((p, args[0] + p) for p in range(PARTITIONS))
                action, args = action.removeprefix("race_then_"), args[1:]
            if action == "isr":
                await leader_changes_isr(reader, nodes, *args)
                continue
            if action == "race":
                racer.pending.append(tuple(args))
                continue
            if action == "race_all":
                racer.pending.extend((p, args[0] + p) for p in range(PARTITIONS))
                continue
            if action == "kill":
                (broker,) = args
                if broker not in nodes or len(nodes) == 1:
                    continue
                node = nodes.pop(broker)
                await node.controller.shutdown()
                await node.session.close()
            elif action == "restart":
                (broker,) = args
                if broker in nodes:
                    continue
                nodes[broker] = await start_node(store, cluster, broker, config=config())
            elif action == "elect":
                active = [n for n in nodes.values() if n.controller.is_active]
                if active:
                    try:
                        await active[0].controller.elect_preferred_leaders(None)
                    except Exception as error:  # a controller move mid-call answers an error
                        assert type(error).__name__ in ("NotControllerError",), error
            elif action == "shutdown":
                (broker,) = args
                active = [n for n in nodes.values() if n.controller.is_active]
                if broker not in nodes or not active:
                    continue
                epoch = (await reader.exists(f"/brokers/ids/{broker}")).czxid
                try:
                    await active[0].controller.controlled_shutdown(broker, epoch)
                except Exception as error:
                    assert type(error).__name__ in ("NotControllerError",), error
                # it then stops, as a broker does after its controlled shutdown
                node = nodes.pop(broker)
                await node.controller.shutdown()
                await node.session.close()
                if not nodes:
                    nodes[broker] = await start_node(store, cluster, broker, config=config())
            await converged(nodes, reader)
        await racer.apply_pending()
        await converged(nodes, reader)
        assert cluster.violations == []
        for node in nodes.values():
            assert node.controller.event_manager.errors == []
        return racer.applied
    finally:
        kafka_controller.zk_data.apply_partition_state_writes = racer.real
        for node in nodes.values():
            await node.controller.shutdown()
            await node.session.close()
        await reader.close()
        await store.close()


assignments = st.lists(st.permutations(BROKERS), min_size=PARTITIONS, max_size=PARTITIONS).map(
    lambda perms: {p: list(perm) for p, perm in enumerate(perms)}
)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(assignment=assignments, steps=st.lists(step, min_size=1, max_size=10))
def test_a_stale_cache_never_yields_a_wrong_leader(assignment, steps):
    asyncio.run(scenario(assignment, steps))


def test_a_leader_whose_isr_changed_behind_the_controller_is_re_read_alone(monkeypatch):
    """Broker 1 leads t-0 with the ISR (1, 2, 0) in the controller's cache; right before the
    controller writes its decision for broker 1's failure (broker 2 from the cached ISR), the
    leader had shrunk the ISR to (1, 0). The compare-and-set fails, t-0 alone is re-read and
    decided again: broker 0 leads. No other partition is read, nothing is reloaded."""

    async def run() -> None:
        store = EmbeddedStore(None)
        cluster = FakeCluster(store)
        cluster.reader = reader = await store.open_session()
        nodes = {b: await start_node(store, cluster, b, config=config()) for b in BROKERS}
        assert nodes[0].controller.is_active
        await admin.create_topic(
            reader, "t", PARTITIONS, 3, replica_assignment={p: [1, 2, 0] for p in range(PARTITIONS)}
        )
        await converged(nodes, reader)
        racer = Racer(reader, nodes)
        monkeypatch.setattr(kafka_controller.zk_data, "apply_partition_state_writes", racer)
        reads: list[list[TopicPartition]] = []
        real_read = zk_data.get_partition_states

        async def counted(session, partitions):
            partitions = sorted(set(partitions))
            reads.append(partitions)
            return await real_read(session, partitions)

        monkeypatch.setattr(kafka_controller.zk_data, "get_partition_states", counted)
        reloads = []
        real_failover = kafka_controller.KafkaController._on_controller_failover

        async def failover(self, *args):
            reloads.append(args)
            return await real_failover(self, *args)

        monkeypatch.setattr(kafka_controller.KafkaController, "_on_controller_failover", failover)

        async def shrink_t0() -> None:
            racer.apply_pending = no_more  # type: ignore[method-assign]
            current = await zk_data.get_partition_state(reader, TopicPartition("t", 0))
            lai = current.leader_and_isr
            assert lai.leader == 1 and lai.isr == (1, 2, 0)
            await zk_data.update_leader_and_isr(  # its answer was on its way as it died
                reader,
                TopicPartition("t", 0),
                LeaderIsrAndControllerEpoch(
                    LeaderAndIsr(1, lai.leader_epoch, (1, 0), lai.zk_version),
                    current.controller_epoch,
                ),
            )

        async def no_more() -> None:
            pass

        racer.apply_pending = shrink_t0  # type: ignore[method-assign]
        node = nodes.pop(1)
        await node.controller.shutdown()
        await node.session.close()
        await converged(nodes, reader)
        states = await stored_states(reader)
        assert (states[0].leader, states[0].isr) == (0, (0,))
        assert all((s.leader, s.isr) == (2, (2, 0)) for p, s in states.items() if p != 0)
        assert [TopicPartition("t", 0)] in reads
        assert all(len(r) <= 1 for r in reads), reads
        assert reloads == []
        for n in nodes.values():
            await n.controller.shutdown()
            await n.session.close()
        await reader.close()
        await store.close()

    asyncio.run(run())
