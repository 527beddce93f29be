"""Helpers shared by the handler tests: hypothesis strategies for hostile requests, Fetch
requests built for any version, and an in-memory ``__consumer_offsets`` writer."""

import dataclasses
import datetime
import sys

from hypothesis import strategies as st
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from kafkalite.protocol.api import ADVERTISED_VERSIONS, ApiKey, request_class
from kafkalite.protocol.errors import ErrorCode

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def _int(kafka_type):
    low, high = _INT_RANGES[kafka_type]
    edges = [v for v in (low, -2, -1, 0, 1, 2, 3, high) if low <= v <= high]
    return st.one_of(st.sampled_from(edges), st.integers(low, high))


def _primitive(kafka_type):
    if kafka_type in _INT_RANGES:
        return _int(kafka_type)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return _int("int32").map(lambda ms: datetime.timedelta(milliseconds=ms))
    if kafka_type == "datetime_i64":
        return st.none()
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "string":
        return st.one_of(st.none(), st.sampled_from(["", "orders", "__consumer_offsets"]))
    if kafka_type in ("bytes", "records"):
        return st.one_of(st.none(), st.binary(max_size=70))
    if kafka_type == "uuid":
        return st.one_of(st.none(), st.uuids())
    if kafka_type == "float64":
        return st.floats(allow_nan=False)
    if kafka_type == "error_code":
        return st.sampled_from([ErrorCode.NONE, ErrorCode.UNKNOWN_SERVER_ERROR])
    raise NotImplementedError(kafka_type)


def hostile(cls, depth=0):
    """Messages of `cls` with nulls anywhere a wire format can carry one (nullable or not),
    edge-case and negative numbers, and out-of-range enum bytes."""
    fields = {}
    for f in dataclasses.fields(cls):
        if get_field_tag(f) is not None:
            continue  # tagged fields keep their defaults
        kind = classify_field(f)
        kafka_type = f.metadata.get("kafka_type")
        if isinstance(kind, EntityTupleField):
            items = st.lists(hostile(kind.type_, depth + 1), max_size=2 if depth < 2 else 1)
            fields[f.name] = st.one_of(st.none(), items.map(tuple))
        elif isinstance(kind, EntityField):
            entity = hostile(kind.type_, depth + 1)
            fields[f.name] = st.one_of(st.none(), entity) if is_optional(f) else entity
        elif isinstance(kind, PrimitiveTupleField):
            items = st.lists(_primitive(kafka_type).filter(lambda v: v is not None), max_size=3)
            fields[f.name] = st.one_of(st.none(), items.map(tuple))
        else:
            fields[f.name] = _primitive(kafka_type)
    return st.builds(cls, **fields)


ADVERTISED = [
    (key, version)
    for key, (low, high) in ADVERTISED_VERSIONS.items()
    for version in range(low, high + 1)
]


def partition(cls, index):
    fields = dict(
        partition=index,
        fetch_offset=5,
        partition_max_bytes=1000,
        current_leader_epoch=-1,
        log_start_offset=-1,
        last_fetched_epoch=-1,
    )
    names = set(cls.__dataclass_fields__)
    return cls(**{k: v for k, v in fields.items() if k in names})


def fetch_request(version, topics, session_id=0, session_epoch=-1, max_bytes=1 << 20):
    cls = request_class(ApiKey.FETCH, version)
    module = sys.modules[cls.__module__]
    fields = dict(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=100),
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        topics=tuple(
            module.FetchTopic(
                topic=name,
                partitions=tuple(partition(module.FetchPartition, p) for p in parts),
            )
            for name, parts in topics
        ),
    )
    if version >= 7:
        fields.update(session_id=session_id, session_epoch=session_epoch, forgotten_topics_data=())
    if version >= 11:
        fields["rack_id"] = ""
    names = set(cls.__dataclass_fields__)
    return cls(**{k: v for k, v in fields.items() if k in names})


class MemoryWriter:
    def __init__(self) -> None:
        self.partitions: dict[int, list] = {}

    async def append(self, partition, records):
        log = self.partitions.setdefault(partition, [])
        base = len(log)
        log.extend((base + i, k, v) for i, (k, v) in enumerate(records))
        return ErrorCode.NONE, base

    async def read(self, partition):
        for record in list(self.partitions.get(partition, [])):
            yield record
