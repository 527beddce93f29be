"""Shared fixtures: kafkalite brokers as subprocesses (tests/harness/broker.py)."""

import pytest

from tests.harness.broker import BrokerProcess


@pytest.fixture
def broker_factory(tmp_path):
    """Make (not start) brokers on fresh data dirs; every one is stopped at teardown."""
    made: list[BrokerProcess] = []

    def make(name: str = "broker", **kwargs) -> BrokerProcess:
        b = BrokerProcess(tmp_path / name, **kwargs)
        made.append(b)
        return b

    yield make
    for b in made:
        if b.running:
            try:
                b.stop()
            except TimeoutError:
                b.kill()


@pytest.fixture
def broker(broker_factory):
    """A started single broker on a fresh data dir."""
    return broker_factory().start()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for a whole test module (tests use distinct topics)."""
    b = BrokerProcess(tmp_path_factory.mktemp("shared-broker"))
    b.start()
    yield b
    if b.running:
        try:
            b.stop()
        except TimeoutError:
            b.kill()


# -- Spark: one shared session for tests/bench and tests/spark (tests/harness/spark.py) ----------


@pytest.fixture(scope="session")
def spark_holder():
    from tests.harness.spark import HOLDERS, INSTALL_HINT, SparkHolder, bench_on_path

    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        pytest.fail(f"{e.name} is missing: {INSTALL_HINT}")
    bench_on_path()
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
        from tests.harness.spark import HOLDERS

        for holder in HOLDERS:
            holder.poisoned = True
    return report
