"""Length pre-checks that keep kio's native reader from aborting the process."""

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import Records

from kafkalite.protocol.api import ADVERTISED_VERSIONS, ApiKey, request_class, response_class
from kafkalite.protocol.encoder import encode
from kafkalite.protocol.errors import InvalidRequestError, KafkaError
from kafkalite.protocol.frames import decode_request, parse_request_header
from kafkalite.protocol.validator import reference_validator_for, validator_for

st.register_type_strategy(Records, st.binary(max_size=64))

# MetadataRequest v12 body: compact array of topics declaring ~2^32 entries, in 6 bytes.
HUGE_ARRAY = b"\xff\xff\xff\xff\x0f" + b"\x00"

ROOT = Path(__file__).resolve().parents[2]


def test_huge_declared_array_is_rejected_before_the_native_reader():
    with pytest.raises(InvalidRequestError):
        validator_for(request_class(ApiKey.METADATA, 12))(HUGE_ARRAY, 0)
    # Through the public path, in a child process: without the check this aborts the
    # interpreter (a failed native allocation), which must never happen to a broker.
    code = (
        "from kafkalite.protocol.frames import RequestHeader, decode_request\n"
        "from kafkalite.protocol.errors import InvalidRequestError\n"
        "try:\n"
        f"    decode_request(RequestHeader(3, 12, 1, None), {HUGE_ARRAY!r}, 0)\n"
        "except InvalidRequestError:\n"
        "    print('rejected')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "rejected"


PAIRS = [
    (key, version)
    for key, (low, high) in sorted(ADVERTISED_VERSIONS.items())
    for version in range(low, high + 1)
]


@pytest.mark.parametrize("key,version", PAIRS, ids=lambda x: str(int(x)))
def test_every_valid_message_passes(key, version):
    @settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        st.one_of(
            st.from_type(request_class(key, version)), st.from_type(response_class(key, version))
        )
    )
    def check(message):
        data = encode(message)
        assert validator_for(type(message))(data, 0) == len(data)

    check()


CAPTURED = [p.read_bytes()[4:] for p in sorted((Path(__file__).parent / "frames").glob("*.bin"))]


@settings(max_examples=300, deadline=None, database=None)
@given(
    st.sampled_from(CAPTURED),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_mutated_client_frames_fail_only_with_kafka_errors(frame, flips):
    mutated = bytearray(frame)
    for position, value in flips:
        mutated[position % len(mutated)] = value
    try:
        header, offset = parse_request_header(mutated)
        decode_request(header, mutated, offset)
    except KafkaError:
        pass


def _outcome(walk, data) -> tuple:
    """What a walk says of ``data``: its end and the nulls it noted, or its refusal."""
    nulls: list[str] = []
    try:
        return ("end", walk(data, 0, nulls), tuple(nulls))
    except InvalidRequestError as e:
        return ("refused", str(e))


# the controller's requests, whose lengths the walk reads inline, and a client's
CONTROLLER_PAIRS = [
    (ApiKey.LEADER_AND_ISR, 7),
    (ApiKey.UPDATE_METADATA, 7),
    (ApiKey.STOP_REPLICA, 3),
    (ApiKey.METADATA, 12),
    (ApiKey.PRODUCE, 9),
]


@pytest.mark.parametrize("key,version", CONTROLLER_PAIRS, ids=lambda x: str(int(x)))
def test_the_inline_lengths_walk_as_the_reference_walk_on_damaged_bodies(key, version):
    """Lengths of one varint byte are read inline (validator_for); every other length, and
    every refusal, goes as the reference walk that reads each by a call: the two agree on the
    end, the nulls noted and the refusal's message, whatever bytes are changed or cut."""
    cls = request_class(key, version)
    fast, reference = validator_for(cls), reference_validator_for(cls)

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        st.from_type(cls),
        st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
        st.one_of(st.just(0), st.integers(1, 10**6)),  # bytes cut from the end
    )
    def check(message, flips, cut):
        data = bytearray(encode(message))
        for position, value in flips:
            data[position % len(data)] = value
        body = bytes(data[: len(data) - cut % (len(data) + 1)])
        assert _outcome(fast, body) == _outcome(reference, body)
        assert _outcome(fast, memoryview(body)) == _outcome(reference, body)

    check()
