"""bench/scale_cluster.py --gc-census: the hook it gives each broker counts the cyclic garbage
the freezer kept (decision 0072), names its types, and frees it, so the next count starts
from nothing. Run here in a small child process standing for a broker (``serve`` in its
command line, as the hook requires), not in a 3-broker cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import scale_cluster

CHILD = r"""
import gc, json, os, signal, sys

class Node:
    pass

def pair():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a

def freezer(phase, info):  # as the broker's: freezes what a full collection leaves
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()

gc.callbacks.append(freezer)
held = [pair() for _ in range(100)]
gc.collect()  # frozen while alive, by the freezer
del held  # then dropped: 200 objects in cycles, frozen, that no collection would walk
out = f"{os.environ['SCALE_GC_CENSUS_OUT']}.{os.getpid()}.json"
counts = []
for _ in range(2):
    os.kill(os.getpid(), signal.SIGUSR2)  # the handler runs before the next line
    with open(out) as f:
        counts.append(json.load(f))
print(json.dumps(counts))
"""


def hooked_env(tmp_path) -> dict[str, str]:
    """An environment whose Python runs the census hook as its sitecustomize."""
    (tmp_path / "sitecustomize.py").write_text(scale_cluster.GC_CENSUS_HOOK)
    return {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "SCALE_GC_CENSUS_OUT": str(tmp_path / "census"),
    }


def test_the_census_hook_counts_names_and_frees_what_a_freeze_kept(tmp_path):
    env = hooked_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    first, second = json.loads(done.stdout)
    kept = dict((name, count) for name, count in first["kept_types"])
    assert kept.get("__main__.Node") == 200
    assert first["kept_by_freeze"] >= 200 and first["frozen"] >= 200
    # freed by the first census: the second finds none of them
    assert "__main__.Node" not in dict((name, count) for name, count in second["kept_types"])


def test_the_hook_stays_out_of_processes_that_are_not_brokers(tmp_path):
    env = hooked_env(tmp_path)
    code = "import signal; print(signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "True"
