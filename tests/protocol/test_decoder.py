"""The pure-Python fallback decoder against kio's native reader, and its handling of unknown
tagged fields."""

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader
from kio.static.primitive import Records

from kafkalite.client.messages import build_message
from kafkalite.protocol.api import ApiKey, request_class, response_class
from kafkalite.protocol.decoder import decoder_for
from kafkalite.protocol.encoder import encode
from kafkalite.protocol.errors import InvalidRequestError

st.register_type_strategy(Records, st.binary(max_size=64))

CLASSES = [
    request_class(ApiKey.PRODUCE, 3),
    request_class(ApiKey.PRODUCE, 9),
    response_class(ApiKey.PRODUCE, 11),
    request_class(ApiKey.FETCH, 12),
    response_class(ApiKey.FETCH, 4),
    response_class(ApiKey.FETCH, 12),
    response_class(ApiKey.METADATA, 12),
    request_class(ApiKey.METADATA, 0),
    response_class(ApiKey.API_VERSIONS, 3),
    request_class(ApiKey.CREATE_TOPICS, 7),
    response_class(ApiKey.OFFSET_FETCH, 8),
    request_class(ApiKey.JOIN_GROUP, 9),
    request_class(ApiKey.LEADER_AND_ISR, 7),
    request_class(ApiKey.UPDATE_METADATA, 7),
]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__name__}v{c.__version__}")
def test_same_result_as_native_reader(cls):
    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(cls))
    def check(message):
        data = encode(message)
        native, size = entity_reader(cls)(data, 0)
        python, end = decoder_for(cls)(data, 0)
        assert python == native == message
        assert end == size == len(data)

    check()


def test_truncations_raise_invalid_request():
    cls = response_class(ApiKey.METADATA, 12)
    message = build_message(
        cls,
        brokers=[{"node_id": 1, "host": "h", "port": 9092, "rack": "r"}],
        cluster_id="c",
        topics=[
            {
                "name": "t",
                "topic_id": uuid.UUID(int=7),
                "partitions": [{"partition_index": 0, "replica_nodes": [1], "isr_nodes": [1]}],
            }
        ],
    )
    data = encode(message)
    assert decoder_for(cls)(data, 0) == (message, len(data))
    for cut in range(len(data)):
        with pytest.raises(InvalidRequestError):
            decoder_for(cls)(data[:cut], 0)
