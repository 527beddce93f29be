"""The embedded store's share of creating many topics, batch by batch (prints numbers; not a test).

What one CreateTopics batch asks of the store on one broker, replayed in-process on an
``EmbeddedStore`` with its journal fsynced (the default), with the cyclic collector running:
the request's reads (``/brokers/topics``, ``/admin/delete_topics``, ``/config/topics``
listed), one ``multi`` with each topic's config and topic nodes, then the controller's part
(``/brokers/topics`` listed again, the new topics' nodes read with watches, one ``multi`` with
each partition's ``partitions``, ``0`` and ``state`` nodes). Each batch's seconds are printed,
wall and CPU, with the last batches against the first, and the store's open afterwards in CPU
seconds (snapshot after a clean close, and snapshot plus journal after a crash: the store is
abandoned without closing).

    PYTHONPATH=. .venv/bin/python bench/coord_create_scale.py [--topics 10000] [--batch 500]

To compare with another tree, run its copy of this file with that tree on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkalite.coord import CreateOp  # noqa: E402
from kafkalite.coord.embedded import EmbeddedStore  # noqa: E402

TOPIC_DATA = b'{"partitions":{"0":[0]},"topic_id":"wwoumGct8d6hFrChlW2FHQ","adding_replicas":{},"removing_replicas":{},"version":3}'  # noqa: E501
STATE_DATA = b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}'


async def create(
    store: EmbeddedStore, topics: int, batch: int, cpu: list[float] | None = None
) -> list[float]:
    session = await store.open_session()
    for path in (
        "/brokers",
        "/brokers/topics",
        "/config",
        "/config/topics",
        "/admin",
        "/admin/delete_topics",
    ):
        await session.create(path, b"")
    seconds = []
    for start in range(0, topics, batch):
        names = [f"scale-{i:05d}" for i in range(start, min(start + batch, topics))]
        began, began_cpu = time.perf_counter(), time.process_time()
        existing = set(await session.get_children("/brokers/topics"))
        set(await session.get_children("/admin/delete_topics"))
        set(await session.get_children("/config/topics"))
        assert not existing & set(names)
        ops = []
        for name in names:
            ops.append(CreateOp(f"/config/topics/{name}", b'{"version":1,"config":{}}'))
            ops.append(CreateOp(f"/brokers/topics/{name}", TOPIC_DATA))
        await session.multi(ops)
        topics_now = set(await session.get_children("/brokers/topics"))
        new = sorted(topics_now - existing)
        await session.get_data_and_watch_many([f"/brokers/topics/{n}" for n in new])
        ops = []
        for name in new:
            ops.append(CreateOp(f"/brokers/topics/{name}/partitions", b""))
            ops.append(CreateOp(f"/brokers/topics/{name}/partitions/0", b""))
            ops.append(CreateOp(f"/brokers/topics/{name}/partitions/0/state", STATE_DATA))
        await session.multi(ops)
        seconds.append(time.perf_counter() - began)
        if cpu is not None:
            cpu.append(time.process_time() - began_cpu)
    return seconds


def open_seconds(data_dir: str) -> float:
    began = time.process_time()
    store = EmbeddedStore(data_dir)
    took = time.process_time() - began
    asyncio.run(store.close())
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="coord-create-scale-")
    try:
        crashed = os.path.join(root, "crashed")
        store = EmbeddedStore(crashed)
        cpu: list[float] = []
        seconds = asyncio.run(create(store, args.topics, args.batch, cpu))
        store._journal.flush()
        # Abandoned as by kill -9: the lock goes with the descriptor, nothing else is written.
        os.close(store._lock_fd)
        store._lock_fd = None
        clean = os.path.join(root, "clean")
        shutil.copytree(crashed, clean)
        clean_store = EmbeddedStore(clean)  # replays, then a clean close leaves a snapshot
        asyncio.run(clean_store.close())
        copies = []
        for kind in ("crashed", "clean"):
            for i in range(3):
                copy = os.path.join(root, f"{kind}-{i}")
                shutil.copytree(crashed if kind == "crashed" else clean, copy)
                copies.append((kind, copy))
        gc.disable()  # as in the broker's start-up
        opens: dict[str, list[float]] = {"crashed": [], "clean": []}
        for kind, copy in copies:
            opens[kind].append(round(open_seconds(copy), 3))
        gc.enable()
        print(
            json.dumps(
                {
                    "topics": args.topics,
                    "batch": args.batch,
                    "total_s": round(sum(seconds), 3),
                    "first_s": round(seconds[0], 4),
                    "last_s": round(seconds[-1], 4),
                    "last_over_first": round(seconds[-1] / seconds[0], 2),
                    "mean_of_last_3_over_first_3": round(sum(seconds[-3:]) / sum(seconds[:3]), 2),
                    "batches_s": [round(s, 4) for s in seconds],
                    "cpu_total_s": round(sum(cpu), 3),
                    "cpu_last_3_over_first_3": round(sum(cpu[-3:]) / sum(cpu[:3]), 2),
                    "open_after_crash_s": opens["crashed"],
                    "open_after_clean_close_s": opens["clean"],
                    "load_average": os.getloadavg()[0],
                }
            )
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
