"""Transactional offset commits in the group core (TxnOffsetCommit, markers, reload)."""

from __future__ import annotations

from kafkalite.group.metadata import OffsetAndMetadata
from kafkalite.group.records import (
    OffsetCommitValue,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

from .harness import Harness

TP = TopicPartition("t", 0)


def om(offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, "", 1000, -1)


def committed(h: Harness, group: str) -> int | None:
    _, offsets = h.core.fetch_offsets(group, [TP])
    return offsets[TP].offset


def test_offsets_become_visible_on_commit_and_vanish_on_abort():
    h = Harness()
    partition = h.core.partition_for("g")
    token = h.token()
    h.apply(h.core.commit_transactional_offsets(token, "g", 7, 0, "", None, -1, {TP: om(10)}))
    assert h.responses[token] == {TP: ErrorCode.NONE}
    append = h.log.partitions[partition]
    assert len(append) == 1  # written, as a transactional batch of producer 7 (the writer's job)
    assert committed(h, "g") == -1
    _, stable = h.core.fetch_offsets("g", [TP], require_stable=True)
    assert stable[TP].error is ErrorCode.UNSTABLE_OFFSET_COMMIT
    h.apply(h.core.complete_transaction(7, [partition], commit=True))
    assert committed(h, "g") == 10

    token = h.token()
    h.apply(h.core.commit_transactional_offsets(token, "g", 7, 0, "", None, -1, {TP: om(20)}))
    h.apply(h.core.complete_transaction(7, [partition], commit=False))
    assert committed(h, "g") == 10
    # a marker for another partition or producer changes nothing
    token = h.token()
    h.apply(h.core.commit_transactional_offsets(token, "g", 8, 0, "", None, -1, {TP: om(30)}))
    h.apply(h.core.complete_transaction(9, [partition], commit=True))
    h.apply(h.core.complete_transaction(8, [partition + 1], commit=True))
    assert committed(h, "g") == 10


def test_an_older_transactional_commit_does_not_replace_a_newer_offset():
    h = Harness()
    partition = h.core.partition_for("g")
    h.apply(h.core.commit_transactional_offsets(h.token(), "g", 7, 0, "", None, -1, {TP: om(5)}))
    h.apply(h.core.commit_offsets(h.token(), "g", "", None, -1, {TP: om(9)}))
    h.apply(h.core.complete_transaction(7, [partition], commit=True))
    assert committed(h, "g") == 9  # the plain commit was appended after the transactional one


def test_reload_keeps_pending_and_applies_markers():
    h = Harness()
    partition = h.core.partition_for("g")
    key = encode_offset_commit_key("g", TP.topic, TP.partition)

    def value(offset: int) -> bytes:
        return encode_offset_commit_value(OffsetCommitValue(offset, "", 1000, -1, -1))

    h.apply(h.core.begin_loading(partition, 1))
    h.core.load_txn_record(partition, 7, 0, key, value(3))
    h.core.load_txn_marker(partition, 7, commit=True)
    h.core.load_txn_record(partition, 8, 2, key, value(4))
    h.core.load_txn_marker(partition, 8, commit=False)
    h.core.load_txn_record(partition, 9, 4, key, value(6))  # still open when loaded
    h.apply(h.core.complete_loading(partition, 1))
    assert committed(h, "g") == 3
    h.apply(h.core.complete_transaction(9, [partition], commit=True))
    assert committed(h, "g") == 6
