"""The encoded Metadata partitions (protocol/metadata_response.py) against kio's own writer,
and the cache's invalidation of them (broker/metadata_bytes.py) on partition, topic-id and
live-broker changes."""

import importlib
import io
import uuid

from hypothesis import given
from hypothesis import strategies as st
from kio.serial import entity_writer

from kafkalite.broker.metadata_cache import (
    BrokerEndpoint,
    MetadataBroker,
    MetadataCache,
    PartitionInfo,
    PartitionMetadata,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.metadata_response import (
    FAMILY_OF_VERSION,
    array_length,
    encode_partition,
    encode_topic_head,
)

VERSIONS = range(0, 14)

ids = st.lists(st.integers(-1, 2**31 - 1), max_size=140).map(tuple)
partitions = st.builds(
    PartitionMetadata,
    st.sampled_from([ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.LISTENER_NOT_FOUND]),
    st.integers(0, 2**31 - 1),
    st.integers(-1, 2**31 - 1),
    st.integers(-1, 2**31 - 1),
    ids,
    ids,
    ids,
)


def kio_partition(p, version):
    module = importlib.import_module(f"kio.schema.metadata.v{version}.response")
    cls = module.MetadataResponsePartition
    fields = {
        "error_code": p.error_code,
        "partition_index": p.partition_index,
        "leader_id": p.leader_id,
        "leader_epoch": p.leader_epoch,
        "replica_nodes": p.replica_nodes,
        "isr_nodes": p.isr_nodes,
        "offline_replicas": p.offline_replicas,
    }
    entity = cls(**{k: v for k, v in fields.items() if k in cls.__dataclass_fields__})
    buf = io.BytesIO()
    entity_writer(cls)(buf, entity)
    return buf.getvalue()


@given(partitions, st.sampled_from(VERSIONS))
def test_partition_entry_is_kios_encoding(p, version):
    assert encode_partition(p, FAMILY_OF_VERSION[version]) == kio_partition(p, version)


@given(st.integers(0, 100_000), st.booleans())
def test_array_length(n, flexible):
    from kafkalite.protocol.varint import encode_unsigned_varint

    expected = encode_unsigned_varint(n + 1) if flexible else n.to_bytes(4, "big")
    assert array_length(n, flexible) == expected


def broker(i, listeners=("PLAINTEXT",)):
    return MetadataBroker(i, {name: BrokerEndpoint(name, f"h{i}", 9092) for name in listeners})


def internal(name):
    return name.startswith("__")


def fresh_entry(cache, topic, listener, version):
    """The topic's entry encoded from the cache's current state, without any kept entry."""
    family = FAMILY_OF_VERSION[version]
    head = encode_topic_head(topic, cache.get_topic_id(topic) or uuid.UUID(int=0), False, family)
    metadata = cache.get_topic_metadata(
        [topic],
        listener,
        error_unavailable_endpoints=family.endpoints,
        error_unavailable_listeners=family.listeners,
    )[0]
    return (
        head
        + array_length(len(metadata.partitions), family.flexible)
        + b"".join(encode_partition(p, family) for p in metadata.partitions)
    )


def test_entries_follow_partition_changes_and_live_brokers():
    cache = MetadataCache(0)
    cache.set_alive_brokers([broker(0), broker(1, ("INTERNAL",))])
    for p in range(3):
        cache.update_partition(PartitionInfo("t", p, 0, 1, (0, 1), (0, 1)))

    def check():
        for version in (0, 5, 6, 9, 12):
            for listener in ("PLAINTEXT", "INTERNAL"):
                [(_, _, entry)] = cache.encoded_topics(["t"], listener, version, internal)
                assert entry == fresh_entry(cache, "t", listener, version), (version, listener)

    check()
    cache.update_partition(PartitionInfo("t", 1, 1, 2, (1,), (0, 1)))  # new leader
    check()
    cache.update_partition(PartitionInfo("t", 3, 0, 0, (0,), (0,)))  # a partition added
    check()
    cache.set_alive_brokers([broker(0)])  # broker 1 gone
    check()
    cache.set_alive_brokers([broker(0), broker(1, ("PLAINTEXT", "INTERNAL"))])  # back, 2 listeners
    check()
    cache.update_partition(PartitionInfo("t", 0, -2, 0, (), ()))  # partition deleted
    check()
    for p in (1, 2, 3):
        cache.update_partition(PartitionInfo("t", p, -2, 0, (), ()))
    assert cache.encoded_topics(["t"], "PLAINTEXT", 12, internal) == []
    # re-created with another id and other states: nothing of the old topic is answered
    cache.record_topic_ids({"t": uuid.UUID(int=9)})
    cache.update_partition(PartitionInfo("t", 0, 1, 0, (1,), (1,)))
    check()
    assert cache.encoded_topics(["t"], "PLAINTEXT", 12, internal)[0][1] == uuid.UUID(int=9)
    cache.record_topic_ids({"t": uuid.UUID(int=10)})  # the id alone changes (LeaderAndIsr)
    check()


def test_unchanged_state_keeps_the_entry():
    """A partition restated with the same leader, epoch and replicas (a new zk version, a full
    UpdateMetadata after a controller change) keeps its encoded entry."""
    cache = MetadataCache(0)
    cache.set_alive_brokers([broker(0)])
    cache.update_partition(PartitionInfo("t", 0, 0, 1, (0,), (0,), zk_version=1))
    [(_, _, before)] = cache.encoded_topics(["t"], "PLAINTEXT", 12, internal)
    cache.update_partition(PartitionInfo("t", 0, 0, 1, (0,), (0,), zk_version=2))
    [(_, _, after)] = cache.encoded_topics(["t"], "PLAINTEXT", 12, internal)
    assert after is before
    cache.update_partition(PartitionInfo("t", 0, 0, 2, (0,), (0,), zk_version=3))
    [(_, _, changed)] = cache.encoded_topics(["t"], "PLAINTEXT", 12, internal)
    assert changed != before
