"""The package as a user gets it: ``python -m build`` makes an sdist and a wheel without a
deprecation warning; the wheel is a platform wheel (``cp3XY-cp3XY-linux_x86_64``) holding the
validator's compiled C walk, the sdist holds its source, and built from the sdist without a C
compiler the wheel still builds (the extension is optional: the validator then walks in
Python); the wheel, with its ``spark`` extra, installs into a fresh venv from the
package index (pip's cache keeps it fast, nothing of this checkout or of the test venv is
reused), its validator on the C walk; and from that venv, run the way a user runs it (no PYTHONPATH, the venv not on PATH,
not activated), ``kafkalite serve`` serves a real client and a Spark job reads a topic through
the installed ``kafkalite.spark``, its Python workers on the venv's interpreter without
PYSPARK_PYTHON set (kafkalite/spark/workers.py).

One venv for the broker and Spark: the spark extra installs the base package too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60


def user_env() -> dict[str, str]:
    """The environment of a user who installed kafkalite into a venv: this checkout is not on
    the path, the venv's bin is not on PATH, no Spark Python is chosen. HOME stays: pip's cache
    is there."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    }
    env["PATH"] = os.pathsep.join(
        p
        for p in env.get("PATH", "").split(os.pathsep)
        if p and not p.startswith(str(Path(sys.executable).parent)) and ".venv" not in p
    )
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


@pytest.fixture(scope="module")
def workdir():
    """A directory of this module's own: pytest's base temp directory is pruned by any other
    pytest run of the machine (it keeps the last three), and a venv deleted under a running
    broker makes no sense as a failure."""
    import shutil
    import tempfile

    where = Path(tempfile.mkdtemp(prefix="kafkalite-packaging-"))
    yield where
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(scope="module")
def dist(workdir: Path) -> Path:
    out = workdir / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    # setuptools' "project.license as a TOML table is deprecated" (and any other) is a failure
    said = built.stdout + built.stderr
    assert not re.search(r"deprecat", said, re.IGNORECASE), said
    return out


def test_make_dist_gives_a_wheel_and_an_sdist_with_the_license(dist: Path) -> None:
    [wheel] = dist.glob("kafkalite-*.whl")
    [sdist] = dist.glob("kafkalite-*.tar.gz")
    import tarfile
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = z.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "kafkalite/admin/console/index.html" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in metadata
    assert "Requires-Python: >=3.11" in metadata
    assert "Provides-Extra: spark" in metadata
    assert "kafkalite = kafkalite.__main__:main" in entry_points
    with tarfile.open(sdist) as t:
        assert any(n.endswith("/LICENSE") for n in t.getnames())
        in_sdist = t.getnames()
    # the C extensions (the validator's walk, the empty pools' release): compiled into a
    # platform wheel, their sources in the sdist only
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert wheel.name == f"kafkalite-0.1.0-{tag}-{tag}-linux_x86_64.whl", wheel.name
    assert any(re.fullmatch(r"kafkalite/schema_registry/_walk\.cpython-.*\.so", n) for n in names)
    assert any(re.fullmatch(r"kafkalite/network/_pools\.cpython-.*\.so", n) for n in names)
    assert not any(n.endswith(".c") for n in names)
    assert any(n.endswith("/kafkalite/schema_registry/_walk.c") for n in in_sdist)
    assert any(n.endswith("/kafkalite/network/_pools.c") for n in in_sdist)
    assert not any(n.endswith(".so") for n in in_sdist)


def test_without_a_c_compiler_the_wheel_still_builds(dist: Path, workdir: Path) -> None:
    """The extension is optional: a machine without a C compiler (CC=false) still gets a
    wheel, one without the compiled walk."""
    [sdist] = dist.glob("kafkalite-*.tar.gz")
    out = workdir / "dist-no-compiler"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(sdist)],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, CC="false"),
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = out.glob("kafkalite-*.whl")
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert "kafkalite/schema_registry/validation.py" in names
    assert not any(n.endswith(".so") for n in names)


@pytest.fixture(scope="module")
def venv(dist: Path, workdir: Path) -> Path:
    """A fresh venv with the wheel and its spark extra installed from the index."""
    [wheel] = dist.glob("kafkalite-*.whl")
    where = workdir / "venv"
    # as the user's shell has it: with this checkout on PYTHONPATH, pip would take the
    # kafkalite.egg-info that the build leaves here for an installed kafkalite
    env = user_env()
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300, env=env)
    installed = subprocess.run(
        # --no-compile: byte-compiling pyspark's thousands of modules is most of an install's
        # time, and Python compiles what it imports anyway
        [
            str(where / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "--disable-pip-version-check",
            f"{wheel}[spark]",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "dependency conflicts" not in installed.stderr, installed.stderr
    return where


def started(process: subprocess.Popen, deadline: float) -> str:
    """The broker's bootstrap address, from its "started" log line."""
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"kafkalite serve exited with {process.wait()}")
        if '"started"' in line:
            [listener] = json.loads(line)["listeners"]
            return listener.split("://", 1)[1]
    raise AssertionError("kafkalite serve did not start in time")


@pytest.fixture(scope="module")
def served(venv: Path, workdir: Path):
    """``kafkalite serve`` of the venv, its ports picked by the OS; (bootstrap, env)."""
    home = workdir / "home"
    home.mkdir()
    env = user_env()
    process = subprocess.Popen(
        [
            str(venv / "bin" / "kafkalite"),
            "serve",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            "admin.listener=http://127.0.0.1:0",
            "--override",
            f"log.dirs={home / 'data'}",
        ],  # fmt: skip
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield started(process, time.monotonic() + START_TIMEOUT_S), env
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_installed_broker_serves_a_real_client(venv: Path, served) -> None:
    bootstrap, env = served
    version = subprocess.run(
        [str(venv / "bin" / "kafkalite"), "--version"], env=env, capture_output=True, text=True
    )
    assert version.stdout.strip() == "kafkalite 0.1.0", version.stderr
    native = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from kafkalite.schema_registry import validation; print(validation._walk); "
            "from kafkalite.network import server; print(server._release_empty_pools)",
        ],
        cwd=venv,  # not this checkout, whose kafkalite `-c` would import
        env=env,
        capture_output=True,
        text=True,
    )
    assert f"{venv}" in native.stdout and "_walk" in native.stdout, native.stdout + native.stderr
    assert "built-in function release" in native.stdout, native.stdout + native.stderr
    created = subprocess.run(
        [
            str(venv / "bin" / "kafkalite"),
            "topics",
            "create",
            "installed",
            "-p",
            "2",
            "-b",
            bootstrap,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("installed", f"value-{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "installed"})
    consumer.assign([TopicPartition("installed", p, 0) for p in (0, 1)])
    got = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value().decode())
    finally:
        consumer.close()
    assert sorted(got) == sorted(f"value-{i}" for i in range(10))


SPARK_JOB = """
import json, sys
from pyspark.sql import SparkSession
from kafkalite.spark import KafkaDataSource

spark = (SparkSession.builder.master("local[1]")
         .config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.sql.shuffle.partitions", "2")
         .getOrCreate())
spark.dataSource.register(KafkaDataSource)
rows = (spark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", sys.argv[1])
        .option("subscribe", "installed")
        .load()
        .selectExpr("CAST(value AS STRING) AS v")
        .collect())
print("VALUES " + json.dumps(sorted(r.v for r in rows)))
spark.stop()
"""


def test_spark_reads_through_the_installed_package_without_an_activated_venv(
    venv: Path, served, workdir: Path
) -> None:
    """Spark's Python workers would run ``python3`` from PATH (not the venv's, which is not on
    PATH): ModuleNotFoundError: No module named 'kafkalite', unless kafkalite.spark points
    them at the driver's interpreter."""
    bootstrap, env = served
    # the records of test_the_installed_broker_serves_a_real_client, or these if run alone
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("installed", b"from-spark-test", partition=0)
    assert producer.flush(30) == 0
    job = workdir / "job.py"
    job.write_text(SPARK_JOB)
    ran = subprocess.run(
        [str(venv / "bin" / "python"), str(job), bootstrap],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-5000:]
    [line] = [x for x in ran.stdout.splitlines() if x.startswith("VALUES ")]
    values = json.loads(line[len("VALUES ") :])
    assert "from-spark-test" in values
