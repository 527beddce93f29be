"""Deleting topics never holds the broker's event loop on the disk: while the deletion's
checkpoint write (three files, each fsynced) is in progress, the broker still answers a client.

An in-process broker (kafkalite.testing.Broker); the checkpoint write is held until a Metadata
request has been answered (or a deadline passes): a broker that wrote its checkpoints on the
event loop could not answer meanwhile, and the test fails on the Metadata request's timeout.
No timing is asserted; the figures are in bench/delete_topics.py."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.storage import checkpoint
from kafkalite.testing import Broker, wait_for

pytestmark = pytest.mark.integration

TOPICS = [f"doomed-{i}" for i in range(10)]


@pytest.fixture(scope="module")
def broker():
    # Periodic checkpoints out of the way: only the deletion's write is held.
    with Broker(
        config={
            "replica.high.watermark.checkpoint.interval.ms": 3_600_000,
            "log.flush.offset.checkpoint.interval.ms": 3_600_000,
        }
    ) as broker:
        yield broker


def test_a_metadata_request_is_answered_while_deleted_topics_are_checkpointed(broker, monkeypatch):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    created = admin.create_topics([NewTopic(t, 4, 1) for t in TOPICS], operation_timeout=30)
    for future in created.values():
        future.result(60)
    for topic in TOPICS:
        broker.wait_for_leaders(topic)

    entered, answered = threading.Event(), threading.Event()
    original = checkpoint.OffsetCheckpointFile.write

    def held(self, offsets):
        if not any(topic.startswith("doomed-") for topic, _ in offsets) and not entered.is_set():
            entered.set()  # the first write that forgets the deleted partitions
            answered.wait(30)
        original(self, offsets)

    monkeypatch.setattr(checkpoint.OffsetCheckpointFile, "write", held)
    try:
        deleted = admin.delete_topics(TOPICS, operation_timeout=60)
        assert entered.wait(60), "the deletion wrote its checkpoints"
        metadata = admin.list_topics(timeout=10)  # raises if the broker cannot answer
        assert not set(TOPICS) & set(metadata.topics), "the deleted topics are gone already"
    finally:
        answered.set()
    for future in deleted.values():
        future.result(60)
    # the directories go in a worker thread, afterwards
    wait_for(
        lambda: not [d for d in broker.log_dir.iterdir() if d.name.startswith("doomed-")],
        "the deleted partitions' directories to be removed",
        timeout=60,
    )
