"""The controller's events against its broker's loop: on that loop, or on a thread of its own
(prints JSON; not a test).

One real ZooKeeper, three broker registrations (sessions of their own), one topic of
``--partitions`` partitions at RF 3, and one controller whose channel to the brokers is a fake
transport (each request encoded at its version and answered at once: the brokers' own work is
left out, so what is measured is the controller's). This process's main loop plays the broker's
loop: a probe on it sleeps 10 ms at a time and records how late it wakes (the broker's
``kafkalite_event_loop_lag_seconds`` probe does the same). Phases, each timed from its start
until the controller's context shows the outcome:

1. ``failover``: the controller starts and loads the context (every partition's state read,
   LeaderAndIsr and UpdateMetadata for all) until it is active and idle;
2. ``broker_failure``: broker 3's session is closed, until no partition is led by it;
3. ``broker_return``: broker 3 registers again, until the controller is idle;
4. ``isr_expansion``: the leaders (brokers 1 and 2, from their own sessions) add broker 3 back
   to every ISR as a real leader does after the catch-up: ISR changes in multis of 500 with one
   ISR change notification each, all sent at once; until the controller's context shows every
   ISR whole and the controller is idle (each notification is followed by a read of the
   partitions it names);
5. ``preferred_election``: ElectLeaders PREFERRED for all, answered;
6. ``failover_again``: that controller resigns and a new one starts, as after a controller's
   death: the failover of phase 1 with every partition state already in the store (phase 1
   also creates them all), until it is active and idle.

``--mode loop`` runs ``KafkaController`` on the main loop (as before decision 0029), ``--mode
thread`` runs ``ControllerThread``; by default both, alternating for ``--rounds`` rounds, each
round on a chroot of its own, so the two are compared in the same run.

    PYTHONPATH=. .venv/bin/python bench/controller_loop.py --partitions 3000 --rounds 2

``--decisions`` measures the controller's decisions alone, without a store or a loop: the CPU
time (``time.process_time``) of ``ControllerCore`` deciding each event of the phases above at
``--partitions`` (a new controller over a context that holds every state, a broker's failure,
its return, a preferred election of every partition), each followed by what the channel manager
does with the result (the requests of the event coalesced, each encoded at the codec's newest
version for every live broker); the median and the least of ``--rounds`` rounds, each in a child process of its own (with ``--baseline-src`` the trees alternate), what was built before each event frozen (``gc.freeze``) as a served broker freezes its start (decision 0052).

``--baseline-src DIR`` (DIR a ``git archive`` of another commit) compares two trees in the same
run: every round runs in a child process of its own, once with this tree's ``kafkalite`` and
once with DIR's (alternating which goes first), against the same ZooKeeper; ``--profile DIR``
writes a cProfile of each round's child there.

    git archive 5eedc91 | tar -x -C /tmp/base
    PYTHONPATH=. .venv/bin/python bench/controller_loop.py --partitions 10000 --rounds 2 \
        --mode thread --baseline-src /tmp/base
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# A child round of a --baseline-src run imports the tree it is given, not this one.
sys.path.insert(
    0, os.environ.get("CONTROLLER_LOOP_SRC") or str(Path(__file__).resolve().parent.parent)
)

from kafkalite.client.messages import build_message  # noqa: E402
from kafkalite.controller.controller_thread import ControllerThread  # noqa: E402
from kafkalite.controller.kafka_controller import KafkaController  # noqa: E402
from kafkalite.coord import open_store  # noqa: E402
from kafkalite.protocol.api import CODEC_VERSIONS, ApiKey, response_class  # noqa: E402
from kafkalite.protocol.errors import ErrorCode  # noqa: E402
from kafkalite.protocol.frames import encode_request  # noqa: E402
from kafkalite.testing import ZooKeeperServer  # noqa: E402
from kafkalite.zk import admin  # noqa: E402
from kafkalite.zk import client as zk_client  # noqa: E402
from kafkalite.zk import data as paths  # noqa: E402
from kafkalite.zk.writes import ISR_BATCH_MAX_PARTITIONS, update_leader_and_isr_batch  # noqa: E402

PROBE_S = 0.01


class EncodingTransport:
    """Encodes each request at the codec's newest version and answers success at once."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    async def send(self, api_key: int, build: Any) -> Any:
        key = ApiKey(api_key)
        version = CODEC_VERSIONS[key][1]
        encode_request(api_key, version, 1, "controller", build(version))
        await asyncio.sleep(0)
        return build_message(response_class(key, version), error_code=ErrorCode.NONE)

    async def close(self) -> None:
        return None


class LagProbe:
    def __init__(self) -> None:
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(PROBE_S)
            self.samples.append(max(0.0, loop.time() - before - PROBE_S))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def take(self) -> dict[str, float]:
        samples, self.samples = self.samples, []
        if not samples:
            return {}
        ordered = sorted(samples)
        return {
            "probes": len(ordered),
            "p99_ms": round(1000 * ordered[int(0.99 * (len(ordered) - 1))], 1),
            "max_ms": round(1000 * ordered[-1], 1),
            "over_50ms": sum(1 for s in ordered if s > 0.05),
        }

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


async def register(connect: str, broker_id: int) -> tuple[Any, Any]:
    store = open_store(connect, None, 6000)
    session = await store.open_session()
    await session.ensure_path(paths.BROKER_IDS)
    info = paths.BrokerInfo(broker_id, (paths.EndPoint("127.0.0.1", 19092 + broker_id),))
    await session.create(paths.broker_path(broker_id), paths.encode_broker(info), ephemeral=True)
    return store, session


async def expand_isrs(sessions: dict[int, Any], ctx: Any, partitions: int) -> None:
    """Every leader puts broker 3 back into the ISRs it leads, from its own session, in
    batches of ``ISR_BATCH_MAX_PARTITIONS`` with one notification each (a broker's batched ISR
    writes), all batches at once; a batch that loses a race is written again from a re-read."""
    snapshot = dict(ctx.partition_leadership_info)
    by_leader: dict[int, dict[Any, Any]] = {}
    for tp, info in snapshot.items():
        lai = info.leader_and_isr
        if 3 in lai.isr or lai.leader not in sessions:
            continue
        isr = tuple(sorted((*lai.isr, 3)))
        new_lai = type(lai)(lai.leader, lai.leader_epoch, isr, zk_version=lai.zk_version)
        by_leader.setdefault(lai.leader, {})[tp] = type(info)(new_lai, info.controller_epoch)

    async def write(leader: int, states: dict[Any, Any]) -> None:
        if await update_leader_and_isr_batch(sessions[leader], states) is None:
            for tp in states:  # lost a race with the controller: one by one
                current = await zk_client.get_partition_state(sessions[leader], tp)
                assert current is not None
                lai = current.leader_and_isr
                wanted = type(lai)(
                    lai.leader,
                    lai.leader_epoch,
                    tuple(sorted({*lai.isr, 3})),
                    zk_version=lai.zk_version,
                )
                await zk_client.update_leader_and_isr(
                    sessions[leader], tp, type(current)(wanted, current.controller_epoch)
                )

    batches = []
    for leader, states in by_leader.items():
        items = sorted(states.items())
        for i in range(0, len(items), ISR_BATCH_MAX_PARTITIONS):
            batches.append(write(leader, dict(items[i : i + ISR_BATCH_MAX_PARTITIONS])))
    await asyncio.gather(*batches)


async def wait(condition: Any, deadline_s: float = 300.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("phase did not finish")
        await asyncio.sleep(0.005)


async def idle(controller: Any) -> None:
    inner = controller.controller if isinstance(controller, ControllerThread) else controller
    if isinstance(controller, ControllerThread):
        await controller._run(inner.event_manager.wait_idle())
    else:
        await inner.event_manager.wait_idle()


async def one_round(connect: str, mode: str, partitions: int) -> dict[str, Any]:
    stores, sessions = {}, {}
    for b in (1, 2, 3):
        stores[b], sessions[b] = await register(connect, b)
    await admin.create_topic(sessions[1], "scale", partitions, 3)
    config = SimpleNamespace(
        delete_topic_enable=True,
        unclean_leader_election_enable=False,
        auto_leader_rebalance_enable=False,
        leader_imbalance_check_interval_seconds=300,
    )
    kind = ControllerThread if mode == "thread" else KafkaController
    controller = kind(1, sessions[1], config, transport_factory=EncodingTransport)
    probe = LagProbe()
    probe.start()
    figures: dict[str, Any] = {}

    def leadership() -> dict:
        ctx = controller.context
        return dict(ctx.partition_leadership_info) if ctx is not None else {}

    try:
        await asyncio.sleep(0.2)
        probe.take()
        start = time.monotonic()
        await controller.startup()
        await wait(lambda: controller.is_active)
        await idle(controller)
        figures["failover"] = {"s": round(time.monotonic() - start, 3), "lag": probe.take()}

        start = time.monotonic()
        await sessions[3].close()
        await wait(
            lambda: (
                len(lead := leadership()) == partitions
                and all(i.leader_and_isr.leader != 3 for i in lead.values())
            )
        )
        figures["broker_failure"] = {"s": round(time.monotonic() - start, 3), "lag": probe.take()}
        await idle(controller)
        probe.take()

        start = time.monotonic()
        await stores[3].close()
        stores[3], sessions[3] = await register(connect, 3)
        await wait(lambda: 3 in (controller.context.live_broker_ids if controller.context else ()))
        await idle(controller)
        figures["broker_return"] = {"s": round(time.monotonic() - start, 3), "lag": probe.take()}

        start = time.monotonic()
        await expand_isrs(sessions, controller.context, partitions)
        await wait(
            lambda: (
                (ctx := controller.context) is not None
                and sum(
                    len(i.leader_and_isr.isr) == 3 for i in ctx.partition_leadership_info.values()
                )
                == partitions
            )
        )
        await idle(controller)
        figures["isr_expansion"] = {"s": round(time.monotonic() - start, 3), "lag": probe.take()}

        start = time.monotonic()
        await controller.elect_preferred_leaders(None)
        figures["preferred_election"] = {
            "s": round(time.monotonic() - start, 3),
            "lag": probe.take(),
        }

        await controller.shutdown()
        controller = kind(1, sessions[1], config, transport_factory=EncodingTransport)
        probe.take()
        start = time.monotonic()
        await controller.startup()
        await wait(lambda: controller.is_active)
        await idle(controller)
        figures["failover_again"] = {"s": round(time.monotonic() - start, 3), "lag": probe.take()}
    finally:
        await probe.stop()
        await controller.shutdown()
        for store in stores.values():
            await store.close()
    return figures


DECISION_PHASES = ("create", "failover", "broker_failure", "broker_return", "preferred_election")


def decisions_round(partitions: int) -> dict[str, float]:
    """One round of ``--decisions`` (see the module docstring), in this process."""
    import gc
    import inspect

    from kafkalite.controller.broker_request_batch import coalesce_requests
    from kafkalite.controller.channel_manager import api_key_of, to_message
    from kafkalite.controller.controller_core import ControllerCore
    from kafkalite.protocol.types import TopicPartition
    from kafkalite.zk.data import new_topic_id
    from kafkalite.zk.types import (
        Broker,
        EndPoint,
        LeaderAndIsr,
        LeaderIsrAndControllerEpoch,
        ReplicaAssignment,
    )

    # (a tree before encoded=True builds the structs for each broker: that is what it sent)
    encoded = "encoded" in inspect.signature(to_message).parameters

    def broker(b: int) -> Broker:
        return Broker(b, (EndPoint("127.0.0.1", 19092 + b),), None)

    def send(core: Any, result: Any) -> None:
        live = core.ctx.live_or_shutting_down_broker_ids
        # (a tree whose results announce their elections first sends those as a batch first)
        staged = [getattr(result, "first_requests", []), result.requests]
        for request in [r for batch in staged if batch for r in coalesce_requests(batch)]:
            if request.broker_id not in live:
                continue  # the channel manager has no channel to a dead broker: dropped
            key = api_key_of(request)
            version = CODEC_VERSIONS[key][1]
            kwargs = {"encoded": True} if encoded else {}
            encode_request(key, version, 1, "c", to_message(request, version, **kwargs))

    def timed(name: str, decide: Any, core: Any) -> None:
        # What was built before is frozen, as a served broker freezes what its start made
        # (decision 0052): the collector's passes then walk only what the event makes.
        gc.collect()
        gc.freeze()
        start = time.process_time()
        result = decide()
        send(core, result)
        out[name] = round(time.process_time() - start, 3)

    out: dict[str, float] = {}
    core = ControllerCore(1)
    core.ctx.epoch = 1
    core.ctx.add_live_brokers([(broker(b), 100 + b) for b in (1, 2, 3)])
    assignment = {
        p: ReplicaAssignment(tuple(1 + (p + i) % 3 for i in range(3))) for p in range(partitions)
    }
    topic_id = new_topic_id()
    timed(
        "create",
        lambda: core.process_topic_change({"scale"}, {"scale": (topic_id, assignment)}),
        core,
    )
    # a new controller whose context holds what the store holds
    new = ControllerCore(1)
    ctx = new.ctx
    ctx.epoch = 2
    ctx.add_live_brokers([(broker(b), 100 + b) for b in (1, 2, 3)])
    ctx.set_all_topics({"scale"})
    ctx.topic_ids["scale"] = topic_id
    for p, a in assignment.items():
        ctx.update_partition_full_replica_assignment(TopicPartition("scale", p), a)
    for tp, info in core.ctx.partition_leadership_info.items():
        ctx.put_partition_leadership_info(tp, info)
    timed("failover", lambda: new.on_controller_failover([]), new)
    two = {b: (broker(b), 100 + b) for b in (1, 2)}
    timed("broker_failure", lambda: core.process_broker_change(two)[1], core)
    three = {b: (broker(b), (200 if b == 3 else 100) + b) for b in (1, 2, 3)}
    timed("broker_return", lambda: core.process_broker_change(three)[1], core)
    for tp, info in list(core.ctx.partition_leadership_info.items()):  # the ISRs whole again
        lai = info.leader_and_isr
        isr = tuple(sorted({*lai.isr, 3}))
        whole = LeaderAndIsr(lai.leader, lai.leader_epoch, isr, lai.zk_version + 1)
        core.ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(whole, 1))
    timed(
        "preferred_election",
        lambda: core.elect_preferred_leaders(core.ctx.all_partitions()),
        core,
    )
    return out


def decisions(partitions: int, rounds: int) -> dict[str, float]:
    import gc

    rows = []
    for _ in range(rounds):
        gc.unfreeze()
        gc.collect()
        rows.append(decisions_round(partitions))
    return {k: statistics.median(r[k] for r in rows) for k in DECISION_PHASES} | {
        f"{k}_min": min(r[k] for r in rows) for k in DECISION_PHASES
    }


PHASES = (
    "failover",
    "broker_failure",
    "broker_return",
    "isr_expansion",
    "preferred_election",
    "failover_again",
)


def child_decisions(src: str, partitions: int, rounds: int) -> dict:
    """``--decisions`` in a child process importing ``kafkalite`` from ``src``."""
    env = dict(os.environ, CONTROLLER_LOOP_SRC=src, PYTHONPATH=src)
    command = [sys.executable, __file__, "--child-decisions", "--partitions", str(partitions)]
    command += ["--rounds", str(rounds)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"decisions in {src} failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout)


def child_round(src: str, connect: str, mode: str, partitions: int, profile: str | None) -> dict:
    """One round in a child process importing ``kafkalite`` from ``src``."""
    env = dict(os.environ, CONTROLLER_LOOP_SRC=src, PYTHONPATH=src)
    command = [sys.executable, __file__, "--child", connect, "--partitions", str(partitions)]
    command += ["--mode", mode] + (["--profile", profile] if profile else [])
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"round in {src} failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout)


async def main(
    partitions: int,
    rounds: int,
    modes: list[str],
    baseline_src: str | None = None,
    profile: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "partitions": partitions,
        "load_average_before": os.getloadavg(),
        "rounds": [],
    }
    here = str(Path(__file__).resolve().parent.parent)
    trees = {"branch": here, "base": baseline_src} if baseline_src else {"branch": None}
    with ZooKeeperServer() as zk:
        for r in range(rounds):
            names = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in names:
                for mode in modes if r % 2 == 0 else list(reversed(modes)):
                    chroot = f"/bench-{r}-{name}-{mode}"
                    src = trees[name]
                    if src is None:
                        figures = await one_round(zk.connect_string(chroot), mode, partitions)
                    else:
                        prof = f"{profile}/{name}-{mode}-{r}.prof" if profile else None
                        figures = await asyncio.to_thread(
                            child_round, src, zk.connect_string(chroot), mode, partitions, prof
                        )
                    row = {"tree": name, "mode": mode, "load": os.getloadavg()[0], **figures}
                    out["rounds"].append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    summary: dict[str, Any] = {}
    for name in trees:
        for mode in modes:
            rows = [r for r in out["rounds"] if r["mode"] == mode and r["tree"] == name]
            for phase in PHASES:
                summary.setdefault(phase, {})[f"{name}/{mode}"] = {
                    "s_median": statistics.median(r[phase]["s"] for r in rows),
                    "lag_p99_ms_median": statistics.median(
                        r[phase]["lag"].get("p99_ms", 0) for r in rows
                    ),
                    "lag_max_ms_worst": max(r[phase]["lag"].get("max_ms", 0) for r in rows),
                }
    out["summary"] = summary
    out["load_average_after"] = os.getloadavg()
    return out


async def child_main(connect: str, mode: str, partitions: int, profile: str | None) -> None:
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    figures = await one_round(connect, mode, partitions)
    if profile:
        profiler.disable()
        profiler.dump_stats(profile)
    print(json.dumps(figures))


if __name__ == "__main__":
    import logging

    import structlog

    # The controller's info lines would land in the JSON on stdout: warnings only.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mode", choices=("loop", "thread"), action="append")
    parser.add_argument("--baseline-src", help="another tree to compare with, in the same run")
    parser.add_argument("--profile", help="a directory for a cProfile of each round (children)")
    parser.add_argument("--decisions", action="store_true", help="the decisions' CPU alone")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a ZooKeeper connect string
    parser.add_argument("--child-decisions", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    modes = args.mode or ["loop", "thread"]
    if args.child_decisions:
        print(json.dumps(decisions(args.partitions, args.rounds)))
    elif args.decisions:
        here = str(Path(__file__).resolve().parent.parent)
        trees = {"branch": here, **({"base": args.baseline_src} if args.baseline_src else {})}
        result = {"partitions": args.partitions, "load_average_before": os.getloadavg()}
        # --rounds child processes per tree, the trees alternating (one round each in turn)
        rows: dict[str, list[dict]] = {name: [] for name in trees}
        for r in range(args.rounds):
            for name in list(trees) if r % 2 == 0 else list(reversed(trees)):
                rows[name].append(child_decisions(trees[name], args.partitions, 1))
        for name, runs in rows.items():
            result[name] = {
                k: statistics.median(run[k] for run in runs) for k in DECISION_PHASES
            } | {f"{k}_min": min(run[k] for run in runs) for k in DECISION_PHASES}
        result["load_average_after"] = os.getloadavg()
        print(json.dumps(result, indent=2))
    elif args.child:
        asyncio.run(child_main(args.child, modes[0], args.partitions, args.profile))
    else:
        if args.profile and not args.baseline_src:
            parser.error("--profile profiles the child rounds of a --baseline-src run")
        result = asyncio.run(
            main(args.partitions, args.rounds, modes, args.baseline_src, args.profile)
        )
        print(json.dumps(result, indent=2))
