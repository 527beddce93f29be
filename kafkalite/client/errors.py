"""Errors of kafkalite's Kafka client.

Socket-level failures (refused, reset, closed by the peer, a frame that does not parse) are
converted at the connection boundary into ``KafkaConnectionError``, which is both a
``KafkaError`` (NETWORK_EXCEPTION, retriable, invalid metadata) and a builtin ``ConnectionError``.
A request that gets no answer in time raises ``KafkaTimeoutError`` (REQUEST_TIMED_OUT, also a
builtin ``TimeoutError``). Error codes inside responses are data and are not raised by ``send``.
"""

from __future__ import annotations

from kafkalite.protocol.errors import ErrorCode, KafkaError


class KafkaConnectionError(KafkaError, ConnectionError):
    """The connection to a broker failed or was closed; pending requests fail with it."""

    error_code = ErrorCode.NETWORK_EXCEPTION


class KafkaTimeoutError(KafkaError, TimeoutError):
    """No response within the request timeout."""

    error_code = ErrorCode.REQUEST_TIMED_OUT


class NoBrokersAvailableError(KafkaConnectionError):
    """None of the bootstrap servers (or a requested node) could be reached."""

    error_code = ErrorCode.BROKER_NOT_AVAILABLE
