"""A SparkSession shared by every Spark test of the run (tests/bench and tests/spark): Spark
start-up is the slow part, so there is one session, started on first use, and a failed test
cannot poison the tests after it (see SparkHolder)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"

INSTALL_HINT = "install the test extras: .venv/bin/pip install -e '.[test]' (pyspark, pyarrow)"

HOLDERS: list[SparkHolder] = []


def bench_on_path() -> None:
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))


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
            bench_on_path()
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
