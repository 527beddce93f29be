"""``wait_for``: poll a condition until it holds, with a deadline (never a bare sleep).

The condition is called at least once; its first truthy value is returned. When the deadline
passes first, ``AssertionError`` names what was awaited, so a test fails (not errors) with a
message that says what did not happen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T], what: str, timeout: float = 30.0, interval: float = 0.05
) -> T:
    """Call ``condition()`` every ``interval`` seconds until it returns something truthy (that
    value is returned); raise ``AssertionError`` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)  # the polling interval, not synchronisation
