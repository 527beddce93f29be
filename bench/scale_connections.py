"""Broker memory per idle connection, and whether closing them gives the memory back.

    PYTHONPATH=. .venv/bin/python bench/scale_connections.py [--connections 10000]
        [--baseline-src DIR] [--pythonmalloc malloc] [--jemalloc /path/to/libjemalloc.so.2]
        [--census FILE] [--pools]

One `kafkalite serve` subprocess on a free port (admin API on, for /metrics), then:

1. a real client (confluent-kafka) produces and consumes a few records (warm-up), and the
   broker's RSS is read from /proc/<pid>/status (`before`);
2. N plain sockets connect and each sends one ApiVersions request and reads the answer (what
   every Kafka client does first), then stays idle; once the broker counts them all
   (`kafkalite_connections` in /metrics) its RSS is read again (`with`);
3. with those connections open, the real client produces and consumes again on its own
   connections: every record must come back;
4. the idle sockets are closed; once the broker counts them gone its RSS is read (`after`);
5. steps 2-4 again (`--rounds`, default 2): a second burst should reuse what the first one
   gave back, not add to it.

With `--baseline-src DIR` (a tree of another commit, e.g. `git archive <commit> | tar -x -C
DIR`) the same steps run against that tree's broker in the same run, after this one's, and
both are printed (`candidate`, `baseline`) with the RSS before, at the peak (`with`) and after
the close, and the share given back. `--pythonmalloc malloc` starts this tree's broker with
PYTHONMALLOC=malloc (every Python object from glibc's malloc instead of CPython's arenas);
`--jemalloc LIB` starts it with jemalloc preloaded instead (`JEMALLOC_ENV`: PYTHONMALLOC=malloc,
and freed pages returned within a second by jemalloc's background thread).

Printed as JSON, each figure next to its target: `<= 16 KiB each` for (with - before) / N,
and `memory returned` for the share of the first round's growth that closing gave back. The
broker's event-loop lag is read from /metrics: per phase, how many of the 10 ms loop probes ran
more than 50 ms / 250 ms late (kafkalite_event_loop_lag_seconds), and the worst stall of the
last 10-20 s at the end of each round (kafkalite_event_loop_lag_max_seconds).
The soft RLIMIT_NOFILE is raised to the hard limit here (the broker does the same itself).
`--census FILE` (decision 0067) also counts, inside each broker, what the first burst left
alive: a sitecustomize hook (CENSUS_HOOK) starts tracemalloc just before the burst and, once the
connections are closed and RSS has settled, writes FILE.<label>.json: CPython's arena counts
before and after (`sys._debugmallocstats()`), the traced blocks still alive by the broker's own
frame that made them, the objects among them (reached from the garbage collector) by place and
by MiB of address (an arena is 1 MiB). Tracing slows the broker, so the RSS figures of a census
run are not comparable with those of a plain one.
`--pools` (decision 0074) reads, inside each broker, `kafkalite.network._pools.census()`
before the first burst, with its connections open and after they closed: the arenas tracked,
their resident pages, and the empty and used pools with the resident pages of each (a
sitecustomize hook, POOLS_HOOK, answering SIGUSR2; `{"available": false}` for a tree without
the extension). It cannot be combined with `--census`, which uses the same signal.
Figures are printed, never asserted. `run()` returns the same dict for bench/scale.py.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import struct
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalite.testing import (  # noqa: E402
    Broker,  # noqa: E402
    free_port,
    recv_exactly,
)

JEMALLOC_ENV = {
    "PYTHONMALLOC": "malloc",
    "MALLOC_CONF": "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0",
}
"""With LD_PRELOAD of libjemalloc: what docs/operations.md gives an operator to set."""
TARGET_KIB_PER_CONNECTION = 16
TARGET_RETURNED_SHARE = 0.9
SETTLE_TIMEOUT_S = 120.0
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"

CENSUS_HOOK = r"""
# Written as sitecustomize.py into a directory on the broker's PYTHONPATH by
# bench/scale_connections.py --census: SIGUSR1 (just before the first burst) starts tracemalloc;
# SIGUSR2 (once the burst's connections are closed and RSS has settled) writes what was
# allocated since and is still alive, and CPython's arena counts, as JSON to $SCALE_CENSUS_OUT.
import os
import signal

_state = {}


def _arena_counts():
    # sys._debugmallocstats() prints to the C stderr; read it through a temporary file.
    # (It prints nothing about pymalloc while tracemalloc's hooks are installed.)
    import ctypes
    import sys
    import tempfile

    libc = ctypes.CDLL(None)
    libc.fflush(None)
    with tempfile.TemporaryFile("w+") as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            sys._debugmallocstats()
            libc.fflush(None)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read()
    counts = {}
    for line in text.splitlines():
        if line.startswith("# arenas allocated current"):
            counts["arenas"] = int(line.rsplit("=", 1)[1].replace(",", ""))
        elif line.startswith("# arenas highwater mark"):
            counts["arenas_highwater"] = int(line.rsplit("=", 1)[1].replace(",", ""))
        elif "unused pools" in line:
            counts["free_pools"] = int(line.split()[0])
        elif line.startswith("# bytes in allocated blocks"):
            counts["bytes_in_blocks"] = int(line.rsplit("=", 1)[1].replace(",", ""))
    return counts


def _start(signum, frame):
    import gc
    import tracemalloc

    gc.collect()
    _state["before"] = _arena_counts()
    tracemalloc.start(int(os.environ.get("SCALE_CENSUS_FRAMES", "10")))
    with open(os.environ["SCALE_CENSUS_OUT"] + ".started", "w"):
        pass


def _where(traceback):
    # the innermost frame of the broker's own code (else the innermost frame), and the one
    # that called it
    frames = list(traceback)[::-1]
    mine = [i for i, f in enumerate(frames) if "/kafkalite/" in f.filename]
    i = mine[0] if mine else 0
    return " <- ".join(
        f.filename.rsplit("/kafkalite/", 1)[-1].rsplit("site-packages/", 1)[-1] + f":{f.lineno}"
        for f in frames[i : i + 2]
    )


def _dump(signum, frame):
    import collections
    import gc
    import json
    import sys
    import tracemalloc

    gc.collect()
    objects = gc.get_objects()
    seen = {id(o): o for o in objects}
    for o in objects:
        for r in gc.get_referents(o):
            seen.setdefault(id(r), r)
    here = __file__
    survivors = []
    for address, o in seen.items():
        tb = tracemalloc.get_object_traceback(o)
        if tb is not None and not any(f.filename == here for f in tb):
            survivors.append((address, type(o).__name__, sys.getsizeof(o), _where(tb)))
    del objects, seen
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, here), tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    tracemalloc.stop()
    blocks = collections.defaultdict(lambda: [0, 0])
    for trace in snapshot.traces:
        entry = blocks[_where(trace.traceback)]
        entry[0] += 1
        entry[1] += trace.size
    by_place = collections.defaultdict(list)
    by_window = collections.defaultdict(collections.Counter)
    for address, kind, size, where in survivors:
        by_place[where].append((kind, size))
        by_window[address >> 20][where] += 1
    gc.collect()
    report = {
        "arenas_before": _state.get("before"),
        "arenas_after": _arena_counts(),
        "traced_blocks_alive": {
            "count": sum(b[0] for b in blocks.values()),
            "bytes": sum(b[1] for b in blocks.values()),
            "largest": sorted(
                ({"where": k, "blocks": v[0], "bytes": v[1]} for k, v in blocks.items()),
                key=lambda e: -e["bytes"],
            )[:25],
        },
        "objects_alive": {
            "count": len(survivors),
            "bytes": sum(s[2] for s in survivors),
            "by_place": sorted(
                (
                    {
                        "where": k,
                        "objects": len(v),
                        "bytes": sum(x[1] for x in v),
                        "types": dict(collections.Counter(x[0] for x in v).most_common(4)),
                    }
                    for k, v in by_place.items()
                ),
                key=lambda e: -e["objects"],
            )[:40],
            "by_mib_of_address": {
                hex(w << 20): dict(c.most_common(4)) for w, c in sorted(by_window.items())
            },
        },
    }
    path = os.environ["SCALE_CENSUS_OUT"]
    with open(path + ".part", "w") as out:
        json.dump(report, out, indent=1)
    os.replace(path + ".part", path)


signal.signal(signal.SIGUSR1, _start)
signal.signal(signal.SIGUSR2, _dump)
"""


POOLS_HOOK = r"""
# Written as sitecustomize.py into a directory on the broker's PYTHONPATH by
# bench/scale_connections.py --pools: SIGUSR2 writes kafkalite.network._pools.census() (the
# resident pages of CPython's arenas by empty and used pool, decision 0074) as JSON to
# $SCALE_POOLS_OUT.
import os
import signal


def _pools_census(signum, frame):
    import json

    try:
        from kafkalite.network import _pools

        report = _pools.census()
    except ImportError:  # a tree without the extension
        report = {"available": False}
    path = os.environ["SCALE_POOLS_OUT"]
    with open(path + ".part", "w") as out:
        json.dump(report, out)
    os.replace(path + ".part", path)


signal.signal(signal.SIGUSR2, _pools_census)
"""


def raise_open_file_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit (as the JVM does for Kafka); the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and its anonymous part (the broker's heap), in KiB, from /proc/<pid>/status."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def settled_memory_kib(pid: int, quiet_s: float = 2.0, limit_s: float = 15.0) -> dict[str, int]:
    """memory_kib once VmRSS has stayed within 1% for `quiet_s` (the broker gives freed memory
    back a second after a burst of closes), or after `limit_s`."""
    deadline = time.monotonic() + limit_s
    last = memory_kib(pid)
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)  # sampling interval of a measurement, not synchronisation
        now = memory_kib(pid)
        if abs(now["VmRSS"] - last["VmRSS"]) > last["VmRSS"] / 100:
            stable_since = time.monotonic()
            last = now
        elif time.monotonic() - stable_since >= quiet_s:
            return now
    return memory_kib(pid)


def census_env(
    env: dict[str, str] | None,
    tmp: Path,
    out: Path,
    hook: str = CENSUS_HOOK,
    out_variable: str = "SCALE_CENSUS_OUT",
) -> dict[str, str]:
    """The broker's environment with `hook` (CENSUS_HOOK, or POOLS_HOOK with
    SCALE_POOLS_OUT) as its sitecustomize (after the tree's own PYTHONPATH, this tree's unless
    `env` names another) writing to `out`, named by `out_variable`."""
    hook_dir = tmp / "census-hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(hook)
    env = dict(env or {})
    tree = env.get("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    env["PYTHONPATH"] = f"{tree}:{hook_dir}"
    env[out_variable] = str(out)
    for stale in (out, Path(f"{out}.started")):
        stale.unlink(missing_ok=True)
    return env


def pools_census(pid: int, out: Path) -> dict:
    """The broker's `_pools.census()`, through POOLS_HOOK."""
    out.unlink(missing_ok=True)
    signal_and_wait(pid, signal.SIGUSR2, out)
    return json.loads(out.read_text())


def signal_and_wait(pid: int, signum: int, written: Path) -> None:
    """Send the census hook `signum` and wait for the file it writes when done."""
    os.kill(pid, signum)
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while not written.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the broker's census hook wrote no {written}")
        time.sleep(0.1)  # polling interval of a measurement, not synchronisation


def scrape(admin_url: str) -> dict[str, float]:
    """The unlabelled samples of the broker's /metrics."""
    with urllib.request.urlopen(admin_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith("#") or "{" in line or " " not in line:
            continue
        name, _, value = line.partition(" ")
        try:
            samples[name] = float(value)
        except ValueError:
            continue
    return samples


def lag_probes(admin_url: str) -> dict[str, float]:
    """Cumulative counts of the broker's loop-lag probes: all, and those later than 50 / 250 ms
    (from the kafkalite_event_loop_lag_seconds histogram)."""
    with urllib.request.urlopen(admin_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    buckets, count = {}, 0.0
    for line in text.splitlines():
        if line.startswith("kafkalite_event_loop_lag_seconds_bucket"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[bound] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("kafkalite_event_loop_lag_seconds_count"):
            count = float(line.rsplit(" ", 1)[1])
    return {
        "probes": count,
        "over_50ms": count - buckets.get("0.05", count),
        "over_250ms": count - buckets.get("0.25", count),
    }


def lag_during(start: dict[str, float], end: dict[str, float]) -> dict[str, int]:
    return {key: int(end[key] - start[key]) for key in end}


def wait_for_connections(admin_url: str, predicate: Callable[[float], bool]) -> float:
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        count = scrape(admin_url).get("kafkalite_connections", -1)
        if predicate(count):
            return count
        if time.monotonic() > deadline:
            raise TimeoutError(f"broker still counts {count} connections")
        time.sleep(0.1)  # polling interval of a measurement, not synchronisation


def open_idle_connections(bootstrap: str, count: int) -> list[socket.socket]:
    host, port = bootstrap.rsplit(":", 1)
    socks = []
    frame = struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0
    for _ in range(count):
        s = socket.create_connection((host, int(port)), timeout=30)
        s.sendall(frame)
        size = struct.unpack(">i", recv_exactly(s, 4))[0]
        recv_exactly(s, size)
        socks.append(s)
    return socks


def produce_and_consume(bootstrap: str, topic: str, count: int, tag: str) -> dict:
    """Produce `count` records tagged `tag`, read them back; how many came back."""
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    delivered = []
    for i in range(count):
        producer.produce(
            topic, f"{tag}-{i}".encode(), on_delivery=lambda err, msg: delivered.append(err)
        )
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(60)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"scale-{tag}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen = set()
    deadline = time.monotonic() + 60
    while len(seen) < count and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 1.0):
            if msg.error() is None and msg.value().startswith(f"{tag}-".encode()):
                seen.add(msg.value())
    consumer.close()
    return {
        "produced": sum(1 for err in delivered if err is None),
        "consumed": len(seen),
        "ok": len(seen) == count and all(err is None for err in delivered),
    }


def run(
    connections: int = 10_000,
    records: int = 10_000,
    rounds: int = 2,
    report: Callable[[str], None] = print,
    env: dict[str, str] | None = None,
    census: Path | None = None,
    pools: bool = False,
) -> dict:
    """Measure; return the figures (also reported through `report`, one line per phase).

    Each round opens `connections` idle connections, checks the real client meanwhile, and
    closes them; the second round shows whether the memory the first one returned is reused
    (a broker whose memory only grows would end it higher)."""
    limit = raise_open_file_limit()
    if limit < connections + 100:
        raise RuntimeError(f"RLIMIT_NOFILE hard limit {limit} is below {connections} connections")
    rounds_out = []
    with tempfile.TemporaryDirectory(prefix="kl-scale-") as tmp:
        if census is not None and pools:
            raise ValueError("--census and --pools both answer SIGUSR2: one at a time")
        if census is not None:
            env = census_env(env, Path(tmp), census)
        pools_out = Path(tmp) / "pools.json"
        pools_seen: dict[str, dict] = {}
        if pools:
            env = census_env(env, Path(tmp), pools_out, POOLS_HOOK, "SCALE_POOLS_OUT")
        admin_url = f"http://127.0.0.1:{free_port()}"
        broker = Broker(
            data_dir=tmp,
            config={
                "admin.listener": admin_url,
                "offsets.topic.num.partitions": "1",
                "num.partitions": "1",
            },
            subprocess=True,
            env=env,
        )
        broker.start()
        try:
            pid = broker.proc.pid
            topic = "scale"
            warm = produce_and_consume(broker.bootstrap, topic, records // 10 or 1, "warm")
            base_count = wait_for_connections(admin_url, lambda c: c >= 0)
            before = settled_memory_kib(pid)
            report(f"before: {before} ({base_count:.0f} connections)")
            if census is not None:
                signal_and_wait(pid, signal.SIGUSR1, Path(f"{census}.started"))
            if pools:
                pools_seen["before"] = pools_census(pid, pools_out)
            for round_ in range(rounds):
                probes = lag_probes(admin_url)
                started = time.monotonic()
                socks = open_idle_connections(broker.bootstrap, connections)
                opened_s = time.monotonic() - started
                wait_for_connections(admin_url, lambda c: c >= base_count + connections)
                with_conns = settled_memory_kib(pid)
                if pools and round_ == 0:
                    pools_seen["with"] = pools_census(pid, pools_out)
                lag_opening = lag_during(probes, probes := lag_probes(admin_url))
                report(f"round {round_}: with {connections} idle connections: {with_conns}")
                meanwhile = produce_and_consume(
                    broker.bootstrap, topic, records, f"meanwhile{round_}"
                )
                lag_meanwhile = lag_during(probes, probes := lag_probes(admin_url))
                report(f"round {round_}: real client meanwhile: {meanwhile}")
                for s in socks:
                    s.close()
                socks.clear()
                wait_for_connections(admin_url, lambda c: c <= base_count)
                after = settled_memory_kib(pid)
                lag_closing = lag_during(probes, lag_probes(admin_url))
                worst = scrape(admin_url).get("kafkalite_event_loop_lag_max_seconds")
                report(f"round {round_}: after closing: {after}")
                if census is not None and round_ == 0:
                    signal_and_wait(pid, signal.SIGUSR2, census)
                    report(f"census of what the burst left alive: {census}")
                if pools and round_ == 0:
                    pools_seen["after"] = pools_census(pid, pools_out)
                    report(f"CPython's pools before / with / after: {pools_seen}")
                rounds_out.append(
                    {
                        "open_seconds": round(opened_s, 2),
                        "rss_kib_with": with_conns,
                        "rss_kib_after": after,
                        "client_meanwhile": meanwhile,
                        "event_loop_lag_probes": {
                            "opening": lag_opening,
                            "client_meanwhile": lag_meanwhile,
                            "closing": lag_closing,
                        },
                        "event_loop_lag_max_seconds_last_10_20s": worst,
                    }
                )
        finally:
            broker.stop()

    first = rounds_out[0]
    growth = first["rss_kib_with"]["VmRSS"] - before["VmRSS"]
    per_connection = growth / connections
    returned = (
        (first["rss_kib_with"]["VmRSS"] - first["rss_kib_after"]["VmRSS"]) / growth
        if growth > 0
        else 1.0
    )
    last_after = rounds_out[-1]["rss_kib_after"]["VmRSS"]
    clients_ok = all(r["client_meanwhile"]["ok"] for r in rounds_out)
    return {
        "connections": connections,
        "rss_kib_before": before,
        "rounds": rounds_out,
        "kib_per_connection": {
            "value": round(per_connection, 2),
            "target": f"<= {TARGET_KIB_PER_CONNECTION} KiB each",
            "met": per_connection <= TARGET_KIB_PER_CONNECTION,
        },
        "rss_kib": {
            "before": before["VmRSS"],
            "peak": first["rss_kib_with"]["VmRSS"],
            "after_close": first["rss_kib_after"]["VmRSS"],
        },
        "memory_returned": {
            "value": round(returned, 3),
            "kib_kept_after_first_round": first["rss_kib_after"]["VmRSS"] - before["VmRSS"],
            "kib_kept_after_last_round": last_after - before["VmRSS"],
            "target": f"memory returned (>= {TARGET_RETURNED_SHARE:.0%} of the growth)",
            "met": returned >= TARGET_RETURNED_SHARE,
        },
        "client_meanwhile": {
            "target": "every record back in every round",
            "met": clients_ok,
        },
        "warm_up": warm,
        **({"pools_census": pools_seen} if pools else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--baseline-src", type=Path, help="a tree of another commit, measured in the same run"
    )
    parser.add_argument(
        "--pythonmalloc", help="PYTHONMALLOC for this tree's broker (e.g. malloc)", default=None
    )
    parser.add_argument(
        "--jemalloc", type=Path, help="libjemalloc.so.2 to preload into this tree's broker"
    )
    parser.add_argument(
        "--census",
        type=Path,
        help="write what the first burst left alive in each broker to CENSUS.<label>.json",
    )
    parser.add_argument(
        "--pools",
        action="store_true",
        help="read each broker's _pools.census() before, with and after the first burst",
    )
    args = parser.parse_args()
    if args.census and args.pools:
        parser.error("--census and --pools both answer SIGUSR2: one at a time")

    def measure(label: str, env: dict[str, str] | None) -> dict:
        return run(
            args.connections,
            args.records,
            args.rounds,
            report=lambda line: print(f"{label}: {line}", file=sys.stderr),
            env=env,
            census=(
                args.census.resolve().with_name(f"{args.census.name}.{label}.json")
                if args.census
                else None
            ),
            pools=args.pools,
        )

    candidate_env = {"PYTHONMALLOC": args.pythonmalloc} if args.pythonmalloc else {}
    if args.jemalloc is not None:
        if not args.jemalloc.is_file():
            parser.error(f"--jemalloc {args.jemalloc}: no such file")
        candidate_env.update(JEMALLOC_ENV, LD_PRELOAD=str(args.jemalloc.resolve()))
    result: dict = {"candidate": measure("candidate", candidate_env or None)}
    if args.baseline_src is not None:
        baseline = args.baseline_src.resolve()
        if not (baseline / "kafkalite" / "__init__.py").is_file():
            parser.error(f"--baseline-src {baseline}: no kafkalite package there")
        result["baseline"] = measure("baseline", {"PYTHONPATH": str(baseline)})
    result["summary"] = {
        label: {
            **figures["rss_kib"],
            "share_given_back": figures["memory_returned"]["value"],
            "kib_per_connection": figures["kib_per_connection"]["value"],
        }
        for label, figures in result.items()
    }
    result["summary"]["candidate"]["environment"] = candidate_env
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
