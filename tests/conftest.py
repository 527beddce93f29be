"""Shared fixtures (kafkalite brokers as subprocesses: ``kafkalite.testing.Broker``) and the test
tiers.

The tiers are pytest markers, registered in pyproject.toml and checked with ``--strict-markers``:

- ``integration``: starts a broker process, or another program (kcat, schemathesis' ``st``);
- ``zookeeper``: starts Debian's ZooKeeper (with java);
- ``system``: a multi-broker scenario with faults (``tests/system``);
- ``spark``: a Spark session (a JVM);
- ``browser``: Debian's chromium through chromedriver;
- ``bench``: a benchmark run as a test (``tests/bench``).

A test with none of them is in the unit tier, which ``make test-fast`` runs: it starts no other
process, so it needs no Debian package. Markers are applied here: by directory; by the test's
module (one that makes a ``Broker(subprocess=True)`` or imports ``ZooKeeperServer``); by the
fixtures it
uses (subprocess brokers, Spark, ZooKeeper); and, for the few tests outside the tiered
directories that start a program some other way, by name in ``_STARTS_A_PROCESS``. In the unit
tier (``--unit-tier``, as ``make test-fast`` runs it) starting a process fails the test with a
message saying to mark it, so a test that needs a component cannot slip into the fast loop. There
each property test draws a quarter of its examples (``UNIT_TIER_EXAMPLES``); ``make test`` draws
them all.
"""

import datetime
import functools
import subprocess
from pathlib import Path

import kio.static.primitive as kio_primitive
import pytest
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st

from kafkalite.testing import Broker

# Property tests draw fresh examples on every run, in CI too (this profile replaces the "ci" one
# hypothesis picks when $CI is set, which derandomizes), keep failures in .hypothesis/ and print
# the blob that replays one. Generation or an example that is slow on a loaded 2-core machine
# is not a failure of the code under test: no health check on speed, and no per-example
# deadline (hypothesis's default of 200 ms is a timed assertion).
settings.register_profile(
    "kafkalite", suppress_health_check=[HealthCheck.too_slow], print_blob=True, deadline=None
)
settings.load_profile("kafkalite")


def _unambiguous_aware_datetimes(phantom: type) -> st.SearchStrategy:
    """kio's strategy for its timezone-aware timestamps (a UTC instant seen in any zone), less
    the instants that fall in a repeated local hour (a DST fall-back): Python never finds such a
    datetime equal to one of another zone (PEP 495), so a codec round trip, which can only give
    back UTC, would fail on equality while losing nothing."""
    top = int(datetime.datetime.max.replace(tzinfo=datetime.UTC).timestamp()) - 1

    @st.composite
    def draw_one(draw):
        instant = datetime.datetime.fromtimestamp(draw(st.integers(0, top)), tz=datetime.UTC)
        try:
            local = instant.astimezone(draw(st.timezones()))
        except OverflowError:  # past year 9999 in that zone
            assume(False)
        assume(local.replace(fold=1 - local.fold).utcoffset() == local.utcoffset())
        return phantom.parse(local)

    return draw_one()


for _phantom in (kio_primitive.TZAware, kio_primitive.TZAwareMicros):
    st.register_type_strategy(_phantom, _unambiguous_aware_datetimes(_phantom))


def subprocess_broker(data_dir, *, overrides: dict[str, str] | None = None, **kwargs) -> Broker:
    """A ``python -m kafkalite serve`` broker (not started) on ``data_dir``: the fixtures'
    brokers. Its admin API is off unless ``overrides`` name an ``admin.listener`` (then
    ``start()`` also waits for it); ``kwargs`` go to ``Broker`` (``broker_id``, ``port``,
    ``env``)."""
    overrides = dict(overrides or {})
    admin = bool(overrides.get("admin.listener"))
    return Broker(overrides, subprocess=True, data_dir=data_dir, admin=admin, **kwargs)


def _stop(broker: Broker) -> None:
    if broker.running:
        try:
            broker.stop()
        except TimeoutError:
            broker.kill()


@pytest.fixture
def broker_factory(tmp_path):
    """Make (not start) subprocess brokers on fresh data dirs; every one is stopped at
    teardown. ``make(name, overrides=..., broker_id=..., port=..., env=...)``."""
    made: list[Broker] = []

    def make(name: str = "broker", **kwargs) -> Broker:
        b = subprocess_broker(tmp_path / name, **kwargs)
        made.append(b)
        return b

    yield make
    for b in made:
        _stop(b)


@pytest.fixture
def broker(broker_factory):
    """A started single subprocess broker on a fresh data dir."""
    return broker_factory().start()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One subprocess broker for a whole test module (tests use distinct topics)."""
    b = subprocess_broker(tmp_path_factory.mktemp("shared-broker"))
    b.start()
    yield b
    _stop(b)


# -- Spark: one shared session for tests/bench and tests/spark (tests/spark/session.py) ----------


@pytest.fixture(scope="session")
def spark_holder():
    from tests.spark.session import HOLDERS, INSTALL_HINT, SparkHolder, bench_on_path

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
        from tests.spark.session import HOLDERS

        for holder in HOLDERS:
            holder.poisoned = True
    return report


# -- test tiers ----------------------------------------------------------------------------------

TIERS = ("integration", "zookeeper", "system", "spark", "browser", "bench")

_BY_DIRECTORY = {
    "integration": ("integration",),
    "system": ("system", "zookeeper"),
    "spark": ("spark",),
    "bench": ("bench",),
}

# Tests outside the tiered directories that start a broker process or another program: a path
# names a whole module, ``path::name`` one test (with all its parametrisations).
_STARTS_A_PROCESS = {
    "tests/cli/test_serve.py": ("integration",),
    "tests/cli/test_root.py": ("integration",),
    "tests/cli/test_topics.py": ("integration",),
    "tests/cli/test_produce.py": ("integration",),
    "tests/cli/test_consume.py": ("integration",),
    "tests/observability/test_logging.py::test_every_line_is_json": ("integration",),
    "tests/admin/test_app.py": ("integration",),
    "tests/cli/test_admin_api.py": ("integration",),
    "tests/cli/test_kafka_semantics.py": ("integration",),
    "tests/admin/test_console.py": ("integration", "browser"),
    "tests/admin/test_console_cluster.py": ("integration", "browser"),
    "tests/admin/test_console_login.py": ("integration", "browser"),
    "tests/admin/test_console_schemas.py": ("integration", "browser"),
    "tests/admin/test_schemas_and_broker_configs.py": ("integration",),
    "tests/network/test_quotas.py::test_a_broker_with_an_unresolvable_override_stops_naming_the_key": (
        "integration",
    ),
    "tests/network/test_quotas.py::test_a_client_on_other_connections_is_unaffected_by_a_rejected_address": (
        "integration",
    ),
    "tests/protocol/test_validator.py::test_huge_declared_array_is_rejected_before_the_native_reader": (
        "integration",
    ),
    "tests/storage/test_file_records.py::test_reading_a_truncated_view_does_not_crash_the_process": (
        "integration",
    ),
    "tests/storage/test_log_dir_faults.py": ("integration",),
    "tests/storage/test_log_recovery.py::test_sigkill_mid_write_keeps_every_complete_batch": (
        "integration",
    ),
    "tests/storage/test_verifier.py::test_storage_verify_command": ("integration",),
    "tests/storage/test_verifier.py::test_an_index_cut_mid_entry_is_a_finding": ("integration",),
    "tests/testing/test_broker.py::test_subprocess_broker_with_kafka_python_and_kill": (
        "integration",
    ),
    "tests/testing/test_broker.py::test_a_subprocess_broker_is_ready_when_start_returns": (
        "integration",
    ),
    "tests/testing/test_broker.py::test_a_quiet_subprocess_broker_on_a_given_port_is_spawned_then_waited_for": (
        "integration",
    ),
    "tests/testing/test_cluster.py": ("integration",),
    "tests/testing/test_pytest_plugin.py": ("integration",),
}


@functools.cache
def _makes_subprocess_brokers(path: Path) -> bool:
    """The module starts ``kafkalite.testing.Broker(subprocess=True)`` brokers itself (in a
    module fixture, say). tests/testing/ is left out: its modules test both kinds of broker,
    and name their process-starting tests in ``_STARTS_A_PROCESS``."""
    if "testing" in path.parts[-2:-1]:
        return False
    try:
        return "subprocess=True" in path.read_text()
    except OSError:
        return False


def _tiers_of(item: pytest.Item) -> set[str]:
    path = item.nodeid.split("::")[0]
    parts = path.split("/")
    tiers: set[str] = set(_BY_DIRECTORY.get(parts[1], ())) if len(parts) > 2 else set()
    name = item.nodeid.split("[")[0]
    for key, marks in _STARTS_A_PROCESS.items():
        if key == path or key == name:
            tiers.update(marks)
    module = getattr(item, "module", None)
    names = vars(module) if module is not None else {}
    if "Broker" in names and _makes_subprocess_brokers(item.path):
        tiers.add("integration")
    if "ZooKeeperServer" in names or "started_zookeeper" in names:
        tiers.update(("integration", "zookeeper"))
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("backend") == "zookeeper":
        tiers.add("zookeeper")
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & {"broker", "broker_factory", "shared_broker", "admin_broker", "secured"}:
        tiers.add("integration")
    if fixtures & {"spark", "spark_holder"}:
        tiers.add("spark")
    if fixtures & {"zookeeper_server", "zookeeper"}:
        tiers.add("zookeeper")
    return tiers


# Under pytest-xdist (``make test`` runs a worker per core and one more, ``--dist loadscope``)
# the unit of work is a module, so a module's shared broker starts once, except that every Spark
# test is one unit: one JVM at a time, its session shared. The units go out longest first (by
# tier, in the order below, then in collection order), so that no long one is left to start
# last while the other workers idle.
_LONGEST_FIRST = ("system", "spark", "zookeeper", "browser", "bench", "integration")


def _is_spark_module(path: str) -> bool:
    return path.startswith(("tests/spark/", "tests/bench/test_spark"))


def _work_unit(nodeid: str) -> str:
    module = nodeid.split("::")[0]
    return "spark" if _is_spark_module(module) else module


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank: dict[str, int] = {}
    for item in items:
        tiers = _tiers_of(item)
        for tier in sorted(tiers):
            item.add_marker(getattr(pytest.mark, tier))
        module = item.nodeid.split("::")[0]
        if "spark" in tiers and not _is_spark_module(module):
            raise pytest.UsageError(
                f"{item.nodeid} needs Spark: put it under tests/spark/ (or tests/bench/test_spark*) "
                "so that pytest-xdist runs it with the other Spark tests"
            )
        order = min((_LONGEST_FIRST.index(t) for t in tiers), default=len(_LONGEST_FIRST))
        unit = _work_unit(item.nodeid)
        rank[unit] = min(rank.get(unit, order), order)
    if getattr(config.option, "numprocesses", None):
        # stable: the tests of a unit keep their order
        items.sort(key=lambda item: rank[_work_unit(item.nodeid)])
    if config.getoption("--unit-tier", False):
        _fewer_examples(items)


UNIT_TIER_EXAMPLES = 4
"""The unit tier runs each property test with a quarter of its examples (at least 10, or all of
them when it asks for fewer): it is the inner loop, and its property tests were half of its
CPU. ``make test``, which CI runs, draws every example each test asks for."""


def _fewer_examples(items: list[pytest.Item]) -> None:
    """``UNIT_TIER_EXAMPLES``: each ``@given`` test's settings (read when the test runs) and
    each stateful test case's ``settings`` replaced once by a copy with fewer examples."""
    done: set[int] = set()

    def fewer(current: settings) -> settings:
        count = current.max_examples
        return settings(current, max_examples=max(min(count, 10), count // UNIT_TIER_EXAMPLES))

    for item in items:
        case = getattr(item, "cls", None)
        machine = getattr(getattr(case, "runTest", None), "_hypothesis_state_machine_class", None)
        if machine is not None:
            if id(case) not in done:
                done.add(id(case))
                case.settings = fewer(case.settings)
            continue
        function = getattr(item, "obj", None)
        function = getattr(function, "__func__", function)
        if getattr(function, "is_hypothesis_test", False) and id(function) not in done:
            done.add(id(function))
            current = getattr(function, "_hypothesis_internal_use_settings", None)
            if isinstance(current, settings):
                function._hypothesis_internal_use_settings = fewer(current)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadscope`` (as ``make test`` asks) with the Spark tests as one scope."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid)

    return ByWorkUnit(config, log)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--unit-tier",
        action="store_true",
        help="the unit tier (make test-fast): starting any process fails the test",
    )


_running: list[str] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    _running.append(item.nodeid)
    try:
        return (yield)
    finally:
        _running.pop()


def pytest_configure(config: pytest.Config) -> None:
    """In the unit tier, starting a process (in a test or in any fixture it uses, whatever the
    fixture's scope) is a test that is missing its tier marker."""
    if not config.getoption("--unit-tier", False):
        return
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return  # pytest-xdist's controller, which starts the workers; each worker guards itself

    original = subprocess.Popen.__init__

    def refuse(self, args, *a, **k):
        if not _running:  # pytest's own machinery, between tests
            return original(self, args, *a, **k)
        raise AssertionError(
            f"{_running[-1]} starts a process ({args!r}) in the unit tier: give it a tier "
            "marker (tests/conftest.py, _STARTS_A_PROCESS) or move it to tests/integration/"
        )

    subprocess.Popen.__init__ = refuse
