"""CONTRIBUTING.md, convention 1: the protocol layer does no I/O."""

import ast
from pathlib import Path

import kafkalite.protocol

PACKAGE = Path(kafkalite.protocol.__file__).resolve().parent
FORBIDDEN = {"asyncio", "socket", "selectors", "subprocess", "threading", "mmap"}


def test_protocol_modules_import_no_io_modules():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            offenders += [
                f"{path.relative_to(PACKAGE)}: {n}" for n in names if n.split(".")[0] in FORBIDDEN
            ]
    assert offenders == []
