"""Writing a response whose parts include file regions (a Fetch response's record data).

A response is a sequence of parts: byte buffers (bytes, bytearray, memoryview) and file regions,
objects with ``fd``, ``position`` and ``size`` and a ``view()`` that maps them (the log's
``FileRecordsSlice``). uvloop has no ``loop.sendfile`` (asyncio's fallback would read the file
into Python buffers), so:

* when the transport's write buffer is empty, the parts go straight to the socket: the byte
  buffers before a region with ``os.writev``, the region with ``os.sendfile`` (the kernel copies
  from the page cache: no map, no page faults in the broker, no record bytes in Python); the
  buffers after the last region (and a response without regions) go to the transport, which
  writes them at once when its buffer is empty;
* whatever the socket does not take at once (it is non-blocking), and every part after it, goes
  to the transport in order (a region as ``view()`` of what is left), which writes it when the
  socket drains, as before.

``bench/sendfile_bench.py`` measured the choice: writer CPU per response of 4-6 µs (1.2 KiB) and
13 µs (64 KiB) with sendfile against 15 µs and 23-27 µs for writev of a fresh map's view; about
equal at 1 MiB.

A region shorter on disk than it was when read (its file truncated in place meanwhile: a leader
that became follower) cannot be sent in full: the frame would be corrupt, so the connection is
closed (Kafka's FileRecords.writeTo throws for the same reason).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

_BYTES = (bytes, bytearray, memoryview)


class RegionTruncated(Exception):
    """A file region's file ended before the region did."""


def is_region(part: Any) -> bool:
    return type(part) not in _BYTES and hasattr(part, "fd") and hasattr(part, "view")


def write_parts(transport: Any, sock_fd: int, parts: Iterable[Any]) -> None:
    """Write ``parts`` in order (see the module docstring). Raises RegionTruncated (the caller
    closes the connection)."""
    # Never past a close: the transport may have let go of the descriptor (and its number be
    # reused) once its buffer drained.
    direct = sock_fd >= 0 and not transport.is_closing() and transport.get_write_buffer_size() == 0
    pending: list[Any] = []  # byte buffers not written yet
    for part in parts:
        if not is_region(part):
            pending.append(part)
            continue
        if not part.size:
            continue
        if direct:
            direct = _flush(transport, sock_fd, pending)
            pending = []
        if direct:
            direct = _sendfile(transport, sock_fd, part)
        else:
            try:
                pending.append(part.view())
            except ValueError as e:  # truncated in place since the read
                raise RegionTruncated(str(e)) from e
    if pending:
        # After the last region (or with none): the transport's own path, which writes at once
        # when its buffer is empty (uvloop's C write, no GIL round trip) and keeps the order
        # either way.
        transport.writelines(pending)


def _flush(transport: Any, sock_fd: int, buffers: list[Any]) -> bool:
    """Write ``buffers`` to the socket; what it does not take goes to the transport. True if
    everything went out directly (the socket may be written to again)."""
    if not buffers:
        return True
    try:
        sent = os.writev(sock_fd, buffers)
    except (BlockingIOError, InterruptedError):
        sent = 0
    except OSError:
        transport.writelines(buffers)  # the transport meets the error itself and closes
        return False
    for i, buffer in enumerate(buffers):
        size = len(buffer) if type(buffer) is not memoryview else buffer.nbytes
        if sent < size:
            rest = [memoryview(buffer).cast("B")[sent:], *buffers[i + 1 :]]
            transport.writelines(rest)
            return False
        sent -= size
    return True


def _sendfile(transport: Any, sock_fd: int, region: Any) -> bool:
    """Send ``region`` with sendfile; the rest the socket does not take goes to the transport.
    True if it all went out directly."""
    fd, position, size = region.fd, region.position, region.size
    done = 0
    while done < size:
        try:
            n = os.sendfile(sock_fd, fd, position + done, size - done)
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            break  # the transport's own write meets a socket error and closes
        if n == 0:
            raise RegionTruncated(f"{region!r}: the file ended after {done} of {size} bytes")
        done += n
    if done == size:
        return True
    try:
        view = region.view()
    except ValueError as e:  # truncated in place since the read
        raise RegionTruncated(str(e)) from e
    transport.write(view[done:] if done else view)
    return False
