"""kafkalite for testing: a real Kafka broker (or cluster) inside a test suite.

``Broker`` and ``Cluster`` start kafkalite in this process (a thread with its own event loop)
or as subprocesses; both are sync and async context managers and expose
``bootstrap_servers``, ``admin_url`` and helpers (``create_topic``, ``produce``,
``consume_all``, ``wait_for_leaders``). ``Cluster`` adds fault injection (kill, restart, pause,
isolate, partition, slow, fail_log_dir, expire_session). The pytest plugin
(``kafkalite.testing.pytest_plugin``, registered through the ``pytest11`` entry point) turns
them into fixtures.

For the tests of kafkalite itself and of applications that want them: ``ZooKeeperServer`` runs
a real ZooKeeper (Debian's package, with java) for ``Cluster(zookeeper_connect=...)`` or
brokers on ZooKeeper; ``api_versions_ok``, ``recv_exactly`` and ``free_port`` (``wire.py``)
serve tests that talk to a broker on a raw socket; ``wait_for`` (``waiting.py``) polls a
condition with a deadline.
"""

from ._ops import Message, PartitionState
from .broker import Broker
from .cluster import Cluster
from .waiting import wait_for
from .wire import api_versions_ok, free_port, recv_exactly
from .zookeeper import ZooKeeperMissing, ZooKeeperServer

__all__ = [
    "Broker",
    "Cluster",
    "Message",
    "PartitionState",
    "ZooKeeperMissing",
    "ZooKeeperServer",
    "api_versions_ok",
    "free_port",
    "recv_exactly",
    "wait_for",
]
