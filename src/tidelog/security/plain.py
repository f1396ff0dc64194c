"""PLAIN (RFC 4616) checked against the user's SCRAM credentials (as Redpanda does), so one
store serves PLAIN and SCRAM. Send it over TLS only: the password crosses the wire."""

from __future__ import annotations

from tidelog.security.sasl import CredentialSource, SaslAuthenticationError, SingleMessageServer
from tidelog.security.scram_credentials import MAX_USERNAME_BYTES, SCRAM_MECHANISMS


class PlainServer(SingleMessageServer):
    """RFC 4616: one message `[authzid] NUL authcid NUL passwd`, an empty answer."""

    mechanism = "PLAIN"

    def __init__(self, source: CredentialSource) -> None:
        super().__init__()
        self._source = source

    def evaluate(self, token: bytes) -> bytes:
        self._refuse_after_completion()
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
        self._accept(username)
        return b""
