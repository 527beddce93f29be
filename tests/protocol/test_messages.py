"""Byte layouts of the project-defined inter-broker messages, assembled by hand from Kafka 3.x's
JSON schemas, so a transcription slip in generate.py (a field out of order, a wrong type or
version range) shows up here rather than as a confused broker."""

import struct
import uuid

from kafkalite.client.messages import build_message
from kafkalite.protocol.api import ApiKey, request_class, response_class
from kafkalite.protocol.frames import RequestHeader, decode_request, encode_request, encode_response


def _body(api_key, version, message):
    frame = encode_request(api_key, version, 1, None, message)
    return frame[4 + 10 + 1 :]  # size, fixed header with null client id, empty tagged fields


def cstr(s):
    return bytes([len(s) + 1]) + s.encode()


def carr(n):
    return bytes([n + 1])


def i32s(*xs):
    return b"".join(struct.pack(">i", x) for x in xs)


TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def test_leader_and_isr_v7_layout():
    message = build_message(
        request_class(ApiKey.LEADER_AND_ISR, 7),
        controller_id=1,
        is_kraft_controller=False,
        controller_epoch=5,
        broker_epoch=77,
        type=0,
        topic_states=[
            {
                "topic_name": "t",
                "topic_id": TOPIC_ID,
                "partition_states": [
                    {
                        "partition_index": 0,
                        "controller_epoch": 5,
                        "leader": 1,
                        "leader_epoch": 3,
                        "isr": [1, 2],
                        "zk_version": 9,
                        "replicas": [1, 2],
                        "is_new": True,
                        "leader_recovery_state": 0,
                    }
                ],
            }
        ],
        live_leaders=[{"broker_id": 1, "host_name": "h", "port": 9092}],
    )
    expected = (
        i32s(1)
        + b"\x00"  # isKRaftController (v7+), right after ControllerId
        + i32s(5)
        + struct.pack(">q", 77)
        + b"\x00"  # Type (v5+)
        + carr(1)
        + cstr("t")
        + TOPIC_ID.bytes
        + carr(1)
        + i32s(0, 5, 1, 3)
        + carr(2)
        + i32s(1, 2)
        + i32s(9)
        + carr(2)
        + i32s(1, 2)
        + carr(0)  # adding replicas
        + carr(0)  # removing replicas
        + b"\x01"  # IsNew
        + b"\x00"  # LeaderRecoveryState (v6+)
        + b"\x00"  # partition tagged fields
        + b"\x00"  # topic tagged fields
        + carr(1)
        + i32s(1)
        + cstr("h")
        + i32s(9092)
        + b"\x00"  # live leader tagged fields
        + b"\x00"  # request tagged fields
    )
    assert _body(ApiKey.LEADER_AND_ISR, 7, message) == expected


def test_leader_and_isr_v4_has_neither_type_nor_topic_id():
    fields = request_class(ApiKey.LEADER_AND_ISR, 4).__dataclass_fields__
    assert "type" not in fields and "is_kraft_controller" not in fields
    topic = request_class(ApiKey.LEADER_AND_ISR, 4).__dataclass_fields__["topic_states"]
    assert "topic_id" not in topic.type.__args__[0].__dataclass_fields__


def test_leader_and_isr_response_v5_is_by_topic_id():
    response = build_message(
        response_class(ApiKey.LEADER_AND_ISR, 5),
        error_code=0,
        topics=[
            {"topic_id": TOPIC_ID, "partition_errors": [{"partition_index": 2, "error_code": 6}]}
        ],
    )
    frame = encode_response(RequestHeader(ApiKey.LEADER_AND_ISR, 5, 1, None), response)
    body = frame[4 + 4 + 1 :]
    assert body == (
        b"\x00\x00" + carr(1) + TOPIC_ID.bytes + carr(1) + i32s(2) + b"\x00\x06" + b"\x00\x00\x00"
    )


def test_stop_replica_v3_layout():
    message = build_message(
        request_class(ApiKey.STOP_REPLICA, 3),
        controller_id=1,
        controller_epoch=2,
        broker_epoch=3,
        topic_states=[
            {
                "topic_name": "t",
                "partition_states": [
                    {"partition_index": 4, "leader_epoch": 5, "delete_partition": True}
                ],
            }
        ],
    )
    expected = (
        i32s(1, 2)
        + struct.pack(">q", 3)
        + carr(1)
        + cstr("t")
        + carr(1)
        + i32s(4, 5)
        + b"\x01\x00"  # delete, partition tags
        + b"\x00\x00"  # topic tags, request tags
    )
    assert _body(ApiKey.STOP_REPLICA, 3, message) == expected


def test_update_metadata_v7_layout():
    message = build_message(
        request_class(ApiKey.UPDATE_METADATA, 7),
        controller_id=1,
        controller_epoch=2,
        broker_epoch=3,
        topic_states=[
            {
                "topic_name": "t",
                "topic_id": TOPIC_ID,
                "partition_states": [
                    {
                        "partition_index": 0,
                        "controller_epoch": 2,
                        "leader": 1,
                        "leader_epoch": 4,
                        "isr": [1],
                        "zk_version": 6,
                        "replicas": [1],
                        "offline_replicas": [],
                    }
                ],
            }
        ],
        live_brokers=[
            {
                "id": 1,
                "endpoints": [
                    {"port": 9092, "host": "h", "listener": "PLAINTEXT", "security_protocol": 0}
                ],
                "rack": None,
            }
        ],
    )
    expected = (
        i32s(1, 2)
        + struct.pack(">q", 3)
        + carr(1)
        + cstr("t")
        + TOPIC_ID.bytes
        + carr(1)
        + i32s(0, 2, 1, 4)
        + carr(1)
        + i32s(1)
        + i32s(6)
        + carr(1)
        + i32s(1)
        + carr(0)
        + b"\x00"  # partition tags
        + b"\x00"  # topic tags
        + carr(1)
        + i32s(1)
        + carr(1)
        + i32s(9092)
        + cstr("h")
        + cstr("PLAINTEXT")
        + b"\x00\x00"  # security protocol int16
        + b"\x00"  # endpoint tags
        + b"\x00"  # rack: null compact string
        + b"\x00"  # broker tags
        + b"\x00"  # request tags
    )
    assert _body(ApiKey.UPDATE_METADATA, 7, message) == expected


def test_controlled_shutdown_v3_round_trip():
    message = build_message(
        request_class(ApiKey.CONTROLLED_SHUTDOWN, 3), broker_id=3, broker_epoch=12
    )
    frame = encode_request(ApiKey.CONTROLLED_SHUTDOWN, 3, 8, "broker-3", message)
    assert frame.endswith(i32s(3) + struct.pack(">q", 12) + b"\x00")
    from kafkalite.protocol.frames import parse_request_header

    header, offset = parse_request_header(frame[4:])
    assert decode_request(header, frame[4:], offset) == message
