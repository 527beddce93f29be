"""The controller's failover and a broker's failure on the embedded store, in-process: CPU
seconds (prints JSON; not a test).

No ZooKeeper and no cluster: one ``EmbeddedStore`` in memory, broker registrations (sessions
of their own), and a ``KafkaController`` on this process's loop whose channel to the brokers
is a fake transport that encodes every request at the codec's newest version and answers at
once (the brokers' own work is left out). Two shapes:

- ``cluster``: 3 brokers, one topic of ``--partitions`` partitions at RF 3 (the cluster
  targets: kill -9 of a broker, kill -9 of the controller);
- ``single``: 1 broker, ``--partitions`` topics of one partition (a broker's restart: its
  controller's election).

Phases, each measured with ``time.process_time`` (this process's CPU: the controller's, the
store's and the fake brokers' encoding; the loop does nothing else) and wall time, from its
start until the controller is idle (and, at a failover, has read and watched every topic's node):

1. ``failover``: a controller starts over a store that already holds every partition state
   (a first controller created them and resigned), as after a controller's death;
2. ``broker_failure`` (``cluster`` only): broker 3's session is expired; until no partition is
   led by it and the controller is idle (``broker_failure_queued``: from the BrokerChange
   event's start, the wall and controller-thread CPU seconds at which its elections' requests,
   then its ISR shrinks', were queued, from the controller's "controller event phases" log);
3. ``controller_failure`` (``cluster`` only): broker 3 registers again, a controller starts on
   broker 2 (not elected: the role is taken), then the controller's broker (1) has its session
   expired (kill -9 of the controller): until broker 2's controller is active, idle, has read
   and watched every topic's node and no partition is led by broker 1 (its failover elects
   the partitions broker 1 led and shrinks the ISRs it was in);
4. ``controlled_shutdown`` (``cluster`` only, on a new store: every ISR full): broker 1, the
   controller, asks its own controller for a controlled shutdown: until the answer (the
   leaderships it held moved, the ISRs it was in shrunk; ``remaining``: the partitions it
   still leads, 0).

``--baseline-src DIR`` (a ``git archive`` of another commit, its C extension built) runs each
round in a child process of its own, this tree and DIR's alternating (which goes first
alternates too); ``--profile DIR`` writes a cProfile of each measured phase there.

    PYTHONPATH=. .venv/bin/python bench/controller_failover.py --shape cluster \
        --partitions 10000 --rounds 4 --baseline-src /tmp/base
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

SRC = os.environ.get("CONTROLLER_BENCH_SRC") or str(Path(__file__).resolve().parent.parent)
sys.path.insert(0, SRC)
# controller_loop (its transport that encodes each request and answers success) puts the tree
# it is given first on the path too: the same one
os.environ["CONTROLLER_LOOP_SRC"] = SRC

from controller_loop import EncodingTransport  # noqa: E402

from kafkalite.controller.kafka_controller import KafkaController  # noqa: E402
from kafkalite.coord import open_store  # noqa: E402
from kafkalite.zk import admin  # noqa: E402
from kafkalite.zk import data as paths  # noqa: E402

CONFIG = SimpleNamespace(
    delete_topic_enable=True,
    unclean_leader_election_enable=False,
    auto_leader_rebalance_enable=False,
    leader_imbalance_check_interval_seconds=300,
)


async def register(store: Any, broker_id: int) -> Any:
    session = await store.open_session()
    await session.ensure_path(paths.BROKER_IDS)
    info = paths.BrokerInfo(broker_id, (paths.EndPoint("127.0.0.1", 19092 + broker_id),))
    await session.create(paths.broker_path(broker_id), paths.encode_broker(info), ephemeral=True)
    return session


async def until(condition: Any, deadline_s: float = 300.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("phase did not finish")
        await asyncio.sleep(0.002)


def topics_watched(controller: KafkaController) -> bool:
    """Every topic's node read and its watch armed (``TopicNodeWatcher``, decision 0059)."""
    watcher = controller._topic_watcher
    ctx = controller.context
    return (
        ctx is not None
        and watcher is not None
        and not watcher._due
        and len(watcher._watches) == len(ctx.all_topics)
    )


async def ready(controller: KafkaController) -> None:
    await until(lambda: controller.is_active)
    await controller.event_manager.wait_idle()
    await until(lambda: topics_watched(controller))
    await controller.event_manager.wait_idle()


class Measured:
    def __init__(self, name: str, profile: str | None, out: dict[str, Any]) -> None:
        self.name, self.profile, self.out = name, profile, out

    def __enter__(self) -> Measured:
        # A served broker freezes what survives a full collection (decision 0052): the
        # collector's passes then walk only what the phase makes, as there.
        gc.collect()
        gc.freeze()
        self.profiler = None
        if self.profile:
            import cProfile

            self.profiler = cProfile.Profile()
            self.profiler.enable()
        self.cpu, self.wall = time.process_time(), time.monotonic()
        return self

    def __exit__(self, *exc: Any) -> None:
        cpu, wall = time.process_time() - self.cpu, time.monotonic() - self.wall
        gc.unfreeze()  # (the next phase freezes what is there by then)
        if self.profiler is not None:
            self.profiler.disable()
            self.profiler.dump_stats(f"{self.profile}-{self.name}.prof")
        self.out[self.name] = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}


async def one_round(shape: str, partitions: int, profile: str | None) -> dict[str, Any]:
    store = open_store(None, None, 6000)
    brokers = (1, 2, 3) if shape == "cluster" else (1,)
    sessions = {b: await register(store, b) for b in brokers}
    if shape == "cluster":
        await admin.create_topic(sessions[1], "scale", partitions, 3)
    else:
        topics = [admin.TopicToCreate(f"t{i:05d}", 1, 1) for i in range(partitions)]
        await admin.create_topics(sessions[1], topics)
    out: dict[str, Any] = {}
    first = KafkaController(1, sessions[1], CONFIG, transport_factory=EncodingTransport)
    await first.startup()  # creates every partition state
    await ready(first)
    await first.shutdown()
    controller = KafkaController(1, sessions[1], CONFIG, transport_factory=EncodingTransport)
    try:
        with Measured("failover", profile, out):
            await controller.startup()
            await ready(controller)
        if shape == "cluster":

            def moved() -> bool:
                ctx = controller.context
                return ctx is not None and all(
                    i.leader_and_isr.leader != 3 for i in ctx.partition_leadership_info.values()
                )

            with Measured("broker_failure", profile, out):
                store.expire_session(sessions[3].session_id)
                await until(moved)
                await controller.event_manager.wait_idle()
            out["broker_failure_queued"] = queued_marks("BrokerChange")
            # broker 3 back, then a controller on broker 2 waiting for the role
            sessions[3] = await register(store, 3)
            await until(lambda: 3 in controller.context.live_broker_ids)
            await controller.event_manager.wait_idle()
            standby = KafkaController(2, sessions[2], CONFIG, transport_factory=EncodingTransport)
            await standby.startup()
            assert not standby.is_active

            def led_without_1() -> bool:
                ctx = standby.context
                return ctx is not None and all(
                    i.leader_and_isr.leader != 1 for i in ctx.partition_leadership_info.values()
                )

            try:
                with Measured("controller_failure", profile, out):
                    store.expire_session(sessions[1].session_id)
                    await ready(standby)
                    await until(led_without_1)
                    await standby.event_manager.wait_idle()
            finally:
                await standby.shutdown()
    finally:
        await controller.shutdown()
        await store.close()
    if shape == "cluster":
        await shutdown_round(partitions, profile, out)
    return out


async def shutdown_round(partitions: int, profile: str | None, out: dict[str, Any]) -> None:
    """SIGTERM of the controller's own broker, on a store of its own: every ISR full, broker 1
    the controller, until its ControlledShutdown is answered (the fake brokers answer at once:
    what is measured is the event and the encoding of the requests the answer waits for)."""
    store = open_store(None, None, 6000)
    sessions = {b: await register(store, b) for b in (1, 2, 3)}
    await admin.create_topic(sessions[1], "scale", partitions, 3)
    controller = KafkaController(1, sessions[1], CONFIG, transport_factory=EncodingTransport)
    try:
        await controller.startup()
        await ready(controller)
        stat = await sessions[1].exists(paths.broker_path(1))
        with Measured("controlled_shutdown", profile, out):
            remaining = await controller.controlled_shutdown(1, stat.czxid)
        out["controlled_shutdown"]["remaining"] = len(remaining)
    finally:
        await controller.shutdown()
        await store.close()


PHASES: list[dict[str, Any]] = []
"""The "controller event phases" records the controller logged in this child's round."""


def queued_marks(event_type: str) -> list[list[float]]:
    """[wall s, controller thread CPU s] from the start of the last logged ``event_type`` event
    to the end of each of its ``queue_requests`` phases (the elections' requests queued, then
    the rest's: the ISR shrinks)."""
    events = [e for e in PHASES if e.get("event_type") == event_type]
    if not events:
        return []
    return [[m[1], m[2]] for m in events[-1]["marks"] if m[0] == "queue_requests"]


def child_round(src: str, shape: str, partitions: int, profile: str | None) -> dict[str, Any]:
    env = dict(os.environ, CONTROLLER_BENCH_SRC=src, PYTHONPATH=src)
    command = [sys.executable, __file__, "--child", "--shape", shape]
    command += ["--partitions", str(partitions)] + (["--profile", profile] if profile else [])
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"round in {src} failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(args: argparse.Namespace) -> dict[str, Any]:
    here = str(Path(__file__).resolve().parent.parent)
    trees = {"branch": here, **({"base": args.baseline_src} if args.baseline_src else {})}
    out: dict[str, Any] = {
        "shape": args.shape,
        "partitions": args.partitions,
        "load_average_before": os.getloadavg(),
        "rounds": [],
    }
    for r in range(args.rounds):
        for name in list(trees) if r % 2 == 0 else list(reversed(trees)):
            prof = f"{args.profile}/{name}-{r}" if args.profile else None
            figures = child_round(trees[name], args.shape, args.partitions, prof)
            row = {"tree": name, "load": os.getloadavg()[0], **figures}
            out["rounds"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    summary: dict[str, Any] = {}
    for name in trees:
        rows = [r for r in out["rounds"] if r["tree"] == name]
        for phase in rows[0]:
            if isinstance(rows[0][phase], dict):
                cpus = [r[phase]["cpu_s"] for r in rows]
                summary.setdefault(phase, {})[name] = {
                    "cpu_s_median": statistics.median(cpus),
                    "cpu_s_range": [min(cpus), max(cpus)],
                    "wall_s_median": statistics.median(r[phase]["wall_s"] for r in rows),
                }
    out["summary"] = summary
    out["load_average_after"] = os.getloadavg()
    return out


if __name__ == "__main__":
    import logging

    import structlog

    def keep_phases(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        # the controller's timeline of a slow event (INFO), kept for the round's figures
        if event.get("event") == "controller event phases":
            PHASES.append(event)
            raise structlog.DropEvent
        if method in ("debug", "info"):
            raise structlog.DropEvent
        return event

    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        processors=[keep_phases, structlog.dev.ConsoleRenderer()],
    )
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=("cluster", "single"), default="cluster")
    parser.add_argument("--partitions", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline-src", help="another tree to compare with, in the same run")
    parser.add_argument("--profile", help="a directory for a cProfile of each measured phase")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    if args.child:
        print(json.dumps(asyncio.run(one_round(args.shape, args.partitions, args.profile))))
    else:
        print(json.dumps(main(args), indent=2))
