"""The controller's pre-encoded ``topic_states`` (controller/wire.py): the request frame sent
with them is byte for byte the frame of the request built from kio structs (``build_message``,
encoded by kio's own writer), for random partition states at every version the codec has; the
bytes are encoded once for every broker the same states go to."""

import io
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from kafkalite.client.messages import build_message
from kafkalite.controller import wire
from kafkalite.controller.broker_request_batch import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequestData,
    UpdateMetadataPartitionState,
    UpdateMetadataRequestData,
)
from kafkalite.controller.channel_manager import to_message
from kafkalite.protocol.api import CODEC_VERSIONS, ApiKey, request_class
from kafkalite.protocol.encoder import Encoded
from kafkalite.protocol.frames import encode_request
from kafkalite.zk.data import new_topic_id, topic_id_bytes
from kafkalite.zk.types import Broker, EndPoint

BROKERS = (
    Broker(1, (EndPoint("127.0.0.1", 9093, "PLAINTEXT", "PLAINTEXT"),), "r1"),
    Broker(2, (EndPoint("h2", 9094, "PLAINTEXT", "SSL"),), None),
)
TOPICS = ("t", "other", "ü-topic", "x" * 40)
IDS = {t: new_topic_id() for t in TOPICS}

int32 = st.integers(-(2**31), 2**31 - 1)
small = st.integers(-3, 2**31 - 1)
# mostly short arrays; now and then one long enough for a multi-byte compact length
brokers = st.one_of(
    st.lists(small, max_size=5).map(tuple),
    st.lists(small, min_size=126, max_size=130).map(tuple),
)
topic_partition = st.tuples(st.sampled_from(TOPICS), st.integers(0, 2**31 - 1))


@st.composite
def um_states(draw):
    tps = draw(st.lists(topic_partition, max_size=12, unique=True))
    return tuple(
        UpdateMetadataPartitionState(
            t,
            p,
            draw(int32),
            draw(int32),
            draw(int32),
            draw(brokers),
            draw(int32),
            draw(brokers),
            draw(brokers),
        )
        for t, p in tps
    )


@st.composite
def lai_states(draw):
    tps = draw(st.lists(topic_partition, max_size=12, unique=True))
    return tuple(
        LeaderAndIsrPartitionState(
            t,
            p,
            draw(int32),
            draw(int32),
            draw(int32),
            draw(brokers),
            draw(int32),
            draw(brokers),
            draw(brokers),
            draw(brokers),
            draw(st.booleans()),
        )
        for t, p in tps
    )


topic_ids = st.dictionaries(st.sampled_from(TOPICS), st.sampled_from([*IDS.values(), ""]))


def kio_bytes(message) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(message))(buf, message)
    return buf.getvalue()


def kio_built(api_key: ApiKey, version: int, request) -> bytes:
    """The request body built field by field with ``build_message`` and kio's writer (the
    oracle: no code of the controller's message building)."""
    cls = request_class(api_key, version)
    topics: dict[str, list] = {}
    for s in request.partition_states:
        state = {
            "partition_index": s.partition_index,
            "controller_epoch": s.controller_epoch,
            "leader": s.leader,
            "leader_epoch": s.leader_epoch,
            "isr": list(s.isr),
            "replicas": list(s.replicas),
        }
        if api_key == ApiKey.UPDATE_METADATA:
            state |= {"zk_version": s.zk_version, "offline_replicas": list(s.offline_replicas)}
        else:
            state |= {
                "zk_version": s.partition_epoch,
                "adding_replicas": list(s.adding_replicas),
                "removing_replicas": list(s.removing_replicas),
                "is_new": s.is_new,
            }
        topics.setdefault(s.topic_name, []).append(state)
    topic_states = []
    for t, states in topics.items():
        topic_id = request.topic_ids.get(t)
        topic = {"topic_name": t, "partition_states": states}
        if version >= (7 if api_key == ApiKey.UPDATE_METADATA else 5):
            topic["topic_id"] = uuid.UUID(bytes=topic_id_bytes(topic_id)) if topic_id else None
        topic_states.append(topic)
    plain = to_message(request, version, "PLAINTEXT")  # its other fields, built as before
    others = {
        name: getattr(plain, name)
        for name in plain.__dataclass_fields__
        if name not in ("topic_states",)
    }
    return kio_bytes(build_message(cls, **others, topic_states=topic_states))


def frame(api_key, version, message) -> bytes:
    return encode_request(api_key, version, 5, "controller", message)


def body_of(api_key, version, message) -> bytes:
    whole = frame(api_key, version, message)
    header = frame(api_key, version, build_message(request_class(api_key, version)))
    # the header's length is the same for both (same client id); strip size prefix and header
    empty_body = kio_bytes(build_message(request_class(api_key, version)))
    return whole[len(header) - len(empty_body) :]


SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None
)
UM_VERSIONS = range(
    CODEC_VERSIONS[ApiKey.UPDATE_METADATA][0], CODEC_VERSIONS[ApiKey.UPDATE_METADATA][1] + 1
)
LAI_VERSIONS = range(
    CODEC_VERSIONS[ApiKey.LEADER_AND_ISR][0], CODEC_VERSIONS[ApiKey.LEADER_AND_ISR][1] + 1
)


@SETTINGS
@given(um_states(), topic_ids, st.sampled_from(UM_VERSIONS), int32)
def test_update_metadata_bytes_are_kios(states, ids, version, broker_epoch):
    wire._cache.clear()
    request = UpdateMetadataRequestData(1, 0, 3, broker_epoch, states, BROKERS, ids)
    message = to_message(request, version, encoded=True)
    assert isinstance(message.topic_states, Encoded)
    key = ApiKey.UPDATE_METADATA
    assert body_of(key, version, message) == kio_built(key, version, request)
    assert frame(key, version, message) == frame(key, version, to_message(request, version))


@SETTINGS
@given(lai_states(), topic_ids, st.sampled_from(LAI_VERSIONS), int32)
def test_leader_and_isr_bytes_are_kios(states, ids, version, broker_epoch):
    wire._cache.clear()
    request = LeaderAndIsrRequestData(1, 0, 3, broker_epoch, states, ids, BROKERS)
    message = to_message(request, version, "PLAINTEXT", encoded=True)
    assert isinstance(message.topic_states, Encoded)
    key = ApiKey.LEADER_AND_ISR
    assert body_of(key, version, message) == kio_built(key, version, request)
    assert frame(key, version, message) == frame(
        key, version, to_message(request, version, "PLAINTEXT")
    )


def test_the_states_of_one_batch_are_encoded_once_for_every_broker(monkeypatch):
    wire._cache.clear()
    encoded = []
    real = wire.encode_topic_states
    monkeypatch.setattr(wire, "encode_topic_states", lambda *a: encoded.append(a[0]) or real(*a))
    states = (UpdateMetadataPartitionState("t", 0, 3, 1, 5, (1, 2), 9, (1, 2, 3), (3,)),)
    version = CODEC_VERSIONS[ApiKey.UPDATE_METADATA][1]
    ids = {"t": IDS["t"]}
    messages = [
        to_message(
            UpdateMetadataRequestData(b, 0, 3, 70 + b, states, BROKERS, ids), version, encoded=True
        )
        for b in (1, 2, 3)
    ]
    assert encoded == [ApiKey.UPDATE_METADATA]
    assert messages[0].topic_states is messages[2].topic_states
    assert [m.broker_epoch for m in messages] == [71, 72, 73]
    # LeaderAndIsr of other brokers with equal states (different tuples): encoded once too
    lai = LeaderAndIsrPartitionState("t", 0, 3, 1, 5, (1, 2), 9, (1, 2), (), (), True)
    lai_version = CODEC_VERSIONS[ApiKey.LEADER_AND_ISR][1]
    for b in (1, 2):
        to_message(
            LeaderAndIsrRequestData(b, 0, 3, 7, (lai,), ids, BROKERS), lai_version, encoded=True
        )
    other = LeaderAndIsrPartitionState("t", 1, 3, 1, 5, (1, 2), 9, (1, 2), (), (), True)
    to_message(
        LeaderAndIsrRequestData(3, 0, 3, 7, (other,), ids, BROKERS), lai_version, encoded=True
    )
    assert encoded == [ApiKey.UPDATE_METADATA, ApiKey.LEADER_AND_ISR, ApiKey.LEADER_AND_ISR]
