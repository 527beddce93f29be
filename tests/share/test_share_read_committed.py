"""``share.isolation.level=read_committed``: a share group is handed records up to the last
stable offset, and never those of aborted transactions (they are archived with the markers)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer, ShareConsumer

from kafkalite.testing import Broker

pytestmark = pytest.mark.integration


def test_aborted_transactions_are_not_delivered():
    settings = {
        "share.isolation.level": "read_committed",
        "share.auto.offset.reset": "earliest",
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.num.partitions": 1,
        "share.coordinator.state.topic.num.partitions": 1,
    }
    with Broker(settings) as broker:
        broker.create_topic("txn")
        p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "t1"})
        p.init_transactions(30)
        for values, commit in ((["c1", "c2"], True), (["a1", "a2"], False), (["c3"], True)):
            p.begin_transaction()
            for v in values:
                p.produce("txn", v.encode())
            p.flush(30)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
        c = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g-txn"})
        c.subscribe(["txn"])
        got: list[str] = []
        deadline = time.monotonic() + 60
        try:
            while "c3" not in got:
                assert time.monotonic() < deadline, got
                got += [m.value().decode() for m in c.poll(0.3) if m.error() is None]
        finally:
            c.close()
    assert got == ["c1", "c2", "c3"]
