"""How a Fetch response's record bytes are best written: writev of mmap views vs os.sendfile.

    PYTHONPATH=. .venv/bin/python bench/sendfile_bench.py [--seconds 2]

uvloop has no ``loop.sendfile`` (it raises NotImplementedError, and asyncio's fallback reads the
file into Python buffers), so the broker's choice is between

* ``writev``: the response header (a small bytearray) and a memoryview over an mmap of the
  slice's pages (``FileRecordsSlice.view()``, mapped per response and unmapped when sent), in
  one ``writev`` call (what ``transport.writelines`` does when the write buffer is empty);
* ``sendfile``: the header with ``send`` (MSG_MORE, so it shares the first segment), then
  ``os.sendfile(socket, file, position, size)``: no map, no page faults in the broker, the
  kernel copies from the page cache (usable only when the transport's write buffer is empty).

Both write to a loopback TCP socket drained by a separate process, with the file in the page
cache, for slices of 1.2 KiB (one small batch: a fetch at the tail), 64 KiB and 1 MiB (a
catch-up read). Printed: the writer thread's CPU (user + system, ``RUSAGE_THREAD``) per
response. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import mmap
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

SIZES = (1_215, 16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024)
HEADER = bytes(60)
TRAILER = bytes(3)
DRAIN = (
    "import socket,sys\n"
    "s=socket.create_connection(('127.0.0.1',int(sys.argv[1])))\n"
    "b=bytearray(1<<20)\n"
    "while s.recv_into(b):pass\n"
)


def thread_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_utime + usage.ru_stime


def write_writev(sock: socket.socket, fd: int, position: int, size: int) -> None:
    start = position - position % mmap.ALLOCATIONGRANULARITY
    skip = position - start
    mapped = mmap.mmap(fd, skip + size, access=mmap.ACCESS_READ, offset=start)
    with memoryview(mapped) as whole:
        view = whole[skip : skip + size]
        buffers = [HEADER, view]
        sent = sock.sendmsg(buffers)
        total = len(HEADER) + size
        while sent < total:  # the socket is blocking: rarely partial
            if sent < len(HEADER):
                sent += sock.send(HEADER[sent:])
            else:
                sent += sock.send(view[sent - len(HEADER) :])
        view.release()
    mapped.close()


def write_sendfile(sock: socket.socket, fd: int, position: int, size: int) -> None:
    sock.send(HEADER, socket.MSG_MORE)
    done = 0
    while done < size:
        done += os.sendfile(sock.fileno(), fd, position + done, size - done)


def write_sendfile_as_broker(sock: socket.socket, fd: int, position: int, size: int) -> None:
    """What the broker does (kafkalite/network/zerocopy.py): the header with writev on the raw
    descriptor (no MSG_MORE), sendfile, then the v12 response's 3 trailing tag bytes."""
    out = sock.fileno()
    os.writev(out, [HEADER])
    done = 0
    while done < size:
        done += os.sendfile(out, fd, position + done, size - done)
    os.writev(out, [TRAILER])


def measure(method, sock, fd: int, file_size: int, size: int, seconds: float) -> float:
    position = 0
    count = 0
    cpu0 = thread_cpu()
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(16):
            if position + size > file_size:
                position = 0
            method(sock, fd, position, size)
            position += size
            count += 1
    return (thread_cpu() - cpu0) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    file_size = 64 * 1024 * 1024
    with tempfile.NamedTemporaryFile(prefix="sendfile-bench-") as f:
        f.write(os.urandom(1024 * 1024) * (file_size // (1024 * 1024)))
        f.flush()
        fd = os.open(f.name, os.O_RDONLY)
        os.pread(fd, file_size, 0)  # into the page cache
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        drain = subprocess.Popen([sys.executable, "-c", DRAIN, str(port)])
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            print("\nwriting record bytes to a loopback socket (writer thread CPU per response)\n")
            for size in SIZES:
                results = {}
                for name, method in (
                    ("writev of an mmap view", write_writev),
                    ("os.sendfile (MSG_MORE header)", write_sendfile),
                    ("writev + sendfile + writev", write_sendfile_as_broker),
                ):
                    measure(method, sock, fd, file_size, size, 0.2)  # warm-up
                    results[name] = measure(method, sock, fd, file_size, size, args.seconds)
                best = min(results, key=results.get)
                print(
                    f"  {size:>9,} B: "
                    + ",  ".join(f"{name} {us:8.1f} µs" for name, us in results.items())
                    + f"   -> {best}"
                )
        finally:
            sock.close()
            listener.close()
            drain.wait(30)
            os.close(fd)


if __name__ == "__main__":
    main()
