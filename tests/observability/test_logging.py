"""Every line the broker process logs is structlog JSON (kafkalite/observability/logs.py):
stdlib logging, warnings and the event loop's exception handler ("Task exception was never
retrieved") are routed through the same renderer, tracebacks included as a field."""

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import asyncio, gc, logging, warnings
import structlog
from kafkalite.observability import configure_logging, loop_exception_handler

configure_logging("INFO", json_output=True)
structlog.get_logger("kafkalite.test").info("structlog line", n=1)
logging.getLogger("aiozk.connection").warning("stdlib line %s", "x")
logging.getLogger("aiozk.connection").info("chatter below warning stays out")
try:
    raise ValueError("stdlib traceback")
except ValueError:
    logging.getLogger("some.library").exception("stdlib exception")
warnings.warn("a deprecation", DeprecationWarning, stacklevel=1)
warnings.warn("a user warning", UserWarning, stacklevel=1)

async def fail():
    raise RuntimeError("nobody awaited me")

async def main():
    asyncio.get_running_loop().set_exception_handler(loop_exception_handler)
    task = asyncio.ensure_future(fail())
    await asyncio.wait({task})  # it failed; nobody retrieves its exception
    del task
    gc.collect()

asyncio.run(main())
"""


def test_every_line_is_json():
    proc = subprocess.run(
        [sys.executable, "-W", "always", "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"not a JSON line: {line!r}\n--- stderr:\n{proc.stderr}") from None
    events = {r["event"]: r for r in records}
    assert events["structlog line"]["n"] == 1
    assert events["stdlib line x"]["logger"] == "aiozk.connection"
    assert events["stdlib line x"]["level"] == "warning"
    assert "ValueError: stdlib traceback" in events["stdlib exception"]["exception"]
    assert any("a user warning" in r["event"] for r in records)
    assert not any("chatter" in r["event"] for r in records)
    unretrieved = events["Task exception was never retrieved"]
    assert unretrieved["level"] == "error"
    assert "RuntimeError: nobody awaited me" in unretrieved["exception"]
