"""The values Kafka keeps in its znodes, as the controller and the brokers use them.

- ``Broker``/``EndPoint``: a registered broker (Kafka's ``kafka.cluster.Broker``), decoded from
  ``/brokers/ids/<id>``;
- ``ReplicaAssignment``: a partition's replicas and the reassignment in flight, from
  ``/brokers/topics/<t>`` (Kafka's ``ReplicaAssignment``);
- ``LeaderAndIsr`` and ``LeaderIsrAndControllerEpoch``: the content of a partition state node
  ``/brokers/topics/<t>/partitions/<p>/state`` with the node's version (Kafka's
  ``kafka.api.LeaderAndIsr`` and ``LeaderIsrAndControllerEpoch``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

NO_LEADER = -1
"""``LeaderAndIsr.NoLeader``: the partition has no leader (all eligible replicas are down)."""
LEADER_DURING_DELETE = -2
"""``LeaderAndIsr.LeaderDuringDelete``: sent in UpdateMetadata for a topic being deleted."""
INITIAL_LEADER_EPOCH = 0
INITIAL_PARTITION_EPOCH = 0
"""Version of a freshly created partition state node."""
INITIAL_CONTROLLER_EPOCH = 0
"""Value written into a fresh ``/controller_epoch``; the first elected controller has epoch 1."""


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One listener of a broker, as registered in ``/brokers/ids/<id>``."""

    host: str
    port: int
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class Broker:
    """A registered broker (Kafka's ``kafka.cluster.Broker``)."""

    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None

    def endpoint(self, listener_name: str | None = None) -> EndPoint:
        """The endpoint of ``listener_name`` (the first one when None). Raises KeyError."""
        if listener_name is None:
            if not self.endpoints:
                raise KeyError(f"broker {self.id} has no endpoints")
            return self.endpoints[0]
        for endpoint in self.endpoints:
            if endpoint.listener_name == listener_name:
                return endpoint
        raise KeyError(f"broker {self.id} has no listener {listener_name}")


@dataclass(slots=True, unsafe_hash=True)
class LeaderAndIsr:
    """A partition's leadership as stored in its partition state node.

    ``zk_version`` is the node's version (Kafka's partition epoch in the ZooKeeper era): the
    expected version of the next compare-and-set write of this node.

    Not frozen (a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``: four times the cost, and a broker's failure at 10,000 partitions
    builds 10,000 of these), but treated as immutable: equal and hashed by content, one
    object shared by the context, the writes and the requests; a change is a new object.
    """

    leader: int
    leader_epoch: int = INITIAL_LEADER_EPOCH
    isr: tuple[int, ...] = ()
    zk_version: int = INITIAL_PARTITION_EPOCH
    leader_recovery_state: int = 0
    """0 RECOVERED, 1 RECOVERING (KIP-704); written to the node only when RECOVERING."""

    def __post_init__(self) -> None:
        if type(self.isr) is not tuple:
            self.isr = tuple(self.isr)

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """A new leadership: bumps the leader epoch, keeps the version (the CAS token)."""
        # The constructor, not dataclasses.replace (which inspects the fields on every call):
        # a broker's failure makes one of these per partition it held.
        return LeaderAndIsr(
            leader, self.leader_epoch + 1, tuple(isr), self.zk_version, self.leader_recovery_state
        )

    def new_leader(self, leader: int) -> LeaderAndIsr:
        return self.new_leader_and_isr(leader, self.isr)

    def with_zk_version(self, zk_version: int) -> LeaderAndIsr:
        return LeaderAndIsr(
            self.leader, self.leader_epoch, self.isr, zk_version, self.leader_recovery_state
        )

    @staticmethod
    def during_delete(isr: Iterable[int]) -> LeaderAndIsr:
        """What UpdateMetadata says of a partition of a topic being deleted (Kafka's
        ``LeaderAndIsr.duringDelete``: leader -2, initial epochs)."""
        return LeaderAndIsr(
            LEADER_DURING_DELETE, INITIAL_LEADER_EPOCH, tuple(isr), INITIAL_PARTITION_EPOCH
        )


@dataclass(slots=True, unsafe_hash=True)
class LeaderIsrAndControllerEpoch:
    """The content of a partition state node: the leadership and the epoch of the controller
    that wrote it (or whose LeaderAndIsr the leader had when it changed the ISR). Not frozen
    but never assigned, as ``LeaderAndIsr``."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """The replicas of a partition in preference order (Kafka's ``ReplicaAssignment``).

    During a reassignment ``replicas`` is the union of the old and the new replicas; the new ones
    are listed in ``adding_replicas``, the old ones that go away in ``removing_replicas``.
    """

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "replicas", tuple(self.replicas))
        object.__setattr__(self, "adding_replicas", tuple(self.adding_replicas))
        object.__setattr__(self, "removing_replicas", tuple(self.removing_replicas))

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    def remove_replica(self, replica: int) -> ReplicaAssignment:
        return ReplicaAssignment(
            tuple(r for r in self.replicas if r != replica),
            tuple(r for r in self.adding_replicas if r != replica),
            tuple(r for r in self.removing_replicas if r != replica),
        )
