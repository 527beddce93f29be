"""Which Python Spark's workers run: the driver's own, unless the user said otherwise.

PySpark starts its Python workers with ``PYSPARK_PYTHON`` as the SparkContext saw it when it was
made, else ``python3`` from ``PATH``. Outside an activated virtualenv that is another Python,
without kafkalite, and the first task fails with ``ModuleNotFoundError: No module named
'kafkalite'``. So importing kafkalite.spark (which the driver does before
``spark.dataSource.register``) sets ``PYSPARK_PYTHON`` to the driver's interpreter when neither
``PYSPARK_PYTHON`` nor ``spark.pyspark.python`` is set, and points a SparkContext already made
without either at it too. A Python that cannot name its own executable fails at once, saying
what to set.

Invariant: a choice the user made (the environment variable, the Spark config) is never
overridden.
"""

from __future__ import annotations

import os
import sys
from typing import Any

HINT = (
    "set PYSPARK_PYTHON (or the Spark config spark.pyspark.python) to a Python that has "
    "kafkalite[spark] installed"
)
DEFAULT_WORKER_PYTHON = "python3"
"""What PySpark's SparkContext runs when PYSPARK_PYTHON is unset (core/context.py)."""


class WorkerPythonError(RuntimeError):
    pass


def use_the_drivers_python() -> str | None:
    """Point Spark's Python workers at ``sys.executable`` unless the user chose; the
    interpreter set, or None when the user's choice stands."""
    if os.environ.get("PYSPARK_PYTHON"):
        return None
    context = active_context()
    if context is not None and context.getConf().get("spark.pyspark.python", None):
        return None
    if not sys.executable:
        raise WorkerPythonError(f"kafkalite.spark cannot tell which Python this is: {HINT}")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    if context is not None and context.pythonExec == DEFAULT_WORKER_PYTHON:
        # made before this import with nothing set: its functions (the data source registered
        # next among them) carry pythonExec, read at registration
        context.pythonExec = sys.executable
    return sys.executable


def active_context() -> Any:
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    return SparkContext._active_spark_context
