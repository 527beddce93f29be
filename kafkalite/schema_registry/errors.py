"""Confluent Schema Registry's error codes: each error is `{"error_code": N, "message": ...}`
with the HTTP status its code starts with (40401 -> 404, 42201 -> 422, 50001 -> 500; 409 is
its own code). Pure: no I/O, no kafkalite import."""

from __future__ import annotations

SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
VERSION_SOFT_DELETED = 40406
VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_LEVEL_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
STORE_ERROR = 50001
OPERATION_TIMEOUT = 50002
FORWARDING_ERROR = 50003
UNAUTHORIZED = 40101
FORBIDDEN = 40301
NOT_FOUND = 404
METHOD_NOT_ALLOWED = 405
UNSUPPORTED_MEDIA_TYPE = 415
BAD_REQUEST = 400
REQUEST_TOO_LARGE = 413
INTERNAL_ERROR = 50001


class RegistryError(Exception):
    """An answer of the registry's API that is an error (Confluent's RestException)."""

    def __init__(self, error_code: int, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.status = status if status is not None else status_of(error_code)

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def status_of(error_code: int) -> int:
    """The HTTP status of a Confluent error code: its first three digits (409 is itself)."""
    return error_code if error_code < 1000 else error_code // 100


class InvalidSchema(RegistryError):
    """42201: the schema text is not a schema of its type (or is too big, or names a reference
    that does not exist)."""

    def __init__(self, message: str) -> None:
        super().__init__(INVALID_SCHEMA, f"Invalid schema: {message}")
