"""The admin app in-process over a fake broker: every failure is a JSON answer with the right
status, and a handler that blows up is a 500 the app survives (no broker needed)."""

from __future__ import annotations

from kafkalite.admin.errors import AdminError, status_for
from kafkalite.coord.errors import ConnectionLoss
from kafkalite.protocol.errors import ErrorCode
from tests.admin.support import client_for, fake_server


class ExplodingStore:
    """A coordination session whose reads fail as configured."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def get_children(self, path):
        raise self.error

    async def get_data(self, path):
        raise self.error

    async def exists(self, path):
        raise self.error


async def test_missing_roles_are_503_with_a_message() -> None:
    client = await client_for(fake_server())
    try:
        for path in ("/groups", "/groups/g"):
            response = await client.get(path)
            assert response.status == 503
            body = await response.json()
            assert body["error"] == "UNAVAILABLE" and "group coordinator" in body["message"]
        response = await client.get("/topics")
        assert response.status == 503 and (await response.json())["error"] == "UNAVAILABLE"
        ready = await client.get("/ready")
        assert ready.status == 503
        assert (await ready.json())["checks"]["coordination_session"] is False
        assert (await client.get("/health")).status == 200
    finally:
        await client.close()


async def test_store_failures_and_bugs_are_answered_not_raised() -> None:
    client = await client_for(fake_server(ExplodingStore(ConnectionLoss("gone"))))
    try:
        response = await client.get("/topics")
        assert response.status == 503
        assert (await response.json())["error"] == "COORDINATION_ERROR"
    finally:
        await client.close()

    client = await client_for(fake_server(ExplodingStore(ZeroDivisionError("bug"))))
    try:
        response = await client.get("/cluster")
        assert response.status == 500
        body = await response.json()
        assert body == {"error": "INTERNAL_ERROR", "message": "ZeroDivisionError: bug"}
        assert (await client.get("/health")).status == 200  # the app is still serving
    finally:
        await client.close()


def test_status_of_kafka_errors() -> None:
    assert status_for(ErrorCode.TOPIC_ALREADY_EXISTS) == 409
    assert status_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) == 404
    assert status_for(ErrorCode.INVALID_PARTITIONS) == 400
    assert status_for(ErrorCode.NOT_CONTROLLER) == 503
    assert status_for(ErrorCode.REQUEST_TIMED_OUT) == 503  # retriable
    error = AdminError.invalid("partitions", "must be >= 1")
    assert error.body() == {
        "error": "INVALID_REQUEST",
        "message": "partitions: must be >= 1",
        "field": "partitions",
    }
