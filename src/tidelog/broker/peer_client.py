"""A broker's own client connection to another broker (replica fetchers): framing, and the
inter-broker listener's TLS and SASL (`security.inter.broker.protocol`,
`sasl.mechanism.inter.broker.protocol`).

Frames (client side): int32 size, then the request header and body, both encoded by kio from
the request schema's own header schema; the answer is int32 size, the response header of the
response schema, the body. No header bytes are written by hand.

SASL, as Kafka's clients do it: SaslHandshake v1 names the mechanism, then SaslAuthenticate v2
carries each token (`security/sasl_client.py`) until the exchange completes. A refusal is a
PeerError with the broker's message; the caller reconnects after its back-off.
"""

from __future__ import annotations

import asyncio
import io
import ssl
import struct
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader, entity_writer

from tidelog.errors import ErrorCode, TidelogError
from tidelog.protocol import responses
from tidelog.protocol.codec import request_schema, response_schema
from tidelog.security.sasl import SaslAuthenticationError
from tidelog.security.sasl_client import SaslClient

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
CONNECT_TIMEOUT_S = 10.0  # TCP, TLS handshake and SASL together
SASL_HANDSHAKE_KEY, SASL_HANDSHAKE_VERSION = 17, 1
SASL_AUTHENTICATE_KEY, SASL_AUTHENTICATE_VERSION = 36, 2
MAX_SASL_ROUNDS = 4  # SCRAM takes two; a server asking for more is refused
_SIZE = struct.Struct(">i")


class PeerError(TidelogError):
    """The other broker answered with an error or a malformed frame, or refused us."""


@dataclass(frozen=True, slots=True)
class PeerSecurity:
    """How this broker connects to the others: PLAINTEXT unless the inter-broker listener
    says otherwise (built from the broker's settings by net/inter_broker.py)."""

    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""


def encode_request(api_key: int, version: int, correlation_id: int, body: Any,
                   client_id: str) -> bytes:
    """One framed request: size, the schema's own request header (kio), the body (kio)."""
    schema = request_schema(api_key, version)
    header = schema.__header_schema__(
        request_api_key=api_key, request_api_version=version,
        correlation_id=correlation_id, client_id=client_id,
    )
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")  # size, filled in below
    entity_writer(type(header))(buffer, header)
    entity_writer(schema)(buffer, body)
    frame = buffer.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - 4)
    del frame
    return buffer.getvalue()


class PeerConnection:
    """One connection, one request in flight at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 client_id: str) -> None:
        self.reader = reader
        self.writer = writer
        self._client_id = client_id
        self._correlation_id = 0

    async def call(self, api_key: int, version: int, body: Any) -> Any:
        self._correlation_id += 1
        self.writer.write(
            encode_request(api_key, version, self._correlation_id, body, self._client_id))
        await self.writer.drain()
        (size,) = _SIZE.unpack(await self.reader.readexactly(4))
        if not 5 <= size <= MAX_RESPONSE_BYTES:
            raise PeerError(f"response of {size} bytes")
        frame = await self.reader.readexactly(size)
        schema = response_schema(api_key, version)
        try:
            header, position = entity_reader(schema.__header_schema__)(frame, 0)
            if header.correlation_id != self._correlation_id:
                raise PeerError(
                    f"correlation id {header.correlation_id} != {self._correlation_id}")
            response, _ = entity_reader(schema)(frame, position)
        except PeerError:
            raise
        except Exception as error:  # kio raises assorted errors on malformed input
            raise PeerError(f"malformed response to api {api_key}: {error}") from error
        return response

    def close(self) -> None:
        self.writer.close()


async def connect_peer(security: PeerSecurity, host: str, port: int,
                       client_id: str) -> PeerConnection:
    """A connection to another broker, TLS-wrapped and SASL-authenticated as configured."""
    async def open_and_authenticate() -> PeerConnection:
        context = security.ssl_context
        reader, writer = await asyncio.open_connection(
            host, port, ssl=context, server_hostname=host if context is not None else None)
        connection = PeerConnection(reader, writer, client_id)
        try:
            if security.sasl_mechanism is not None:
                await _authenticate(connection, security)
        except BaseException:
            connection.close()
            raise
        return connection

    return await asyncio.wait_for(open_and_authenticate(), CONNECT_TIMEOUT_S)


async def _authenticate(connection: PeerConnection, security: PeerSecurity) -> None:
    mechanism = security.sasl_mechanism
    assert mechanism is not None
    handshake_schema = request_schema(SASL_HANDSHAKE_KEY, SASL_HANDSHAKE_VERSION)
    answer = await connection.call(SASL_HANDSHAKE_KEY, SASL_HANDSHAKE_VERSION,
                                   responses.build(handshake_schema, mechanism=mechanism))
    if answer.error_code != ErrorCode.NONE:
        raise PeerError(f"SASL mechanism {mechanism} refused by the broker (it enables"
                        f" {', '.join(answer.mechanisms)})")
    client = SaslClient(mechanism, security.username, security.password)
    token: bytes | None = client.first()
    authenticate_schema = request_schema(SASL_AUTHENTICATE_KEY, SASL_AUTHENTICATE_VERSION)
    for _ in range(MAX_SASL_ROUNDS):
        if token is None:
            return
        answer = await connection.call(SASL_AUTHENTICATE_KEY, SASL_AUTHENTICATE_VERSION,
                                       responses.build(authenticate_schema, auth_bytes=token))
        if answer.error_code != ErrorCode.NONE:
            raise PeerError(f"SASL {mechanism} as {security.username!r} failed:"
                            f" {answer.error_message or ErrorCode(answer.error_code).name}")
        try:
            token = client.evaluate(answer.auth_bytes)
        except SaslAuthenticationError as error:
            raise PeerError(str(error)) from None
    if not client.complete:
        raise PeerError(f"SASL {mechanism}: the broker asked for too many rounds")
