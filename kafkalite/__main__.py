"""``python -m kafkalite ...``: the command line (kafkalite/cli/).

``python -m kafkalite serve [--config FILE | -c FILE] [--override key=value]...`` takes a short
way that imports only what the broker needs (not typer, rich's console, nor the admin and
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


def main() -> None:
    arguments = serve_arguments(sys.argv[1:])
    if arguments is None:
        from kafkalite.cli import main as cli_main

        cli_main()
        return
    # as the full command line does: kio's hypothesis strategies are of no use to a broker
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    from kafkalite.config import BrokerConfig, ConfigError

    try:
        config = BrokerConfig.load(*arguments)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    from kafkalite.server import serve

    raise SystemExit(serve(config, exit_when_stopped=True))


if __name__ == "__main__":
    main()
