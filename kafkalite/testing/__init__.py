"""kafkalite for testing: a real Kafka broker (or cluster) inside a test suite.

``Broker`` and ``Cluster`` start kafkalite in this process (a thread with its own event loop)
or as subprocesses; both are sync and async context managers and expose
``bootstrap_servers``, ``admin_url`` and helpers (``create_topic``, ``produce``,
``consume_all``, ``wait_for_leaders``). ``Cluster`` adds fault injection (kill, restart, pause,
isolate, partition, slow, fail_log_dir, expire_session). The pytest plugin
(``kafkalite.testing.pytest_plugin``, registered through the ``pytest11`` entry point) turns
them into fixtures.
"""

from kafkalite.protocol.kio_import import import_kio_without_hypothesis

import_kio_without_hypothesis()  # before kio is imported below: a faster start

from ._ops import Message, PartitionState  # noqa: E402
from .broker import Broker  # noqa: E402
from .cluster import Cluster  # noqa: E402

__all__ = ["Broker", "Cluster", "Message", "PartitionState"]
