import pickle

import pytest

from kafkalite.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    KafkaError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnsupportedVersionError,
    error_class_for,
    raise_for_error_code,
)


def test_codes_are_contiguous_and_match_kafka():
    assert [int(c) for c in ErrorCode] == list(range(-1, 134))
    assert ErrorCode.NONE == 0
    assert ErrorCode.OFFSET_OUT_OF_RANGE == 1
    assert ErrorCode.CORRUPT_MESSAGE == 2
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6
    assert ErrorCode.MESSAGE_TOO_LARGE == 10
    assert ErrorCode.STALE_CONTROLLER_EPOCH == 11
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.INVALID_REQUEST == 42
    assert ErrorCode.INVALID_RECORD == 87


def test_flags_follow_kafka():
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.invalid_metadata
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.invalid_metadata
    assert ErrorCode.NOT_ENOUGH_REPLICAS.retriable
    assert not ErrorCode.NOT_ENOUGH_REPLICAS.invalid_metadata
    assert not ErrorCode.OFFSET_OUT_OF_RANGE.retriable
    assert not ErrorCode.NONE.retriable
    assert ErrorCode.REQUEST_TIMED_OUT.message == "The request timed out."


def test_unknown_code_maps_to_unknown_server_error():
    assert ErrorCode.of(9999) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.of(3) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(ValueError):
        ErrorCode(9999)


def test_named_exceptions_carry_their_codes():
    assert CorruptRecordError.error_code is ErrorCode.CORRUPT_MESSAGE
    assert InvalidRecordError.error_code is ErrorCode.INVALID_RECORD
    assert OffsetOutOfRangeError("x").error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert UnsupportedVersionError().retriable is False
    assert NotLeaderOrFollowerError().invalid_metadata
    assert "NOT_LEADER_OR_FOLLOWER" in str(NotLeaderOrFollowerError("moved"))


def test_every_code_has_a_class_and_one_only():
    for code in ErrorCode:
        cls = error_class_for(code)
        assert issubclass(cls, KafkaError)
        assert cls.error_code is code
        assert error_class_for(int(code)) is cls
    assert error_class_for(ErrorCode.THROTTLING_QUOTA_EXCEEDED).__name__ == (
        "ThrottlingQuotaExceededError"
    )
    assert ErrorCode.CORRUPT_MESSAGE.exception is CorruptRecordError


def test_generic_error_with_instance_code():
    err = KafkaError("boom", error_code=ErrorCode.POLICY_VIOLATION)
    assert err.error_code is ErrorCode.POLICY_VIOLATION
    assert KafkaError.error_code is ErrorCode.UNKNOWN_SERVER_ERROR


def test_raise_for_error_code():
    raise_for_error_code(0)
    with pytest.raises(OffsetOutOfRangeError):
        raise_for_error_code(1, "offset 7")


def test_pickle_round_trip_of_enum():
    assert pickle.loads(pickle.dumps(ErrorCode.INVALID_RECORD)) is ErrorCode.INVALID_RECORD


def test_record_validation_error_reads_like_kafkas():
    from kafkalite.protocol.errors import RecordError, RecordValidationError

    errors = [RecordError(i, f"bad {i}") for i in range(5)] + [RecordError(7, None)]
    e = RecordValidationError(errors)
    assert e.error_code is ErrorCode.INVALID_RECORD
    assert e.record_errors == tuple(errors)
    assert e.args[0] == (
        "One or more records have been rejected due to 6 record errors in total, and only "
        "showing the first three errors at most: [RecordError(batchIndex=0, message='bad 0'), "
        "RecordError(batchIndex=1, message='bad 1'), RecordError(batchIndex=2, message='bad 2')]"
    )
    assert str(RecordError(7, None)) == "RecordError(batchIndex=7, message=null)"
