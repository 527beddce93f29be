"""`kafkalite schemas` against one in-process broker's registry (click's runner)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kafkalite.cli.root import app
from kafkalite.testing import Broker

pytestmark = pytest.mark.integration

V1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
V2 = {
    "type": "record",
    "name": "R",
    "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}],
}
BAD = {"type": "record", "name": "R", "fields": [{"name": "c", "type": "string"}]}


@pytest.fixture(scope="module")
def url():
    with Broker() as broker:
        yield broker.schema_registry_url


def kafkalite(url, *args):
    return CliRunner().invoke(app, [*args, "--registry-url", url])


def test_register_get_check_config_delete(url, tmp_path):
    for name, schema in (("v1", V1), ("v2", V2), ("bad", BAD)):
        (tmp_path / f"{name}.avsc").write_text(json.dumps(schema))
    done = kafkalite(url, "schemas", "register", "orders-value", str(tmp_path / "v1.avsc"))
    assert done.exit_code == 0 and "id 1" in done.output, done.output
    assert "orders-value" in kafkalite(url, "schemas", "list").output
    got = kafkalite(url, "schemas", "get", "orders-value")
    assert got.exit_code == 0 and '"name": "R"' in got.output
    assert (
        kafkalite(url, "schemas", "check", "orders-value", str(tmp_path / "v2.avsc")).exit_code == 0
    )
    refused = kafkalite(url, "schemas", "check", "orders-value", str(tmp_path / "bad.avsc"))
    assert refused.exit_code == 1 and "incompatible" in refused.output
    assert kafkalite(url, "schemas", "config").output.strip() == "BACKWARD"
    assert (
        kafkalite(url, "schemas", "config", "orders-value", "--set", "full").output.strip()
        == "FULL"
    )
    error = kafkalite(url, "schemas", "register", "orders-value", str(tmp_path / "bad.avsc"))
    assert error.exit_code == 1 and "409" in error.output
    gone = kafkalite(url, "schemas", "delete", "orders-value")
    assert gone.exit_code == 0 and "versions 1" in gone.output
    missing = kafkalite(url, "schemas", "get", "orders-value")
    assert missing.exit_code == 1 and "40401" in missing.output
    unreadable = kafkalite(url, "schemas", "register", "x", str(tmp_path / "nope.avsc"))
    assert unreadable.exit_code == 2
