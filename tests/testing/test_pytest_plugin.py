"""The pytest plugin, as a user's project meets it: a sample project (tests/testing/
sample_project/, the README's examples) run by pytester with confluent-kafka, aiokafka and
kafka-python against each fixture."""

from __future__ import annotations

import tomllib
from pathlib import Path

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "sample_project"
# the plugin by module, whether or not the installed entry point ("kafkalite") loaded it too
PLUGIN_ARGS = ("-p", "no:kafkalite", "-p", "kafkalite.testing.pytest_plugin", "-p", "no:randomly")


def test_the_plugin_is_registered_as_a_pytest11_entry_point():
    project = tomllib.loads((HERE.parents[1] / "pyproject.toml").read_text())
    entry_points = project["project"]["entry-points"]["pytest11"]
    assert entry_points == {"kafkalite": "kafkalite.testing.pytest_plugin"}


def test_the_sample_project_passes_with_every_fixture_and_client(pytester):
    for example in sorted(SAMPLE.glob("example_*.py")):
        pytester.makepyfile(
            **{f"test_{example.stem.removeprefix('example_')}": example.read_text()}
        )
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    result = pytester.runpytest_inprocess(*PLUGIN_ARGS, "--kafkalite-keep-data", "-v")
    result.assert_outcomes(passed=9)
    result.stdout.fnmatch_lines(["*kafkalite data kept*", "*test_produce_then_consume*: *"])


def test_mode_option_runs_every_broker_as_a_subprocess(pytester):
    pytester.makepyfile(
        test_mode="""
        def test_subprocess(kafkalite_broker, kafkalite_bootstrap):
            assert kafkalite_broker.process is not None
            assert kafkalite_bootstrap == kafkalite_broker.bootstrap_servers
            kafkalite_broker.produce("t", [b"x"])
            assert [m.value for m in kafkalite_broker.consume_all("t")] == [b"x"]
        """
    )
    result = pytester.runpytest_inprocess(*PLUGIN_ARGS, "--kafkalite-mode=subprocess")
    result.assert_outcomes(passed=1)
    result = pytester.runpytest_inprocess(*PLUGIN_ARGS, "--kafkalite-mode=nonsense")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*--kafkalite-mode*invalid choice*"])
