"""``kafkalite ...`` and ``python -m kafkalite ...``: the command line (kafkalite/cli/).

A bare ``kafkalite``, ``kafkalite --help`` and ``kafkalite --version`` are answered here from
kafkalite/cli/overview.py, without importing click: the same text the full command line prints,
in the time Python takes to start (docs/decisions/0021-a-command-line-that-imports-what-it-uses.md).

``python -m kafkalite serve [--config FILE | -c FILE] [--override key=value]...`` takes a short
way that imports only what the broker needs (not click, rich's console, nor the admin and
storage commands): the port opens about a quarter sooner, which a test suite starting brokers
as subprocesses pays at every start. Anything else (``--help``, another command, an option the
short way does not know) goes through the full command line, which behaves the same.
"""

from __future__ import annotations

import sys


def serve_arguments(argv: list[str]) -> tuple[str | None, list[str]] | None:
    """(config file, overrides) when ``argv`` is a plain ``serve`` command, else None."""
    if not argv or argv[0] != "serve":
        return None
    config: str | None = None
    overrides: list[str] = []
    rest = argv[1:]
    while rest:
        option, _, value = rest[0].partition("=")
        if option not in ("--config", "-c", "--override"):
            return None
        if "=" in rest[0] and option != "-c":
            rest = rest[1:]
        elif len(rest) >= 2:
            option, value, rest = rest[0], rest[1], rest[2:]
        else:
            return None
        if option == "--override":
            overrides.append(value)
        else:
            config = value
    return config, overrides


def overview(argv: list[str]) -> tuple[str, int, bool] | None:
    """(text, exit status, to stderr) for a bare command, ``--help`` or ``--version``, else
    None. With no argument the help goes to stderr with status 2, as click's no_args_is_help."""
    if argv not in ([], ["--help"], ["--version"]):
        return None
    from kafkalite.cli.overview import program_name, root_help, version_line

    if argv == ["--version"]:
        return version_line() + "\n", 0, False
    return root_help(program_name()), 2 if not argv else 0, not argv


def import_structlog(*, console: bool) -> None:
    """Import structlog for a broker whose lines are JSON (``console`` False: its stderr is no
    terminal, observability/logs.py) without rich.

    structlog's ``dev`` and ``tracebacks`` modules import rich (and rich.pretty, attrs) when it
    is installed, for the console renderer's tracebacks and the locals in its dict tracebacks:
    65-95 ms of a broker's 0.5 s of imports before it logs "starting", for lines that are JSON
    with plain tracebacks (``format_exc_info``). rich is hidden only while structlog is
    imported, so anything later that imports rich gets it; on a terminal nothing is hidden and
    the console renderer keeps rich's tracebacks (decision 0061)."""
    if console or "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


def main() -> None:
    answer = overview(sys.argv[1:])
    if answer is not None:
        text, status, to_stderr = answer
        (sys.stderr if to_stderr else sys.stdout).write(text)
        raise SystemExit(status)
    arguments = serve_arguments(sys.argv[1:])
    if arguments is None:
        from kafkalite.cli import main as cli_main

        cli_main()
        return
    # as the full command line does: kio's hypothesis strategies are of no use to a broker
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    import gc

    # The cyclic collector is paused for the imports and the configuration (0.4 s of CPU,
    # before the broker logs "starting"): what they make are modules, classes and functions
    # that live on, which some 120 young and a dozen older collections walked for nothing
    # (30-50 ms). It runs again before ``serve``, whose gc freezer collects fully first (what
    # the imports left as garbage goes then) and freezes the rest (decision 0066).
    collecting = gc.isenabled()
    gc.disable()
    try:
        import_structlog(console=sys.stderr.isatty())
        from kafkalite.config import BrokerConfig, ConfigError

        try:
            config = BrokerConfig.load(*arguments)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            raise SystemExit(2) from None
        from kafkalite.server import serve
    finally:
        if collecting:
            gc.enable()

    raise SystemExit(serve(config, exit_when_stopped=True))


if __name__ == "__main__":
    main()
