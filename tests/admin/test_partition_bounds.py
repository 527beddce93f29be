"""The admin API under the partition ceilings: its routes that create or add
partitions answer 400 POLICY_VIOLATION over max.partitions.per.topic / max.partitions, as the
Kafka handlers do, and a route that needs every partition's offsets asks the other brokers in
batches, never with a request (and a task) per partition: an admin-API add of 100,000
partitions left 137,000 pending ListOffsets and a 2.1 GB broker."""

from __future__ import annotations

import pytest

from kafkalite.client.client import KafkaClient
from kafkalite.protocol.api import ApiKey
from kafkalite.testing import Broker, Cluster
from tests.admin.conftest import AdminClient


def test_routes_refuse_partition_counts_over_the_ceilings() -> None:
    with Broker(config={"max.partitions.per.topic": 8, "max.partitions": 12}) as broker:
        admin = AdminClient(broker.admin_url)
        wide = admin.post("/topics", {"name": "wide", "partitions": 9})
        assert wide.status == 400 and wide.body["error"] == "POLICY_VIOLATION"
        assert "max.partitions.per.topic" in wide.body["message"]
        assert admin.get("/topics/wide").status == 404

        assert admin.post("/topics", {"name": "t", "partitions": 8}).status == 201
        grown = admin.post("/topics/t/partitions", {"partitions": 9})
        assert grown.status == 400 and grown.body["error"] == "POLICY_VIOLATION"
        # 8 exist: 5 more would pass max.partitions (12), 4 fit
        over = admin.post("/topics", {"name": "u", "partitions": 5})
        assert over.status == 400 and over.body["error"] == "POLICY_VIOLATION"
        assert "max.partitions" in over.body["message"]
        assert admin.get("/topics/u").status == 404
        assert admin.post("/topics", {"name": "u", "partitions": 4}).status == 201
        full = admin.post("/topics/u/partitions", {"partitions": 5})
        assert full.status == 400 and full.body["error"] == "POLICY_VIOLATION"

        overview = admin.get("/overview")  # and the broker goes on answering
        assert overview.status == 200 and overview.body["partitions"] == 12


def test_describe_topic_asks_the_other_broker_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[int] = []
    send = KafkaClient.send

    async def counting_send(self, api_key, request, version=None, node_id=None):
        if api_key == ApiKey.LIST_OFFSETS:
            sent.append(node_id)
        return await send(self, api_key, request, version, node_id)

    monkeypatch.setattr(KafkaClient, "send", counting_send)
    with Cluster(brokers=2) as cluster:
        cluster.create_topic("wide", partitions=300, replication_factor=1)
        leaders = {p: s.leader for p, s in cluster.partitions("wide").items()}
        first = min(leaders.values())
        remote = [p for p, leader in leaders.items() if leader != first]
        assert remote  # the topic is spread over both brokers
        admin = AdminClient(cluster.admin_url_of(first))
        # the metadata names a leader before that broker has applied its LeaderAndIsr: until it
        # has, it answers NOT_LEADER and the route shows no offsets
        admin.wait_for(
            lambda: all(
                p["high_watermark"] is not None
                for p in admin.get("/topics/wide").body["partitions"]
            ),
            "every leader to answer ListOffsets",
        )
        sent.clear()
        described = admin.get("/topics/wide")
        assert described.status == 200
        partitions = {p["partition"]: p for p in described.body["partitions"]}
        for p in remote:  # answered by the other broker
            assert partitions[p]["high_watermark"] == 0
            assert partitions[p]["log_start_offset"] == 0
        # one ListOffsets for the earliest offsets and one for the latest, not one per partition
        assert len(sent) <= 2, f"{len(sent)} ListOffsets for {len(remote)} remote partitions"
