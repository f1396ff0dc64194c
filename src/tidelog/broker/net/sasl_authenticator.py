"""A SASL listener's connection before (and while) it authenticates: Kafka's
SaslServerAuthenticator as a state machine the connection drives.

    HANDSHAKE       ApiVersions (answered by the router) or SaslHandshake; anything else
                    closes the connection (Kafka: IllegalSaslStateException)
    AUTHENTICATE    after SaslHandshake v1: SaslAuthenticate requests carry the tokens
    RAW_TOKEN       after SaslHandshake v0: the next frames are bare tokens (size + bytes,
                    no request header), answered the same way (pre-1.0 clients)
    COMPLETE        authenticated: `principal` is set; every API is served (SaslHandshake and
                    SaslAuthenticate then get ILLEGAL_SASL_STATE from their handlers, unless
                    connections.max.reauth.ms is set: then a SaslHandshake starts KIP-368
                    re-authentication with a new authenticator, which must end with the same
                    principal and mechanism)
    FAILED          the answer is sent after connection.failed.authentication.delay.ms and
                    the connection is closed

No sockets or timers here: each step returns a `SaslStep` saying what to send and whether to
delay and close. Runs on the event loop (a SCRAM or PLAIN step costs one PBKDF2 for PLAIN,
a few HMACs for SCRAM, and a stat of the credential file).
"""

from __future__ import annotations

import logging
import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from tidelog.broker import clock
from tidelog.errors import ErrorCode
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.codec import RequestHeader
from tidelog.security.mechanisms import create_server
from tidelog.security.oauthbearer import JwtValidator
from tidelog.security.principal import KafkaPrincipal
from tidelog.security.sasl import (
    MAX_TOKEN_BYTES,
    CredentialSource,
    SaslAuthenticationError,
    SaslServer,
    client_failure_message,
)
from tidelog.security.scram_credentials import CredentialStoreError

log = logging.getLogger("tidelog.broker.sasl")
_SIZE = struct.Struct(">i")


class SaslPhase(Enum):
    HANDSHAKE = "expecting ApiVersions or SaslHandshake"
    AUTHENTICATE = "expecting SaslAuthenticate"
    RAW_TOKEN = "expecting a bare SASL token (SaslHandshake v0)"
    COMPLETE = "authenticated"
    FAILED = "authentication failed"


@dataclass(frozen=True, slots=True)
class SaslStep:
    response: Any = None  # a kio response entity to encode with the request's header
    raw: bytes | None = None  # a bare token frame (size included), for RAW_TOKEN
    fail: bool = False  # delay the answer, then close the connection
    close: bool = False  # close now, with no answer


@dataclass(frozen=True, slots=True)
class SaslSettings:
    enabled_mechanisms: tuple[str, ...]
    credentials: CredentialSource
    failed_authentication_delay_ms: int
    max_reauth_ms: int = 0  # connections.max.reauth.ms (KIP-368); 0: sessions never expire
    jwt_validator: JwtValidator | None = None  # OAUTHBEARER (sasl.oauthbearer.*)


@dataclass(frozen=True, slots=True)
class Reauthentication:
    """What a KIP-368 re-authentication must keep: Kafka refuses a change of principal or
    mechanism ("Cannot change principals during re-authentication")."""

    principal: KafkaPrincipal
    mechanism: str


class SaslAuthenticator:
    def __init__(
        self, settings: SaslSettings, peer: str, reauthentication: Reauthentication | None = None
    ) -> None:
        self._settings = settings
        self._peer = peer
        self._reauthentication = reauthentication
        self.phase = SaslPhase.HANDSHAKE
        self._server: SaslServer | None = None
        self.principal: KafkaPrincipal | None = None

    @property
    def mechanism(self) -> str:
        assert self._server is not None
        return self._server.mechanism

    @property
    def settings(self) -> SaslSettings:
        return self._settings

    @property
    def complete(self) -> bool:
        return self.phase is SaslPhase.COMPLETE

    @property
    def failed_authentication_delay_ms(self) -> int:
        return self._settings.failed_authentication_delay_ms

    def allows(self, api_key: int) -> bool:
        """May this request be served before authentication completes?"""
        if self.phase is SaslPhase.HANDSHAKE:
            return api_key in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE)
        if self.phase is SaslPhase.AUTHENTICATE:
            return api_key == ApiKey.SASL_AUTHENTICATE
        return False

    def handshake(self, header: RequestHeader, request: Any) -> SaslStep:
        mechanism = str(request.mechanism)
        enabled = self._settings.enabled_mechanisms
        cls = responses.response_class(ApiKey.SASL_HANDSHAKE, header.api_version)
        expected = self._reauthentication
        if expected is not None and mechanism != expected.mechanism:
            log.info("%s: re-authentication with %r, not %s", self._peer, mechanism[:64],
                     expected.mechanism)
            self.phase = SaslPhase.FAILED
            answer = responses.build(
                cls, error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
            )
            return SaslStep(response=answer, fail=True)
        if mechanism not in enabled:
            log.info("%s: SASL mechanism %r is not enabled", self._peer, mechanism[:64])
            self.phase = SaslPhase.FAILED
            answer = responses.build(
                cls, error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
            )
            return SaslStep(response=answer, fail=True)
        self._server = create_server(
            mechanism, self._settings.credentials, _nonce(), self._settings.jwt_validator,
            clock.now_ms,
        )
        self.phase = SaslPhase.AUTHENTICATE if header.api_version >= 1 else SaslPhase.RAW_TOKEN
        return SaslStep(
            response=responses.build(cls, error_code=ErrorCode.NONE, mechanisms=enabled)
        )

    def authenticate(self, header: RequestHeader, request: Any) -> SaslStep:
        cls = responses.response_class(ApiKey.SASL_AUTHENTICATE, header.api_version)
        try:
            answer = self._evaluate(bytes(request.auth_bytes))
        except SaslAuthenticationError:
            assert self._server is not None
            failed = responses.build(
                cls,
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                error_message=client_failure_message(self._server.mechanism),
                auth_bytes=b"",
            )
            return SaslStep(response=failed, fail=True)
        lifetime_ms = self._settings.max_reauth_ms if self.complete else 0
        return SaslStep(
            response=responses.build(
                cls, error_code=ErrorCode.NONE, error_message=None, auth_bytes=answer,
                session_lifetime=lifetime_ms,
            )
        )

    def raw_token(self, token: bytes) -> SaslStep:
        """A bare token after SaslHandshake v0. Failure: Kafka closes without an answer."""
        try:
            answer = self._evaluate(token)
        except SaslAuthenticationError:
            return SaslStep(fail=True)
        return SaslStep(raw=_SIZE.pack(len(answer)) + answer)

    def _evaluate(self, token: bytes) -> bytes:
        server = self._server
        assert server is not None
        try:
            if len(token) > MAX_TOKEN_BYTES:
                raise SaslAuthenticationError(f"token of {len(token)} bytes")
            answer = server.evaluate(token)
        except SaslAuthenticationError as error:
            log.info("%s: SASL %s authentication failed: %s", self._peer, server.mechanism,
                     error)
            self.phase = SaslPhase.FAILED
            raise
        except CredentialStoreError as error:
            log.error("%s: SASL %s: credential store: %s", self._peer, server.mechanism, error)
            self.phase = SaslPhase.FAILED
            raise SaslAuthenticationError(str(error)) from None
        if server.complete:
            principal = KafkaPrincipal("User", server.username)
            expected = self._reauthentication
            if expected is not None and principal != expected.principal:
                self.phase = SaslPhase.FAILED
                log.info("%s: re-authentication as %s, not %s", self._peer, principal,
                         expected.principal)
                raise SaslAuthenticationError("Cannot change principals during re-authentication")
            self.phase = SaslPhase.COMPLETE
            self.principal = principal
            log.info("%s: %s as %s with %s", self._peer,
                     "re-authenticated" if expected else "authenticated", principal,
                     server.mechanism)
        return answer


def enabled_mechanisms(text: str, supported: Sequence[str]) -> tuple[str, ...]:
    """`sasl.enabled.mechanisms` -> the names, each checked against `supported`."""
    names = tuple(name.strip().upper() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in supported]
    if unknown or not names:
        raise ValueError(
            f"sasl.enabled.mechanisms: {', '.join(unknown) or 'none given'}"
            f" (supported: {', '.join(supported)})"
        )
    return names


def _nonce() -> str:
    return secrets.token_urlsafe(24)  # printable, no comma (RFC 5802 "printable")
