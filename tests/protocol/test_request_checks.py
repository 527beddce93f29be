"""Nullability and range checks of decoded requests (protocol/request_checks.py)."""

import dataclasses
import datetime
import inspect

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial._introspect import EntityTupleField, classify_field, is_optional

from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.request_checks import InvalidRequestFieldError, check_request, null_field


def nullable_arrays(cls):
    return {
        f.name: is_optional(f)
        for f in dataclasses.fields(cls)
        if isinstance(classify_field(f), EntityTupleField)
    }


@pytest.mark.parametrize(
    "key,version",
    [
        (ApiKey.FETCH, 4),
        (ApiKey.FETCH, 12),
        (ApiKey.METADATA, 0),
        (ApiKey.METADATA, 12),
        (ApiKey.OFFSET_COMMIT, 8),
        (ApiKey.JOIN_GROUP, 9),
        (ApiKey.CREATE_TOPICS, 7),
    ],
)
def test_null_top_level_arrays_follow_the_schema(key, version):
    cls = request_class(key, version)

    @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.from_type(cls), st.data())
    def check(request, data):
        arrays = nullable_arrays(cls)
        if not arrays:
            return
        name = data.draw(st.sampled_from(sorted(arrays)))
        nulled = dataclasses.replace(request, **{name: None})
        found = null_field(nulled)
        if arrays[name]:
            assert found != name
        else:
            assert found == name

    check()


def test_nested_null_is_found_with_its_path():
    cls = request_class(ApiKey.FETCH, 12)
    m = inspect.getmodule(cls)
    request = cls(
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=100,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(m.FetchTopic(topic="a", partitions=()), m.FetchTopic(topic="b", partitions=None)),
        forgotten_topics_data=(),
        rack_id="",
    )
    assert null_field(request) == "topics[1].partitions"
    with pytest.raises(InvalidRequestFieldError, match=r"topics\[1\]\.partitions is null") as info:
        check_request(ApiKey.FETCH, request)
    assert info.value.request is request
    fine = dataclasses.replace(request, topics=request.topics[:1])
    check_request(ApiKey.FETCH, fine)
    for bad in (
        dataclasses.replace(fine, isolation_level=2),
        dataclasses.replace(fine, isolation_level=-1),
        dataclasses.replace(fine, max_bytes=-1),
    ):
        with pytest.raises(InvalidRequestFieldError):
            check_request(ApiKey.FETCH, bad)


@pytest.mark.parametrize(
    "key,version",
    [
        (ApiKey.FETCH, 4),
        (ApiKey.FETCH, 12),
        (ApiKey.OFFSET_COMMIT, 2),
        (ApiKey.OFFSET_COMMIT, 8),
        (ApiKey.JOIN_GROUP, 5),
        (ApiKey.SYNC_GROUP, 5),
        (ApiKey.CREATE_TOPICS, 7),
        (ApiKey.OFFSET_FETCH, 8),
        (ApiKey.LEADER_AND_ISR, 7),
    ],
)
def test_the_validator_notes_exactly_the_forbidden_nulls(key, version):
    """Oracle: null_field's walk of the message sent finds a forbidden null exactly when the
    frame's structural walk (validator.py) notes one."""
    from kafkalite.protocol.frames import encode_request, parse_request_header
    from kafkalite.protocol.validator import validator_for
    from tests.apis.support import hostile

    cls = request_class(key, version)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(hostile(cls))
    def check(request):
        frame = encode_request(key, version, 1, None, request)[4:]
        _, offset = parse_request_header(frame)
        nulls = []
        assert validator_for(cls)(frame, offset, nulls) == len(frame)
        assert bool(nulls) == (null_field(request) is not None)

    check()
