"""The packages listed under [tool.mypy] in pyproject.toml type-check clean.

The same check as `make lint`'s `mypy`, run in-process with the project's configuration. Its
cache is the repository's .mypy_cache (gitignored, shared with `make lint`): the first run reads
the whole package, later ones only what changed.
"""

import os
from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parent.parent


def test_configured_packages_type_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # the configuration's `files` and `cache_dir` are relative to the repository
    monkeypatch.chdir(ROOT)
    stdout, stderr, status = api.run(["--config-file", os.fspath(ROOT / "pyproject.toml")])
    assert status == 0, f"mypy found errors (run `mypy` at the repository root):\n{stdout}{stderr}"
    assert "Success" in stdout, stdout
