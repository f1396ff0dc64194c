"""SaslHandshake (key 17, v0-1) and SaslAuthenticate (key 36, v0-2) once a connection needs
no authentication: on a PLAINTEXT or SSL listener, or after SASL completed.

Before authentication the connection answers these itself (`net/sasl_authenticator.py`); a
request that reaches the handler table is out of place, and Kafka answers it with
ILLEGAL_SASL_STATE (KafkaApis.handleSaslHandshakeRequest / handleSaslAuthenticateRequest).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey


async def handle_sasl_handshake(context: RequestContext, request: Any) -> Any:
    cls = responses.response_class(ApiKey.SASL_HANDSHAKE, context.header.api_version)
    return responses.build(cls, error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=())


async def handle_sasl_authenticate(context: RequestContext, request: Any) -> Any:
    cls = responses.response_class(ApiKey.SASL_AUTHENTICATE, context.header.api_version)
    return responses.build(
        cls,
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
    )


def handlers() -> HandlerTable:
    return {
        ApiKey.SASL_HANDSHAKE: partial(handle_sasl_handshake),
        ApiKey.SASL_AUTHENTICATE: partial(handle_sasl_authenticate),
    }
