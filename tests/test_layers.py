"""The layer rules (docs/architecture.md, Layers): lower layers never import higher ones.

Every module under kafkalite/ is parsed (not imported) and each of its `kafkalite.*` imports is
checked against the layer table.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "kafkalite"

LAYER = {
    "protocol": 0,
    "config": 0,
    "observability": 0,
    "security": 0,
    "storage": 1,
    "coord": 1,
    "zk": 1,
    "client": 1,
    "broker": 2,
    "controller": 2,
    "group": 2,
    "txn": 2,
    "share": 2,
    "apis": 3,
    "network": 3,
    "admin": 3,
    "server": 3,
    "cli": 3,
    # the PySpark data source: a client-side component, only pyspark/confluent-kafka
    "spark": 3,
    "testing": 3,
    # the Schema Registry: its HTTP app, store and produce validator at the admin API's layer;
    # the pure parts (formats, compatibility rules, the materialised view, errors, models)
    # lowest, so they can never reach for the broker
    "schema_registry": 3,
    "schema_registry.errors": 0,
    "schema_registry.formats": 0,
    "schema_registry.compatibility": 0,
    "schema_registry.view": 0,
    "schema_registry.models": 0,
}

# Layer 3 is not checked against itself by the table; these edges within it are forbidden too:
# the handlers serve the Kafka protocol whatever front ends exist, and the command line is a
# client of the broker (of its admin API among others), never a part of it.
FORBIDDEN_IN_LAYER_3 = {
    ("apis", "admin"): "the handlers know nothing of the admin API",
    ("apis", "cli"): "the handlers know nothing of the command line",
    ("admin", "cli"): "the command line is a client of the admin API",
}


def component_of(module: str) -> str | None:
    """The module's top-level package, or its module within that package when the table
    gives the module a layer of its own ("schema_registry.formats")."""
    parts = module.split(".")
    if parts[0] != "kafkalite" or len(parts) < 2:
        return None
    if len(parts) >= 3 and f"{parts[1]}.{parts[2]}" in LAYER:
        return f"{parts[1]}.{parts[2]}"
    return parts[1]


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    current_package = parts[:-1]  # for __init__.py the package itself, else the enclosing one
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = current_package[: len(current_package) - (node.level - 1)]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
    return found


def violations() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        own = component_of(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        if own not in LAYER:
            continue
        for module in imports_of(path):
            other = component_of(module)
            if other is None or other == own or other not in LAYER:
                continue
            if LAYER[other] > LAYER[own]:
                found.append(f"{path.relative_to(PACKAGE.parent)} imports {module}")
            if own in ("broker", "group") and other == "txn":
                found.append(
                    f"{path.relative_to(PACKAGE.parent)} imports {module} (txn uses {own})"
                )
            if own == "broker" and other == "group":
                found.append(
                    f"{path.relative_to(PACKAGE.parent)} imports {module} (group uses broker)"
                )
            if own == "coord" and other == "zk":
                found.append(f"{path.relative_to(PACKAGE.parent)} imports {module} (zk uses coord)")
            if LAYER[own] == 2 and other == "apis":
                found.append(f"{path.relative_to(PACKAGE.parent)} imports handlers {module}")
            if (own, other) in FORBIDDEN_IN_LAYER_3:
                found.append(
                    f"{path.relative_to(PACKAGE.parent)} imports {module} "
                    f"({FORBIDDEN_IN_LAYER_3[own, other]})"
                )
    return found


def test_every_component_has_a_layer():
    components = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()}
    components -= {"__init__", "__main__", "__pycache__"}
    assert components <= set(LAYER), components - set(LAYER)


def test_lower_layers_never_import_higher_ones():
    assert violations() == []


def test_protocol_does_no_io():
    for path in (PACKAGE / "protocol").rglob("*.py"):
        for module in imports_of(path):
            assert module.split(".")[0] not in {"asyncio", "socket", "selectors"}, (path, module)
