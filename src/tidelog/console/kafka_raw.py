"""Kafka requests that confluent-kafka's admin client does not offer (the transaction APIs),
sent by hand: kio-encoded frames on one blocking socket per broker, with the console's
security settings (TLS from `ssl.ca.location`, SASL PLAIN, SCRAM or OAUTHBEARER with the
signed-in user's credentials or token), as `tidelog transactions` does on a plain socket.

Frame layout (Kafka's): int32 size, then the request header (v1, or v2 with tagged fields for
flexible requests) and body; answers are int32 size, int32 correlation id, an empty tagged-field
section for flexible responses, then the body. Every answer's size is bounded and every read has
a timeout.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import secrets
import socket
import ssl
import struct
import sys
from collections.abc import Callable, Mapping
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError

from tidelog.console.errors import ClusterError, Unauthenticated

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
MAX_FRAME_BYTES = 64 * 1024 * 1024
MAX_SCRAM_ITERATIONS = 65536  # a hostile server must not make the console spin


def schema_module(api_key: int, version: int) -> Any:
    """The kio module holding the request's nested entity classes."""
    return sys.modules[load_request_schema(api_key, version).__module__]


class RawConnection:
    def __init__(self, host: str, port: int, settings: Mapping[str, Any],
                 timeout_s: float) -> None:
        self.where = f"{host}:{port}"
        self.timeout_s = timeout_s
        self._correlation = 0
        protocol = settings.get("security.protocol", "PLAINTEXT").upper()
        try:
            raw = socket.create_connection((host.strip("[]"), port), timeout=timeout_s)
        except OSError as error:
            raise ClusterError(f"connecting to {self.where}: {error}", 503) from None
        self.sock: socket.socket = raw
        try:
            if protocol in ("SSL", "SASL_SSL"):
                self.sock = _tls_context(settings).wrap_socket(raw, server_hostname=host)
            if protocol.startswith("SASL_"):
                self._authenticate(settings)
        except ssl.SSLError as error:
            self.close()
            raise ClusterError(f"TLS with {self.where}: {error}", 503) from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def exchange(self, api_key: int, version: int, body: Any) -> bytes:
        """Send one request; the answer's bytes after its header."""
        request_cls: Any = load_request_schema(api_key, version)
        self._correlation += 1
        header = request_cls.__header_schema__(
            request_api_key=api_key, request_api_version=version,
            correlation_id=self._correlation, client_id="tidelog-console")
        buffer = io.BytesIO()
        entity_writer(type(header))(buffer, header)
        entity_writer(request_cls)(buffer, body)
        payload = buffer.getvalue()
        try:
            self.sock.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", self._read(4))[0]
            if not 4 <= size <= MAX_FRAME_BYTES:
                raise ClusterError(f"{self.where} answered a frame of {size} bytes")
            frame = self._read(size)
        except OSError as error:
            raise ClusterError(f"talking to {self.where}: {error}", 503) from None
        response_cls: Any = load_response_schema(api_key, version)
        # ApiVersions answers with header v0 whatever its version (KIP-511): no tagged fields.
        flexible_header = response_cls.__flexible__ and api_key != API_VERSIONS
        return frame[5:] if flexible_header else frame[4:]

    def call(self, api_key: int, version: int, body: Any) -> Any:
        data = self.exchange(api_key, version, body)
        try:
            answer, _ = entity_reader(load_response_schema(api_key, version))(data, 0)
        except SerialError as error:
            raise ClusterError(f"cannot decode {self.where}'s answer: {error}") from None
        return answer

    def _read(self, count: int) -> bytes:
        chunks = []
        while count:
            chunk = self.sock.recv(min(count, 1 << 20))
            if not chunk:
                raise ClusterError(f"{self.where} closed the connection", 503)
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    # -- SASL -----------------------------------------------------------------------------------

    def _authenticate(self, settings: Mapping[str, Any]) -> None:
        mechanism = settings.get("sasl.mechanism", "").upper()
        user, password = settings.get("sasl.username", ""), settings.get("sasl.password", "")
        handshake = schema_module(SASL_HANDSHAKE, 1)
        answer = self.call(SASL_HANDSHAKE, 1, handshake.SaslHandshakeRequest(mechanism=mechanism))
        if answer.error_code.value != 0:
            raise Unauthenticated(f"{self.where} does not offer SASL {mechanism} "
                                  f"({answer.error_code.name}; it offers "
                                  f"{', '.join(answer.mechanisms)})")
        authenticate = schema_module(SASL_AUTHENTICATE, 2)

        def step(token: bytes) -> bytes:
            reply = self.call(SASL_AUTHENTICATE, 2,
                              authenticate.SaslAuthenticateRequest(auth_bytes=token))
            if reply.error_code.value != 0:
                raise Unauthenticated(f"the cluster refused the {mechanism} sign-in "
                                      f"({reply.error_message or reply.error_code.name})")
            return bytes(reply.auth_bytes)

        if mechanism == "PLAIN":
            step(b"\0" + user.encode("utf-8") + b"\0" + password.encode("utf-8"))
        elif mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            scram_exchange(mechanism, user, password, step)
        elif mechanism == "OAUTHBEARER" and callable(settings.get("oauth_cb")):
            # RFC 7628's initial client response with the session's token (the one
            # librdkafka's oauth_cb hands out); the broker answers an empty message.
            token = str(settings["oauth_cb"](None)[0])
            step(f"n,,\x01auth=Bearer {token}\x01\x01".encode())
        else:
            raise Unauthenticated(f"SASL mechanism {mechanism!r} is not supported here")


def scram_exchange(mechanism: str, user: str, password: str,
                   step: Callable[[bytes], bytes]) -> None:
    """RFC 5802's client side (no channel binding), checking the server's signature."""
    hash_name = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    client_nonce = secrets.token_urlsafe(24)
    name = user.replace("=", "=3D").replace(",", "=2C")
    first_bare = f"n={name},r={client_nonce}"
    server_first = step(("n,," + first_bare).encode("utf-8")).decode("utf-8", "replace")
    fields = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
    try:
        nonce, iterations = fields["r"], int(fields["i"])
        salt = base64.b64decode(fields["s"], validate=True)
    except (KeyError, ValueError):
        raise Unauthenticated("the cluster's SCRAM server-first-message is malformed") from None
    if not nonce.startswith(client_nonce) or not 1 <= iterations <= MAX_SCRAM_ITERATIONS:
        raise Unauthenticated("the cluster's SCRAM server-first-message is not acceptable")
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode('ascii')}"
    server_final = step(final.encode("ascii")).decode("utf-8", "replace")
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    expected = "v=" + base64.b64encode(
        hmac.new(server_key, auth_message, hash_name).digest()).decode("ascii")
    if not hmac.compare_digest(server_final.encode(), expected.encode()):
        raise Unauthenticated("the cluster's SCRAM signature does not verify")


def _tls_context(settings: Mapping[str, Any]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=settings.get("ssl.ca.location") or None)
    if settings.get("enable.ssl.certificate.verification", "true").lower() == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif settings.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    certificate = settings.get("ssl.certificate.location")
    if certificate:
        context.load_cert_chain(certificate, settings.get("ssl.key.location") or None,
                                settings.get("ssl.key.password") or None)
    return context
