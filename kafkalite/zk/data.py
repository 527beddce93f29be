"""Kafka's ZooKeeper layout and payloads, exactly as Kafka (``kafka.zk.ZkData``) writes them.

An operator who knows Kafka finds everything where Kafka keeps it, and ``zkCli.sh get`` shows the
same JSON: the fields, values and value types of Kafka's encoders (e.g. ``timestamp`` and
``block_start`` as strings, ``/cluster/id``'s ``version`` as the string "1"), compact, in a fixed
key order (Kafka's readers, and ours, do not depend on the order):

=============================================  =======================================================
path                                           data
=============================================  =======================================================
/controller (ephemeral)                        {"version":1,"brokerid":1,"timestamp":"1700000000000"}
/controller_epoch                              1 (decimal text)
/brokers/ids/<id> (ephemeral)                  {"features":{},"listener_security_protocol_map":{...},
                                               "endpoints":["PLAINTEXT://h:9092"],"jmx_port":-1,
                                               "port":9092,"host":"h","version":5,"timestamp":"..."}
                                               (+ "rack" when set)
/brokers/topics/<t>                            {"partitions":{"0":[1,2]},"topic_id":"<base64url>",
                                               "adding_replicas":{},"removing_replicas":{},"version":3}
/brokers/topics/<t>/partitions/<p>/state       {"controller_epoch":1,"leader":1,"version":1,
                                               "leader_epoch":0,"isr":[1,2]}
/brokers/seqid                                 (broker id generation; empty)
/admin/delete_topics/<t>                       (empty; the node's existence is the request)
/admin/reassign_partitions                     {"version":1,"partitions":[{"topic":"t","partition":0,
                                               "replicas":[1,2]}]}
/admin/preferred_replica_election              {"version":1,"partitions":[{"topic":"t","partition":0}]}
/isr_change_notification/isr_change_<seq>      {"version":1,"partitions":[{"topic":"t","partition":0}]}
/log_dir_event_notification/log_dir_event_<s>  {"version":1,"broker":1,"event":1}
/config/topics/<t>                             {"version":1,"config":{"retention.ms":"1000"}}
/config/changes/config_change_<seq>            {"version":2,"entity_path":"topics/t"}
/cluster/id                                    {"version":"1","id":"<base64url uuid>"}
/latest_producer_id_block                      {"version":1,"broker":0,"block_start":"0",
                                               "block_end":"999"}
=============================================  =======================================================

Decoders accept what every Kafka version wrote (broker registrations v1-v5, topic assignments
with or without ``topic_id`` and adding/removing replicas); encoders write the current versions.
A payload that cannot be decoded raises ``ValueError`` naming the path kind.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import LeaderAndIsr, LeaderIsrAndControllerEpoch

# -- paths ----------------------------------------------------------------------------------------

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONSUMERS = "/consumers"

PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{t}" for t in CONFIG_TYPES),
)
"""What a Kafka broker creates at startup (``KafkaZkClient.createTopLevelPaths``)."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def config_entity_path(entity_type: str, name: str) -> str:
    return f"{CONFIG}/{entity_type}/{name}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def isr_change_sequence_path() -> str:
    """The prefix to create sequentially: ``/isr_change_notification/isr_change_``."""
    return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}"


def config_change_sequence_path() -> str:
    return f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}"


def log_dir_event_sequence_path() -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}"


def sequence_number(path_or_name: str, prefix: str) -> str:
    """The digits after ``prefix`` (Kafka's ``IsrChangeNotificationSequenceZNode.sequenceNumber``)."""
    return path_or_name[path_or_name.rindex(prefix) + len(prefix) :]


# -- JSON helpers ---------------------------------------------------------------------------------


def _dump(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _load(data: bytes | None, kind: str) -> dict:
    if not data:
        raise ValueError(f"empty {kind} payload")
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{kind} payload is not JSON: {data[:200]!r}") from error
    if not isinstance(obj, dict):
        raise ValueError(f"{kind} payload is not a JSON object: {data[:200]!r}")
    return obj


def _partitions_json(partitions: Iterable[TopicPartition]) -> list[dict]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(partitions))]


def _decode_partitions(data: bytes, kind: str) -> set[TopicPartition]:
    obj = _load(data, kind)
    try:
        return {TopicPartition(str(p["topic"]), int(p["partition"])) for p in obj["partitions"]}
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"bad {kind} payload: {data[:200]!r}") from error


# -- /controller, /controller_epoch ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    broker_id: int
    timestamp: int


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> ControllerInfo:
    obj = _load(data, "controller")
    try:
        return ControllerInfo(int(obj["brokerid"]), int(obj.get("timestamp", -1)))
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"bad controller payload: {data[:200]!r}") from error


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"bad controller_epoch payload: {data[:50]!r}") from error


# -- /brokers/ids/<id> ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EndPoint:
    host: str
    port: int
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str, protocol_map: Mapping[str, str] | None = None) -> EndPoint:
        """``LISTENER://host:port`` (Kafka's ``EndPoint.createEndPoint``)."""
        listener, sep, rest = text.partition("://")
        if not sep or ":" not in rest:
            raise ValueError(f"bad endpoint {text!r}")
        host, _, port = rest.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        listener = listener.upper()
        protocol = (protocol_map or {}).get(listener, listener)
        return cls(host, int(port), listener, protocol)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker registration (``/brokers/ids/<id>``)."""

    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp: int = 0
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    version: int = 5

    def endpoint(self, listener_name: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


def encode_broker(info: BrokerInfo) -> bytes:
    """Version 5 JSON; top-level host/port are the first PLAINTEXT endpoint's (null/-1 if none)."""
    plaintext = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
    obj: dict[str, object] = {}
    if info.version >= 5:
        obj["features"] = {name: dict(ranges) for name, ranges in info.features.items()}
    if info.version >= 4:
        obj["listener_security_protocol_map"] = {
            e.listener_name: e.security_protocol for e in info.endpoints
        }
    obj["endpoints"] = [e.connection_string for e in info.endpoints]
    if info.rack is not None and info.version >= 3:
        obj["rack"] = info.rack
    obj["jmx_port"] = info.jmx_port
    obj["port"] = plaintext.port if plaintext else -1
    obj["host"] = plaintext.host if plaintext else None
    obj["version"] = info.version
    obj["timestamp"] = str(info.timestamp)
    return _dump(obj)


def decode_broker(broker_id: int, data: bytes) -> BrokerInfo:
    obj = _load(data, "broker registration")
    try:
        version = int(obj["version"])
        if version < 1:
            raise ValueError(f"unsupported broker registration version {version}")
        if version == 1:
            endpoints: tuple[EndPoint, ...] = (EndPoint(str(obj["host"]), int(obj["port"])),)
        else:
            protocol_map = obj.get("listener_security_protocol_map") or {}
            endpoints = tuple(EndPoint.parse(e, protocol_map) for e in obj["endpoints"])
        features = {
            str(name): {str(k): int(v) for k, v in ranges.items()}
            for name, ranges in (obj.get("features") or {}).items()
        }
        return BrokerInfo(
            id=broker_id,
            endpoints=endpoints,
            rack=obj.get("rack"),
            jmx_port=int(obj.get("jmx_port", -1)),
            timestamp=int(obj.get("timestamp", 0)),
            features=features,
            version=version,
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(
            f"failed to parse the registration of broker {broker_id}: {data[:300]!r}"
        ) from error


# -- /brokers/topics/<t> --------------------------------------------------------------------------


def new_topic_id() -> str:
    """A random topic id as Kafka prints a ``Uuid``: 16 bytes, URL-safe base64, no padding.

    Like ``Uuid.randomUuid``: never the reserved ZERO/ONE ids, never starting with ``-``.
    """
    while True:
        raw = os.urandom(16)
        if int.from_bytes(raw, "big") in (0, 1):
            continue
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


def topic_id_bytes(topic_id: str) -> bytes:
    """The 16 bytes of a topic id string (for the wire's UUID fields)."""
    raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    if len(raw) != 16:
        raise ValueError(f"bad topic id {topic_id!r}")
    return raw


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/<t>``: partition -> replicas, plus reassignment state and topic id."""

    topic: str
    partitions: Mapping[int, tuple[int, ...]]
    topic_id: str | None = None
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


def encode_topic(assignment: TopicAssignment) -> bytes:
    def as_json(m: Mapping[int, Iterable[int]]) -> dict[str, list[int]]:
        return {str(p): list(replicas) for p, replicas in sorted(m.items()) if list(replicas)}

    obj: dict[str, object] = {
        "partitions": {str(p): list(r) for p, r in sorted(assignment.partitions.items())}
    }
    if assignment.topic_id is not None:
        obj["topic_id"] = assignment.topic_id
    obj["adding_replicas"] = as_json(assignment.adding_replicas)
    obj["removing_replicas"] = as_json(assignment.removing_replicas)
    obj["version"] = 3
    return _dump(obj)


def decode_topic(topic: str, data: bytes) -> TopicAssignment:
    obj = _load(data, "topic assignment")
    try:

        def replicas(key: str) -> dict[int, tuple[int, ...]]:
            return {int(p): tuple(int(b) for b in r) for p, r in (obj.get(key) or {}).items()}

        return TopicAssignment(
            topic=topic,
            partitions=replicas("partitions"),
            topic_id=obj.get("topic_id"),
            adding_replicas=replicas("adding_replicas"),
            removing_replicas=replicas("removing_replicas"),
        )
    except (TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"bad assignment of topic {topic}: {data[:300]!r}") from error


# -- /brokers/topics/<t>/partitions/<p>/state -----------------------------------------------------


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    """The node's JSON; ``zk_version`` is the node's version, not part of its data.

    Written by hand, not through ``json`` (a failover or a broker's failure writes thousands):
    the same bytes as ``_dump`` of the dict ``{"controller_epoch", "leader", "version": 1,
    "leader_epoch", "isr"[, "leader_recovery_state"]}`` (tests compare the two)."""
    lai = state.leader_and_isr
    # the fields are ints (the controller's and the decoder's; an IntEnum formats as its
    # number since Python 3.11): formatted as they are, without an int() per field
    isr = ",".join(map(str, lai.isr))
    recovery = lai.leader_recovery_state
    tail = f',"leader_recovery_state":{int(recovery)}}}' if recovery else "}"
    return (
        f'{{"controller_epoch":{state.controller_epoch},"leader":{lai.leader},'
        f'"version":1,"leader_epoch":{lai.leader_epoch},"isr":[{isr}]{tail}'
    ).encode()


_INT = rb"(-?(?:0|[1-9][0-9]*))"
_PARTITION_STATE = re.compile(
    rb'\{"controller_epoch":'
    + _INT
    + rb',"leader":'
    + _INT
    + rb',"version":1,"leader_epoch":'
    + _INT
    + rb',"isr":\[((?:-?(?:0|[1-9][0-9]*))(?:,-?(?:0|[1-9][0-9]*))*)?\]'
    + rb'(?:,"leader_recovery_state":'
    + _INT
    + rb")?\}"
)
"""The layout ``encode_partition_state`` writes (and Kafka's JSON of the same fields in this
order, compact): read without ``json``; any other layout goes through ``json``."""


def decode_partition_state(data: bytes, zk_version: int = 0) -> LeaderIsrAndControllerEpoch:
    """The node's content, with ``zk_version`` the version the node was read at."""
    match = _PARTITION_STATE.fullmatch(data) if data else None
    if match is not None:
        controller_epoch, leader, leader_epoch, isr, recovery = match.groups()
        return LeaderIsrAndControllerEpoch(
            LeaderAndIsr(
                int(leader),
                int(leader_epoch),
                tuple(map(int, isr.split(b","))) if isr else (),
                zk_version,
                int(recovery) if recovery else 0,
            ),
            int(controller_epoch),
        )
    obj = _load(data, "partition state")
    try:
        return LeaderIsrAndControllerEpoch(
            LeaderAndIsr(
                leader=int(obj["leader"]),
                leader_epoch=int(obj["leader_epoch"]),
                isr=tuple(int(b) for b in obj["isr"]),
                zk_version=zk_version,
                leader_recovery_state=int(obj.get("leader_recovery_state", 0)),
            ),
            controller_epoch=int(obj["controller_epoch"]),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"bad partition state: {data[:300]!r}") from error


# -- /admin -------------------------------------------------------------------------------------


def encode_reassignment(reassignment: Mapping[TopicPartition, Iterable[int]]) -> bytes:
    return _dump(
        {
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
                for tp, replicas in sorted(reassignment.items())
            ],
        }
    )


def decode_reassignment(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    obj = _load(data, "partition reassignment")
    try:
        return {
            TopicPartition(str(p["topic"]), int(p["partition"])): tuple(
                int(b) for b in p["replicas"]
            )
            for p in obj["partitions"]
        }
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"bad partition reassignment: {data[:300]!r}") from error


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return _dump({"version": 1, "partitions": _partitions_json(partitions)})


def decode_preferred_replica_election(data: bytes) -> set[TopicPartition]:
    return _decode_partitions(data, "preferred replica election")


# -- notifications --------------------------------------------------------------------------------


def encode_isr_change(partitions: Iterable[TopicPartition]) -> bytes:
    return _dump({"version": 1, "partitions": _partitions_json(partitions)})


def decode_isr_change(data: bytes) -> set[TopicPartition]:
    return _decode_partitions(data, "ISR change notification")


LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    return _dump({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    obj = _load(data, "log dir event")
    try:
        return int(obj["broker"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"bad log dir event: {data[:200]!r}") from error


# -- /config --------------------------------------------------------------------------------------


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": {str(k): str(v) for k, v in config.items()}})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    """Kafka treats a missing or empty config node as no overrides."""
    if not data:
        return {}
    obj = _load(data, "entity config")
    config = obj.get("config") or {}
    if not isinstance(config, dict):
        raise ValueError(f"bad entity config: {data[:300]!r}")
    return {str(k): str(v) for k, v in config.items()}


def encode_config_change(entity_path: str) -> bytes:
    """A change notification for e.g. ``topics/orders`` (version 2)."""
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    obj = _load(data, "config change notification")
    try:
        if int(obj["version"]) == 1:
            return f"{obj['entity_type']}/{obj['entity_name']}"
        return str(obj["entity_path"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"bad config change notification: {data[:200]!r}") from error


# -- /cluster/id, /latest_producer_id_block -------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    obj = _load(data, "cluster id")
    try:
        return str(obj["id"])
    except KeyError as error:
        raise ValueError(f"bad cluster id: {data[:200]!r}") from error


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """A range of producer ids handed to a broker; ``first``..``last`` inclusive."""

    broker_id: int
    first: int
    last: int

    @property
    def size(self) -> int:
        return self.last - self.first + 1


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dump(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.first),
            "block_end": str(block.last),
        }
    )


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    obj = _load(data, "producer id block")
    try:
        return ProducerIdBlock(int(obj["broker"]), int(obj["block_start"]), int(obj["block_end"]))
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"bad producer id block: {data[:200]!r}") from error
