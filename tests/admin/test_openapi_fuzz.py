"""Fuzz the live admin API from its own OpenAPI document with schemathesis: every phase
(examples, coverage, fuzzing, stateful) and every check (server errors, status codes, content
types, headers and bodies as documented, schema-valid requests accepted and schema-violating
ones rejected, 405 with an Allow header, deleted resources gone...), and 0 failures.

schemathesis' own pytest integration does not run on pytest 9, so its command line runs against
the document the broker serves; openapi_fuzz_hooks.py keeps the generated requests within the
resources of the test's single broker. The run is bounded (examples per operation, a time
budget) to stay under a minute on the 2-core machine.

A second, smaller run (all checks; the examples, fuzzing and stateful phases) fuzzes a broker
whose admin API asks for credentials and applies ACLs (its document then states the security
schemes, 401 and 403), with a bearer token supplied: every check still passes, including
schemathesis' own check that an operation stating security refuses a request without it. Without credentials, every protected operation answers 401.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kafkalite.admin.openapi import openapi_document
from kafkalite.admin.security import WWW_AUTHENTICATE
from kafkalite.testing import Broker, free_port
from tests.admin.conftest import AdminClient

REPO = Path(__file__).resolve().parents[2]
MAX_EXAMPLES = 10
SECURED_MAX_EXAMPLES = 2
TOKEN = "fuzz-token"
ALL_PHASES = "examples,coverage,fuzzing,stateful"


def schemathesis_command() -> list[str]:
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    if st is None:
        raise RuntimeError("schemathesis is required: pip install -e '.[test]'")
    return [st]


def test_served_document_is_the_documented_one(admin) -> None:
    answer = admin.get("/openapi.json")
    assert answer.status == 200
    # an open API without an authorizer: no security schemes, no 401 or 403
    assert answer.body == json.loads(json.dumps(openapi_document((), False)))


def test_every_phase_and_check_passes(admin, tmp_path) -> None:
    fuzz(admin.url, tmp_path, MAX_EXAMPLES)


def fuzz(url: str, cwd: Path, max_examples: int, *extra: str, phases: str = ALL_PHASES) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["SCHEMATHESIS_HOOKS"] = "tests.admin.openapi_fuzz_hooks"
    result = subprocess.run(
        [
            *schemathesis_command(),
            "run",
            f"{url}/openapi.json",
            *extra,
            "--checks",
            "all",
            "--phases",
            phases,
            "--max-examples",
            str(max_examples),
            "--generation-deterministic",
            "--request-timeout",
            "30",
            # no timed assertions: the response-time check (10 s by default) is set past the
            # request timeout, so only a request that hangs fails the run
            "--max-response-time",
            "120",
            "--suppress-health-check",
            "all",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    assert "No failures" in result.stdout or " passed" in result.stdout, result.stdout


def test_broker_survives_the_fuzzing(admin, admin_broker) -> None:
    assert admin_broker.running
    assert admin.get("/health").status == 200
    assert admin.get("/ready").status == 200


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A broker whose admin API asks for basic or bearer credentials and applies ACLs; the
    bearer token's principal is a super user (so is the broker's own plaintext principal)."""
    port = free_port()
    b = Broker(
        data_dir=tmp_path_factory.mktemp("secured-admin-broker"),
        config={
            "admin.listener": f"http://127.0.0.1:{port}",
            "admin.authentication": "basic,bearer",
            "admin.bearer.token": TOKEN,
            "admin.bearer.principal": "User:fuzzer",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:fuzzer;User:ANONYMOUS",
            "num.partitions": "1",
            # schemathesis sends wrong credentials to every operation (its 401 check): no
            # limit on failed authentications, or they would be answered 429
            "failed.authentication.burst.per.ip": "0",
        },
        subprocess=True,
    )
    b.start()
    try:
        client = AdminClient(f"http://127.0.0.1:{port}")
        client.wait_for(lambda: client.get("/ready").status == 200, "the admin API to be ready")
        token = {"Authorization": f"Bearer {TOKEN}"}
        client.wait_for(
            lambda: client.call("GET", "/schemas", headers=token).status == 200,
            "the Schema Registry's store",
        )
        yield client
    finally:
        if b.running:
            try:
                b.stop()
            except TimeoutError:
                b.kill()


def call_without_credentials(url: str, method: str) -> tuple[int, str | None, object]:
    request = urllib.request.Request(url, method=method.upper())
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, None, None
    except urllib.error.HTTPError as e:
        body = json.loads(e.read()) if e.code == 401 else None
        return e.code, e.headers.get("WWW-Authenticate"), body


def test_without_credentials_every_protected_operation_answers_401(secured) -> None:
    document = authorised_get(secured.url + "/openapi.json")
    assert document == json.loads(json.dumps(openapi_document()))
    assert set(document["components"]["securitySchemes"]) == {"basic", "bearer"}
    protected = 0
    for path, item in document["paths"].items():
        concrete = path.replace("{name}", "t").replace("{id}", "1")
        for method, operation in item.items():
            status, challenge, body = call_without_credentials(secured.url + concrete, method)
            if operation["security"] == []:
                assert status != 401, (method, path)
                continue
            protected += 1
            assert "401" in operation["responses"] and "403" in operation["responses"]
            assert (status, challenge) == (401, WWW_AUTHENTICATE), (method, path)
            assert body["error"] == "unauthorized", body
    assert protected >= 25
    # the undocumented document is protected too; the console's own files are not (no cluster
    # data: they show the login page)
    assert call_without_credentials(secured.url + "/openapi.json", "get")[0] == 401
    assert call_without_credentials(secured.url + "/console/app.js", "get")[0] == 200


def authorised_get(url: str) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_every_phase_and_check_passes_with_credentials(secured, tmp_path) -> None:
    # the coverage phase (every boundary of every parameter, whatever --max-examples says) is
    # the open run's: it is most of its time and tests the handlers, not their protection
    fuzz(
        secured.url,
        tmp_path,
        SECURED_MAX_EXAMPLES,
        "--header",
        f"Authorization: Bearer {TOKEN}",
        phases="examples,fuzzing,stateful",
    )
    assert call_without_credentials(secured.url + "/health", "get")[0] == 200
