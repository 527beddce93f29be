"""Which Python Spark's workers run (kafkalite/spark/workers.py): the driver's, unless the user
chose. The end-to-end case, a job from a venv that is not on PATH, is
tests/packaging/test_install.py."""

import sys

import pytest

from kafkalite.spark import workers


class FakeConf:
    def __init__(self, values):
        self.values = values

    def get(self, key, default=None):
        return self.values.get(key, default)


class FakeContext:
    def __init__(self, python_exec="python3", conf=None):
        self.pythonExec = python_exec
        self.conf = FakeConf(conf or {})

    def getConf(self):
        return self.conf


@pytest.fixture
def no_choice(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setattr(workers, "active_context", lambda: None)
    return monkeypatch


def test_unset_becomes_the_drivers_interpreter(no_choice):
    import os

    assert workers.use_the_drivers_python() == sys.executable
    assert os.environ["PYSPARK_PYTHON"] == sys.executable


def test_a_context_made_before_with_nothing_set_is_pointed_at_it(no_choice):
    context = FakeContext()
    no_choice.setattr(workers, "active_context", lambda: context)
    workers.use_the_drivers_python()
    assert context.pythonExec == sys.executable


def test_the_environment_variable_stands(no_choice):
    import os

    no_choice.setenv("PYSPARK_PYTHON", "/opt/python")
    assert workers.use_the_drivers_python() is None
    assert os.environ["PYSPARK_PYTHON"] == "/opt/python"


def test_the_spark_config_stands(no_choice):
    import os

    context = FakeContext(conf={"spark.pyspark.python": "/opt/python"})
    no_choice.setattr(workers, "active_context", lambda: context)
    assert workers.use_the_drivers_python() is None
    assert "PYSPARK_PYTHON" not in os.environ and context.pythonExec == "python3"


def test_an_interpreter_without_a_name_fails_at_once_saying_what_to_set(no_choice):
    no_choice.setattr(sys, "executable", "")
    with pytest.raises(workers.WorkerPythonError, match="PYSPARK_PYTHON"):
        workers.use_the_drivers_python()
