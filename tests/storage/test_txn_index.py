"""The aborted-transaction index: Kafka's 34-byte entries, checked against an oracle list."""

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex


def test_entry_format(tmp_path):
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    assert not index.file.exists()  # made on the first abort only
    index.append(AbortedTxn(5, 10, 20, 21))
    assert ENTRY_SIZE == 34
    assert index.file.read_bytes() == struct.pack(">hqqqq", 0, 5, 10, 20, 21)
    again = TransactionIndex(index.file)
    assert again.entries == [AbortedTxn(5, 10, 20, 21)]
    again.append(AbortedTxn(5, 10, 20, 21))  # replayed: not appended twice
    assert len(again.file.read_bytes()) == 34


def test_truncate_rename_delete(tmp_path):
    index = TransactionIndex(tmp_path / "a.txnindex")
    for i in range(3):
        index.append(AbortedTxn(i, i * 10, i * 10 + 5, i * 10 + 6))
    index.truncate_to(15)
    assert TransactionIndex(index.file).entries == [AbortedTxn(0, 0, 5, 6)]
    index.rename_to(tmp_path / "b.txnindex")
    assert index.file.exists() and not (tmp_path / "a.txnindex").exists()
    index.truncate_to(0)
    assert not index.file.exists()
    index.delete()  # nothing left: no error


def test_torn_tail_keeps_whole_entries(tmp_path):
    index = TransactionIndex(tmp_path / "t.txnindex")
    index.append(AbortedTxn(1, 0, 3, 4))
    with open(index.file, "ab") as f:
        f.write(b"\x00\x00\x01")
    assert TransactionIndex(index.file).entries == [AbortedTxn(1, 0, 3, 4)]


@st.composite
def aborted_sequences(draw):
    """Aborted transactions as a partition would index them: markers in increasing offsets,
    each transaction starting before its marker, the LSO after the marker."""
    entries = []
    offset = 0
    for pid in range(draw(st.integers(0, 12))):
        first = offset + draw(st.integers(0, 5))
        last = first + draw(st.integers(1, 6))
        lso = last + 1
        entries.append(AbortedTxn(pid, first, last, lso))
        offset = last + 1
    return entries


@settings(max_examples=80, deadline=None)
@given(aborted_sequences(), st.integers(0, 80), st.integers(0, 80))
def test_collect_matches_oracle(tmp_path_factory, entries, start, length):
    index = TransactionIndex(tmp_path_factory.mktemp("ti") / "x.txnindex")
    for entry in entries:
        index.append(entry)
    upper = start + length
    found, _ = index.collect(start, upper)
    expected = [e for e in entries if e.last_offset >= start and e.first_offset < upper]
    # the search stops at the first entry whose LSO reaches ``upper``: nothing after it
    # can overlap the range
    assert found == expected
