"""bench/scale_profile.py's reading of a py-spy speedscope file (no broker, no py-spy): idle
samples told from busy ones for a uvloop loop and a pool thread, the main thread found by its
id, the callback under the loop's runner, the longest run of busy samples, and the collapsed
stacks written beside the profile."""

from __future__ import annotations

import json
from pathlib import Path

from scale_profile import Recorder, _callback, _is_idle, _read_profile

FRAMES = [
    {"name": "<module>", "file": "/x/kafkalite/__main__.py", "line": 1},  # 0
    {"name": "Runner.run", "file": "/usr/lib/python3.11/asyncio/runners.py", "line": 118},  # 1
    {"name": "handle_metadata", "file": "/x/kafkalite/apis/metadata.py", "line": 9},  # 2
    {"name": "partition_entries", "file": "/x/kafkalite/apis/metadata.py", "line": 20},  # 3
    {"name": "render", "file": "/x/kafkalite/admin/metrics.py", "line": 5},  # 4
    {"name": "Thread.run", "file": "/usr/lib/python3.11/threading.py", "line": 982},  # 5
    {"name": "_worker", "file": "/usr/lib/python3.11/concurrent/futures/thread.py", "line": 81},
    {"name": "Log.__init__", "file": "/x/kafkalite/storage/log.py", "line": 40},  # 7
]
IDLE = [0, 1]
METADATA = [0, 1, 2, 3]
METRICS = [0, 1, 4]
POOL_IDLE = [5, 6]
POOL_BUSY = [5, 6, 7]


def label(i: int) -> str:
    frame = FRAMES[i]
    return f"{frame['name']} ({frame['file']})"


def write_profile(path: Path, pid: int) -> None:
    main = [IDLE, METADATA, METADATA, METADATA, IDLE, METRICS, IDLE, IDLE, METADATA, IDLE]
    pool = [POOL_IDLE] * 6 + [POOL_BUSY] * 4
    data = {
        "shared": {"frames": FRAMES},
        "profiles": [
            # the main thread may have no name yet: it is found by its id, the process's
            {"name": f'Thread {pid} ""', "samples": main, "weights": [0.05] * 10},
            {"name": 'Thread 99 "ThreadPoolExecutor-0_0"', "samples": pool, "weights": [0.05] * 10},
        ],
    }
    path.write_text(json.dumps(data))


def test_idle_and_callback() -> None:
    assert _is_idle([label(i) for i in IDLE])
    assert _is_idle([label(i) for i in POOL_IDLE])
    assert not _is_idle([label(i) for i in METADATA])
    assert not _is_idle([label(i) for i in POOL_BUSY])
    assert _callback([label(i) for i in METADATA]) == label(2)
    assert _callback([label(i) for i in IDLE]) is None


def test_read_profile(tmp_path: Path) -> None:
    recorder = Recorder.__new__(Recorder)
    recorder.pid, recorder.broker_id, recorder.rate = 1234, 1, 20
    recorder.path = tmp_path / "broker-1-1234.speedscope.json"
    recorder.started, recorder.stopped = 0.0, 1.0  # 10 samples in 1 s: 0.1 s each
    write_profile(recorder.path, 1234)

    out = _read_profile(recorder, 5)

    main = out["main"]
    assert main["samples"] == 10
    assert main["busy_share"] == 0.5
    assert main["longest_busy_s"] == 0.3  # the three Metadata samples in a row
    assert main["longest_busy"]["callbacks"] == [
        ["handle_metadata (kafkalite/apis/metadata.py)", 1.0]
    ]
    assert main["callbacks"][0] == ["handle_metadata (kafkalite/apis/metadata.py)", 0.4]
    assert ["partition_entries (kafkalite/apis/metadata.py)", 0.4] in main["top_own"]
    # the loop's own frames are left out of the cumulative list
    assert all("Runner.run" not in name for name, _ in main["top_cumulative"])
    assert out["other_threads"]["ThreadPoolExecutor-0_0"] == {
        "busy_share": 0.4,
        "longest_busy_s": 0.4,
    }
    assert out["controller"] is None
    collapsed = (tmp_path / "broker-1-1234.txt").read_text().splitlines()
    assert (
        "MainThread;<module> (kafkalite/__main__.py:1);Runner.run (asyncio/runners.py:118) 5"
        in (collapsed)
    )
    assert sum(int(line.rsplit(" ", 1)[1]) for line in collapsed) == 20
