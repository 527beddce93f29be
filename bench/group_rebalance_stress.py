"""Rebalance stress with kafka-python (prints a count of stalled runs; not a test).

Repeats the scenario of tests/integration/test_groups_clients.py against one broker subprocess:
three kafka-python consumers (each its own process, kafka-python's default request and poll
settings apart from session.timeout.ms 6000 and heartbeat.interval.ms 500) join one group on a
6-partition topic, consume, one closes (LeaveGroup), one is SIGKILLed (evicted after its
session timeout), the last consumes what follows. A run *stalls* when a step does not happen
within its deadline; the run's consumer logs (kafka-python at DEBUG) are kept under --out.

Found with it: kafka-python 3.0.12 loses a JoinGroup+SyncGroup that completes between two polls
when the leader rejoined because its topic-metadata snapshot changed (see
``kafka_python_metadata_before_poll`` in the test); about 1 run in 20 with 100 ms polls, nearly
every run with ``--poll-ms 5``; none with ``--metadata-first`` (what the tests do).

    PYTHONPATH=. .venv/bin/python bench/group_rebalance_stress.py [--runs 50] [--poll-ms 100]
        [--metadata-first] [--broker-log-level DEBUG] [--out /tmp/group-stress]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PARTITIONS = 6
STEP_DEADLINE_S = 45.0
EVICTION_DEADLINE_S = 60.0


# ---------------------------------------------------------------------- the consumer process


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def worker(bootstrap: str, topic: str, group: str, poll_ms: int, metadata_first: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG, format="%(asctime)s %(threadName)s %(name)s %(message)s"
    )
    from kafka import KafkaConsumer

    from tests.integration.support import kafka_python_metadata_before_poll

    stop = threading.Event()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    if metadata_first:
        kafka_python_metadata_before_poll(consumer, topic)
    last = None
    while not stop.is_set():
        batch = consumer.poll(timeout_ms=poll_ms)
        assigned = sorted(tp.partition for tp in consumer.assignment())
        if assigned != last:
            last = assigned
            _emit({"assigned": assigned})
        for records in batch.values():
            for m in records:
                _emit({"msg": m.value.decode()})
        if batch:
            consumer.commit()
    consumer.close()
    _emit({"closed": True})


# ---------------------------------------------------------------------- the driver


class Consumer:
    def __init__(
        self, args: argparse.Namespace, bootstrap: str, topic: str, group: str, log: Path
    ) -> None:
        self.log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, __file__, "worker", bootstrap, topic, group, str(args.poll_ms)]
        cmd += ["--metadata-first"] if args.metadata_first else []
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log
        )
        self.assigned: list[int] | None = None
        self.consumed = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            if "assigned" in event:
                self.assigned = event["assigned"]
            elif "msg" in event:
                self.consumed += 1

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"close\n")
        self.proc.stdin.flush()
        self.proc.wait(60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Stalled(Exception):
    pass


def wait_for(condition, what: str, timeout: float = STEP_DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise Stalled(what)
        time.sleep(0.1)  # polling interval, not synchronisation


def one_run(args: argparse.Namespace, bootstrap: str, run: int, run_dir: Path) -> str | None:
    """None when every step happened, else what stalled and the state at that moment."""
    from tests.integration.support import create_topic, describe, produce

    topic, group = f"stress-{run}", f"stress-group-{run}"
    create_topic(bootstrap, topic)
    consumers = [
        Consumer(args, bootstrap, topic, group, run_dir / f"consumer-{i}.log") for i in range(3)
    ]

    def covering(members: list[Consumer]) -> bool:
        assignments = [c.assigned for c in members]
        if any(not a for a in assignments):
            return False
        if sorted(p for a in assignments for p in a) != list(range(PARTITIONS)):
            return False
        return describe(bootstrap, group) == ("Stable", len(members))

    consumed = lambda: sum(c.consumed for c in consumers)  # noqa: E731
    try:
        wait_for(lambda: covering(consumers), "three covering assignments")
        produce(bootstrap, topic, [f"a-{i}" for i in range(300)])
        wait_for(lambda: consumed() >= 300, "first messages consumed")
        consumers[0].close()
        wait_for(lambda: covering(consumers[1:]), "rebalance after LeaveGroup")
        produce(bootstrap, topic, [f"b-{i}" for i in range(120)])
        wait_for(lambda: consumed() >= 420, "messages after the leave")
        consumers[1].stop()
        wait_for(
            lambda: covering(consumers[2:]), "eviction of the killed consumer", EVICTION_DEADLINE_S
        )
        produce(bootstrap, topic, [f"c-{i}" for i in range(60)])
        wait_for(lambda: consumed() >= 480, "messages after the eviction")
        consumers[2].close()
        return None
    except Stalled as e:
        return f"{e}; assignments {[c.assigned for c in consumers]}, group {describe(bootstrap, group)}"
    finally:
        for c in consumers:
            c.stop()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--poll-ms", type=int, default=100, help="the consumers' poll(timeout_ms)")
    parser.add_argument(
        "--metadata-first", action="store_true", help="fetch topic metadata before the first poll"
    )
    parser.add_argument(
        "--broker-log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    parser.add_argument("--out", type=Path, default=Path("/tmp/group-stress"))
    parser.add_argument(
        "--stop-at-first", action="store_true", help="stop at the first stalled run"
    )
    args = parser.parse_args()

    from kafkalite.testing import Broker

    shutil.rmtree(args.out, ignore_errors=True)
    broker = Broker(
        data_dir=args.out / "broker",
        config={"offsets.topic.num.partitions": "10"},
        env={"KAFKALITE_LOG_LEVEL": args.broker_log_level},
        subprocess=True,
        admin=False,
    )
    broker.start()
    stalled = 0
    try:
        for run in range(args.runs):
            run_dir = args.out / f"run-{run}"
            run_dir.mkdir(parents=True)
            started = time.monotonic()
            error = one_run(args, broker.bootstrap, run, run_dir)
            took = time.monotonic() - started
            if error is None:
                shutil.rmtree(run_dir)  # keep only the logs of stalled runs
                print(f"run {run}: ok ({took:.1f} s)", flush=True)
                continue
            stalled += 1
            print(f"run {run}: STALLED ({took:.1f} s): {error}; logs in {run_dir}", flush=True)
            if args.stop_at_first:
                break
    finally:
        broker.stop()
    print(
        f"{stalled} stalled of {run + 1} runs (poll {args.poll_ms} ms, metadata first: {args.metadata_first})"
    )
    return 1 if stalled else 0


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "worker":
    worker(
        sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), "--metadata-first" in sys.argv[6:]
    )
elif __name__ == "__main__":
    sys.exit(main())
