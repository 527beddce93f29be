"""bench/metadata_view.py: the benchmarks' Metadata poller reads what confluent-kafka reads."""

from __future__ import annotations

import struct

import metadata_view
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.testing import free_port, wait_for

ids = st.integers(-1, 2**31 - 1)
names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF), min_size=1, max_size=20)
partitions = st.lists(
    st.tuples(st.integers(-1, 100), ids, st.lists(ids, max_size=5), st.lists(ids, max_size=5)),
    max_size=8,
)


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def encode_v4_response(correlation_id, brokers, controller_id, topics) -> bytes:
    """A Metadata v4 response as Kafka lays it out (no size prefix), built independently of
    the decoder under test."""
    out = struct.pack(">ii", correlation_id, 0) + struct.pack(">i", len(brokers))
    for node, (host, port, rack) in brokers.items():
        out += struct.pack(">i", node) + _string(host) + struct.pack(">i", port) + _string(rack)
    out += _string("cluster-id") + struct.pack(">i", controller_id) + struct.pack(">i", len(topics))
    for name, (error, parts) in topics.items():
        out += struct.pack(">h", error) + _string(name) + b"\x00" + struct.pack(">i", len(parts))
        for index, (error_code, leader, replicas, isr) in enumerate(parts):
            out += struct.pack(">hii", error_code, index, leader)
            out += struct.pack(f">i{len(replicas)}i", len(replicas), *replicas)
            out += struct.pack(f">i{len(isr)}i", len(isr), *isr)
    return out


@given(
    st.integers(-(2**31), 2**31 - 1),
    st.dictionaries(ids, st.tuples(names, st.integers(0, 65535), st.none() | names), max_size=4),
    ids,
    st.dictionaries(names, st.tuples(st.integers(0, 100), partitions), max_size=4),
)
def test_a_v4_answer_decodes_to_what_was_encoded(correlation_id, brokers, controller_id, topics):
    got_id, md = metadata_view.decode_response(
        encode_v4_response(correlation_id, brokers, controller_id, topics)
    )
    assert got_id == correlation_id
    assert md.controller_id == controller_id
    assert md.brokers == {node: (host, port) for node, (host, port, _) in brokers.items()}
    assert set(md.topics) == set(topics)
    for name, (error, parts) in topics.items():
        topic = md.topics[name]
        assert topic.error == (error or None)
        assert [
            (p.error or 0, p.leader, p.replicas, p.isrs) for p in topic.partitions.values()
        ] == [tuple(part) for part in parts]
        assert list(topic.partitions) == list(range(len(parts)))


def test_a_request_names_its_topics_and_asks_for_no_creation():
    raw = metadata_view.encode_request(7, ["a", "bc"])
    (size,) = struct.unpack_from(">i", raw)
    assert size == len(raw) - 4
    assert struct.unpack_from(">hhi", raw, 4) == (3, 4, 7)
    assert raw.endswith(b"\x00\x00\x00\x02\x00\x01a\x00\x02bc\x00")
    assert metadata_view.encode_request(8, None).endswith(b"\xff\xff\xff\xff\x00")


def test_the_view_reads_what_confluent_kafka_reads_from_a_real_broker(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("seven", 7, 1), NewTopic("two", 2, 1)]).values():
        future.result(30)
    view = metadata_view.MetadataView(broker.host, broker.port)
    try:
        wait_for(
            lambda: (
                (md := view.get(["seven"])) is not None
                and all(p.leader >= 0 for p in md.topics["seven"].partitions.values())
            ),
            "the topic led",
            30,
        )
        theirs = admin.list_topics(timeout=10)
        ours = view.get(None)
        assert ours is not None
        assert ours.controller_id == theirs.controller_id
        assert set(ours.brokers) == set(theirs.brokers)
        for name in ("seven", "two"):
            assert {
                p.id: (p.leader, p.replicas, p.isrs) for p in ours.topics[name].partitions.values()
            } == {
                p.id: (p.leader, list(p.replicas), list(p.isrs))
                for p in theirs.topics[name].partitions.values()
            }
        one = view.get(["two"])
        assert one is not None and set(one.topics) == {"two"}

        # an unknown topic is reported, and asking does not create it
        missing = view.get(["not-there"])
        assert missing is not None and missing.topics["not-there"].error == 3
        assert "not-there" not in admin.list_topics(timeout=10).topics
    finally:
        view.close()


def test_an_unreachable_broker_is_none():
    assert metadata_view.MetadataView("127.0.0.1", free_port(), timeout_s=2).get() is None
