"""Responses with file regions: sendfile when the transport's buffer is empty, the transport
otherwise, in order either way (network/zerocopy.py). Real sockets, real segment files."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.network.zerocopy import RegionTruncated, write_parts
from kafkalite.storage.file_records import FileRecords, FileRecordsSlice

FILE_BYTES = bytes(range(256)) * 64  # 16 KiB, every byte's position recognisable


class QueueingTransport:
    """The parts of a transport write_parts uses; keeps what it was asked to write."""

    def __init__(self, buffered: int = 0) -> None:
        self.buffered = buffered
        self.queued: list[bytes] = []
        self.kinds: list[str] = []

    closing = False

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return self.buffered + sum(len(q) for q in self.queued)

    def write(self, data) -> None:
        self.kinds.append(type(data).__name__)
        self.queued.append(bytes(data))

    def writelines(self, parts) -> None:
        for part in parts:
            self.write(part)


@pytest.fixture
def records(tmp_path):
    r = FileRecords(tmp_path / "00000000000000000000.log")
    r.append(FILE_BYTES)
    yield r
    r.close()


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    yield a, b
    a.close()
    b.close()


def received(sock: socket.socket, size: int) -> bytes:
    sock.settimeout(0)
    out = bytearray()
    while len(out) < size:
        try:
            chunk = sock.recv(size - len(out))
        except BlockingIOError:
            break
        if not chunk:
            break
        out += chunk
    return bytes(out)


def test_empty_buffer_sends_the_region_directly_with_no_map(records, pair):
    writer, reader = pair
    transport = QueueingTransport()
    region = records.slice(100, 1_000)
    write_parts(transport, writer.fileno(), [bytearray(b"head"), region, b"tail"])
    expected = b"head" + FILE_BYTES[100:1_100]
    assert received(reader, len(expected) + 1) == expected
    # what follows the last region goes to the transport (which writes it at once when its
    # buffer is empty: uvloop's own path), after everything sent directly
    assert transport.queued == [b"tail"]
    assert not records._maps  # sendfile: no map of the region was made


def test_a_busy_transport_gets_every_part_in_order_as_views(records, pair):
    writer, reader = pair
    transport = QueueingTransport(buffered=1)  # an earlier response is still queued
    write_parts(transport, writer.fileno(), [b"head", records.slice(0, 300), b"tail"])
    assert received(reader, 1) == b""
    assert b"".join(transport.queued) == b"head" + FILE_BYTES[:300] + b"tail"
    assert transport.kinds == ["bytes", "memoryview", "bytes"]


def test_a_closing_transport_is_never_bypassed(records, pair):
    writer, reader = pair
    transport = QueueingTransport()
    transport.closing = True
    write_parts(transport, writer.fileno(), [b"h", records.slice(5, 10)])
    assert received(reader, 1) == b""
    assert b"".join(transport.queued) == b"h" + FILE_BYTES[5:15]


def test_without_a_socket_the_transport_writes(records):
    transport = QueueingTransport()
    write_parts(transport, -1, [b"h", records.slice(5, 10)])
    assert b"".join(transport.queued) == b"h" + FILE_BYTES[5:15]


def test_what_the_socket_does_not_take_is_queued_after_what_it_took(tmp_path):
    big = FileRecords(tmp_path / "big.log")
    payload = bytes(range(251)) * 8_000  # ~2 MB: more than a socketpair's buffer takes
    big.append(payload)
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    a.setblocking(False)
    try:
        transport = QueueingTransport()
        write_parts(transport, a.fileno(), [b"head", big.slice(0, len(payload)), b"tail"])
        direct = received(b, len(payload) + 8)
        assert transport.queued, "the socket took everything: the test needs a smaller buffer"
        assert direct + b"".join(transport.queued) == b"head" + payload + b"tail"
        assert len(direct) >= 4
    finally:
        a.close()
        b.close()
        big.close()


def test_a_region_truncated_in_place_since_the_read_is_refused(records, pair):
    writer, _ = pair
    region = records.slice(8_000, 4_000)
    records.truncate_to(10_000)  # no map of the file exists: truncated in place
    with pytest.raises(RegionTruncated):
        write_parts(QueueingTransport(), writer.fileno(), [b"head", region])
    with pytest.raises(RegionTruncated):
        write_parts(QueueingTransport(buffered=1), writer.fileno(), [b"head", region])


parts = st.lists(
    st.one_of(
        st.binary(min_size=0, max_size=40),
        st.tuples(st.integers(0, len(FILE_BYTES) - 1), st.integers(0, 3_000)),
    ),
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(parts=parts, buffered=st.booleans())
def test_bytes_arrive_in_order_whatever_the_parts(tmp_path_factory, parts, buffered):
    records = FileRecords(tmp_path_factory.mktemp("z") / "00000000000000000000.log")
    records.append(FILE_BYTES)
    a, b = socket.socketpair()
    a.setblocking(False)
    try:
        built, expected = [], b""
        for part in parts:
            if isinstance(part, bytes):
                built.append(part)
                expected += part
            else:
                position, size = part
                region = records.slice(position, size)
                assert isinstance(region, FileRecordsSlice)
                built.append(region)
                expected += FILE_BYTES[position : position + size]
        transport = QueueingTransport(buffered=int(buffered))
        write_parts(transport, a.fileno(), built)
        direct = received(b, len(expected) + 1)
        assert direct + b"".join(transport.queued) == expected
        if buffered:
            assert direct == b""
    finally:
        a.close()
        b.close()
        records.close()
