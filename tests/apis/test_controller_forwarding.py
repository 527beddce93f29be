"""A broker that is not the controller forwards ElectLeaders to the one its metadata names (a
FakeBroker here), relays its answer, and never forwards a forwarded request again."""

import datetime

import pytest

from kafkalite.apis.controller_forwarding import FORWARDED_CLIENT_ID_PREFIX
from kafkalite.broker.metadata_cache import BrokerEndpoint, MetadataBroker, MetadataCache
from kafkalite.client.messages import build_message
from kafkalite.protocol.api import ApiKey, request_class, response_class, supported_versions
from kafkalite.protocol.errors import ErrorCode
from tests.client.fake_broker import FakeBroker


class Inactive:
    is_active = False


def elect_request(version=2):
    return build_message(
        request_class(ApiKey.ELECT_LEADERS, version),
        election_type=1,
        topic_partitions=[{"topic": "t", "partitions": [0]}],
        timeout=datetime.timedelta(seconds=3),
    )


@pytest.fixture
async def controller_broker():
    def answer(header, request):
        assert request.election_type == 1 and request.topic_partitions[0].topic == "t"
        return build_message(
            response_class(ApiKey.ELECT_LEADERS, header.api_version),
            replica_election_results=[
                {"topic": "t", "partition_result": [{"partition_id": 0, "error_code": 84}]}
            ],
        )

    fake = FakeBroker(
        node_id=1,
        versions={int(k): v for k, v in supported_versions([ApiKey.ELECT_LEADERS]).items()},
        handlers={ApiKey.ELECT_LEADERS: answer},
    )
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
def not_controller(services, controller_broker):
    cache = MetadataCache(0)
    cache.controller_id = 1
    cache.set_alive_brokers(
        [
            MetadataBroker(
                1, {"PLAINTEXT": BrokerEndpoint("PLAINTEXT", "127.0.0.1", controller_broker.port)}
            )
        ]
    )
    services.metadata_cache = cache
    services.controller = Inactive()
    return cache


async def test_forwarded_to_the_controller_and_relayed(call, controller_broker, not_controller):
    response = await call(ApiKey.ELECT_LEADERS, 2, elect_request())
    [result] = response.replica_election_results
    assert result.partition_result[0].error_code == ErrorCode.ELECTION_NOT_NEEDED
    [(header, request)] = controller_broker.requests_of(ApiKey.ELECT_LEADERS)
    assert header.api_version == 2
    assert header.client_id == f"{FORWARDED_CLIENT_ID_PREFIX}0"
    assert request == elect_request()


async def test_a_forwarded_request_is_not_forwarded_again(call, controller_broker, not_controller):
    from kafkalite.protocol import frames

    frame = bytearray(
        frames.encode_request(
            ApiKey.ELECT_LEADERS, 2, 7, f"{FORWARDED_CLIENT_ID_PREFIX}5", elect_request()
        )[4:]
    )
    data = bytes(await call.dispatcher.dispatch(frame, call.connection))
    _, response = frames.decode_response(ApiKey.ELECT_LEADERS, 2, data[4:])
    assert response.replica_election_results[0].partition_result[0].error_code == (
        ErrorCode.NOT_CONTROLLER
    )
    assert controller_broker.requests_of(ApiKey.ELECT_LEADERS) == []


async def test_unreachable_controller_is_not_controller(call, controller_broker, not_controller):
    await controller_broker.stop()
    response = await call(ApiKey.ELECT_LEADERS, 2, elect_request())
    assert response.replica_election_results[0].partition_result[0].error_code == (
        ErrorCode.NOT_CONTROLLER
    )
