"""docs/compatibility.md lists exactly the APIs and versions the broker advertises.

The tables were generated from the code once; this keeps them true. A handler added, removed or
widened without its row changing fails here, naming the row.
"""

from __future__ import annotations

import re
from pathlib import Path

from kafkalite.apis import load_handlers
from kafkalite.apis.dispatcher import advertised_versions
from kafkalite.protocol.api import ApiKey

DOC = Path(__file__).resolve().parents[1] / "docs" / "compatibility.md"
ROW = re.compile(r"^\| (\d+) \| (\w+) \| (\d+)(?:-(\d+))? \|")


def snake(camel: str) -> str:
    """``LeaderAndIsr`` -> ``LEADER_AND_ISR``, as ApiKey names them."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", camel).upper()


def documented() -> dict[int, tuple[str, int, int]]:
    rows: dict[int, tuple[str, int, int]] = {}
    for line in DOC.read_text().splitlines():
        m = ROW.match(line)
        if m:
            key, name, lo, hi = m.groups()
            assert int(key) not in rows, f"API key {key} is listed twice"
            rows[int(key)] = (snake(name), int(lo), int(hi if hi is not None else lo))
    return rows


def test_every_advertised_api_is_documented_with_its_versions():
    load_handlers()
    code = {key: (ApiKey(key).name, lo, hi) for key, (lo, hi) in advertised_versions().items()}
    doc = documented()
    assert set(doc) - set(code) == set(), "documented but not advertised"
    assert set(code) - set(doc) == set(), "advertised but not documented"
    wrong = {key: (doc[key], code[key]) for key in code if doc[key] != code[key]}
    assert wrong == {}, "rows whose name or version range differ from the code (doc, code)"


def test_the_documented_count_matches():
    load_handlers()
    text = DOC.read_text()
    m = re.search(r"generated from the code \((\d+) APIs\)", text)
    assert m is not None
    assert int(m.group(1)) == len(advertised_versions())
