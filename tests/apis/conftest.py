"""Fakes of the roles the handlers call, and a helper that runs one request through the
dispatcher the way the network layer does (frame in, response frame out)."""

import inspect
import struct
from dataclasses import dataclass, field

import pytest

from kafkalite.apis import load_handlers
from kafkalite.apis.base import BrokerServices
from kafkalite.apis.dispatcher import ApiDispatcher
from kafkalite.broker.types import FetchPartitionData, ProduceResult
from kafkalite.config import BrokerConfig
from kafkalite.network.connection import NO_RESPONSE, ConnectionInfo
from kafkalite.protocol import frames
from kafkalite.protocol.errors import ErrorCode

load_handlers()


@dataclass
class FakeReplicaManager:
    appended: dict = field(default_factory=dict)
    logs: dict = field(default_factory=dict)  # tp -> bytes
    fetches: list = field(default_factory=list)

    async def append_records(self, timeout_ms, required_acks, entries):
        out = {}
        for tp, records in entries.items():
            if tp.topic == "unknown":
                out[tp] = ProduceResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            assert isinstance(records, memoryview) and not records.readonly
            self.appended[tp] = bytes(records)
            out[tp] = ProduceResult(ErrorCode.NONE, base_offset=42, log_start_offset=0)
        return out

    def fetch_messages_now_or_later(self, params, fetch_infos):
        return self.fetch_messages(params, fetch_infos)

    async def fetch_messages(self, params, fetch_infos):
        self.fetches.append((params, dict(fetch_infos)))
        return {
            tp: FetchPartitionData(
                high_watermark=10,
                last_stable_offset=10,
                log_start_offset=0,
                records=self.logs.get(tp, b""),
            )
            if tp.topic != "unknown"
            else FetchPartitionData(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            for tp in fetch_infos
        }


@pytest.fixture
def services():
    config = BrokerConfig.load(environ={})
    return BrokerServices(
        config=config, broker_id=0, replica_manager=FakeReplicaManager(), cluster_id="test-cluster"
    )


@pytest.fixture
def call(services):
    dispatcher = ApiDispatcher(services)
    dispatcher.ready.set()
    conn = ConnectionInfo("127.0.0.1", 5555, "PLAINTEXT")

    async def run(api_key, version, request, *, raw=False):
        frame = bytearray(frames.encode_request(api_key, version, 99, "test", request)[4:])
        result = dispatcher.dispatch(frame, conn)
        if inspect.isawaitable(result):
            result = await result
        if result is NO_RESPONSE:
            return NO_RESPONSE
        data = b"".join(bytes(b) for b in result) if isinstance(result, list) else bytes(result)
        (size,) = struct.unpack_from(">i", data)
        assert size == len(data) - 4
        if raw:
            return data
        correlation_id, response = frames.decode_response(api_key, version, data[4:])
        assert correlation_id == 99
        return response

    run.dispatcher = dispatcher
    run.connection = conn
    return run
