"""SaslHandshake (17, v0-1) and SaslAuthenticate (36, v0-2) outside a SASL exchange.

On a SASL listener these requests never get here: the connection's authenticator
(security/sasl.py) takes them first, before authentication and for re-authentication. What
reaches these handlers came on a listener without SASL (or a SaslAuthenticate without a
handshake), and Kafka answers it ILLEGAL_SASL_STATE (KafkaApis.handleSaslHandshakeRequest /
handleSaslAuthenticateRequest).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


@handles(ApiKey.SASL_HANDSHAKE)
def handle_sasl_handshake(ctx: RequestContext, request: Any) -> Any:
    return ctx.response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


@handles(ApiKey.SASL_AUTHENTICATE)
def handle_sasl_authenticate(ctx: RequestContext, request: Any) -> Any:
    return ctx.response(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
    )
