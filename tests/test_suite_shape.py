"""The suite's own shape: a test module is never imported by another module.

Every Python file under tests/ and bench/ is parsed (not imported) and each import, at module
level or inside a function, is resolved; one that names a ``tests/**/test_*.py`` module other
than the importing file itself fails. What tests share lives in a support module beside them
(``support.py``), or in the directory's ``conftest.py`` for fixtures.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("tests", "bench")


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def is_test_module(module: str) -> bool:
    parts = module.split(".")
    if parts[0] != "tests" or not parts[-1].startswith("test_"):
        return False
    return ROOT.joinpath(*parts).with_suffix(".py").is_file()


def imported_modules(path: Path) -> set[str]:
    """Every module an import statement of `path` may load: the module named, and for
    ``from package import name`` the submodule ``package.name`` too."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_of(path).split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_no_module_imports_a_test_module():
    offenders = []
    for top in SCANNED:
        for path in sorted(ROOT.joinpath(top).rglob("*.py")):
            own = module_of(path)
            for module in sorted(imported_modules(path)):
                if module != own and is_test_module(module):
                    offenders.append(f"{path.relative_to(ROOT)} imports {module}")
    assert not offenders, (
        "a test module is imported by another module; move what they share to a support.py "
        "beside them (or the directory's conftest.py for fixtures):\n  " + "\n  ".join(offenders)
    )


def test_the_check_sees_every_form_of_import(tmp_path, monkeypatch):
    """The resolution itself: absolute, relative, ``from package import test_module`` and
    nested imports are found; a module merely named like a test outside tests/ is not."""
    tests = tmp_path / "tests"
    (tests / "pkg").mkdir(parents=True)
    for name in ("__init__.py", "pkg/__init__.py", "pkg/test_a.py", "pkg/support.py"):
        (tests / name).write_text("")
    (tests / "pkg" / "test_b.py").write_text(
        "from .test_a import x\n"
        "from . import test_a\n"
        "import tests.pkg.test_a\n"
        "from .support import y\n"
        "from aiohttp.test_utils import TestClient\n"
        "def f():\n"
        "    from tests.pkg.test_a import z\n"
    )
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    found = imported_modules(tests / "pkg" / "test_b.py")
    hits = {m for m in found if is_test_module(m)}
    assert hits == {"tests.pkg.test_a"}
    assert {"tests.pkg.test_a.x", "tests.pkg.support", "aiohttp.test_utils"} <= found
