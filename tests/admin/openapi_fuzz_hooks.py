"""schemathesis hooks for tests/admin/test_openapi_fuzz.py (loaded through SCHEMATHESIS_HOOKS).

The fuzzer tests the document as served; these hooks only keep the generated requests within
what the test's one small broker can hold, never change what is checked: a request asking for
more than MAX_PARTITIONS partitions or a replication factor above the number of brokers (1) is
not sent.
"""

from __future__ import annotations

from typing import Any

import schemathesis

MAX_PARTITIONS = 4
BROKERS = 1


def _within_bounds(body: Any) -> bool:
    if not isinstance(body, dict):
        return True
    # a JSON number with an integral value (39460.0) is an integer to the API too
    partitions = body.get("partitions")
    if isinstance(partitions, int | float) and not isinstance(partitions, bool):
        if partitions > MAX_PARTITIONS:
            return False
    factor = body.get("replication_factor")
    if isinstance(factor, int | float) and not isinstance(factor, bool) and factor > BROKERS:
        return False
    return True


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    return _within_bounds(case.body)
