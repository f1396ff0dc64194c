"""SCRAM-SHA-256 / SCRAM-SHA-512 server (RFC 5802, RFC 7677), as Kafka's ScramSaslServer.

    client-first   n,[a=authzid],n=user,r=cnonce[,extensions]      gs2 header "n,," or "y,,"
    server-first   r=cnonce+snonce,s=base64(salt),i=iterations
    client-final   c=base64(gs2 header),r=cnonce+snonce,p=base64(ClientProof)
    server-final   v=base64(ServerSignature)

    AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
    ClientSignature = HMAC(StoredKey, AuthMessage);  ClientKey = ClientProof XOR ClientSignature
    valid iff H(ClientKey) == StoredKey;  ServerSignature = HMAC(ServerKey, AuthMessage)

Channel binding ("p=") is refused, as Kafka refuses it; `tokenauth` (delegation tokens) too.
An unknown user goes through the same exchange with a made-up credential and fails at the
proof, so the two failures look alike from outside (RFC 5802 section 5.1 suggests this).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from enum import Enum

from tidelog.security.sasl import CredentialSource, SaslAuthenticationError
from tidelog.security.scram_credentials import (
    DEFAULT_ITERATIONS,
    MAX_USERNAME_BYTES,
    SCRAM_MECHANISMS,
    ScramCredential,
)


class ScramState(Enum):
    RECEIVE_CLIENT_FIRST = "waiting for client-first-message"
    RECEIVE_CLIENT_FINAL = "waiting for client-final-message"
    COMPLETE = "authenticated"
    FAILED = "failed; no further token is accepted"


class ScramServer:
    def __init__(self, mechanism: str, source: CredentialSource, server_nonce: str) -> None:
        self.mechanism = mechanism
        self._hash_name = SCRAM_MECHANISMS[mechanism]
        self._source = source
        self._server_nonce = server_nonce
        self._state = ScramState.RECEIVE_CLIENT_FIRST
        self._username = ""
        self._known_user = False
        self._credential: ScramCredential | None = None
        self._nonce = ""
        self._client_nonce = ""
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""

    @property
    def complete(self) -> bool:
        return self._state is ScramState.COMPLETE

    @property
    def username(self) -> str:
        assert self._state is ScramState.COMPLETE, "not authenticated"
        return self._username

    def evaluate(self, token: bytes) -> bytes:
        state = self._state
        self._state = ScramState.FAILED  # until a step succeeds
        if state is ScramState.RECEIVE_CLIENT_FIRST:
            answer = self._client_first(_text(token))
            self._state = ScramState.RECEIVE_CLIENT_FINAL
            return answer
        if state is ScramState.RECEIVE_CLIENT_FINAL:
            answer = self._client_final(_text(token))
            self._state = ScramState.COMPLETE
            return answer
        raise SaslAuthenticationError(f"{self.mechanism}: a token while {state.value}")

    def _client_first(self, message: str) -> bytes:
        gs2_flag, authzid, bare = _split_gs2(message)
        if gs2_flag.startswith("p="):
            raise SaslAuthenticationError("SCRAM: channel binding is not supported")
        if gs2_flag not in ("n", "y"):
            raise SaslAuthenticationError(f"SCRAM: bad gs2 flag {gs2_flag!r}")
        attributes = _attributes(bare)
        if "m" in attributes:
            raise SaslAuthenticationError("SCRAM: mandatory extension not supported")
        username = _decode_saslname(attributes.get("n", ""))
        client_nonce = attributes.get("r", "")
        if not username or not client_nonce or len(username.encode()) > MAX_USERNAME_BYTES:
            raise SaslAuthenticationError("SCRAM: missing user name or nonce")
        if authzid and _decode_saslname(authzid) != username:
            raise SaslAuthenticationError(f"SCRAM: authzid {authzid!r} is not {username!r}")
        if attributes.get("tokenauth", "false").lower() == "true":
            raise SaslAuthenticationError("SCRAM: delegation tokens are not supported")
        credential = self._source.credentials(username).get(self.mechanism)
        self._known_user = credential is not None
        if credential is None:
            # The same exchange as for a real user; the proof cannot match (see module doc).
            fake_salt = hashlib.new(self._hash_name, b"tidelog-unknown" + username.encode())
            credential = ScramCredential(
                self.mechanism, fake_salt.digest(), DEFAULT_ITERATIONS, b"", b""
            )
        self._username = username
        self._credential = credential
        self._client_nonce = client_nonce
        self._nonce = client_nonce + self._server_nonce
        self._gs2_header = message[: len(message) - len(bare)]
        self._client_first_bare = bare
        self._server_first = (
            f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
            f"i={credential.iterations}"
        )
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        without_proof, separator, proof_text = message.rpartition(",p=")
        if not separator:
            raise SaslAuthenticationError("SCRAM: client-final-message without a proof")
        attributes = _attributes(without_proof)
        expected_binding = base64.b64encode(self._gs2_header.encode()).decode()
        if attributes.get("c") != expected_binding:
            raise SaslAuthenticationError("SCRAM: channel binding does not match")
        if attributes.get("r") not in (self._nonce, self._client_nonce + self._nonce):
            # The second form is librdkafka's before 2.6.1 (its client nonce twice; Debian's
            # kcat links 2.0.2); it still echoes the whole fresh server nonce, which is what
            # the check is for. Kafka 3.8.1-3.9 accepted it too; Kafka 4 refuses it.
            raise SaslAuthenticationError("SCRAM: nonce does not match")
        proof = _b64decode(proof_text)
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key or b"\0", auth_message, self._hash_name)
        if len(proof) != len(signature):
            raise SaslAuthenticationError("SCRAM: proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        stored_key = hashlib.new(self._hash_name, client_key).digest()
        if not self._known_user or not hmac.compare_digest(stored_key, credential.stored_key):
            reason = "unknown user" if not self._known_user else "wrong password"
            raise SaslAuthenticationError(f"SCRAM: {reason} for {self._username!r}")
        server_signature = hmac.digest(credential.server_key, auth_message, self._hash_name)
        return f"v={base64.b64encode(server_signature).decode()}".encode()


def _text(token: bytes) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationError("SCRAM: message is not UTF-8") from None


def _split_gs2(message: str) -> tuple[str, str, str]:
    """`n,a=bob,n=bob,r=...` -> ("n", "bob", "n=bob,r=...")."""
    parts = message.split(",", 2)
    if len(parts) != 3:
        raise SaslAuthenticationError("SCRAM: client-first-message without a gs2 header")
    gs2_flag, authzid, bare = parts
    if authzid and not authzid.startswith("a="):
        raise SaslAuthenticationError("SCRAM: bad authzid in the gs2 header")
    return gs2_flag, authzid[2:], bare


def _attributes(text: str) -> dict[str, str]:
    """`n=bob,r=abc` -> {"n": "bob", "r": "abc"}; extensions (`name=value`) are kept too."""
    attributes: dict[str, str] = {}
    for item in text.split(","):
        name, separator, value = item.partition("=")
        if not separator or not name:
            raise SaslAuthenticationError(f"SCRAM: malformed attribute {item[:32]!r}")
        attributes.setdefault(name, value)
    return attributes


def _decode_saslname(name: str) -> str:
    # RFC 5802: "," and "=" are sent as "=2C" and "=3D"; any other "=" is malformed.
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise SaslAuthenticationError("SCRAM: malformed user name")
    return name.replace("=2C", ",").replace("=3D", "=")


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise SaslAuthenticationError("SCRAM: proof is not base64") from None
