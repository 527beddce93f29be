"""Byte-exact codec checks against request frames captured from real clients.

The frames in tests/protocol/frames/ were recorded by capture_frames.py (run by hand) from
confluent-kafka 2.16 (librdkafka), kafka-python 3.0, aiokafka 0.14 and kcat: producers,
partition-assigned consumers, and group consumers (FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, OffsetFetch, ListOffsets, OffsetCommit, LeaveGroup). kio's encoding is
canonical for all of them: decoding and re-encoding gives the same bytes.
"""

from pathlib import Path

import pytest

from kafkalite.protocol.api import SUPPORTED_VERSIONS, ApiKey
from kafkalite.protocol.frames import (
    api_versions_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
)

FRAMES = Path(__file__).resolve().parent / "frames"
CAPTURED = sorted(FRAMES.glob("*.bin"))
CLIENTS = ("librdkafka", "kafka-python", "aiokafka", "kcat")


def test_frames_from_every_client_are_present():
    assert CAPTURED, "no frames: run .venv/bin/python -m tests.protocol.capture_frames"
    for client in CLIENTS:
        kinds = {p.name.split(f"{client}-", 1)[1] for p in CAPTURED if p.name.startswith(client)}
        assert any(k.startswith("produce-") for k in kinds), client
        assert any(k.startswith("api_versions-") for k in kinds), client


def test_group_frames_from_every_group_client():
    for client in ("librdkafka", "kafka-python", "aiokafka"):
        names = {p.name for p in CAPTURED if p.name.startswith(client + "-")}
        for api in (
            "find_coordinator",
            "join_group",
            "sync_group",
            "offset_fetch",
            "offset_commit",
        ):
            assert any(n.startswith(f"{client}-{api}-") for n in names), (client, api)


@pytest.mark.parametrize(
    "path", [p for p in CAPTURED if "-join_group-" in p.name], ids=lambda p: p.stem
)
def test_join_group_frames_carry_consumer_protocol(path):
    _raw, _header, request = _decode(path)
    assert request.group_id == "capture-group"
    assert request.protocol_type == "consumer"
    assert request.protocols and all(p.metadata for p in request.protocols)


def _decode(path):
    raw = path.read_bytes()
    assert int.from_bytes(raw[:4], "big", signed=True) == len(raw) - 4
    payload = raw[4:]
    header, offset = parse_request_header(payload)
    return raw, header, decode_request(header, payload, offset, strict=True)


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: p.stem)
def test_decode_and_reencode_byte_exact(path):
    raw, header, request = _decode(path)
    client = path.stem.rsplit("-", 2)[0]
    assert header.client_id == client
    assert ApiKey(header.api_key).name.lower() in path.stem
    again = encode_request(
        header.api_key, header.api_version, header.correlation_id, header.client_id, request
    )
    assert again == raw


@pytest.mark.parametrize(
    "path", [p for p in CAPTURED if "-produce-" in p.name], ids=lambda p: p.stem
)
def test_produce_frames_carry_one_v2_batch_untouched(path):
    _raw, _header, request = _decode(path)
    (topic,) = request.topic_data
    assert topic.name == "capture"
    (partition,) = topic.partition_data
    records = partition.records
    assert records[16] == 2  # RecordBatch magic
    assert int.from_bytes(records[8:12], "big") == len(records) - 12  # batchLength


@pytest.mark.parametrize(
    "path", [p for p in CAPTURED if "-api_versions-" in p.name], ids=lambda p: p.stem
)
def test_api_versions_requests_get_an_answer_at_their_version(path):
    _raw, header, _request = _decode(path)
    response = api_versions_response(header.api_version, SUPPORTED_VERSIONS)
    frame = encode_response(header, response)
    correlation_id, decoded = decode_response(header.api_key, header.api_version, frame[4:])
    assert correlation_id == header.correlation_id
    assert {k.api_key for k in decoded.api_keys} == set(SUPPORTED_VERSIONS)
