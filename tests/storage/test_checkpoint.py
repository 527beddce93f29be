"""Checkpoint files: Kafka's text format, atomic replacement, malformed input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.storage.checkpoint import EpochEntry, LeaderEpochCheckpointFile, OffsetCheckpointFile
from kafkalite.storage.errors import StorageError

topics = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=20,
)


@settings(max_examples=50, deadline=None)
@given(
    offsets=st.dictionaries(
        st.tuples(topics, st.integers(0, 10_000)), st.integers(0, 2**63 - 1), max_size=20
    )
)
def test_offset_checkpoint_round_trip(tmp_path_factory, offsets):
    path = tmp_path_factory.mktemp("cp") / "recovery-point-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets
    lines = path.read_text().split("\n")
    assert lines[0] == "0" and lines[1] == str(len(offsets)) and lines[-1] == ""
    assert sorted(lines[2:-1]) == sorted(f"{t} {p} {o}" for (t, p), o in offsets.items())
    assert not path.with_name(path.name + ".tmp").exists()


def test_offset_checkpoint_exact_text(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    OffsetCheckpointFile(path).write(
        {("orders", 1): 42, ("orders", 0): 7, ("__consumer_offsets", 12): 0}
    )
    assert path.read_text() == "0\n3\n__consumer_offsets 12 0\norders 0 7\norders 1 42\n"


def test_missing_checkpoint_is_empty(tmp_path):
    assert OffsetCheckpointFile(tmp_path / "nope").read() == {}


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\norders 0 7\n", "0\n1\norders 0\n", "0\n1\norders x 7\n", "zero\n0\n"],
)
def test_malformed_checkpoint_names_the_file(tmp_path, text):
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(StorageError, match="recovery-point-offset-checkpoint"):
        OffsetCheckpointFile(path).read()


@pytest.mark.parametrize(
    "text",
    [
        "0\n0\n",
        "0\n2\norders 0 7\norders 1 8\n",
        "0\n2\norders 0 7\norders 0 9\n",  # a partition twice: the later line, both counted
        "0\n1\norders 0 7",  # no final newline
        "00\n1\norders 0 7\n",  # what int() takes: the general reader's checks decide
        "0\n+1\norders 0 7\n",
        "0\n1\norders 0 7\r\n",
        "0\n1\norders +0 -7\n",
        "",
        "1\n0\n",
        "0\n2\norders 0 7\n",
        "0\n0\norders 0 7\n",
        "0\n1\norders 0\n",
        "0\n1\norders 0 7 1\n",
        "0\n1\norders  0 7\n",
        "0\n1\norders x 7\n",
        "0\n1\norders 0 7\n\n",
        "0\n2\norders 0 7\n\norders 1 8\n",
        "0\n\u00b9\norders 0 7\n",  # a digit int() refuses
        "zero\n0\n",
        "0\n",
    ],
)
def test_offset_checkpoint_reads_as_the_general_reader_does(tmp_path, text):
    """The offsets' own parse (a broker's start reads three files of a line per partition)
    accepts and refuses what the general checkpoint reader does, with the same offsets."""
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(text)
    checkpoint = OffsetCheckpointFile(path)
    try:
        expected = {(t, p): o for t, p, o in checkpoint._file.read()}
    except StorageError as e:
        with pytest.raises(StorageError) as raised:
            checkpoint.read()
        assert str(raised.value) == str(e)
    else:
        assert checkpoint.read() == expected


def test_leader_epoch_checkpoint_format(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(path).write([EpochEntry(0, 0), EpochEntry(3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert LeaderEpochCheckpointFile(path).read() == [(0, 0), (3, 120)]


def test_a_checkpoint_given_a_str_path_reads_writes_and_moves(tmp_path):
    # a log's epoch checkpoint is given its path as a str (a loading broker makes 10,000 of
    # them): it reads, writes and follows a renamed directory as with a Path
    first = tmp_path / "t-0"
    first.mkdir()
    checkpoint = LeaderEpochCheckpointFile(str(first / "leader-epoch-checkpoint"))
    assert checkpoint.read() == []
    checkpoint.write([EpochEntry(1, 10)])
    assert checkpoint.path == first / "leader-epoch-checkpoint"
    assert LeaderEpochCheckpointFile(str(checkpoint.path)).read() == [EpochEntry(1, 10)]
    moved = tmp_path / "t-0.deleted"
    first.rename(moved)
    checkpoint.path = str(moved / "leader-epoch-checkpoint")
    assert checkpoint.path == moved / "leader-epoch-checkpoint"
    checkpoint.write([EpochEntry(1, 10), EpochEntry(2, 20)])
    assert checkpoint.read() == [EpochEntry(1, 10), EpochEntry(2, 20)]
    assert (moved / "leader-epoch-checkpoint").read_text() == "0\n2\n1 10\n2 20\n"
