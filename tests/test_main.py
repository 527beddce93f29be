"""`python -m kafkalite serve` takes a short way past click only for a plain serve command."""

import pytest

from kafkalite.__main__ import serve_arguments


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["serve"], (None, [])),
        (["serve", "--override", "a=1", "--override=b=2"], (None, ["a=1", "b=2"])),
        (["serve", "-c", "f.properties", "--override", "x=y=z"], ("f.properties", ["x=y=z"])),
        (["serve", "--config=one", "--config", "two"], ("two", [])),
    ],
)
def test_a_plain_serve_is_parsed_here(argv, expected):
    assert serve_arguments(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["topics", "list"],
        ["serve", "--help"],
        ["serve", "--override"],
        ["serve", "--verbose"],
        ["serve", "extra"],
    ],
)
def test_anything_else_goes_to_the_full_command_line(argv):
    assert serve_arguments(argv) is None


# A fresh interpreter each: this process has imported structlog (and maybe rich) already.
IMPORT_STRUCTLOG = """
import sys
from kafkalite.__main__ import import_structlog
import_structlog(console={console})
import structlog.dev, structlog.tracebacks
print(structlog.dev.rich is None, structlog.tracebacks.rich is None, "rich" in sys.modules)
import rich.console
print(rich.console.Console.__name__)
"""


def _import_structlog_in_a_child(console: bool) -> list[str]:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", IMPORT_STRUCTLOG.format(console=console)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return out.stdout.split()


@pytest.mark.integration  # a child Python
def test_a_broker_logging_json_imports_structlog_without_rich_and_rich_stays_importable():
    assert _import_structlog_in_a_child(console=False) == ["True", "True", "False", "Console"]


@pytest.mark.integration  # a child Python
def test_a_broker_on_a_terminal_keeps_rich_for_its_console_tracebacks():
    assert _import_structlog_in_a_child(console=True) == ["False", "False", "True", "Console"]


def _serve_through_main(monkeypatch, *, fail_config: bool = False) -> dict:
    """``main()`` for a plain serve, with the configuration's load and ``serve`` replaced by
    stubs that note whether the cyclic collector was running when they were called."""
    import gc
    import sys

    import kafkalite.config
    import kafkalite.server
    from kafkalite.__main__ import main

    seen: dict = {}

    def load(cls, *args):
        seen["load"] = gc.isenabled()
        if fail_config:
            raise kafkalite.config.ConfigError("broker.id", "a bad setting")
        return "the config"

    def serve(config, **kwargs):
        seen["serve"] = (config, gc.isenabled())
        return 0

    monkeypatch.setattr(kafkalite.config.BrokerConfig, "load", classmethod(load))
    monkeypatch.setattr(kafkalite.server, "serve", serve)
    monkeypatch.setattr(sys, "argv", ["kafkalite", "serve"])
    with pytest.raises(SystemExit) as exit:
        main()
    seen["exit"] = exit.value.code
    seen["after"] = gc.isenabled()
    return seen


def test_the_collector_is_paused_for_the_imports_and_the_config_and_runs_for_serve(monkeypatch):
    import gc

    assert gc.isenabled()
    assert _serve_through_main(monkeypatch) == {
        "load": False,
        "serve": ("the config", True),
        "exit": 0,
        "after": True,
    }


def test_a_bad_config_exits_with_the_collector_running_again(monkeypatch, capsys):
    assert _serve_through_main(monkeypatch, fail_config=True) == {
        "load": False,
        "exit": 2,
        "after": True,
    }
    assert "a bad setting" in capsys.readouterr().err


def test_a_collector_paused_by_the_caller_stays_paused(monkeypatch):
    import gc

    gc.disable()
    try:
        seen = _serve_through_main(monkeypatch)
    finally:
        gc.enable()
    assert seen == {"load": False, "serve": ("the config", False), "exit": 0, "after": False}
