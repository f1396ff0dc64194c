"""The SASL layer against raw and hostile input: only ApiVersions, SaslHandshake and
SaslAuthenticate are answered before authentication (anything else closes the connection);
a failed authentication is answered late (connection.failed.authentication.delay.ms) with one
message for every cause; random, truncated and huge tokens close connections without harming
the broker; SaslHandshake v0's bare-token framing works; a canary client loses nothing."""

from __future__ import annotations

import os
import random
import socket
import struct
import time
from collections.abc import Iterator

import pytest

from broker.raw import RawClient, request_module
from conftest import BrokerFactory

from .conftest import USERS, SecureBroker, tidelog
from .tls_sasl_clients import ROUNDTRIPS, Security, values

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA, API_VERSIONS = 17, 36, 3, 18
DELAY_MS = 500
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    tmp = tmp_path_factory.mktemp("hostile")
    for name, (mechanism, password) in USERS.items():
        tidelog("users", "add", name, "--password", password, "--mechanism", mechanism,
                "--data-dir", str(tmp / "data"))
    factory = BrokerFactory(tmp)
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "connection.failed.authentication.delay.ms": str(DELAY_MS),
    }
    try:
        process = factory(tmp / "data", settings=settings, listen=None)
        text = process.log_text()
        ports = {name: int(text.split(f"listener {name} ({name}) on 127.0.0.1:")[1].split()[0])
                 for name in ("SASL_PLAINTEXT", "PLAINTEXT")}
        yield SecureBroker(process, ports)
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


def _handshake(client: RawClient, mechanism: str, version: int = 1) -> object:
    body = request_module(SASL_HANDSHAKE, version).SaslHandshakeRequest(mechanism=mechanism)
    return client.call(SASL_HANDSHAKE, version, body)


def _authenticate_send(client: RawClient, token: bytes, version: int = 2) -> int:
    body = request_module(SASL_AUTHENTICATE, version).SaslAuthenticateRequest(auth_bytes=token)
    return client.send(SASL_AUTHENTICATE, version, body)


def _metadata_send(client: RawClient) -> int:
    body = request_module(METADATA, 1).MetadataRequest(topics=None)
    return client.send(METADATA, 1, body)


def test_api_versions_is_answered_before_authentication(broker: SecureBroker) -> None:
    with RawClient(broker.bootstrap("SASL_PLAINTEXT")) as client:
        body = request_module(API_VERSIONS, 0).ApiVersionsRequest()
        response = client.call(API_VERSIONS, 0, body)
        keys = {entry.api_key: (entry.min_version, entry.max_version)
                for entry in response.api_keys}
        assert keys[SASL_HANDSHAKE] == (0, 1) and keys[SASL_AUTHENTICATE] == (0, 2)
        _handshake(client, "PLAIN")


def test_other_requests_before_authentication_close_the_connection(broker: SecureBroker) -> None:
    with RawClient(broker.bootstrap("SASL_PLAINTEXT"), timeout_s=20) as client:
        _metadata_send(client)
        assert client.read_frame() == b""  # closed, never answered
    with RawClient(broker.bootstrap("SASL_PLAINTEXT"), timeout_s=20) as client:
        _handshake(client, "SCRAM-SHA-256")  # between handshake and authenticate, too
        _metadata_send(client)
        assert client.read_frame() == b""


def test_unknown_mechanism_lists_the_enabled_ones(broker: SecureBroker) -> None:
    with RawClient(broker.bootstrap("SASL_PLAINTEXT"), timeout_s=20) as client:
        response = _handshake(client, "GSSAPI")
        assert int(response.error_code) == 33  # UNSUPPORTED_SASL_MECHANISM
        assert list(response.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert client.read_frame() == b""


@pytest.mark.parametrize("token", [b"\x00alice\x00wrong", b"\x00nobody\x00alice-secret"])
def test_failed_authentication_is_late_generic_and_closes(broker: SecureBroker,
                                                          token: bytes) -> None:
    with RawClient(broker.bootstrap("SASL_PLAINTEXT"), timeout_s=20) as client:
        _handshake(client, "PLAIN")
        started = time.monotonic()
        correlation_id = _authenticate_send(client, token)
        response = client.read_response(SASL_AUTHENTICATE, 2, correlation_id)
        assert time.monotonic() - started >= DELAY_MS / 1000 * 0.9
        assert int(response.error_code) == 58  # SASL_AUTHENTICATION_FAILED
        assert response.error_message == f"{GENERIC} mechanism PLAIN"
        assert client.read_frame() == b""


def test_plain_success_then_requests_are_served(broker: SecureBroker) -> None:
    with RawClient(broker.bootstrap("SASL_PLAINTEXT"), timeout_s=20) as client:
        _handshake(client, "PLAIN")
        response = client.read_response(
            SASL_AUTHENTICATE, 2, _authenticate_send(client, b"\x00alice\x00alice-secret")
        )
        assert int(response.error_code) == 0
        metadata = client.read_response(METADATA, 1, _metadata_send(client))
        assert [b.port for b in metadata.brokers] == [broker.ports["SASL_PLAINTEXT"]]
        again = _handshake(client, "PLAIN")  # after authentication: Kafka's answer
        assert int(again.error_code) == 34  # ILLEGAL_SASL_STATE


def test_handshake_v0_then_bare_tokens(broker: SecureBroker) -> None:
    with RawClient(broker.bootstrap("SASL_PLAINTEXT"), timeout_s=20) as client:
        assert int(_handshake(client, "PLAIN", version=0).error_code) == 0
        token = b"\x00bob512\x00bob-secret"
        client.sock.sendall(struct.pack(">i", len(token)) + token)
        assert client.sock.recv(4) == struct.pack(">i", 0)  # an empty bare token: success
        metadata = client.read_response(METADATA, 1, _metadata_send(client))
        assert metadata.brokers


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_random_truncated_and_huge_tokens_do_not_hurt_the_broker(broker: SecureBroker) -> None:
    generator = random.Random(11)
    rss_before = _rss_kib(broker.process.pid)
    valid_first = b"n,,n=alice,r=abcdefghijklmnop"
    for index in range(60):  # each refusal waits DELAY_MS
        mechanism = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")[index % 3]
        if index % 2:
            token = valid_first[: generator.randrange(len(valid_first))]
        else:
            token = os.urandom(generator.randrange(0, 600))
        with RawClient(broker.bootstrap("SASL_PLAINTEXT"), timeout_s=20) as client:
            _handshake(client, mechanism)
            correlation_id = _authenticate_send(client, token)
            # An answer (a well-formed SCRAM first message gets its challenge, anything
            # else a refusal after the delay) or a closed connection; never a hang.
            frame = client.read_frame()
            if frame:
                assert struct.unpack_from(">i", frame)[0] == correlation_id
    # Random bytes where a request should be.
    for _ in range(50):
        with socket.create_connection(("127.0.0.1", broker.ports["SASL_PLAINTEXT"]),
                                      timeout=20) as sock:
            sock.sendall(os.urandom(generator.randrange(1, 300)))
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass  # until the broker closes
    # A 100 MiB token: refused by its declared size (sasl.server.max.receive.size), unread.
    with RawClient(broker.bootstrap("SASL_PLAINTEXT"), timeout_s=20) as client:
        _handshake(client, "PLAIN")
        try:
            client.sock.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\x00" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert client.is_closed_by_peer()
    # One just over the limit, sent whole, is refused too.
    with RawClient(broker.bootstrap("SASL_PLAINTEXT"), timeout_s=20) as client:
        _handshake(client, "PLAIN")
        try:
            _authenticate_send(client, b"\x00" * (600 * 1024))
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert client.is_closed_by_peer()
    assert _rss_kib(broker.process.pid) - rss_before < 64 * 1024
    # The canary: a real client over SASL and plaintext loses nothing.
    security = Security("SASL_PLAINTEXT", mechanism="SCRAM-SHA-256", username="alice",
                        password=USERS["alice"][1])
    assert ROUNDTRIPS["confluent"](broker.bootstrap("SASL_PLAINTEXT"), "canary",
                                   security, 50) == values("canary", 50)
    assert ROUNDTRIPS["confluent"](broker.bootstrap("PLAINTEXT"), "canary-plain",
                                   Security("PLAINTEXT"), 50) == values("canary-plain", 50)
