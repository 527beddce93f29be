"""Errors of the HTTP admin API: every failure is answered as JSON
`{"error": CODE, "message": "..."}` (plus `"field"` for a bad request field), never raised into
aiohttp's default handler.

Codes are Kafka's error names where a Kafka error is the cause (`TOPIC_ALREADY_EXISTS`,
`UNKNOWN_TOPIC_OR_PARTITION`, `NON_EMPTY_GROUP`, ...) and HTTP-level names otherwise
(`INVALID_REQUEST`, `NOT_FOUND`, `METHOD_NOT_ALLOWED`, `UNAVAILABLE`, `INTERNAL_ERROR`).
"""

from __future__ import annotations

from kafkalite.protocol.errors import ErrorCode

# Kafka error -> HTTP status; anything else: 503 when retriable, 400 otherwise.
KAFKA_ERROR_STATUS: dict[ErrorCode, int] = {
    ErrorCode.TOPIC_ALREADY_EXISTS: 409,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 404,
    ErrorCode.GROUP_ID_NOT_FOUND: 404,
    ErrorCode.RESOURCE_NOT_FOUND: 404,
    ErrorCode.SECURITY_DISABLED: 409,
    ErrorCode.NON_EMPTY_GROUP: 409,
    ErrorCode.REASSIGNMENT_IN_PROGRESS: 409,
    ErrorCode.ELECTION_NOT_NEEDED: 409,
    # fewer in-sync replicas than the topic's min.insync.replicas: a conflict with the topic's
    # state, which its own config can make permanent (min.insync.replicas above the replication
    # factor), not a fault of the server
    ErrorCode.NOT_ENOUGH_REPLICAS: 409,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: 409,
    # a record the topic's own rules refuse (a keyless record on a compacted topic, one failing
    # the topic's schema validation): a conflict with the topic, not a malformed request
    ErrorCode.INVALID_RECORD: 409,
    ErrorCode.NOT_COORDINATOR: 503,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: 503,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: 503,
    ErrorCode.NOT_CONTROLLER: 503,
    ErrorCode.KAFKA_STORAGE_ERROR: 503,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: 403,
    ErrorCode.GROUP_AUTHORIZATION_FAILED: 403,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: 403,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: 403,
}


def status_for(code: ErrorCode) -> int:
    status = KAFKA_ERROR_STATUS.get(code)
    if status is not None:
        return status
    return 503 if code.retriable else 400


class AdminError(Exception):
    """Answered as `status` with `{"error": code, "message": message[, "field": field]}`."""

    def __init__(self, status: int, code: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    def body(self) -> dict[str, object]:
        body: dict[str, object] = {"error": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return body

    @classmethod
    def invalid(cls, field: str, message: str) -> AdminError:
        return cls(400, "INVALID_REQUEST", f"{field}: {message}", field=field)

    @classmethod
    def not_found(cls, message: str) -> AdminError:
        return cls(404, "NOT_FOUND", message)

    @classmethod
    def kafka(cls, code: ErrorCode, message: str | None = None) -> AdminError:
        return cls(status_for(code), code.name, message or code.message or code.name)
