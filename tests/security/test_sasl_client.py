"""The broker's own SASL client (inter-broker connections) against the broker's SASL servers,
sans-I/O: both SCRAM mechanisms and PLAIN complete; a wrong password, a server that does not
extend the client's nonce, a forged server signature and junk server messages all fail with
SaslAuthenticationError; Kafka's JAAS line gives the credentials."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelog.security.plain import PlainServer
from tidelog.security.sasl import SaslAuthenticationError
from tidelog.security.sasl_client import SaslClient, jaas_credentials
from tidelog.security.scram import ScramServer
from tidelog.security.scram_credentials import make_credential

from .test_mechanisms import Source


def _source(mechanism: str, password: str = "broker-secret") -> Source:
    return Source({"broker": {mechanism: make_credential(mechanism, password)}})


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_authenticates_and_checks_the_server(mechanism: str) -> None:
    server = ScramServer(mechanism, _source(mechanism), "servernonce")
    client = SaslClient(mechanism, "broker", "broker-secret")
    final = client.evaluate(server.evaluate(client.first()))
    assert final is not None
    assert client.evaluate(server.evaluate(final)) is None
    assert client.complete and server.complete and server.username == "broker"


def test_scram_wrong_password_is_refused_by_the_server() -> None:
    server = ScramServer("SCRAM-SHA-512", _source("SCRAM-SHA-512"), "servernonce")
    client = SaslClient("SCRAM-SHA-512", "broker", "not-the-password")
    final = client.evaluate(server.evaluate(client.first()))
    assert final is not None
    with pytest.raises(SaslAuthenticationError, match="wrong password"):
        server.evaluate(final)


def test_a_server_without_the_credential_cannot_impersonate_the_broker() -> None:
    """The impostor knows another password: its server-final signature does not match."""
    impostor = ScramServer("SCRAM-SHA-256", _source("SCRAM-SHA-256", "other"), "servernonce")
    client = SaslClient("SCRAM-SHA-256", "broker", "broker-secret")
    final = client.evaluate(impostor.evaluate(client.first()))
    assert final is not None
    with pytest.raises(SaslAuthenticationError):
        impostor.evaluate(final)  # the impostor refuses the proof...
    forged = b"v=" + b"A" * 44  # ...and a forged acceptance is caught by the client
    with pytest.raises(SaslAuthenticationError, match="signature"):
        client.evaluate(forged)


@pytest.mark.parametrize("server_first", [
    b"r=someoneelse,s=c2FsdA==,i=4096",  # does not extend our nonce
    b"r=NONCE,s=c2FsdA==,i=4096",  # echoes our nonce without adding to it
    b"r=NONCEmore,s=!!!,i=4096",  # salt not base64
    b"r=NONCEmore,s=c2FsdA==,i=10",  # iterations under RFC 7677's minimum
    b"r=NONCEmore,s=c2FsdA==,i=999999999",  # a denial of service by iterations
    b"\xff\xfe",  # not UTF-8
])
def test_bad_server_first_messages_are_refused(server_first: bytes) -> None:
    client = SaslClient("SCRAM-SHA-256", "broker", "x", nonce="NONCE")
    client.first()
    with pytest.raises(SaslAuthenticationError):
        client.evaluate(server_first)


@given(st.binary(max_size=200), st.binary(max_size=200))
def test_random_server_messages_fail_cleanly(first: bytes, second: bytes) -> None:
    client = SaslClient("SCRAM-SHA-512", "broker", "x", nonce="n")
    client.first()
    try:
        client.evaluate(first)
        client.evaluate(second)
    except SaslAuthenticationError:
        return
    raise AssertionError("random bytes completed a SCRAM exchange")


def test_plain_client_against_the_plain_server() -> None:
    source = _source("SCRAM-SHA-256")  # PLAIN checks the SCRAM credentials (docs/security.md)
    server = PlainServer(source)
    client = SaslClient("PLAIN", "broker", "broker-secret")
    assert client.evaluate(server.evaluate(client.first())) is None
    assert client.complete and server.complete


def test_jaas_line_as_kafka_writes_it() -> None:
    line = ('org.apache.kafka.common.security.scram.ScramLoginModule required\n'
            '    username="broker" password="p\\"w=d;";')
    assert jaas_credentials(line) == ("broker", 'p"w=d;')
    with pytest.raises(ValueError, match="username"):
        jaas_credentials("org.apache.kafka.common.security.plain.PlainLoginModule required;")
