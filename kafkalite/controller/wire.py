"""The ``topic_states`` of LeaderAndIsr and UpdateMetadata requests, encoded once per event.

One controller event sends every live broker an UpdateMetadata with the same partition states
(all 10,000 of them after a failover), and at RF = brokers every broker the same LeaderAndIsr
states. Building the protocol's per-partition structs and encoding them again for each broker
was most of the controller's CPU at 10,000 partitions; here the field is encoded straight from
the controller's partition states, once per (states, topic ids, version), and every broker's
request carries the same bytes (``kafkalite.protocol.encoder.Encoded``).

Invariants:
- the bytes are exactly what the message class's encoder writes for the structs
  ``channel_manager.to_message`` builds from the same request (tests compare the two, and kio's
  own writer, on random states at every version);
- the layout is taken from the message classes, not assumed: a version whose partition state
  fields are not one of the known layouts (a future codec) is not encoded here (``None``: the
  caller builds the structs as before);
- the cache holds the last few results and recognises a request by its states tuple (the same
  object for every broker's UpdateMetadata of one batch) or equal content (LeaderAndIsr tuples
  of different brokers holding the same state objects compare element by element by identity).
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import typing
from collections.abc import Callable, Mapping
from typing import Any

from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.encoder import Encoded
from kafkalite.protocol.varint import write_unsigned_varint

_UM_FIELDS = (
    "partition_index",
    "controller_epoch",
    "leader",
    "leader_epoch",
    "isr",
    "zk_version",
    "replicas",
    "offline_replicas",
)
_LAI_FIELDS = (
    "partition_index",
    "controller_epoch",
    "leader",
    "leader_epoch",
    "isr",
    "zk_version",
    "replicas",
    "adding_replicas",
    "removing_replicas",
    "is_new",
)
_LAI_FIELDS_RECOVERY = (*_LAI_FIELDS, "leader_recovery_state")

_ZERO_UUID = bytes(16)
_SHORT = 127
"""Arrays shorter than this have a one-byte compact length (n + 1 < 128)."""


@functools.cache
def _layout(api_key: ApiKey, version: int) -> tuple[str, bool] | None:
    """(partition layout name, whether topics carry an id) of the request's ``topic_states``,
    or None when this module does not know the layout."""
    cls = request_class(api_key, version)
    if not getattr(cls, "__flexible__", False):
        return None
    hints = typing.get_type_hints(cls)
    if "topic_states" not in hints:
        return None
    (topic_cls, *_) = typing.get_args(hints["topic_states"])
    topic_fields = tuple(f.name for f in dataclasses.fields(topic_cls))
    if topic_fields == ("topic_name", "topic_id", "partition_states"):
        with_id = True
    elif topic_fields == ("topic_name", "partition_states"):
        with_id = False
    else:
        return None
    (partition_cls, *_) = typing.get_args(typing.get_type_hints(topic_cls)["partition_states"])
    fields = dataclasses.fields(partition_cls)
    if any(f.metadata.get("tag") is not None for f in fields):
        return None  # tagged fields: not a layout written here
    names = tuple(f.name for f in fields)
    for layout, known in (("um", _UM_FIELDS), ("lai", _LAI_FIELDS), ("lai6", _LAI_FIELDS_RECOVERY)):
        if names == known:
            return layout, with_id
    return None


@functools.lru_cache(maxsize=512)
def _packer(layout: str, lengths: tuple[int, ...]) -> Callable[..., bytes]:
    """One ``struct`` pack for a partition state whose arrays have ``lengths`` (all short)."""
    a = [f"B{n}i" for n in lengths]
    if layout == "um":  # isr, replicas, offline
        fmt = f">4i{a[0]}i{a[1]}{a[2]}B"
    elif layout == "lai":  # isr, replicas, adding, removing; is_new
        fmt = f">4i{a[0]}i{a[1]}{a[2]}{a[3]}BB"
    else:  # and leader_recovery_state
        fmt = f">4i{a[0]}i{a[1]}{a[2]}{a[3]}BbB"
    return struct.Struct(fmt).pack


_i32 = struct.Struct(">i").pack


def _array(out: bytearray, values: tuple[int, ...]) -> None:
    write_unsigned_varint(out, len(values) + 1)
    for v in values:
        out += _i32(v)


def _partition_long(layout: str, s: Any, out: bytearray) -> None:
    """A partition state with a long array (the general path, rarely taken)."""
    out += struct.pack(">4i", s.partition_index, s.controller_epoch, s.leader, s.leader_epoch)
    _array(out, s.isr)
    if layout == "um":
        out += _i32(s.zk_version)
        _array(out, s.replicas)
        _array(out, s.offline_replicas)
    else:
        out += _i32(s.partition_epoch)
        _array(out, s.replicas)
        _array(out, s.adding_replicas)
        _array(out, s.removing_replicas)
        out.append(1 if s.is_new else 0)
        if layout == "lai6":
            out.append(0)  # leader_recovery_state: the controller sends RECOVERED
    out.append(0)  # no tagged fields


def _write_partitions(out: bytearray, layout: str, states: list[Any]) -> None:
    """Append the compact array of ``states`` to ``out`` (written in place: at 10,000 topics
    of one partition each, a bytes object and a join per topic were a third of the time)."""
    count = len(states) + 1
    if count < 128:
        out.append(count)
    else:
        write_unsigned_varint(out, count)
    short = _SHORT
    if layout == "um":
        for s in states:
            isr, replicas, offline = s.isr, s.replicas, s.offline_replicas
            n1, n2, n3 = len(isr), len(replicas), len(offline)
            if n1 < short and n2 < short and n3 < short:
                out += _packer(layout, (n1, n2, n3))(
                    s.partition_index,
                    s.controller_epoch,
                    s.leader,
                    s.leader_epoch,
                    n1 + 1,
                    *isr,
                    s.zk_version,
                    n2 + 1,
                    *replicas,
                    n3 + 1,
                    *offline,
                    0,
                )
            else:
                _partition_long(layout, s, out)
        return
    recovery = (0,) if layout == "lai6" else ()
    for s in states:
        isr, replicas, adding, removing = s.isr, s.replicas, s.adding_replicas, s.removing_replicas
        n1, n2, n3, n4 = len(isr), len(replicas), len(adding), len(removing)
        if n1 < short and n2 < short and n3 < short and n4 < short:
            out += _packer(layout, (n1, n2, n3, n4))(
                s.partition_index,
                s.controller_epoch,
                s.leader,
                s.leader_epoch,
                n1 + 1,
                *isr,
                s.partition_epoch,
                n2 + 1,
                *replicas,
                n3 + 1,
                *adding,
                n4 + 1,
                *removing,
                1 if s.is_new else 0,
                *recovery,
                0,
            )
        else:
            _partition_long(layout, s, out)


def encode_topic_states(
    api_key: ApiKey,
    version: int,
    partition_states: tuple[Any, ...],
    topic_ids: Mapping[str, str],
    topic_id_bytes: Callable[[str | None], bytes | None],
) -> Encoded | None:
    """The request's ``topic_states`` field at ``version`` as wire bytes (see the module
    docstring), or None when the version's layout is not known here. Topics come in the order
    of their first partition in ``partition_states``, as ``to_message`` groups them.
    ``topic_id_bytes(topic_id)`` is the id's 16 bytes (None for no id)."""
    plan = _layout(api_key, version)
    if plan is None:
        return None
    layout, with_id = plan
    by_topic: dict[str, list[Any]] = {}
    for s in partition_states:
        states = by_topic.get(s.topic_name)
        if states is None:
            states = by_topic[s.topic_name] = []
        states.append(s)
    out = bytearray()
    write_unsigned_varint(out, len(by_topic) + 1)
    for topic, states in by_topic.items():
        name = topic.encode()
        if len(name) < _SHORT:
            out.append(len(name) + 1)
        else:
            write_unsigned_varint(out, len(name) + 1)
        out += name
        if with_id:
            out += topic_id_bytes(topic_ids.get(topic)) or _ZERO_UUID
        _write_partitions(out, layout, states)
        out.append(0)  # the topic's tagged fields: none
    return Encoded(bytes(out))


_KEPT = 4
_cache: list[tuple[ApiKey, int, tuple[Any, ...], dict[str, str], Encoded | None]] = []


def shared_topic_states(
    api_key: ApiKey,
    version: int,
    partition_states: tuple[Any, ...],
    topic_ids: dict[str, str],
    topic_id_bytes: Callable[[str | None], bytes | None],
) -> Encoded | None:
    """``encode_topic_states``, reusing the result of an earlier request with the same states,
    topic ids and version (the same request sent to another broker)."""
    for key, v, states, ids, encoded in _cache:
        if (
            key == api_key
            and v == version
            and (states is partition_states or states == partition_states)
            and (ids is topic_ids or ids == topic_ids)
        ):
            return encoded
    encoded = encode_topic_states(api_key, version, partition_states, topic_ids, topic_id_bytes)
    if len(_cache) >= _KEPT:
        del _cache[0]
    _cache.append((api_key, version, partition_states, topic_ids, encoded))
    return encoded
