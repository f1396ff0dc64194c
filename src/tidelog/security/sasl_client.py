"""The client side of SASL PLAIN and SCRAM-SHA-256/512, for a broker's own connections to
other brokers (`sasl.mechanism.inter.broker.protocol`). Pure: tokens in, tokens out.

    PLAIN   one token: authzid NUL username NUL password (authzid empty)
    SCRAM   client-first  n,,n=<user>,r=<cnonce>
            client-final  c=biws,r=<nonce>,p=<ClientProof>   after the server-first message
            the server-final message's signature is checked: the broker proves it knows the
            credential too, so a replica never fetches from an impostor

The message layouts are in `scram.py` (the server side); credentials come from Kafka's JAAS
line (`jaas_credentials`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets

from tidelog.security.sasl import SaslAuthenticationError
from tidelog.security.scram_credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    salted_password,
)

CLIENT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_credentials(jaas: str) -> tuple[str, str]:
    """(username, password) from a JAAS line as Kafka writes it:
    `org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";`
    """
    options = {name: re.sub(r"\\(.)", r"\1", value) for name, value in _JAAS_OPTION.findall(jaas)}
    if not options.get("username") or "password" not in options:
        raise ValueError("sasl.jaas.config: needs username=\"...\" and password=\"...\"")
    return options["username"], options["password"]


class SaslClient:
    """One authentication exchange: `first()`, then `evaluate(server_token)` until `complete`
    (every step raises SaslAuthenticationError on a bad server message)."""

    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: str | None = None) -> None:
        if mechanism not in CLIENT_MECHANISMS:
            raise ValueError(f"SASL client mechanism {mechanism!r}: one of {CLIENT_MECHANISMS}")
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = ""
        self._expected_server_signature = b""
        self._step = 0
        self.complete = False

    def first(self) -> bytes:
        if self.mechanism == "PLAIN":
            return f"\0{self._username}\0{self._password}".encode()
        name = self._username.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={name},r={self._nonce}"
        return f"n,,{self._client_first_bare}".encode()

    def evaluate(self, token: bytes) -> bytes | None:
        """The next client token, or None when the exchange is complete."""
        self._step += 1
        if self.mechanism == "PLAIN" or self._step == 2:
            if self.mechanism != "PLAIN":
                self._check_server_final(token)
            self.complete = True
            return None
        if self._step == 1:
            return self._client_final(token)
        raise SaslAuthenticationError(f"{self.mechanism}: unexpected token after completion")

    def _client_final(self, token: bytes) -> bytes:
        server_first = _text(token)
        fields = dict(item.split("=", 1) for item in server_first.split(",") if "=" in item)
        nonce, salt_text, iterations_text = fields.get("r", ""), fields.get("s"), fields.get("i")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslAuthenticationError("SCRAM: the server's nonce does not extend ours")
        try:
            salt = base64.b64decode(salt_text or "", validate=True)
            iterations = int(iterations_text or "")
        except (binascii.Error, ValueError):
            raise SaslAuthenticationError("SCRAM: malformed server-first-message") from None
        if not salt or not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise SaslAuthenticationError(f"SCRAM: salt or iterations ({iterations}) refused")
        hash_name = SCRAM_MECHANISMS[self.mechanism]
        salted = salted_password(hash_name, self._password.encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", hash_name)
        stored_key = hashlib.new(hash_name, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, hash_name)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", hash_name)
        self._expected_server_signature = hmac.digest(server_key, auth_message, hash_name)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _check_server_final(self, token: bytes) -> None:
        text = _text(token)
        if text.startswith("e="):
            raise SaslAuthenticationError(f"SCRAM: the server refused: {text[2:64]}")
        try:
            signature = base64.b64decode(text.removeprefix("v="), validate=True)
        except (binascii.Error, ValueError):
            raise SaslAuthenticationError("SCRAM: malformed server-final-message") from None
        if not text.startswith("v=") or not hmac.compare_digest(
                signature, self._expected_server_signature):
            raise SaslAuthenticationError("SCRAM: the server's signature is wrong")


def _text(token: bytes) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationError("SCRAM: server message is not UTF-8") from None
