"""Shared fixtures: kafkalite brokers as subprocesses (tests/harness/broker.py)."""

import pytest

from tests.harness.broker import BrokerProcess


@pytest.fixture
def broker_factory(tmp_path):
    """Make (not start) brokers on fresh data dirs; every one is stopped at teardown."""
    made: list[BrokerProcess] = []

    def make(name: str = "broker", **kwargs) -> BrokerProcess:
        b = BrokerProcess(tmp_path / name, **kwargs)
        made.append(b)
        return b

    yield make
    for b in made:
        if b.running:
            try:
                b.stop()
            except TimeoutError:
                b.kill()


@pytest.fixture
def broker(broker_factory):
    """A started single broker on a fresh data dir."""
    return broker_factory().start()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for a whole test module (tests use distinct topics)."""
    b = BrokerProcess(tmp_path_factory.mktemp("shared-broker"))
    b.start()
    yield b
    if b.running:
        try:
            b.stop()
        except TimeoutError:
            b.kill()
