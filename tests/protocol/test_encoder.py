"""The compiled encoders against their oracle, kio's own writer, on every message kafkalite
advertises (requests and responses, every version)."""

import dataclasses
import datetime
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.join_group.v5.request import JoinGroupRequest
from kio.serial import entity_writer
from kio.static.primitive import Records

from kafkalite.client.messages import build_message
from kafkalite.protocol.api import ADVERTISED_VERSIONS, request_class, response_class
from kafkalite.protocol.encoder import Parts, encode, encoder_for
from kafkalite.protocol.errors import ErrorCode

st.register_type_strategy(Records, st.binary(max_size=64))

PAIRS = [
    (key, version)
    for key, (low, high) in sorted(ADVERTISED_VERSIONS.items())
    for version in range(low, high + 1)
]


def kio_encode(message):
    buf = io.BytesIO()
    entity_writer(type(message))(buf, message)
    return buf.getvalue()


@pytest.mark.parametrize("key,version", PAIRS, ids=lambda x: str(int(x)))
def test_same_bytes_as_kio(key, version):
    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        st.one_of(
            st.from_type(request_class(key, version)), st.from_type(response_class(key, version))
        )
    )
    def check(message):
        assert encode(message) == kio_encode(message)

    check()


def test_tagged_fields_written_only_when_not_default():
    plain = ApiVersionsResponse(
        error_code=ErrorCode.NONE, api_keys=(), throttle_time=datetime.timedelta(0)
    )
    assert encode(plain) == b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"
    tagged = ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=(),
        throttle_time=datetime.timedelta(0),
        finalized_features_epoch=7,
        zk_migration_ready=True,
    )
    body = encode(tagged)
    assert body == kio_encode(tagged)
    # two tagged fields: tag 1 (int64, 8 bytes) and tag 3 (bool, 1 byte), in tag order
    assert body.endswith(b"\x02" + b"\x01\x08" + (7).to_bytes(8, "big") + b"\x03\x01\x01")


def test_plain_ints_accepted_for_error_codes():
    message = ApiVersionsResponse(error_code=35, api_keys=(), throttle_time=datetime.timedelta(0))
    assert encode(message)[:2] == b"\x00\x23"


def test_parts_keep_big_and_foreign_objects_by_reference():
    class Slice:
        def __len__(self):
            return 5

    big = memoryview(bytearray(b"x" * 100))
    foreign = Slice()
    cls = request_class(0, 3)  # ProduceRequest v3, legacy bytes
    module = __import__(cls.__module__, fromlist=["TopicProduceData"])
    message = cls(
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            module.TopicProduceData(
                name="t",
                partition_data=(
                    module.PartitionProduceData(index=0, records=big),
                    module.PartitionProduceData(index=1, records=b"small"),
                    module.PartitionProduceData(index=2, records=foreign),
                ),
            ),
        ),
    )
    parts = Parts(threshold=50)
    out = bytearray()
    encoder_for(cls)(out, parts, message)
    items = [*parts.items, bytes(out)]
    assert items[1] is big and items[3] is foreign
    flat = b"".join(b"?????" if p is foreign else bytes(p) for p in items)
    expected = kio_encode(
        cls(
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=1),
            topic_data=(
                module.TopicProduceData(
                    name="t",
                    partition_data=(
                        module.PartitionProduceData(index=0, records=bytes(big)),
                        module.PartitionProduceData(index=1, records=b"small"),
                        module.PartitionProduceData(index=2, records=b"?????"),
                    ),
                ),
            ),
        )
    )
    assert flat == expected


def test_legacy_string_length_limit():
    request = JoinGroupRequest(
        group_id="g" * 40000,
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=10),
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(),
    )
    with pytest.raises(ValueError):
        encode(request)


def test_an_encoded_array_of_structs_is_written_as_its_bytes():
    from kafkalite.protocol.encoder import Encoded

    for version in (4, 9):  # a legacy and a flexible version
        cls = request_class(3, version)  # Metadata: topics is an array of structs
        message = build_message(cls, topics=[{"name": "a"}, {"name": "bb"}])
        whole = encode(message)
        without = encode(dataclasses.replace(message, topics=()))
        empty_array = b"\x01" if cls.__flexible__ else b"\x00\x00\x00\x00"
        # the field's bytes: what the encoding gains over an empty array, plus that array
        start = without.index(empty_array)
        field = whole[start : start + len(whole) - len(without) + len(empty_array)]
        replaced = dataclasses.replace(message, topics=Encoded(field))
        assert encode(replaced) == whole
        assert encode(dataclasses.replace(message, topics=Encoded(b"XYZ"))).count(b"XYZ") == 1
