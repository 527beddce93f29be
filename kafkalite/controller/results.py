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
- ``announce_first`` and ``first_requests``: the elections of a broker's failure or of a
  failover (``announce_elections``): the partitions and their requests (a LeaderAndIsr to
  their replicas, an UpdateMetadata to every broker). The shell writes those partitions'
  states and sends their requests before it writes the other changes (ISR shrinks) and sends
  the other requests, which it sends without those partitions (their states there are older):
  clients find the new leaders without waiting for the bulk of the event (Kafka sends the
  elections' batch before the replica state machine's on a broker's failure).
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
    first_requests: list = field(default_factory=list)
    """The requests of ``announce_first`` (``ControllerRequest`` objects), sent first."""

    def merge(self, other: ControllerResult) -> ControllerResult:
        """Append ``other`` (a later step of the same event) to this result; returns self."""
        self.writes.extend(other.writes)
        self.requests.extend(other.requests)
        self.failed.update(other.failed)
        self.leadership.update(other.leadership)
        self.announce_first |= other.announce_first
        self.first_requests.extend(other.first_requests)
        return self

    def announce_elections(self, elections: ControllerResult) -> ControllerResult:
        """Append ``elections`` (a state machine's elections) to this result as its first
        announced stage (see the module docstring); returns self."""
        self.writes.extend(elections.writes)
        self.failed.update(elections.failed)
        self.leadership.update(elections.leadership)
        self.announce_first.update(elections.leadership)
        self.first_requests.extend(elections.requests)
        self.first_requests.extend(elections.first_requests)
        self.announce_first |= elections.announce_first
        return self

    def __iadd__(self, other: ControllerResult) -> ControllerResult:
        return self.merge(other)

    @property
    def is_empty(self) -> bool:
        return not (self.writes or self.requests or self.first_requests)

    def requests_to(self, broker_id: int) -> list:
        return [r for r in self.requests if r.broker_id == broker_id]
