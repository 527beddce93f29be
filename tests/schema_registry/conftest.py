"""The `walker` fixture: a validation test run once with the validator's C walk (the optional
extension `_walk`, which the test environment must have built: `pip install -e .` builds it)
and once without it (the regular expressions and the Python walk), as KAFKALITE_NO_NATIVE=1
makes it. In-process brokers share the module, so their validator follows the switch."""

from __future__ import annotations

import pytest

from kafkalite.schema_registry import validation


@pytest.fixture(params=["native", "python"])
def walker(request, monkeypatch):
    if request.param == "native":
        assert validation._walk is not None, (
            "the C walk is not built: run `pip install -e .` (or `make venv`) with gcc and "
            "Python's headers installed"
        )
    else:
        monkeypatch.setattr(validation, "_walk", None)
    return request.param
