"""Fixtures of the bench tests: the bench/ scripts on sys.path, a Redis server for the peer.
The shared SparkSession (`spark_holder`, `spark`) is in tests/conftest.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))


@pytest.fixture
def redis_server():
    from redis_peer import RedisServer

    with RedisServer() as server:
        yield server
