"""Fuzz the live registry from its own OpenAPI document with schemathesis (every phase, every
check) against one in-process broker: 0 failures. As in tests/admin, schemathesis' command line
runs against the served document.

One setting differs from schemathesis' defaults: a well-formed request may be answered 422,
because the registry's API is Confluent's, which answers 422 (42201) for a schema string that is
not a schema of its type (an empty string, say) and 42202 for a version id out of range: no JSON
Schema can say which strings are valid Avro, so "schema-valid" requests may still be invalid
schemas. Every other check (no 5xx, documented statuses, content types, response bodies, invalid
requests rejected) is schemathesis' own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalite.schema_registry.app import openapi_document
from kafkalite.testing import Broker
from tests.schema_registry.support import call

pytestmark = pytest.mark.integration

MAX_EXAMPLES = 5
CONFIG = """
[checks.positive_data_acceptance]
expected-statuses = ["2XX", "401", "403", "404", "409", "422"]
"""


@pytest.fixture(scope="module")
def url():
    with Broker() as b:
        yield b.schema_registry_url


def test_served_document_is_the_generated_one(url):
    assert call(url, "GET", "/openapi.json").body == json.loads(json.dumps(openapi_document()))


def test_every_phase_and_check_passes(url, tmp_path):
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    assert st is not None, "schemathesis is required: pip install -e '.[test]'"
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    result = subprocess.run(
        [
            st,
            "run",
            f"{url}/openapi.json",
            "--checks",
            "all",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--max-examples",
            str(MAX_EXAMPLES),
            "--generation-deterministic",
            "--request-timeout",
            "30",
            "--max-response-time",
            "120",
            "--suppress-health-check",
            "all",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ),
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    # the broker survived and still serves
    assert call(url, "GET", "/subjects").status == 200
