"""Fixtures of the bench tests: the bench/ scripts on sys.path, one SparkSession for the whole
directory (Spark start-up is the slow part), a Redis server for the peer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

INSTALL_HINT = "install the bench extras: .venv/bin/pip install -e '.[test]' (pyspark, pyarrow)"


@pytest.fixture(scope="session")
def spark():
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        pytest.fail(f"{e.name} is missing: {INSTALL_HINT}")
    import spark_load

    spark_load.check_java()
    session = spark_load.build_spark("local[4]", app_name="kafkalite-bench-tests")
    yield session
    session.stop()


@pytest.fixture
def redis_server():
    from redis_peer import RedisServer

    with RedisServer() as server:
        yield server
