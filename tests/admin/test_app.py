"""Every admin endpoint against a broker subprocess, cross-checked with confluent-kafka."""

from __future__ import annotations

import json

import pytest

from tests.admin.conftest import AdminClient, produce

try:
    from confluent_kafka import Consumer, Producer, TopicPartition
except ImportError as e:  # pragma: no cover - the test extras are required
    raise RuntimeError("confluent-kafka is required: pip install -e '.[test]'") from e


def partition_of(admin: AdminClient, topic: str, partition: int) -> dict:
    answer = admin.get(f"/topics/{topic}")
    assert answer.status == 200, answer.body
    return answer.body["partitions"][partition]


# ---------------------------------------------------------------------- health, cluster, brokers


def test_health_and_ready(admin: AdminClient, admin_broker) -> None:
    health = admin.get("/health")
    assert health.status == 200 and health.body == {"status": "ok", "broker_id": 0}
    ready = admin.get("/ready")
    assert ready.status == 200
    assert ready.body["ready"] is True
    assert set(ready.body["checks"]) >= {"listening", "coordination_session", "logs_loaded"}


def test_cluster_and_brokers(admin: AdminClient, admin_broker) -> None:
    cluster = admin.get("/cluster").body
    assert cluster["controller"]["broker_id"] == 0
    assert cluster["controller"]["epoch"] >= 1
    assert len(cluster["cluster_id"]) == 22
    [broker] = cluster["brokers"]
    assert broker["id"] == 0 and broker["is_controller"] is True
    assert (broker["host"], broker["port"]) == ("127.0.0.1", admin_broker.port)
    assert admin.get("/brokers").body == cluster["brokers"]
    assert admin.get("/brokers/0").body == broker
    missing = admin.get("/brokers/7")
    assert missing.status == 404 and missing.body["error"] == "BROKER_NOT_AVAILABLE"
    bad = admin.get("/brokers/x")
    assert bad.status == 400 and bad.body["field"] == "id"


def test_cluster_id_matches_what_clients_see(admin: AdminClient, admin_broker) -> None:
    from confluent_kafka.admin import AdminClient as KafkaAdmin

    kafka = KafkaAdmin({"bootstrap.servers": admin_broker.bootstrap})
    described = kafka.describe_cluster(request_timeout=10)
    assert described.result(10).cluster_id == admin.get("/cluster").body["cluster_id"]


# ---------------------------------------------------------------------- topics


def test_topic_created_over_http_is_usable_by_confluent_kafka(
    admin: AdminClient, admin_broker
) -> None:
    created = admin.post(
        "/topics",
        {
            "name": "http-made",
            "partitions": 3,
            "replication_factor": 1,
            "configs": {"retention.ms": "86400000"},
        },
    )
    assert created.status == 201, created.body
    assert created.body["partitions"] == 3 and created.body["configs"] == {
        "retention.ms": "86400000"
    }

    produce(admin_broker.bootstrap, "http-made", 25, partition=1)
    topic = admin.get("/topics/http-made").body
    assert topic["configs"] == {"retention.ms": "86400000"}
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    p1 = topic["partitions"][1]
    assert p1["leader"] == 0 and p1["replicas"] == [0] and p1["isr"] == [0]
    assert p1["leader_epoch"] >= 0
    assert (p1["log_start_offset"], p1["high_watermark"], p1["log_end_offset"]) == (0, 25, 25)
    assert p1["size_bytes"] > 0
    assert topic["partitions"][0]["high_watermark"] == 0

    # the high watermark is what a consumer sees as the end of the partition
    consumer = Consumer({"bootstrap.servers": admin_broker.bootstrap, "group.id": "hw-check"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("http-made", 1), timeout=10)
    finally:
        consumer.close()
    assert (low, high) == (p1["log_start_offset"], p1["high_watermark"])

    listed = {t["name"]: t for t in admin.get("/topics").body}
    assert listed["http-made"]["partitions"] == 3
    assert listed["http-made"]["replication_factor"] == 1
    assert listed["http-made"]["topic_id"] == created.body["topic_id"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"partitions": 1}, "name"),
        ({"name": "bad name!"}, "name"),
        ({"name": "ok-name", "partitions": 0}, "partitions"),
        ({"name": "ok-name", "partitions": "3"}, "partitions"),
        ({"name": "ok-name", "replication_factor": 3}, "replication_factor"),
        ({"name": "ok-name", "configs": {"retention.ms": "soon"}}, "configs"),
        ({"name": "ok-name", "configs": ["retention.ms"]}, "configs"),
    ],
)
def test_create_topic_validation_names_the_field(admin: AdminClient, body, field) -> None:
    answer = admin.post("/topics", body)
    assert answer.status == 400, answer.body
    assert answer.body["field"] == field
    assert field in answer.body["message"]


def test_create_existing_topic_conflicts(admin: AdminClient) -> None:
    assert admin.post("/topics", {"name": "twice"}).status == 201
    again = admin.post("/topics", {"name": "twice"})
    assert again.status == 409 and again.body["error"] == "TOPIC_ALREADY_EXISTS"


def test_alter_config_add_partitions_and_delete(admin: AdminClient, admin_broker) -> None:
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from confluent_kafka.admin import ConfigResource

    assert admin.post("/topics", {"name": "altered", "partitions": 1}).status == 201
    changed = admin.call(
        "PATCH",
        "/topics/altered/config",
        {"configs": {"retention.ms": "1000", "segment.ms": "60000"}},
    )
    assert changed.status == 200 and changed.body["configs"] == {
        "retention.ms": "1000",
        "segment.ms": "60000",
    }
    removed = admin.call("PATCH", "/topics/altered/config", {"configs": {"segment.ms": None}})
    assert removed.body["configs"] == {"retention.ms": "1000"}
    bad = admin.call("PATCH", "/topics/altered/config", {"configs": {"retention.ms": "x"}})
    assert bad.status == 400 and bad.body["field"] == "configs"

    kafka = KafkaAdmin({"bootstrap.servers": admin_broker.bootstrap})
    resource = ConfigResource("topic", "altered")
    described = kafka.describe_configs([resource])[resource].result(10)
    assert described["retention.ms"].value == "1000"

    grown = admin.post("/topics/altered/partitions", {"partitions": 3})
    assert grown.status == 200
    assert [p["partition"] for p in grown.body["new_partitions"]] == [1, 2]
    for count in (2, 3):  # partitions may only grow: a conflict with the topic's state
        shrink = admin.post("/topics/altered/partitions", {"partitions": count})
        assert shrink.status == 409 and shrink.body["error"] == "INVALID_PARTITIONS"

    def client_sees_partitions():
        md = kafka.list_topics("altered", timeout=10)
        return len(md.topics["altered"].partitions) == 3

    admin.wait_for(client_sees_partitions, "3 partitions in the client's metadata")

    deleted = admin.call("DELETE", "/topics/altered")  # answered once the topic is gone
    assert deleted.status == 200 and deleted.body == {
        "name": "altered",
        "deleted": True,
        "marked_for_deletion": False,
    }
    assert admin.get("/topics/altered").status == 404
    assert "altered" not in kafka.list_topics(timeout=10).topics
    assert admin.call("DELETE", "/topics/altered").status == 404


def test_unknown_topic(admin: AdminClient) -> None:
    for method, path, body in (
        ("GET", "/topics/nope", None),
        ("PATCH", "/topics/nope/config", {"configs": {}}),
        ("POST", "/topics/nope/partitions", {"partitions": 2}),
    ):
        answer = admin.call(method, path, body)
        assert answer.status == 404, (path, answer.body)
        assert answer.body["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


# ---------------------------------------------------------------------- errors


def test_unknown_routes_and_malformed_bodies(admin: AdminClient) -> None:
    missing = admin.get("/no/such/route")
    assert missing.status == 404 and missing.body["error"] == "NOT_FOUND"
    wrong_method = admin.call("PUT", "/topics")
    assert wrong_method.status == 405 and wrong_method.body["error"] == "METHOD_NOT_ALLOWED"
    deep = b"[" * 100_000 + b"]" * 100_000  # deeper than the JSON parser recurses
    huge_int = b'{"partitions": ' + b"9" * 5000 + b"}"  # more digits than Python converts
    for raw in (b"{", b"[1, 2]", b"\xff\xfe", b"null", deep, huge_int):
        answer = admin.call("POST", "/topics", raw=raw)
        assert answer.status == 400, raw
        assert answer.body["error"] == "INVALID_REQUEST"
    too_large = admin.call("POST", "/topics", raw=b"{" + b" " * (2 * 1024 * 1024) + b"}")
    assert too_large.status == 413 and too_large.body["error"] == "REQUEST_TOO_LARGE"
    assert admin.get("/health").status == 200  # still up


# ---------------------------------------------------------------------- groups


def test_group_lag_reset_and_delete(admin: AdminClient, admin_broker) -> None:
    bootstrap = admin_broker.bootstrap
    assert admin.post("/topics", {"name": "lagged", "partitions": 1}).status == 201
    produce(bootstrap, "lagged", 30)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "lag-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumed = 0
    try:
        consumer.subscribe(["lagged"])
        while consumed < 12:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                consumed += 1
        consumer.commit(asynchronous=False, offsets=[TopicPartition("lagged", 0, 12)])

        # the group is active: its members and assignment are shown, resets are refused
        group = admin.get("/groups/lag-group").body
        assert group["state"] == "Stable"
        [member] = group["members"]
        assert member["assignment"] == [{"topic": "lagged", "partitions": [0]}]
        refused = admin.post("/groups/lag-group/offsets", {"to": "earliest"})
        assert refused.status == 409 and refused.body["error"] == "NON_EMPTY_GROUP"
        assert admin.call("DELETE", "/groups/lag-group").status == 409
    finally:
        consumer.close()

    produce(bootstrap, "lagged", 8)
    listed = {g["group_id"]: g for g in admin.get("/groups").body}
    assert listed["lag-group"]["state"] == "Empty"
    group = admin.get("/groups/lag-group").body
    assert group["members"] == []
    [offset] = group["offsets"]
    assert offset == {
        "topic": "lagged",
        "partition": 0,
        "committed_offset": 12,
        "log_start_offset": 0,
        "high_watermark": 38,
        "lag": 38 - 12,
        "member_id": None,
    }
    assert group["total_lag"] == 26

    dry = admin.post("/groups/lag-group/offsets", {"to": "latest", "dry_run": True})
    assert dry.body["offsets"] == [{"topic": "lagged", "partition": 0, "offset": 38}]
    assert admin.get("/groups/lag-group").body["offsets"][0]["committed_offset"] == 12

    reset = admin.post("/groups/lag-group/offsets", {"to": "earliest"})
    assert reset.status == 200 and reset.body["offsets"][0]["offset"] == 0
    explicit = admin.post(
        "/groups/lag-group/offsets",
        {"to": "explicit", "offsets": [{"topic": "lagged", "partition": 0, "offset": 5}]},
    )
    assert explicit.status == 200

    # what the API committed is where a consumer of the group starts
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lag-group"})
    try:
        [committed] = consumer.committed([TopicPartition("lagged", 0)], timeout=10)
    finally:
        consumer.close()
    assert committed.offset == 5
    assert admin.get("/groups/lag-group").body["offsets"][0]["lag"] == 33

    deleted = admin.call("DELETE", "/groups/lag-group")
    assert deleted.status == 200 and deleted.body == {"group_id": "lag-group", "deleted": True}
    assert admin.get("/groups/lag-group").status == 404


def test_reset_by_timestamp_and_validation(admin: AdminClient, admin_broker) -> None:
    assert admin.post("/topics", {"name": "timed", "partitions": 1}).status == 201
    producer = Producer({"bootstrap.servers": admin_broker.bootstrap})
    for i in range(10):
        producer.produce("timed", value=b"x", partition=0, timestamp=1_000_000 + i * 1000)
    assert producer.flush(30) == 0

    answer = admin.post(
        "/groups/ts-group/offsets", {"to": "timestamp", "timestamp": 1_004_500, "topics": ["timed"]}
    )
    assert answer.status == 200, answer.body
    assert answer.body["offsets"] == [{"topic": "timed", "partition": 0, "offset": 5}]
    past_end = admin.post(
        "/groups/ts-group/offsets", {"to": "timestamp", "timestamp": 9_000_000, "topics": ["timed"]}
    )
    assert past_end.body["offsets"][0]["offset"] == 10

    for body, field in (
        ({"to": "sideways"}, "to"),
        ({"to": "timestamp", "topics": ["timed"]}, "timestamp"),
        (
            {"to": "explicit", "offsets": [{"topic": "timed", "partition": 0, "offset": -1}]},
            "offsets[0].offset",
        ),
        ({"to": "earliest", "topics": "timed"}, "topics"),
    ):
        bad = admin.post("/groups/ts-group/offsets", body)
        assert bad.status == 400, (body, bad.body)
        assert bad.body["field"] == field
    unknown = admin.post("/groups/ts-group/offsets", {"to": "earliest", "topics": ["nope"]})
    assert unknown.status == 404


# ---------------------------------------------------------------------- partitions


def test_reassignment_and_elections_write_the_admin_nodes(admin: AdminClient) -> None:
    assert admin.post("/topics", {"name": "moved", "partitions": 2}).status == 201
    bad = admin.post(
        "/partitions/reassign",
        {"partitions": [{"topic": "moved", "partition": 0, "replicas": [5]}]},
    )
    assert bad.status == 404 and bad.body["field"] == "partitions[0].replicas"
    assert bad.body["error"] == "BROKER_NOT_AVAILABLE"  # as GET /brokers/5 answers
    unknown = admin.post(
        "/partitions/reassign",
        {"partitions": [{"topic": "moved", "partition": 9, "replicas": [0]}]},
    )
    assert unknown.status == 404

    accepted = admin.post(
        "/partitions/reassign",
        {"partitions": [{"topic": "moved", "partition": 1, "replicas": [0]}]},
    )
    assert accepted.status == 202, accepted.body
    assert accepted.body["path"] == "/admin/reassign_partitions"
    # pending until the controller picks it up (and removes the node)
    status = admin.get("/partitions/reassign")
    assert status.status == 200
    assert status.body["pending"] in ([], [{"topic": "moved", "partition": 1, "replicas": [0]}])

    elect = admin.post(
        "/partitions/elect-leaders",
        {"election_type": "unclean", "partitions": [{"topic": "moved", "partition": 0}]},
    )
    assert elect.status == 202, elect.body
    assert elect.body["path"] == "/admin/unclean_leader_election"
    assert elect.body["partitions"] == [{"topic": "moved", "partition": 0}]
    wrong = admin.post("/partitions/elect-leaders", {"election_type": "random"})
    assert wrong.status == 400 and wrong.body["field"] == "election_type"


# ---------------------------------------------------------------------- metrics and document


def test_metrics_after_traffic(admin: AdminClient, admin_broker) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    assert admin.post("/topics", {"name": "metered", "partitions": 1}).status == 201
    produce(admin_broker.bootstrap, "metered", 40)
    answer = admin.get("/metrics")
    assert answer.status == 200 and answer.content_type.startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(answer.body):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    assert samples[("kafkalite_topic_messages_in_total", (("topic", "metered"),))] == 40
    assert samples[("kafkalite_requests_total", (("api", "Produce"),))] >= 1
    assert samples[("kafkalite_request_latency_seconds_count", (("api", "Produce"),))] >= 1
    assert samples[("kafkalite_network_bytes_in_total", ())] > 0
    assert samples[("kafkalite_network_bytes_out_total", ())] > 0
    assert samples[("kafkalite_active_controller", ())] == 1
    assert samples[("kafkalite_under_replicated_partitions", ())] == 0
    assert samples[("kafkalite_offline_partitions", ())] == 0
    assert samples[("kafkalite_isr_shrinks_total", ())] == 0
    assert samples[("kafkalite_connections", ())] >= 0
    size = samples[("kafkalite_log_size_bytes", (("partition", "0"), ("topic", "metered")))]
    assert size == partition_of(admin, "metered", 0)["size_bytes"] > 0
    assert "# TYPE kafkalite_groups gauge" in answer.body
    # the broker's event-loop lag probe runs and is exported
    assert samples[("kafkalite_event_loop_lag_seconds_count", ())] > 0
    assert samples[("kafkalite_event_loop_lag_max_seconds", ())] >= 0


def test_console_page_reads_the_api(admin: AdminClient) -> None:
    page = admin.get("/")
    assert page.status == 200 and page.content_type.startswith("text/html")
    assert 'src="/console/app.js"' in page.body
    script = admin.get("/console/app.js").body
    for route in ("/overview", "/cluster", "/topics", "/groups", "/partitions"):
        assert f'"{route}' in script or f"`{route}" in script, route


def test_openapi_document_lists_every_route(admin: AdminClient) -> None:
    doc = admin.get("/openapi.json").body
    assert doc["openapi"].startswith("3.")
    ops = {(path, method) for path, item in doc["paths"].items() for method in item}
    assert ops >= {
        ("/", "get"),
        ("/health", "get"),
        ("/ready", "get"),
        ("/cluster", "get"),
        ("/brokers", "get"),
        ("/brokers/{id}", "get"),
        ("/topics", "get"),
        ("/topics", "post"),
        ("/topics/{name}", "get"),
        ("/topics/{name}", "delete"),
        ("/topics/{name}/config", "patch"),
        ("/topics/{name}/partitions", "post"),
        ("/groups", "get"),
        ("/groups/{id}", "get"),
        ("/groups/{id}", "delete"),
        ("/groups/{id}/offsets", "post"),
        ("/partitions/reassign", "get"),
        ("/partitions/reassign", "post"),
        ("/partitions/elect-leaders", "post"),
        ("/metrics", "get"),
    }
    json.dumps(doc)  # serialisable as served


@pytest.mark.parametrize(
    "configs",
    [{"no.such.config": "1"}, {"retention.ms": 1000}, {"preallocate": True}],
    ids=["unknown-key", "number", "boolean"],
)
def test_alter_config_validates_as_create_topics_does(
    admin: AdminClient, admin_broker, configs
) -> None:
    """An unknown key or a non-string value is refused (it was stored, after which every
    Kafka-protocol alter of the topic failed); the topic stays alterable through Kafka's API."""
    from confluent_kafka.admin import AdminClient as KafkaAdmin
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    name = "validated-" + next(iter(configs)).replace(".", "-")
    assert admin.post("/topics", {"name": name, "partitions": 1}).status == 201
    answer = admin.call("PATCH", f"/topics/{name}/config", {"configs": configs})
    assert answer.status == 400, answer.body
    assert answer.body["field"] == "configs"
    assert next(iter(configs)) in answer.body["message"]
    assert admin.get(f"/topics/{name}").body["configs"] == {}
    created = admin.post("/topics", {"name": name + "-new", "configs": configs})
    assert created.status == 400 and created.body["field"] == "configs"

    kafka = KafkaAdmin({"bootstrap.servers": admin_broker.bootstrap})
    entry = ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", name, incremental_configs=[entry])
    kafka.incremental_alter_configs([resource])[resource].result(30)
    assert admin.get(f"/topics/{name}").body["configs"] == {"retention.ms": "5000"}


def test_every_405_names_the_allowed_methods(admin: AdminClient) -> None:
    import urllib.error
    import urllib.request

    for method, path, allowed in [
        ("PUT", "/topics", {"GET", "HEAD", "POST"}),
        ("POST", "/topics/some-topic", {"GET", "HEAD", "DELETE"}),
        ("GET", "/topics/some-topic/config", {"PATCH"}),
        ("TRACE", "/cluster", {"GET", "HEAD"}),
    ]:
        request = urllib.request.Request(admin.url + path, method=method)
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(request, timeout=30)
        assert answer.value.code == 405
        header = answer.value.headers.get("Allow")
        assert header is not None and set(header.split(", ")) == allowed, (path, header)


def test_the_document_states_what_the_server_enforces(admin: AdminClient) -> None:
    """minItems, the topic-name pattern, config names and value forms, partitions that only
    grow: each stated in the document and refused by the server."""
    import re

    doc = admin.get("/openapi.json").body
    schemas = doc["components"]["schemas"]
    pattern = schemas["NewTopic"]["properties"]["name"]["pattern"]
    for name in ("ok", "a.b_c-9", "x" * 249):
        assert re.search(pattern, name)
    for name in (".", "..", "bad name", "t\n", "x" * 250, "ü"):
        assert not re.search(pattern, name), name
        assert admin.post("/topics", {"name": name}).status == 400
    [election_partitions, null] = schemas["Election"]["properties"]["partitions"]["anyOf"]
    assert election_partitions["minItems"] == 1 and null == {"type": "null"}
    assert schemas["Reassignment"]["properties"]["partitions"]["minItems"] == 1
    for path in ("/partitions/elect-leaders", "/partitions/reassign"):
        assert admin.post(path, {"partitions": []}).status == 400
    [ref, null] = schemas["NewTopic"]["properties"]["configs"]["anyOf"]
    configs = schemas[ref["$ref"].rsplit("/", 1)[1]]
    assert configs["additionalProperties"] is False
    retention = configs["properties"]["retention.ms"]["pattern"]
    assert re.search(retention, "-1") and re.search(retention, str(2**63 - 1))
    assert not re.search(retention, str(2**63)) and not re.search(retention, "-2")
    assert not re.search(retention, "1000\n") and not re.search(retention, "soon")
    assert admin.post("/topics", {"name": "form", "configs": {"retention.ms": "-2"}}).status == 400
    assert "may only be added" in schemas["PartitionCount"]["description"]
    assert admin.post("/topics", {"name": "form", "partitions": 2}).status == 201
    grow = admin.post("/topics/form/partitions", {"partitions": 1})
    assert grow.status == 409 and grow.body["error"] == "INVALID_PARTITIONS"
    assert admin.call("PATCH", "/topics/form/config", {"configs": None}).status == 400
    unknown_removal = admin.call("PATCH", "/topics/form/config", {"configs": {"nope": None}})
    assert unknown_removal.status == 400


# ---------------------------------------------------------------------- records and history


def test_record_browser_shows_what_a_client_produced(admin: AdminClient, admin_broker) -> None:
    assert admin.post("/topics", {"name": "browsed", "partitions": 2}).status == 201
    producer = Producer({"bootstrap.servers": admin_broker.bootstrap})
    producer.produce("browsed", key=b"k-text", value=b'{"n": 1}', partition=1, timestamp=5_000)
    producer.produce(
        "browsed",
        key=None,
        value="héllo".encode(),
        partition=1,
        headers=[("h", b"\xff\x00")],
        timestamp=6_000,
    )
    producer.produce("browsed", key=b"\x00\x01", value=None, partition=1, timestamp=9_000)
    for i in range(7):
        producer.produce("browsed", value=f"r{i}".encode(), partition=1, timestamp=10_000 + i)
    assert producer.flush(30) == 0

    page = admin.get("/topics/browsed/records?partition=1&offset=0&limit=3")
    assert page.status == 200, page.body
    body = page.body
    assert (body["log_start_offset"], body["high_watermark"], body["next_offset"]) == (0, 10, 3)
    first, second, third = body["records"]
    assert first["offset"] == 0 and first["timestamp"] == 5_000
    unframed = {"schema_id": None, "subject": None}  # not a Schema Registry record
    assert first["key"] == {
        "encoding": "utf8",
        "text": "k-text",
        "size": 6,
        "truncated": False,
        **unframed,
    }
    assert first["value"]["encoding"] == "json" and first["value"]["text"] == '{"n": 1}'
    assert second["key"] is None and second["value"]["text"] == "héllo"
    assert second["headers"] == [
        {
            "key": "h",
            "value": {"encoding": "hex", "text": "ff00", "size": 2, "truncated": False, **unframed},
        }
    ]
    assert third["key"]["encoding"] == "hex" and third["value"] is None

    by_time = admin.get("/topics/browsed/records?partition=1&timestamp=9000&limit=2").body
    assert [r["offset"] for r in by_time["records"]] == [2, 3]
    last = admin.get("/topics/browsed/records?partition=1&limit=4").body
    assert [r["value"]["text"] for r in last["records"]] == ["r3", "r4", "r5", "r6"]
    empty = admin.get("/topics/browsed/records?partition=0").body
    assert empty["records"] == [] and empty["high_watermark"] == 0
    missing = admin.get("/topics/browsed/records?partition=7")
    assert missing.status == 404 and missing.body["field"] == "partition"
    assert admin.get("/topics/browsed/records?partition=x").status == 400


def test_record_browser_merges_partitions_by_time_and_filters(
    admin: AdminClient, admin_broker
) -> None:
    assert admin.post("/topics", {"name": "merged", "partitions": 3}).status == 201
    producer = Producer({"bootstrap.servers": admin_broker.bootstrap})
    # timestamps interleave the partitions: 1000 + 10 * i in partition i % 3
    for i in range(12):
        producer.produce(
            "merged",
            key=f"key-{i}".encode(),
            value=f"order {i} {'refund' if i % 4 == 0 else 'paid'}".encode(),
            partition=i % 3,
            headers=[("source", b"web" if i == 7 else b"shop")],
            timestamp=1000 + 10 * i,
        )
    assert producer.flush(30) == 0

    last = admin.get("/topics/merged/records?limit=5").body
    assert last["partition"] is None and len(last["partitions"]) == 3
    # the newest five of all partitions, by timestamp
    assert [r["key"]["text"] for r in last["records"]] == [f"key-{i}" for i in range(7, 12)]
    assert [r["partition"] for r in last["records"]] == [i % 3 for i in range(7, 12)]

    by_time = admin.get("/topics/merged/records?timestamp=1035&limit=3").body
    assert [r["timestamp"] for r in by_time["records"]] == [1040, 1050, 1060]
    # each partition goes on after the last record it showed (1060 is offset 2 of partition 0)
    cursors = {c["partition"]: c["next_offset"] for c in by_time["partitions"]}
    assert cursors == {0: 3, 1: 2, 2: 2}

    by_offset = admin.get("/topics/merged/records?offset=3&limit=10").body
    assert [r["key"]["text"] for r in by_offset["records"]] == ["key-9", "key-10", "key-11"]

    refunds = admin.get("/topics/merged/records?filter=REFUND").body
    assert [r["key"]["text"] for r in refunds["records"]] == ["key-0", "key-4", "key-8"]
    assert sum(c["scanned"] for c in refunds["partitions"]) == 12
    by_header = admin.get("/topics/merged/records?filter=web").body
    assert [r["key"]["text"] for r in by_header["records"]] == ["key-7"]
    assert (
        admin.get("/topics/merged/records?filter=key-1&partition=1").body["records"][0]["key"][
            "text"
        ]
        == "key-1"
    )


def test_a_record_produced_through_the_api_is_consumed_by_a_client(
    admin: AdminClient, admin_broker
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    assert admin.post("/topics", {"name": "produced", "partitions": 4}).status == 201
    answer = admin.post(
        "/topics/produced/records",
        {"key": "k1", "value": "hello", "headers": [{"key": "h", "value": "v"}], "partition": 2},
    )
    assert answer.status == 201, answer.body
    assert (answer.body["partition"], answer.body["offset"]) == (2, 0)
    keyed = admin.post("/topics/produced/records", {"key": "k1", "value": "again"}).body
    # by the key's murmur2 hash, as Kafka's producers (and confluent-kafka's murmur2 partitioner)
    from kafkalite.client.partitioner import partition_for_key

    assert keyed["partition"] == partition_for_key(b"k1", 4)
    consumer = Consumer({"bootstrap.servers": admin_broker.bootstrap, "group.id": "check-produced"})
    try:
        consumer.assign([TopicPartition("produced", 2, 0)])
        msg = admin.wait_for(
            lambda: (m := consumer.poll(0.5)) is not None and m.error() is None and m,
            "the record",
        )
    finally:
        consumer.close()
    assert (msg.key(), msg.value(), msg.headers()) == (b"k1", b"hello", [("h", b"v")])
    assert admin.post("/topics/produced/records", {"value": "x", "partition": 9}).status == 404
    assert admin.post("/topics/nope/records", {"value": "x"}).status == 404
    internal = admin.post("/topics/__consumer_offsets/records", {"value": "x"})
    assert internal.status == 403 and internal.body["error"] == "INVALID_TOPIC_EXCEPTION"
    # a topic whose min.insync.replicas its replicas cannot meet: 409 with Kafka's error, not 5xx
    assert (
        admin.post(
            "/topics",
            {"name": "unmet-isr", "partitions": 1, "configs": {"min.insync.replicas": "2"}},
        ).status
        == 201
    )
    unmet = admin.post("/topics/unmet-isr/records", {"value": "x"})
    assert unmet.status == 409 and unmet.body["error"] == "NOT_ENOUGH_REPLICAS", unmet.body


def test_metrics_history_has_rates_of_what_was_produced(admin: AdminClient, admin_broker) -> None:
    assert admin.post("/topics", {"name": "rated", "partitions": 1}).status == 201
    produce(admin_broker.bootstrap, "rated", 30)
    history = admin.get("/metrics/history?topic=rated")
    assert history.status == 200, history.body
    body = history.body
    assert body["interval_seconds"] > 0 and body["window_seconds"] >= 300
    # the last point runs from the last sample to now, so what was just produced is in it,
    # or in the point before when a sample was taken between the produce and this request
    # (the topic is new: any rate of it is this produce)
    assert any(p["messages_in_per_sec"] > 0 for p in body["topics"]["rated"])
    broker_points = [p for p in body["broker"] if p["messages_in_per_sec"] > 0]
    assert broker_points and all(p["bytes_in_per_sec"] > 0 for p in broker_points)
    busiest = admin.get("/metrics/history").body["topics"]
    assert "rated" in busiest


def test_docs_page_and_console_files_are_served_from_the_package(admin: AdminClient) -> None:
    page = admin.get("/docs")
    assert page.status == 200 and page.content_type.startswith("text/html")
    assert 'src="/console/docs.js"' in page.body
    script = admin.get("/console/docs.js")
    assert script.status == 200 and script.content_type.startswith("text/javascript")
    assert 'fetch("/openapi.json"' in script.body
    assert "://" not in script.body  # nothing loaded from elsewhere
    for bad in ("../app.py", "..%2Fapp.py", "app.py", ".hidden.js", "nope.js"):
        assert admin.get(f"/console/{bad}").status == 404, bad


def test_operator_metrics_lag_and_log_dirs(admin: AdminClient, admin_broker) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    assert admin.post("/topics", {"name": "lag-metered", "partitions": 1}).status == 201
    produce(admin_broker.bootstrap, "lag-metered", 40)
    consumer = Consumer({"bootstrap.servers": admin_broker.bootstrap, "group.id": "metered-group"})
    consumer.commit(offsets=[TopicPartition("lag-metered", 0, 10)], asynchronous=False)
    consumer.close()

    samples = {}
    for family in text_string_to_metric_families(admin.get("/metrics").body):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    labels = (("group", "metered-group"), ("partition", "0"), ("topic", "lag-metered"))
    assert samples[("kafkalite_consumergroup_lag", labels)] == 30
    assert samples[("kafkalite_consumergroup_current_offset", labels)] == 10
    assert samples[("kafkalite_consumergroup_members", (("group", "metered-group"),))] == 0
    # the same lag as the API's
    [offset] = admin.get("/groups/metered-group").body["offsets"]
    assert offset["lag"] == 30
    dirs = {k[1][0][1]: v for k, v in samples.items() if k[0] == "kafkalite_log_dir_offline"}
    assert dirs and set(dirs.values()) == {0}
    for name in (
        "kafkalite_under_replicated_partitions",
        "kafkalite_offline_partitions",
        "kafkalite_under_min_isr_partitions",
        "kafkalite_event_loop_lag_max_seconds",
    ):
        assert samples[(name, ())] >= 0, name
    assert samples[("kafkalite_request_latency_seconds_count", (("api", "OffsetCommit"),))] >= 1


def test_topic_effective_configs_consuming_groups_and_message_count(
    admin: AdminClient, admin_broker
) -> None:
    from confluent_kafka import Consumer, TopicPartition

    created = admin.post(
        "/topics",
        {"name": "counted-msgs", "partitions": 2, "configs": {"retention.ms": "3600000"}},
    )
    assert created.status == 201
    produce(admin_broker.bootstrap, "counted-msgs", 5, partition=0)
    produce(admin_broker.bootstrap, "counted-msgs", 3, partition=1)
    topic = admin.get("/topics/counted-msgs").body
    assert (topic["message_count"], topic["message_count_is_estimate"]) == (8, False)

    configs = {c["name"]: c for c in admin.get("/topics/counted-msgs/configs").body["configs"]}
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "delete"
    assert configs["cleanup.policy"]["source"] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")
    assert admin.get("/topics/no-such-topic/configs").status == 404

    consumer = Consumer({"bootstrap.servers": admin_broker.bootstrap, "group.id": "counting"})
    try:
        consumer.commit(offsets=[TopicPartition("counted-msgs", 0, 2)], asynchronous=False)
    finally:
        consumer.close()
    groups = admin.get("/topics/counted-msgs/groups").body
    assert groups == [
        {"group_id": "counting", "state": "Empty", "members": 0, "partitions": 1, "lag": 3}
    ]

    assert (
        admin.post(
            "/topics", {"name": "compacted", "configs": {"cleanup.policy": "compact"}}
        ).status
        == 201
    )
    assert admin.get("/topics/compacted").body["message_count_is_estimate"] is True
