"""Fixtures of the integration tests' brokers (kafkalite.testing.Broker as subprocesses)."""

import pytest

from kafkalite.testing import Broker


@pytest.fixture
def start_broker(tmp_path):
    """Start a subprocess broker with these settings on a fresh data dir; closed at teardown."""
    made: list[Broker] = []

    def start(config: dict[str, str] | None = None) -> Broker:
        broker = Broker(config, subprocess=True, data_dir=tmp_path / f"broker-{len(made)}")
        made.append(broker)
        return broker.start()

    yield start
    for broker in made:
        broker.close()
