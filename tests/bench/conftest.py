"""Fixtures of the bench tests: the bench/ scripts on sys.path, a SparkSession shared by the
directory (Spark start-up is the slow part) that a failed test cannot poison, a Redis server for
the peer."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

INSTALL_HINT = "install the bench extras: .venv/bin/pip install -e '.[test]' (pyspark, pyarrow)"


HOLDERS: list[SparkHolder] = []


class SparkHolder:
    """One SparkSession for the tests, replaced when it may be broken.

    A test that fails mid-call (pytest-timeout's signal lands while py4j waits for the JVM's
    answer) can leave the gateway connection with an unread answer: every later call then gets
    a wrong answer or a py4j error, and one timeout turns into failures of every Spark test
    after it. So a failed Spark test marks the session poisoned, each test first checks the
    session answers a trivial job correctly, and a poisoned or unhealthy session is thrown
    away with its JVM and a new one built."""

    def __init__(self) -> None:
        self.session = None
        self.poisoned = False
        self.builds = 0

    def get(self):
        if self.session is not None and (self.poisoned or not self._healthy()):
            self.discard()
        if self.session is None:
            import spark_load

            self.session = spark_load.build_spark("local[4]", app_name="kafkalite-bench-tests")
            self.builds += 1
            self.poisoned = False
        return self.session

    def _healthy(self) -> bool:
        try:
            return self.session.sparkContext.parallelize(range(10), 2).sum() == 45
        except Exception:
            return False

    def discard(self) -> None:
        """Stop the session and its JVM whatever state they are in, so the next build starts
        a new gateway rather than reusing the broken one."""
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        session, self.session = self.session, None
        with contextlib.suppress(Exception):
            session.stop()
        gateway = SparkContext._gateway
        if gateway is not None:
            with contextlib.suppress(Exception):
                gateway.shutdown()
            proc = getattr(gateway, "proc", None)
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.kill()
                    proc.wait(timeout=30)
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None


@pytest.fixture(scope="session")
def spark_holder():
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        pytest.fail(f"{e.name} is missing: {INSTALL_HINT}")
    import spark_load

    spark_load.check_java()
    holder = SparkHolder()
    HOLDERS.append(holder)
    yield holder
    HOLDERS.remove(holder)
    if holder.session is not None:
        holder.discard()


@pytest.fixture
def spark(spark_holder):
    return spark_holder.get()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Any failure of a test that used Spark, in its set-up, call or tear-down, poisons the
    session for the tests after it."""
    report = yield
    if report.failed and "spark_holder" in getattr(item, "fixturenames", ()):
        for holder in HOLDERS:
            holder.poisoned = True
    return report


@pytest.fixture
def redis_server():
    from redis_peer import RedisServer

    with RedisServer() as server:
        yield server
