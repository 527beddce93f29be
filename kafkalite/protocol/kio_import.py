"""Import kio without its hypothesis strategies, to start a broker faster.

kio registers hypothesis strategies for its types whenever hypothesis is importable
(``kio/static/_phantom.py``), which costs 0.3-1.3 s of imports (hypothesis, and through it
pytest and trio) in any environment where the test tools are installed, such as a project's
test virtualenv running a broker subprocess. A broker has no use for them.
``import_kio_without_hypothesis()`` imports that kio module while ``import hypothesis`` fails,
then lets hypothesis be imported normally again; it does nothing when hypothesis or kio is
imported already (in a test run hypothesis's pytest plugin loaded it first).
"""

from __future__ import annotations

import importlib
import sys


def import_kio_without_hypothesis() -> None:
    if "hypothesis" in sys.modules or "kio.static._phantom" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # import hypothesis: ImportError
    try:
        importlib.import_module("kio.static._phantom")
    finally:
        del sys.modules["hypothesis"]
