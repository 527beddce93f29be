"""kafkalite for testing: a real Kafka broker (or cluster) inside a test suite.

``Broker`` and ``Cluster`` start kafkalite in this process (a thread with its own event loop)
or as subprocesses; both are sync and async context managers and expose
``bootstrap_servers``, ``admin_url`` and helpers (``create_topic``, ``produce``,
``consume_all``, ``wait_for_leaders``). ``Cluster`` adds fault injection (kill, restart, pause,
isolate, partition, slow, fail_log_dir, expire_session). The pytest plugin
(``kafkalite.testing.pytest_plugin``, registered through the ``pytest11`` entry point) turns
them into fixtures.
"""

from ._ops import Message, PartitionState
from .broker import Broker
from .cluster import Cluster

__all__ = ["Broker", "Cluster", "Message", "PartitionState"]
