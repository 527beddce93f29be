"""A broker subprocess hit with failing requests.

Requests with nulls where the schema has none, out-of-range enums and negative sizes, pipelined
on one connection for every advertised API, are each answered with that API's response, in
order, on the same connection; a flood of them is logged a few lines at a time, and everything
the process writes (stdout and stderr, which the harness sends to one file) is JSON lines.
"""

import dataclasses
import datetime
import json
import socket
import struct

import pytest
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
)

from kafkalite.protocol import frames
from kafkalite.protocol.api import ADVERTISED_VERSIONS, ApiKey, request_class
from kafkalite.protocol.error_response import error_codes_in
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.request_checks import null_field
from kafkalite.testing import Broker


@pytest.fixture
def broker(tmp_path):
    """A started subprocess broker on a fresh data dir."""
    with Broker(subprocess=True, data_dir=tmp_path / "broker") as broker:
        yield broker


_VALUES = {
    "string": "hostile",
    "bool": False,
    "bytes": b"\x00",
    "records": None,
    "uuid": None,
    "datetime_i64": None,
    "timedelta_i32": datetime.timedelta(milliseconds=-1),
    "timedelta_i64": datetime.timedelta(milliseconds=-1),
    "float64": 0.0,
    "error_code": ErrorCode.NONE,
}


def all_null(cls):
    """A message whose arrays are all null (allowed or not), numbers -1, strings 'hostile'."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        if get_field_tag(f) is not None:
            continue
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField | PrimitiveTupleField):
            kwargs[f.name] = None
        elif isinstance(kind, EntityField):
            kwargs[f.name] = all_null(kind.type_)
        else:
            kwargs[f.name] = _VALUES.get(f.metadata.get("kafka_type"), -1)
    return cls(**kwargs)


def hostile_requests():
    out = []
    for key, (low, high) in ADVERTISED_VERSIONS.items():
        for version in sorted({low, high}):
            request = all_null(request_class(key, version))
            if key == ApiKey.PRODUCE:
                request = dataclasses.replace(request, acks=-1)  # acks=0 has no answer
            out.append((key, version, request))
    fetch = request_class(ApiKey.FETCH, 12)
    for _ in range(50):  # a flood of one kind of failure
        out.append(
            (
                ApiKey.FETCH,
                12,
                dataclasses.replace(
                    all_null(fetch), topics=(), forgotten_topics_data=(), isolation_level=9
                ),
            )
        )
    return out


def read_frame(s):
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def test_hostile_requests_are_answered_and_logged_as_json(broker):
    requests = hostile_requests()
    s = socket.create_connection((broker.host, broker.port))
    s.settimeout(60)
    payload = b"".join(
        frames.encode_request(key, version, i, "hostile", request)
        for i, (key, version, request) in enumerate(requests)
    )
    s.sendall(payload)  # pipelined: every answer must come back, in order
    refused = 0
    for i, (key, version, request) in enumerate(requests):
        correlation_id, response = frames.decode_response(key, version, read_frame(s))
        assert correlation_id == i
        if null_field(request) is not None or key == ApiKey.FETCH and version == 12:
            assert set(error_codes_in(response)) <= {ErrorCode.INVALID_REQUEST}, (key, version)
            refused += 1
    s.close()
    assert refused > 50

    broker.stop()
    lines = [
        line
        for line in broker.log_text().splitlines()
        if line.strip() and not line.startswith("--- start ")  # the harness's own marker
    ]
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"a log line that is not JSON: {line!r}") from None
    assert not [r for r in records if "never retrieved" in r.get("event", "")]
    fetch_refusals = [
        r for r in records if r.get("event") == "request refused" and r.get("api_key") == "FETCH"
    ]
    # 51 refused Fetch requests (one all-null v12, fifty with isolation_level 9), one line for
    # each kind of failure within the minute
    assert len(fetch_refusals) == 1


def send_hostile(s, key, version):
    from hypothesis import HealthCheck, given, settings

    from tests.apis.support import hostile

    @settings(
        max_examples=4,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(hostile(request_class(key, version)))
    def check(request):
        if key == ApiKey.PRODUCE and request.acks == 0:
            return  # no answer to wait for
        s.sendall(frames.encode_request(key, version, 5, "hostile", request))
        correlation_id, _ = frames.decode_response(key, version, read_frame(s))
        assert correlation_id == 5

    check()


def test_generated_hostile_requests_against_a_real_broker(broker):
    """Hypothesis-generated hostile requests (the strategy in tests/apis/support.py)
    for every advertised API and version, on one connection of a real broker whose handlers
    have real roles behind them: each is answered with its API's response, and nothing the
    handlers do with what passes the checks makes them fail (no error line in the log)."""
    from tests.apis.support import ADVERTISED

    s = socket.create_connection((broker.host, broker.port))
    s.settimeout(60)
    try:
        for key, version in ADVERTISED:
            send_hostile(s, key, version)
    finally:
        s.close()
    broker.stop()
    records = [
        json.loads(line)
        for line in broker.log_text().splitlines()
        if line.strip() and not line.startswith("--- start ")
    ]
    assert [r for r in records if r.get("level") == "error"] == []
