"""KIP-368 re-authentication (connections.max.reauth.ms): the session lifetime is answered in
SaslAuthenticate v1+, librdkafka re-authenticates its open connections before it ends and
keeps producing without a loss, a raw client that lets its session lapse is disconnected at
its next request, and a re-authentication as someone else is refused."""

from __future__ import annotations

import time

import confluent_kafka

from broker.raw import RawClient, request_module

from .conftest import USERS, StartSecure
from .tls_sasl_clients import end_offset

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
LIFETIME_MS = 1500


def _login(client: RawClient, user: str, password: str) -> object:
    handshake = request_module(SASL_HANDSHAKE, 1).SaslHandshakeRequest(mechanism="PLAIN")
    assert int(client.call(SASL_HANDSHAKE, 1, handshake).error_code) == 0
    token = b"\x00" + user.encode() + b"\x00" + password.encode()
    body = request_module(SASL_AUTHENTICATE, 2).SaslAuthenticateRequest(auth_bytes=token)
    return client.call(SASL_AUTHENTICATE, 2, body)


def _metadata(client: RawClient) -> int:
    return client.send(METADATA, 1, request_module(METADATA, 1).MetadataRequest(topics=None))


def test_librdkafka_reauthenticates_and_loses_nothing(secure_broker: StartSecure) -> None:
    broker = secure_broker(["SASL_PLAINTEXT", "PLAINTEXT"],
                           {"connections.max.reauth.ms": str(LIFETIME_MS)})
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice", "sasl.password": USERS["alice"][1], "linger.ms": 0,
    })
    errors: list[object] = []
    sent = 0
    deadline = time.monotonic() + 4 * LIFETIME_MS / 1000
    while time.monotonic() < deadline:
        producer.produce("reauth", b"x%d" % sent, partition=0,
                         on_delivery=lambda error, _m: errors.append(error) if error else None)
        sent += 1
        producer.poll(0.05)
    assert producer.flush(30) == 0 and not errors, errors
    assert end_offset(broker.bootstrap("PLAINTEXT"), "reauth") == sent
    assert "re-authenticated as User:alice with SCRAM-SHA-256" in broker.log_text()


def test_a_lapsed_session_is_closed_at_the_next_request(secure_broker: StartSecure) -> None:
    broker = secure_broker(["SASL_PLAINTEXT"], {"connections.max.reauth.ms": "300"})
    with RawClient(broker.bootstrap("SASL_PLAINTEXT"), timeout_s=20) as client:
        answer = _login(client, "alice", USERS["alice"][1])
        assert answer.session_lifetime.total_seconds() * 1000 == 300
        assert client.read_response(METADATA, 1, _metadata(client)).brokers
        time.sleep(0.4)  # past the lifetime: the point of the test, not a wait for a condition
        _metadata(client)
        assert client.read_frame() == b""
        broker.wait_for_log("SASL session expired")


def test_reauthentication_cannot_change_the_principal(secure_broker: StartSecure) -> None:
    broker = secure_broker(["SASL_PLAINTEXT"], {"connections.max.reauth.ms": "60000"})
    with RawClient(broker.bootstrap("SASL_PLAINTEXT"), timeout_s=20) as client:
        assert int(_login(client, "alice", USERS["alice"][1]).error_code) == 0
        again = _login(client, "alice", USERS["alice"][1])  # the same principal: fine
        assert int(again.error_code) == 0
        other = _login(client, "bob512", USERS["bob512"][1])
        assert int(other.error_code) == 58  # SASL_AUTHENTICATION_FAILED
        assert client.read_frame() == b""
    broker.wait_for_log("re-authentication as User:bob512, not User:alice")
