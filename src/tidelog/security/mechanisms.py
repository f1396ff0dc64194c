"""The server side of each supported SASL mechanism, by name."""

from __future__ import annotations

from collections.abc import Callable

from tidelog.security.oauthbearer import JwtValidator, OAuthBearerServer
from tidelog.security.plain import PlainServer
from tidelog.security.sasl import CredentialSource, SaslServer
from tidelog.security.scram import ScramServer
from tidelog.security.scram_credentials import SCRAM_MECHANISMS


def create_server(
    mechanism: str,
    source: CredentialSource,
    nonce: str,
    jwt_validator: JwtValidator | None = None,
    now_ms: Callable[[], int] | None = None,
) -> SaslServer:
    """The server side of `mechanism` (one of SUPPORTED_MECHANISMS). `nonce`: the server's
    random part of a SCRAM nonce (printable, no comma), passed in so tests are deterministic."""
    if mechanism == "PLAIN":
        return PlainServer(source)
    if mechanism in SCRAM_MECHANISMS:
        return ScramServer(mechanism, source, nonce)
    if mechanism == "OAUTHBEARER" and jwt_validator is not None and now_ms is not None:
        return OAuthBearerServer(jwt_validator, now_ms)
    raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
