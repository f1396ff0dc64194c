"""SASL server mechanisms, sans-I/O: a token in, a token out, a username at the end.

The connection (broker/net) feeds each client token to `evaluate` and sends back what it
returns; once `complete` is true, `username` is who authenticated. Any failure raises
`SaslAuthenticationError`, whose message is for the broker's log only: the client always gets
the same sentence (`CLIENT_FAILURE_MESSAGE`), which does not say whether the user, the password
or the exchange was wrong (Kafka's SaslAuthenticationException).

Mechanisms: PLAIN (RFC 4616, `security.plain`) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802,
RFC 7677, `security.scram`); `security.mechanisms.create_server` picks one. Both check the SCRAM
credentials of the user store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from tidelog.errors import TidelogError
from tidelog.security.scram_credentials import ScramCredential

MAX_TOKEN_BYTES = 64 * 1024  # far above any PLAIN or SCRAM message; bigger is refused
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


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


class SingleMessageServer:
    """A mechanism that authenticates with one client message (PLAIN, OAUTHBEARER): it is
    complete once `_accept(username)` ran, and refuses any later token."""

    mechanism: str

    def __init__(self) -> None:
        self._username: str | None = None

    @property
    def complete(self) -> bool:
        return self._username is not None

    @property
    def username(self) -> str:
        assert self._username is not None, "not authenticated"
        return self._username

    def _refuse_after_completion(self) -> None:
        if self._username is not None:
            raise SaslAuthenticationError(f"{self.mechanism}: a token after the exchange completed")

    def _accept(self, username: str) -> None:
        self._username = username

