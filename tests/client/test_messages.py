import datetime
import uuid

import pytest

from kafkalite.client.messages import build_message
from kafkalite.protocol.api import ApiKey, request_class, response_class
from kafkalite.protocol.errors import ErrorCode


def test_nested_dicts_become_dataclasses_of_the_version():
    cls = request_class(ApiKey.CREATE_TOPICS, 7)
    message = build_message(
        cls,
        topics=[
            {
                "name": "t",
                "num_partitions": 3,
                "replication_factor": 2,
                "configs": [{"name": "retention.ms", "value": "1000"}],
            }
        ],
        timeout=datetime.timedelta(seconds=5),
    )
    assert isinstance(message, cls)
    (topic,) = message.topics
    assert type(topic).__name__ == "CreatableTopic"
    assert topic.configs[0].value == "1000"
    assert topic.assignments == ()
    assert message.validate_only is False


def test_fields_missing_in_a_version_are_dropped_and_neutral_filled():
    v0 = build_message(request_class(ApiKey.METADATA, 0), topics=[{"name": "a"}])
    assert [t.name for t in v0.topics] == ["a"]
    v12 = build_message(
        request_class(ApiKey.METADATA, 12), topics=None, allow_auto_topic_creation=False
    )
    assert v12.topics is None and v12.allow_auto_topic_creation is False
    lisr = build_message(
        request_class(ApiKey.LEADER_AND_ISR, 7),
        controller_id=1,
        topic_states=[
            {"topic_name": "t", "topic_id": uuid.UUID(int=5), "partition_states": [{"isr": [1]}]}
        ],
    )
    assert lisr.broker_epoch == -1  # schema default
    assert lisr.topic_states[0].partition_states[0].isr == (1,)
    assert lisr.controller_epoch == 0


def test_int_error_codes_become_enum_members():
    response = build_message(response_class(ApiKey.UPDATE_METADATA, 7), error_code=6)
    assert response.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_wrong_shape_is_rejected():
    with pytest.raises(TypeError):
        build_message(request_class(ApiKey.METADATA, 12), topics=["not-a-mapping"])
