"""tools/generate_messages.py reproduces the committed inter-broker message modules exactly."""

import importlib.util
import sys
from pathlib import Path

import kafkalite.protocol.messages

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "tools" / "generate_messages.py"
COMMITTED = Path(kafkalite.protocol.messages.__file__).resolve().parent


def load_generator():
    spec = importlib.util.spec_from_file_location("generate_messages", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_regenerated_modules_match_the_committed_ones(tmp_path):
    written = load_generator().generate(tmp_path)
    assert len(written) == 20
    generated = {p.relative_to(tmp_path) for p in tmp_path.rglob("*.py")}
    committed = {
        p.relative_to(COMMITTED) for p in COMMITTED.rglob("*.py") if "__pycache__" not in p.parts
    }
    # the package's own __init__.py is written by hand, every other module by the generator
    assert generated == committed - {Path("__init__.py")}
    different = [
        str(rel)
        for rel in sorted(generated)
        if (tmp_path / rel).read_text() != (COMMITTED / rel).read_text()
    ]
    assert different == [], "run .venv/bin/python tools/generate_messages.py and commit the result"


def test_the_runtime_package_does_not_ship_the_generator():
    assert not (COMMITTED / "generate.py").exists()
    assert not list(COMMITTED.rglob("*.json"))
