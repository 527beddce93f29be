"""A cheap Metadata poller for the benchmarks: one kept connection per broker, Metadata v1, the
answer read with ``struct`` into plain objects.

bench/scale_cluster.py polls a broker's Metadata until a phase's outcome shows (every partition
re-led, every ISR full...). Through confluent-kafka's AdminClient a poll of one topic of 10,000
partitions was a new client, its connection, the request, 10,000 Python objects made by the
binding and the client's teardown: 80-100 ms of the bench's own CPU on a quiet machine and
0.1-0.4 s of wall time during a failover, on the two cores the brokers share. The poll's length
is the figure's resolution (a phase is seen done when the first poll after it ends), so it
weighed on the very figures it measured. Here a poll is one request on a connection kept open
and a loop of ``unpack_from`` over the answer.

The objects have the attributes of confluent-kafka's ``ClusterMetadata`` the benchmarks read:
``controller_id``, ``brokers`` (id -> (host, port)), ``topics`` (name -> ``Topic`` with
``error`` (None or the Kafka error code) and ``partitions`` (id -> ``Partition`` with
``leader``, ``replicas``, ``isrs``, ``error``)). The layout is Kafka's (Metadata request and
response v4: a null topic array asks for every topic, and no topic is created by asking); nothing of kafkalite's codec is used,
so the poller does not share a bug with the broker it measures.
"""

from __future__ import annotations

import gc
import socket
import struct
from typing import Any

from kafkalite.testing import recv_exactly

API_METADATA = 3
VERSION = 4
CLIENT_ID = b"bench-metadata"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">hiii")  # error code, partition, leader, replica count
_ARRAYS: dict[int, struct.Struct] = {}


def _ints(n: int) -> struct.Struct:
    """n int32s in a row."""
    s = _ARRAYS.get(n)
    if s is None:
        s = _ARRAYS[n] = struct.Struct(f">{n}i")
    return s


class Partition:
    __slots__ = ("id", "leader", "replicas", "isrs", "error")

    def __init__(self, pid: int, leader: int, replicas: list[int], isrs: list[int], error: Any):
        self.id = pid
        self.leader = leader
        self.replicas = replicas
        self.isrs = isrs
        self.error = error


class Topic:
    __slots__ = ("topic", "error", "partitions")

    def __init__(self, name: str, error: Any, partitions: dict[int, Partition]) -> None:
        self.topic = name
        self.error = error
        self.partitions = partitions


class ClusterMetadata:
    __slots__ = ("controller_id", "brokers", "topics")

    def __init__(
        self, controller_id: int, brokers: dict[int, tuple[str, int]], topics: dict[str, Topic]
    ) -> None:
        self.controller_id = controller_id
        self.brokers = brokers
        self.topics = topics


def encode_request(correlation_id: int, topics: list[str] | None) -> bytes:
    """A Metadata v4 request with its size prefix (header v1: key, version, id, client id)."""
    body = bytearray()
    body += struct.pack(">hhih", API_METADATA, VERSION, correlation_id, len(CLIENT_ID))
    body += CLIENT_ID
    if topics is None:
        body += _I32.pack(-1)
    else:
        body += _I32.pack(len(topics))
        for name in topics:
            raw = name.encode()
            body += _I16.pack(len(raw)) + raw
    body += b"\x00"  # allow_auto_topic_creation: false
    return _I32.pack(len(body)) + bytes(body)


def _string(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    return buf[pos : pos + n].decode(), pos + n


def decode_response(buf: bytes) -> tuple[int, ClusterMetadata]:
    """(correlation id, the answer) of a Metadata v4 response without its size prefix."""
    i32 = _I32.unpack_from
    (correlation_id,) = i32(buf, 0)
    pos = 8  # and the throttle time
    (count,) = i32(buf, pos)
    pos += 4
    brokers: dict[int, tuple[str, int]] = {}
    for _ in range(count):
        (node,) = i32(buf, pos)
        host, pos = _string(buf, pos + 4)
        (port,) = i32(buf, pos)
        _rack, pos = _string(buf, pos + 4)
        brokers[node] = (host or "", port)
    _cluster_id, pos = _string(buf, pos)
    (controller_id,) = i32(buf, pos)
    pos += 4
    (count,) = i32(buf, pos)
    pos += 4
    topics: dict[str, Topic] = {}
    part = _PARTITION.unpack_from
    for _ in range(count):
        (topic_error,) = _I16.unpack_from(buf, pos)
        name, pos = _string(buf, pos + 2)
        pos += 1  # is_internal
        (n_parts,) = i32(buf, pos)
        pos += 4
        partitions: dict[int, Partition] = {}
        for _ in range(max(n_parts, 0)):
            error, pid, leader, n_replicas = part(buf, pos)
            pos += 14
            # the replicas and the ISR's count, then the ISR
            replicas = list(_ints(n_replicas + 1).unpack_from(buf, pos))
            n_isr = replicas.pop()
            pos += 4 + 4 * n_replicas
            isrs = list(_ints(n_isr).unpack_from(buf, pos))
            pos += 4 * n_isr
            partitions[pid] = Partition(pid, leader, replicas, isrs, error or None)
        topics[name or ""] = Topic(name or "", topic_error or None, partitions)
    return correlation_id, ClusterMetadata(controller_id, brokers, topics)


class MetadataView:
    """Metadata of one broker over a connection kept between polls (made again after any
    failure). ``get`` answers None when the broker cannot be reached or does not answer within
    ``timeout_s``, as the AdminClient's poll did."""

    def __init__(self, host: str, port: int, timeout_s: float = 10.0) -> None:
        self.address = (host, port)
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._correlation = 0

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def get(self, topics: list[str] | None = None) -> ClusterMetadata | None:
        try:
            if self._sock is None:
                self._sock = socket.create_connection(self.address, timeout=self.timeout_s)
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._correlation += 1
            self._sock.sendall(encode_request(self._correlation, topics))
            (size,) = _I32.unpack(recv_exactly(self._sock, 4))
            answer = recv_exactly(self._sock, size)
            # No collection while the answer's objects are made (they hold no cycle): with
            # the collector on, every third poll of 10,000 partitions took 65 ms, not 18.
            collecting = gc.isenabled()
            gc.disable()
            try:
                correlation_id, metadata = decode_response(answer)
            finally:
                if collecting:
                    gc.enable()
            if correlation_id != self._correlation:
                raise OSError(f"correlation id {correlation_id}, expected {self._correlation}")
            return metadata
        except (OSError, struct.error, UnicodeDecodeError):
            self.close()
            return None
