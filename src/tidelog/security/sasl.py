"""SASL server mechanisms, sans-I/O: a token in, a token out, a username at the end.

The connection (broker/net) feeds each client token to `evaluate` and sends back what it
returns; once `complete` is true, `username` is who authenticated. Any failure raises
`SaslAuthenticationError`, whose message is for the broker's log only: the client always gets
the same sentence (`CLIENT_FAILURE_MESSAGE`), which does not say whether the user, the password
or the exchange was wrong (Kafka's SaslAuthenticationException).

Mechanisms here: PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677;
`security.scram`). Both check the SCRAM credentials of the user store.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Protocol

from tidelog.errors import TidelogError
from tidelog.security.scram_credentials import (
    MAX_USERNAME_BYTES,
    SCRAM_MECHANISMS,
    ScramCredential,
)

MAX_TOKEN_BYTES = 64 * 1024  # far above any PLAIN or SCRAM message; bigger is refused
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def client_failure_message(mechanism: str) -> str:
    # Kafka's wording (SaslServerAuthenticator): the same for a wrong user or password.
    return (
        "Authentication failed during authentication due to invalid credentials with SASL"
        f" mechanism {mechanism}"
    )


class SaslAuthenticationError(TidelogError):
    """Authentication failed; `str(error)` says why, for the broker's log only."""


class CredentialSource(Protocol):
    def credentials(self, username: str) -> Mapping[str, ScramCredential]: ...


class SaslServer(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str: ...

    def evaluate(self, token: bytes) -> bytes: ...


class PlainServer:
    """RFC 4616: one message `[authzid] NUL authcid NUL passwd`, an empty answer."""

    mechanism = "PLAIN"

    def __init__(self, source: CredentialSource) -> None:
        self._source = source
        self._username: str | None = None

    @property
    def complete(self) -> bool:
        return self._username is not None

    @property
    def username(self) -> str:
        assert self._username is not None, "not authenticated"
        return self._username

    def evaluate(self, token: bytes) -> bytes:
        if self._username is not None:
            raise SaslAuthenticationError("PLAIN: a token after the exchange completed")
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError("PLAIN: expected authzid NUL authcid NUL passwd")
        authzid, authcid, password = parts
        try:
            username = authcid.decode("utf-8")
            authorization = authzid.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("PLAIN: user name is not UTF-8") from None
        if not username or len(authcid) > MAX_USERNAME_BYTES or not password:
            raise SaslAuthenticationError("PLAIN: empty or oversized user name or password")
        if authorization and authorization != username:
            # Kafka: "Authentication failed: Client requested an authorization id that is
            # different from username"
            raise SaslAuthenticationError(f"PLAIN: authzid {authorization!r} is not {username!r}")
        credentials = self._source.credentials(username)
        if not credentials:
            raise SaslAuthenticationError(f"PLAIN: unknown user {username!r}")
        # Every stored credential is tried, so a user who has only SCRAM-SHA-512 works too.
        matched = False
        for mechanism in SCRAM_MECHANISMS:
            credential = credentials.get(mechanism)
            if credential is not None and credential.matches_password(password):
                matched = True
        if not matched:
            raise SaslAuthenticationError(f"PLAIN: wrong password for {username!r}")
        self._username = username
        return b""


def create_server(mechanism: str, source: CredentialSource, nonce: str) -> SaslServer:
    """The server side of `mechanism` (one of SUPPORTED_MECHANISMS). `nonce`: the server's
    random part of a SCRAM nonce (printable, no comma), passed in so tests are deterministic."""
    from tidelog.security.scram import ScramServer

    if mechanism == "PLAIN":
        return PlainServer(source)
    if mechanism in SCRAM_MECHANISMS:
        return ScramServer(mechanism, source, nonce)
    raise ValueError(f"unsupported SASL mechanism {mechanism!r}")


def constant_time_equal(left: bytes, right: bytes) -> bool:
    return hmac.compare_digest(left, right)
