"""What the controller's pure handlers decide: store writes and broker requests, as data.

A handler (the state machines, the topic deletion manager, ``ControllerCore``) never touches
the coordination store or a socket. It returns a ``ControllerResult``:

- ``writes``: the store writes (``kafkalite.zk.writes``), in order. Each names the znode it
  changes semantically (``CreatePartitionState``, ``UpdatePartitionState`` with the version it
  expects, ...); the I/O shell (``KafkaController``) applies them with ``kafkalite.zk.client`` in ONE
  atomic multi together with a check of ``/controller_epoch``'s version, so a deposed controller
  can never write (Kafka's ``checkControllerEpochZkVersion`` ops).
- ``requests``: the LeaderAndIsr / UpdateMetadata / StopReplica requests to send, per broker,
  in order. The shell sends them only after the writes committed (persist before you announce,
  as Kafka's controller writes leader and ISR before it sends LeaderAndIsr; CONTRIBUTING.md,
  convention 4).
- ``failed``: state changes that could not be made (no live replica, no eligible leader, ...),
  with the reason. They are data, not errors: Kafka logs them and the partition stays where it
  was until the next trigger (a broker start, for instance).
- ``leadership``: the new leadership of each partition elected or initialised by this result.
- ``announce_first``: partitions that got a new leader in this result and whose LeaderAndIsr
  goes to each broker before that broker's UpdateMetadata, the rest of its LeaderAndIsr
  (ISR shrinks, a new controller's resynchronisation) after it: clients find the new leaders
  without waiting for the brokers to apply the bulk of an event (Kafka sends the elections'
  batch before the replica state machine's on a broker's failure).

Handlers update the ``ControllerContext`` as if the writes succeed (optimistically): the
version in each ``LeaderAndIsr`` of the context is the one the node will have after the multi
(creation: 0; compare-and-set: expected + 1). When the multi fails, the context no longer
matches the store and the shell reloads it from the store (the controller failover path, which
recomputes everything from the store alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import LeaderAndIsr
from kafkalite.zk.writes import StoreWrite

# -- the result ---------------------------------------------------------------------------------


@dataclass
class ControllerResult:
    writes: list[StoreWrite] = field(default_factory=list)
    requests: list = field(default_factory=list)
    """``ControllerRequest`` objects (``broker_request_batch``), in sending order."""
    failed: dict[object, str] = field(default_factory=dict)
    """TopicPartition or PartitionAndReplica -> why its state change failed."""
    leadership: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    announce_first: set[TopicPartition] = field(default_factory=set)

    def merge(self, other: ControllerResult) -> ControllerResult:
        """Append ``other`` (a later step of the same event) to this result; returns self."""
        self.writes.extend(other.writes)
        self.requests.extend(other.requests)
        self.failed.update(other.failed)
        self.leadership.update(other.leadership)
        self.announce_first |= other.announce_first
        return self

    def __iadd__(self, other: ControllerResult) -> ControllerResult:
        return self.merge(other)

    @property
    def is_empty(self) -> bool:
        return not (self.writes or self.requests)

    def requests_to(self, broker_id: int) -> list:
        return [r for r in self.requests if r.broker_id == broker_id]
