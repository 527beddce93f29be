"""FileRecords: slices and views, and truncation that never shrinks a file under a live view
(a Fetch response queued as a view into the map would otherwise raise SIGBUS when sent)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from kafkalite.storage.file_records import FileRecords


def filled(tmp_path, chunks: list[bytes]) -> FileRecords:
    records = FileRecords(tmp_path / "00000000000000000000.log")
    for chunk in chunks:
        records.append(chunk)
    return records


def test_truncate_without_views_shrinks_the_same_file(tmp_path):
    records = filled(tmp_path, [b"a" * 100, b"b" * 100])
    assert bytes(records.slice(0, 200).view()) == b"a" * 100 + b"b" * 100  # view released
    inode = os.stat(records.file).st_ino
    assert records.truncate_to(100) == 100
    assert os.stat(records.file).st_ino == inode
    assert os.path.getsize(records.file) == 100 == records.size


def test_truncate_under_a_live_view_keeps_the_view_and_the_log_correct(tmp_path):
    records = filled(tmp_path, [b"a" * 4096, b"b" * 4096])
    old = records.slice(0, 8192)
    view = old.view()  # e.g. a Fetch response still in a transport's buffer
    inode = os.stat(records.file).st_ino
    assert records.truncate_to(4096) == 4096
    # The name now holds the kept prefix in a new file; the old inode serves the view.
    assert os.stat(records.file).st_ino != inode
    assert os.path.getsize(records.file) == 4096 == records.size
    assert view.tobytes() == b"a" * 4096 + b"b" * 4096
    assert bytes(old) == b"a" * 4096 + b"b" * 4096
    records.append(b"c" * 10)
    assert bytes(records.slice(0, 10_000)) == b"a" * 4096 + b"c" * 10
    assert records.slice(4096, 10).view().tobytes() == b"c" * 10
    assert not list(tmp_path.glob("*.tmp"))
    view.release()
    # With the view gone, the next truncation is in place again.
    inode = os.stat(records.file).st_ino
    records.truncate_to(10)
    assert os.stat(records.file).st_ino == inode
    assert records.file.read_bytes() == b"a" * 10


def test_reading_a_truncated_view_does_not_crash_the_process(tmp_path):
    """The failure this guards against kills the interpreter (SIGBUS), so it runs in a child."""
    script = textwrap.dedent(
        f"""
        from kafkalite.storage.file_records import FileRecords
        records = FileRecords({str(tmp_path / "seg.log")!r})
        records.append(b"x" * 1_048_576)
        view = records.slice(0, 1_048_576).view()
        records.truncate_to(0)
        assert view.tobytes() == b"x" * 1_048_576
        print("ok")
        """
    )
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "ok"


def mapped_ranges(path) -> list[tuple[int, int]]:
    """This process's mappings of ``path`` as (start, end) addresses, from /proc/self/maps."""
    out = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.rstrip().endswith(str(path)):
                start, end = line.split()[0].split("-")
                out.append((int(start, 16), int(end, 16)))
    return out


def test_a_view_maps_only_its_own_pages_and_only_while_it_lives(tmp_path):
    records = filled(tmp_path, [bytes([i]) * 65536 for i in range(64)])  # 4 MiB
    records.release_map()
    view = records.slice(40 * 65536 + 10, 100).view()
    assert view.tobytes() == bytes([40]) * 100
    ranges = mapped_ranges(records.file)
    assert len(ranges) == 1
    start, end = ranges[0]
    assert end - start < 128 * 1024  # the slice's pages, not the 4 MiB file
    view.release()
    del view
    assert mapped_ranges(records.file) == []
