"""What ``kafkalite --help`` and ``--version`` import, and how every command's help renders
(kafkalite/__main__.py, cli/overview.py, cli/root.py; decision 0021). In the test process: the
unit tier starts no process, so the imports are watched with a meta-path finder rather than
``python -X importtime``. Nothing here is timed (bench/cli.py measures)."""

import contextlib
import importlib
import io
import sys

import pytest

# modules a bare --help or --version must not import: the broker, its client and config, the
# Kafka clients and Spark, the HTTP stack, and the command line's own frameworks
HEAVY = (
    "asyncio",
    "confluent_kafka",
    "pyspark",
    "aiohttp",
    "structlog",
    "urllib.request",
    "typer",
    "click",
    "pydantic",
    "rich",
    "kafkalite.server",
    "kafkalite.config",
    "kafkalite.client",
    "kafkalite.protocol",
    "kafkalite.storage",
    "kafkalite.admin",
    "kafkalite.cli.root",
    "kafkalite.cli.common",
)
# a command's help may import click and its own module, still none of these
HEAVY_FOR_A_COMMAND = tuple(
    m for m in HEAVY if m not in ("click", "kafkalite.cli.root", "kafkalite.cli.common")
)


def heavy(name: str, forbidden: tuple[str, ...]) -> bool:
    return any(name == m or name.startswith(m + ".") for m in forbidden)


class Watch:
    """Imports of forbidden modules, recorded (and refused) while it is installed."""

    def __init__(self, forbidden: tuple[str, ...]) -> None:
        self.forbidden = forbidden
        self.attempted: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if heavy(name, self.forbidden):
            self.attempted.append(name)
            raise ImportError(f"{name} imported by a help command")
        return None


@contextlib.contextmanager
def watched_imports(forbidden: tuple[str, ...]):
    """Run with the forbidden modules and kafkalite's command line out of sys.modules (so an
    import of them reaches the finder), everything restored afterwards."""
    saved = dict(sys.modules)
    for name in list(sys.modules):
        if heavy(name, forbidden) or name.startswith("kafkalite.cli") or name == "kafkalite":
            del sys.modules[name]
    watch = Watch(forbidden)
    sys.meta_path.insert(0, watch)
    try:
        yield watch
    finally:
        sys.meta_path.remove(watch)
        sys.modules.clear()
        sys.modules.update(saved)


def run_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old_argv = sys.argv
    sys.argv = ["kafkalite", *argv]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main = importlib.import_module("kafkalite.__main__").main
            try:
                main()
                status = 0
            except SystemExit as e:
                status = int(e.code or 0)
    finally:
        sys.argv = old_argv
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv", [["--help"], ["--version"], []])
def test_help_and_version_import_nothing_heavy(argv):
    with watched_imports(HEAVY) as watch:
        status, out, err = run_main(argv)
    assert watch.attempted == [], f"kafkalite {' '.join(argv)} imported {watch.attempted}"
    assert status == (2 if not argv else 0), err
    assert ("kafkalite 0.1.0" if argv == ["--version"] else "Commands:") in out + err


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "--help"],
        ["topics", "describe", "--help"],
        ["cluster", "topics", "--help"],
        ["groups", "describe", "--help"],
        ["transactions", "--help"],
        ["produce", "--help"],
        ["consume", "--help"],
        ["serve", "--help"],
        ["storage", "verify", "--help"],
        ["acls", "add", "--help"],
    ],
)
def test_a_commands_help_imports_click_and_its_module_only(argv):
    with watched_imports(HEAVY_FOR_A_COMMAND) as watch:
        status, out, err = run_main(argv)
    assert watch.attempted == [], f"kafkalite {' '.join(argv)} imported {watch.attempted}"
    assert status == 0 and "Usage:" in out, err


def test_the_full_command_line_prints_the_same_overview():
    from kafkalite.cli.overview import root_help

    status, out, _ = run_main(["--command-config", "/dev/null", "--help"])
    assert status == 0
    assert out == root_help("kafkalite")


def every_command():
    from kafkalite.cli import app

    def walk(command, path):
        yield path, command
        if hasattr(command, "list_commands"):
            ctx = type(command).context_class(command)
            for name in command.list_commands(ctx):
                yield from walk(command.get_command(ctx, name), [*path, name])

    return list(walk(app, []))


def test_the_overview_line_of_a_command_is_its_own_help():
    from kafkalite.cli.common import first_sentence
    from kafkalite.cli.overview import COMMANDS
    from kafkalite.cli.root import load_command

    for name, (_, _, line) in COMMANDS.items():
        assert first_sentence(load_command(name).help) == line, name


def test_help_shows_no_type_labels_and_no_hard_wrapped_lines():
    """Options show a metavar (HOST:PORT, FILE) or click's type name, flags no label (typer
    0.29 printed <bool>, <list[str]>, {topic}); docstrings are re-wrapped to the width."""
    for path, _ in every_command():
        status, out, err = run_main([*path, "--help"])
        assert status == 0, (path, err)
        for bad in ("<bool>", "<str>", "<int>", "<list", "<float>", "{", "}"):
            assert bad not in out, (path, bad, out)
        assert "--install-completion" not in out, path
        for line in out.splitlines():
            assert len(line) <= 80, (path, line)
