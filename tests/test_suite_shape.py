"""The suite's own shape: a test module is never imported by another module, and brokers come
from ``kafkalite.testing``.

Every Python file under tests/ and bench/ is parsed (not imported) and each import, at module
level or inside a function, is resolved; one that names a ``tests/**/test_*.py`` module other
than the importing file itself fails. What tests share lives in a support module beside them
(``support.py``), or in the directory's ``conftest.py`` for fixtures.

No class under tests/ is a broker or cluster harness of its own: none starts ``kafkalite
serve`` (a process launcher in a class that names ``kafkalite`` and ``serve``) or builds a
``KafkaServer``, and none is named like one (``...Cluster``, ``...Broker``,
``...BrokerProcess``) unless it is a fake (``Fake...``) or listed in ``NOT_A_HARNESS`` with
the reason. Brokers and clusters for tests are ``kafkalite.testing.Broker`` and ``Cluster``
(in-process or subprocesses, with the faults), or the fixtures of tests/conftest.py that make
them.
"""

import ast
import re
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


# -- no private broker or cluster harness ----------------------------------------------------

LAUNCHERS = {"Popen", "run", "call", "check_call", "check_output", "create_subprocess_exec"}
HARNESS_NAME = re.compile(r"(Cluster|Broker|BrokerProcess)$")
NOT_A_FAKE = re.compile(r"^(?!Fake|Mock|Scripted)")
NOT_A_HARNESS: dict[str, str] = {}  # "path::Class": why it is not a broker harness


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def harness_classes(path: Path) -> list[str]:
    """The classes of ``path`` that are broker or cluster harnesses, with why."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        calls = {_called_name(n) for n in ast.walk(cls) if isinstance(n, ast.Call)}
        strings = {
            n.value
            for n in ast.walk(cls)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        if "KafkaServer" in calls:
            found.append(f"{cls.name} builds a KafkaServer")
        elif calls & LAUNCHERS and {"kafkalite", "serve"} <= strings:
            found.append(f"{cls.name} starts `kafkalite serve`")
        elif HARNESS_NAME.search(cls.name) and NOT_A_FAKE.match(cls.name):
            found.append(f"{cls.name} is named like a broker or cluster harness")
    return found


def test_no_private_broker_or_cluster_harness():
    offenders = []
    for path in sorted(ROOT.joinpath("tests").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for finding in harness_classes(path):
            if f"{relative}::{finding.split()[0]}" not in NOT_A_HARNESS:
                offenders.append(f"{relative}: {finding}")
    assert not offenders, (
        "a test module defines its own broker or cluster harness; use kafkalite.testing.Broker "
        "or Cluster (subprocess=True for kill -9, signals and the broker's output), or the "
        "fixtures of tests/conftest.py, and give kafkalite.testing what is missing:\n  "
        + "\n  ".join(offenders)
    )
    stale = [
        key
        for key in NOT_A_HARNESS
        if not ROOT.joinpath(key.split("::")[0]).is_file()
        or key.split("::")[1] not in ROOT.joinpath(key.split("::")[0]).read_text()
    ]
    assert not stale, f"NOT_A_HARNESS names classes that are gone: {stale}"


def test_the_harness_check_sees_each_kind(tmp_path):
    """A class that starts ``kafkalite serve``, one that builds a KafkaServer and one named
    like a cluster are found; a fake, a helper that runs another program and a function that
    starts the CLI once (a test of the command itself) are not."""
    module = tmp_path / "test_x.py"
    module.write_text(
        "import subprocess, sys\n"
        "class Spawner:\n"
        "    def command(self):\n"
        "        return [sys.executable, '-m', 'kafkalite', 'serve']\n"
        "    def start(self):\n"
        "        self.proc = subprocess.Popen(self.command())\n"
        "class InProcess:\n"
        "    def start(self):\n"
        "        self.server = KafkaServer(config)\n"
        "class ThreeBrokerCluster:\n"
        "    pass\n"
        "class FakeCluster:\n"
        "    pass\n"
        "class KcatRunner:\n"
        "    def run(self):\n"
        "        subprocess.run(['kcat', '-L'])\n"
        "def test_serve_once():\n"
        "    subprocess.run([sys.executable, '-m', 'kafkalite', 'serve', '--help'])\n"
    )
    assert harness_classes(module) == [
        "Spawner starts `kafkalite serve`",
        "InProcess builds a KafkaServer",
        "ThreeBrokerCluster is named like a broker or cluster harness",
    ]
