"""`kafkalite serve`: run a broker (kafkalite/server.py) until SIGTERM/SIGINT.

``python -m kafkalite serve`` takes a shorter way to the same broker (kafkalite/__main__.py).
"""

from __future__ import annotations

from typing import Annotated

import typer

from kafkalite.cli.common import fail
from kafkalite.config import BrokerConfig, ConfigError


def serve(
    config: str = typer.Option(None, "--config", "-c", help="server.properties file"),
    override: Annotated[list[str] | None, typer.Option(help="key=value (repeatable)")] = None,
) -> None:
    """Run a broker until SIGTERM/SIGINT."""
    from kafkalite.server import serve as serve_broker

    try:
        broker_config = BrokerConfig.load(config, override or [])
    except ConfigError as e:
        fail(str(e), 2)
    raise typer.Exit(serve_broker(broker_config, exit_when_stopped=True))
