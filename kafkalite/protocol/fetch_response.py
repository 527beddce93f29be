"""Hand-written FetchResponse encoder (v4-v12) that never copies record data.

kio's encoder builds the whole response in one bytes object, copying every record batch through
Python (~17 µs per 64 KiB). This one writes the small per-partition fields into a bytearray,
each partition's fixed fields with one precomputed struct per version (``_Layout``) and each
topic name encoded once, and returns the record slices the log handed out as separate parts:
the connection sends them with sendfile, or views of their pages (``network/zerocopy.py``),
with no intermediate copy.

Layout (FetchResponse.json; v12 is the first flexible version: compact arrays/strings/bytes as
unsigned-varint length+1, and a tagged-field section after every struct):

    response header: correlation_id int32 [v12: tagged fields]
    throttle_time_ms int32
    v7+: error_code int16, session_id int32
    responses: [topic string, partitions: [
        partition_index int32, error_code int16, high_watermark int64,
        last_stable_offset int64, v5+: log_start_offset int64,
        aborted_transactions nullable [producer_id int64, first_offset int64 (v12: tags)],
        v11+: preferred_read_replica int32,
        records nullable bytes,
        v12: tagged fields (tag 0 = diverging_epoch {epoch int32, end_offset int64, tags})
    ] (v12: tags) ] (v12: tags)
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Generator, Iterable, Sequence
from typing import Any

from kafkalite.protocol.varint import encode_unsigned_varint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")
_DIVERGING = struct.Struct(">iqB")  # epoch, end_offset, empty tagged fields

MIN_VERSION = 4
MAX_VERSION = 12


class _Layout:
    """The fixed parts of one version's response, each packed with one precomputed struct.

    ``header``: correlation_id [v12: empty header tags] throttle_time_ms [v7+: error_code,
    session_id]. ``partition``: index, error, hw, lso [v5+: log_start] followed, for the common
    partition with no aborted-transaction list, by its null marker [v11+: preferred replica];
    ``partition_head`` is the same without them (a list follows). Records' lengths follow
    (varint in v12, so not part of the struct)."""

    __slots__ = ("flexible", "header", "partition", "partition_head", "null_aborted_tail")

    def __init__(self, version: int) -> None:
        self.flexible = flexible = version >= 12
        header = ">i" + ("B" if flexible else "") + "i" + ("hi" if version >= 7 else "")
        self.header = struct.Struct(header)
        head = ">ihqq" + ("q" if version >= 5 else "")
        self.partition_head = struct.Struct(head)
        null = "B" if flexible else "i"  # compact null array 0 / legacy null array -1
        self.partition = struct.Struct(head + null + ("i" if version >= 11 else ""))
        self.null_aborted_tail = 0 if flexible else -1


_LAYOUTS = {v: _Layout(v) for v in range(MIN_VERSION, MAX_VERSION + 1)}


@functools.lru_cache(maxsize=4096)
def _topic_name(topic: str, flexible: bool) -> bytes:
    """A topic name with its length prefix, encoded once per name."""
    name = topic.encode()
    if flexible:
        return encode_unsigned_varint(len(name) + 1) + name
    return _I16.pack(len(name)) + name


def _records_buffer(records: Any) -> Any:
    """What goes in the frame: a bytes-like as it is, a log slice as it is (a file region the
    connection sends with sendfile, or views when it must queue it: network/zerocopy.py)."""
    if records is None:
        return None
    if isinstance(records, bytes | bytearray | memoryview):
        return records
    if hasattr(records, "fd") and hasattr(records, "view"):
        return records
    view = getattr(records, "view", None)
    if view is not None:
        return view()
    return bytes(records)


def encode_fetch_response(
    correlation_id: int,
    version: int,
    topics: Iterable[tuple[str, Sequence[tuple[int, Any]]]],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> list[Any]:
    """Encode a whole response frame (size prefix included) as a list of buffers.

    `topics` yields (topic, [(partition_index, data)]) where data has the attributes of
    `kafkalite.broker.types.FetchPartitionData` (error_code, high_watermark, last_stable_offset,
    log_start_offset, records, preferred_read_replica, diverging_epoch, aborted_transactions).
    """
    layout, out, cur, topics = _begin(
        correlation_id, version, topics, throttle_time_ms, error_code, session_id
    )
    flexible = layout.flexible
    for topic, partitions in topics:
        cur += _topic_name(topic, flexible)
        _array_len(cur, len(partitions), flexible)
        cur = _encode_partitions(layout, version, partitions, out, cur)
        if flexible:
            cur.append(0)
    return _end(layout, out, cur)


def encode_fetch_response_in_steps(
    correlation_id: int,
    version: int,
    topics: Iterable[tuple[str, Sequence[tuple[int, Any]]]],
    *,
    step: int,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> Generator[None, None, list[Any]]:
    """``encode_fetch_response`` as a generator that yields after every ``step`` partitions
    and returns the same buffers (``StopIteration.value``): the caller may give the event
    loop back between steps when a response has thousands of partitions."""
    layout, out, cur, topics = _begin(
        correlation_id, version, topics, throttle_time_ms, error_code, session_id
    )
    flexible = layout.flexible
    for topic, partitions in topics:
        cur += _topic_name(topic, flexible)
        _array_len(cur, len(partitions), flexible)
        for start in range(0, len(partitions), step):
            cur = _encode_partitions(layout, version, partitions[start : start + step], out, cur)
            yield
        if flexible:
            cur.append(0)
    return _end(layout, out, cur)


def _begin(
    correlation_id: int,
    version: int,
    topics: Iterable[tuple[str, Sequence[tuple[int, Any]]]],
    throttle_time_ms: int,
    error_code: int,
    session_id: int,
) -> tuple[_Layout, list[Any], bytearray, list[tuple[str, Sequence[tuple[int, Any]]]]]:
    """The layout, the buffers so far, the current one (the header and the topic count
    written, the size prefix left to ``_end``) and the topics as a list."""
    layout = _LAYOUTS.get(version)
    if layout is None:
        raise ValueError(f"FetchResponse v{version} is not encoded here")
    flexible = layout.flexible
    out: list[Any] = []
    cur = bytearray(4)  # size prefix, patched at the end
    if version >= 7:
        fields = (correlation_id, throttle_time_ms, error_code, session_id)
    else:
        fields = (correlation_id, throttle_time_ms)
    cur += layout.header.pack(*((fields[0], 0, *fields[1:]) if flexible else fields))
    topics = topics if isinstance(topics, list) else list(topics)
    _array_len(cur, len(topics), flexible)
    return layout, out, cur, topics


def _end(layout: _Layout, out: list[Any], cur: bytearray) -> list[Any]:
    if layout.flexible:
        cur.append(0)
    out.append(cur)
    total = sum(len(b) for b in out) - 4
    out[0][0:4] = _I32.pack(total)
    return out


def _encode_partitions(
    layout: _Layout,
    version: int,
    partitions: Sequence[tuple[int, Any]],
    out: list[Any],
    cur: bytearray,
) -> bytearray:
    """Append ``partitions`` (of one topic) to ``cur``; a non-empty records slice goes to
    ``out`` as a part of its own after ``cur``, and a new current buffer is returned."""
    flexible = layout.flexible
    v5 = version >= 5
    v11 = version >= 11
    pack_partition = layout.partition.pack
    null_aborted = layout.null_aborted_tail
    for index, data in partitions:
        hw = data.high_watermark
        lso = data.last_stable_offset
        if lso < 0:
            lso = hw
        aborted = data.aborted_transactions
        if aborted is None:
            # index, error, hw, lso, [log start], null aborted list, [preferred replica]
            if v11:
                cur += pack_partition(
                    index,
                    data.error_code,
                    hw,
                    lso,
                    data.log_start_offset,
                    null_aborted,
                    data.preferred_read_replica,
                )
            elif v5:
                cur += pack_partition(
                    index, data.error_code, hw, lso, data.log_start_offset, null_aborted
                )
            else:
                cur += pack_partition(index, data.error_code, hw, lso, null_aborted)
        else:
            if v5:
                cur += layout.partition_head.pack(
                    index, data.error_code, hw, lso, data.log_start_offset
                )
            else:
                cur += layout.partition_head.pack(index, data.error_code, hw, lso)
            _array_len(cur, len(aborted), flexible)
            for txn in aborted:
                producer_id, first_offset = _aborted_fields(txn)
                cur += _ABORTED.pack(producer_id, first_offset)
                if flexible:
                    cur.append(0)
            if v11:
                cur += _I32.pack(data.preferred_read_replica)
        records = data.records
        if records is None:
            cur += b"\x00" if flexible else b"\xff\xff\xff\xff"
        else:
            size = len(records)
            if flexible:
                cur += encode_unsigned_varint(size + 1)
            else:
                cur += _I32.pack(size)
            if size:
                out.append(cur)
                out.append(_records_buffer(records))
                cur = bytearray()
        if flexible:
            diverging = data.diverging_epoch
            if diverging is not None and diverging.end_offset >= 0:
                cur.append(1)  # one tagged field
                cur.append(0)  # tag 0: diverging_epoch
                cur.append(_DIVERGING.size)
                cur += _DIVERGING.pack(diverging.leader_epoch, diverging.end_offset, 0)
            else:
                cur.append(0)
    return cur


def _array_len(cur: bytearray, n: int, flexible: bool) -> None:
    if flexible:
        cur += encode_unsigned_varint(n + 1)
    else:
        cur += _I32.pack(n)


def _aborted_fields(txn: Any) -> tuple[int, int]:
    if isinstance(txn, tuple):
        return int(txn[0]), int(txn[1])
    return int(txn.producer_id), int(txn.first_offset)
