"""`kafkalite serve`: run a broker (kafkalite/server.py) until SIGTERM/SIGINT.

``python -m kafkalite serve`` takes a shorter way to the same broker (kafkalite/__main__.py).
"""

from __future__ import annotations

import click

from kafkalite.cli.common import fail


@click.command("serve")
@click.option("--config", "-c", metavar="FILE", help="server.properties file")
@click.option("--override", multiple=True, metavar="KEY=VALUE", help="a broker config (repeatable)")
def serve(config: str | None, override: tuple[str, ...]) -> None:
    """Run a broker until SIGTERM/SIGINT."""
    from kafkalite.config import BrokerConfig, ConfigError
    from kafkalite.server import serve as serve_broker

    try:
        broker_config = BrokerConfig.load(config, list(override))
    except ConfigError as e:
        fail(str(e), 2)
    raise SystemExit(serve_broker(broker_config, exit_when_stopped=True))
