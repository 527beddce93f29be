"""How ``make test`` splits the suite between its pytest-xdist workers (tests/conftest.py)."""

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests.conftest import _work_unit, pytest_xdist_make_scheduler

pytest_plugins = ["pytester"]


def test_a_module_is_one_unit_and_every_spark_test_is_in_one():
    assert _work_unit("tests/storage/test_index.py::test_a[1]") == "tests/storage/test_index.py"
    assert (
        _work_unit("tests/system/test_cluster.py::Test::test_b") == "tests/system/test_cluster.py"
    )
    assert _work_unit("tests/spark/test_batch.py::test_x") == "spark"
    assert _work_unit("tests/bench/test_spark_load.py::test_y") == "spark"


def test_loadscope_gets_the_unit_scheduler_and_other_modes_are_left_alone():
    class Config:
        def __init__(self, dist):
            self.values = {"dist": dist, "tx": ["2*popen"]}

        def getvalue(self, name):
            return self.values[name]

    scheduler = pytest_xdist_make_scheduler(Config("loadscope"), None)
    assert isinstance(scheduler, LoadScopeScheduling)
    assert scheduler._split_scope("tests/spark/test_streaming.py::test_z") == "spark"
    assert scheduler._split_scope("tests/apis/test_fetch.py::test_z") == "tests/apis/test_fetch.py"
    assert pytest_xdist_make_scheduler(Config("load"), None) is None


def test_a_spark_test_outside_the_spark_unit_is_refused(pytester: pytest.Pytester):
    pytester.makepyfile(test_elsewhere="def test_needs_spark(spark_holder):\n    pass\n")
    pytester.makeconftest(
        "import pytest\n"
        "from tests import conftest as c\n"
        "@pytest.fixture\n"
        "def spark_holder():\n"
        "    return None\n"
        "pytest_collection_modifyitems = c.pytest_collection_modifyitems\n"
    )
    result = pytester.runpytest_inprocess("--collect-only", "-q")
    assert result.ret != 0
    assert "needs Spark: put it under tests/spark/" in result.stdout.str() + result.stderr.str()
