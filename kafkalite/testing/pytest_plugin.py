"""The pytest plugin of kafkalite: real Kafka brokers as fixtures, no Docker, Java or ZooKeeper.

Registered through the ``pytest11`` entry point (name ``kafkalite``), so installing kafkalite is
enough; ``-p no:kafkalite`` turns it off. It depends on nothing but kafkalite and pytest, and
imports kafkalite only when a fixture is used (a test run that uses none pays nothing).

Fixtures:

- ``kafkalite_broker``: a ``kafkalite.testing.Broker`` of its own for the test;
- ``kafkalite_broker_session``: one broker for the whole session, seen by each test through a
  fresh namespace (``.topic("orders")`` is ``<namespace>orders``, unique to the test; the
  helpers apply it to the topic names they are given; ``.group(name)`` likewise);
- ``kafkalite_cluster``: a ``kafkalite.testing.Cluster`` of 3 brokers with fault injection;
- ``kafkalite_bootstrap``: the bootstrap string of ``kafkalite_broker``.
- ``kafkalite_schema_registry_url``: the Schema Registry URL of ``kafkalite_broker``.

Choosing how brokers run: ``--kafkalite-mode=in-process|subprocess`` (or the ``kafkalite_mode``
ini option; default in-process), overridden per test with
``@pytest.mark.kafkalite(subprocess=True, config={"num.partitions": 3}, brokers=5)``.
``--kafkalite-keep-data`` keeps every broker's data directory (under pytest's base temp
directory) and lists them at the end of the run, for post-mortem.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

MODES = ("in-process", "subprocess")
_KEPT = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafkalite", "kafkalite brokers for tests")
    group.addoption(
        "--kafkalite-mode",
        choices=MODES,
        default=None,
        help="run the kafkalite fixtures' brokers in this process or as subprocesses "
        "(default: the kafkalite_mode ini option, else in-process)",
    )
    group.addoption(
        "--kafkalite-keep-data",
        action="store_true",
        default=False,
        help="keep the data directories of kafkalite brokers (listed at the end of the run)",
    )
    parser.addini("kafkalite_mode", "in-process or subprocess", default="in-process")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kafkalite(subprocess=None, config=None, brokers=3): how this test's kafkalite "
        "fixtures run their brokers",
    )
    config.stash[_KEPT] = []


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    kept = config.stash.get(_KEPT, [])
    if kept:
        terminalreporter.write_sep("-", "kafkalite data kept")
        for line in kept:
            terminalreporter.write_line(line)


def _marker(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("kafkalite")
    return dict(marker.kwargs) if marker is not None else {}


def _subprocess(config: pytest.Config, marker: dict[str, Any]) -> bool:
    if marker.get("subprocess") is not None:
        return bool(marker["subprocess"])
    mode = config.getoption("--kafkalite-mode") or config.getini("kafkalite_mode")
    if mode not in MODES:
        raise pytest.UsageError(f"kafkalite_mode: {mode!r} is not one of {', '.join(MODES)}")
    return mode == "subprocess"


def _data_dir(request: pytest.FixtureRequest, name: str) -> Any:
    """A directory under pytest's base temp when data is kept (pytest keeps the last runs'),
    else None: the broker makes a temporary one and removes it."""
    config = request.config
    if not config.getoption("--kafkalite-keep-data"):
        return None
    safe = re.sub(r"[^\w.-]+", "_", name)[:60]
    path = request.getfixturevalue("tmp_path_factory").mktemp(f"kafkalite-{safe}")
    config.stash[_KEPT].append(f"{name}: {path}")
    return path


@pytest.fixture
def kafkalite_broker(request: pytest.FixtureRequest):
    """A kafkalite broker of the test's own (``kafkalite.testing.Broker``)."""
    from kafkalite.testing import Broker

    marker = _marker(request)
    broker = Broker(
        config=marker.get("config"),
        subprocess=_subprocess(request.config, marker),
        data_dir=_data_dir(request, request.node.nodeid),
    )
    with broker:
        yield broker


@pytest.fixture
def kafkalite_bootstrap(kafkalite_broker) -> str:
    """``host:port`` of the test's ``kafkalite_broker``."""
    return kafkalite_broker.bootstrap_servers


@pytest.fixture
def kafkalite_schema_registry_url(kafkalite_broker) -> str:
    """``http://127.0.0.1:port`` of the Schema Registry of the test's ``kafkalite_broker``."""
    return kafkalite_broker.schema_registry_url


@pytest.fixture(scope="session")
def kafkalite_session_broker(request: pytest.FixtureRequest):
    """The broker behind ``kafkalite_broker_session`` (one per session)."""
    from kafkalite.testing import Broker

    broker = Broker(
        subprocess=_subprocess(request.config, {}),
        data_dir=_data_dir(request, "session"),
    )
    with broker:
        yield broker


_namespaces = itertools.count(1)


class NamespacedBroker:
    """The session broker as one test sees it: topic and group names under a prefix of the
    test's own. Everything else is the broker's (``bootstrap_servers``, ``admin_url``...)."""

    def __init__(self, broker: Any, namespace: str) -> None:
        self.broker = broker
        self.namespace = namespace

    def topic(self, name: str) -> str:
        return name if name.startswith(self.namespace) else f"{self.namespace}{name}"

    def group(self, name: str) -> str:
        return self.topic(name)

    def create_topic(self, name: str, *args: Any, **kwargs: Any) -> str:
        return self.broker.create_topic(self.topic(name), *args, **kwargs)

    def produce(self, topic: str, *args: Any, **kwargs: Any) -> int:
        return self.broker.produce(self.topic(topic), *args, **kwargs)

    def consume_all(self, topic: str, **kwargs: Any) -> list:
        return self.broker.consume_all(self.topic(topic), **kwargs)

    def wait_for_leaders(self, *topics: str, **kwargs: Any) -> dict:
        return self.broker.wait_for_leaders(*(self.topic(t) for t in topics), **kwargs)

    def partitions(self, topic: str, **kwargs: Any) -> dict:
        return self.broker.partitions(self.topic(topic), **kwargs)

    async def acreate_topic(self, name: str, *args: Any, **kwargs: Any) -> str:
        return await self.broker.acreate_topic(self.topic(name), *args, **kwargs)

    async def aproduce(self, topic: str, *args: Any, **kwargs: Any) -> int:
        return await self.broker.aproduce(self.topic(topic), *args, **kwargs)

    async def aconsume_all(self, topic: str, **kwargs: Any) -> list:
        return await self.broker.aconsume_all(self.topic(topic), **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.broker, name)


@pytest.fixture
def kafkalite_broker_session(request: pytest.FixtureRequest, kafkalite_session_broker):
    """The session's broker with a fresh topic namespace for this test (``.topic(name)``)."""
    test = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name).strip("-")[:40]
    yield NamespacedBroker(kafkalite_session_broker, f"{test}-{next(_namespaces)}.")


@pytest.fixture
def kafkalite_cluster(request: pytest.FixtureRequest):
    """A cluster of 3 kafkalite brokers (``brokers=`` in the marker for another size) in this
    process, on the embedded store, with fault injection (``kafkalite.testing.Cluster``)."""
    from kafkalite.testing import Cluster

    marker = _marker(request)
    if marker.get("subprocess"):
        raise pytest.UsageError(
            "kafkalite_cluster runs in this process only (its brokers share an embedded store)"
        )
    cluster = Cluster(
        brokers=int(marker.get("brokers", 3)),
        config=marker.get("config"),
        data_dir=_data_dir(request, request.node.nodeid),
    )
    with cluster:
        yield cluster
