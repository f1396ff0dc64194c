"""TLS with real clients: produce and consume over SSL (confluent-kafka, kafka-python,
aiokafka, kcat), mutual TLS with ssl.principal.mapping.rules, and refusals (a client
certificate from another CA, none when required, a server the client does not trust, a
handshake that never comes): refused, nothing written, the broker keeps serving."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import time
from pathlib import Path

import confluent_kafka
import pytest

from .conftest import Certs, StartSecure, tls_settings
from .tls_sasl_clients import ROUNDTRIPS, Security, create_topic, end_offset, values


@pytest.mark.parametrize("client", sorted(ROUNDTRIPS))
def test_produce_and_consume_over_ssl(secure_broker: StartSecure, certs: Certs,
                                      client: str) -> None:
    broker = secure_broker(["SSL", "PLAINTEXT"], tls_settings(certs))
    topic = f"ssl-{client}"
    security = Security("SSL", ca=certs["ca.pem"])
    got = ROUNDTRIPS[client](broker.bootstrap("SSL"), topic, security)
    assert got == values(topic, 20)
    assert end_offset(broker.bootstrap("PLAINTEXT"), topic) == 20


@pytest.mark.parametrize("client", sorted(ROUNDTRIPS))
def test_mutual_tls_maps_the_certificate_to_a_principal(
    secure_broker: StartSecure, certs: Certs, client: str
) -> None:
    settings = tls_settings(certs, "required") | {
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=clients,.*$/$1/L,DEFAULT",
    }
    broker = secure_broker(["SSL"], settings)
    topic = f"mtls-{client}"
    security = Security("SSL", ca=certs["ca.pem"], cert=certs["client-cert.pem"],
                        key=certs["client-key.pem"])
    assert ROUNDTRIPS[client](broker.bootstrap("SSL"), topic, security) == values(topic, 20)
    # The broker saw the certificate CN=Alice,OU=clients,O=Tidelog as User:alice.
    match = broker.wait_for_log(r"TLS client (\S+) is (\S+)")
    assert match.group(1) == "CN=Alice,OU=clients,O=Tidelog"
    assert match.group(2) == "User:alice"


def _refused_producer(bootstrap: str, topic: str, conf: dict[str, str]) -> None:
    """Produce one message with a short timeout: it must fail, never be delivered."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **conf,
                                         "message.timeout.ms": 4000,
                                         "socket.connection.setup.timeout.ms": 3000})
    outcomes: list[object] = []
    producer.produce(topic, b"must not be written", partition=0,
                     on_delivery=lambda error, _m: outcomes.append(error))
    producer.flush(15)
    assert len(outcomes) == 1 and outcomes[0] is not None, outcomes


def test_client_certificate_from_another_ca_is_refused(
    secure_broker: StartSecure, certs: Certs, other_certs: Certs
) -> None:
    broker = secure_broker(["SSL", "PLAINTEXT"], tls_settings(certs, "required"))
    create_topic(broker.bootstrap("PLAINTEXT"), "guarded")
    _refused_producer(broker.bootstrap("SSL"), "guarded", {
        "security.protocol": "SSL", "ssl.ca.location": certs["ca.pem"],
        "ssl.certificate.location": other_certs["client-cert.pem"],
        "ssl.key.location": other_certs["client-key.pem"],
    })
    assert end_offset(broker.bootstrap("PLAINTEXT"), "guarded") == 0


def test_missing_client_certificate_is_refused_when_required(
    secure_broker: StartSecure, certs: Certs
) -> None:
    broker = secure_broker(["SSL", "PLAINTEXT"], tls_settings(certs, "required"))
    create_topic(broker.bootstrap("PLAINTEXT"), "guarded")
    _refused_producer(broker.bootstrap("SSL"), "guarded",
                      {"security.protocol": "SSL", "ssl.ca.location": certs["ca.pem"]})
    assert end_offset(broker.bootstrap("PLAINTEXT"), "guarded") == 0
    # ...and a client with a good certificate is served by the same listener.
    security = Security("SSL", ca=certs["ca.pem"], cert=certs["client-cert.pem"],
                        key=certs["client-key.pem"])
    got = ROUNDTRIPS["confluent"](broker.bootstrap("SSL"), "guarded", security, 3)
    assert got == values("guarded", 3)


def test_client_that_does_not_trust_the_broker_writes_nothing(
    secure_broker: StartSecure, certs: Certs, other_certs: Certs
) -> None:
    broker = secure_broker(["SSL", "PLAINTEXT"], tls_settings(certs))
    create_topic(broker.bootstrap("PLAINTEXT"), "guarded")
    _refused_producer(broker.bootstrap("SSL"), "guarded",
                      {"security.protocol": "SSL", "ssl.ca.location": other_certs["ca.pem"]})
    assert end_offset(broker.bootstrap("PLAINTEXT"), "guarded") == 0


def test_a_silent_tls_handshake_is_closed_after_the_timeout(
    secure_broker: StartSecure, certs: Certs
) -> None:
    """Slow-loris: connections that never handshake are closed after ssl.handshake.timeout.ms;
    meanwhile and afterwards the listener serves real clients."""
    broker = secure_broker(["SSL"], tls_settings(certs) | {"ssl.handshake.timeout.ms": "700"})
    silent = [socket.create_connection(("127.0.0.1", broker.ports["SSL"]), timeout=20)
              for _ in range(20)]
    security = Security("SSL", ca=certs["ca.pem"])
    assert ROUNDTRIPS["confluent"](broker.bootstrap("SSL"), "canary", security, 5) == values(
        "canary", 5)
    started = time.monotonic()
    for sock in silent:
        assert sock.recv(1) == b""  # closed by the broker (recv times out after 20 s)
        sock.close()
    assert time.monotonic() - started < 20


def test_inline_pem_key_store(secure_broker: StartSecure, certs: Certs) -> None:
    """ssl.keystore.key + ssl.keystore.certificate.chain (Kafka's inline PEM) instead of a
    file, for one listener only (listener.name.<name>.*)."""
    with open(certs["broker-key.pem"]) as key, open(certs["broker-cert.pem"]) as chain:
        settings = {
            "listener.name.ssl.ssl.keystore.key": key.read(),
            "listener.name.ssl.ssl.keystore.certificate.chain": chain.read(),
        }
    broker = secure_broker(["SSL"], settings)
    security = Security("SSL", ca=certs["ca.pem"])
    got = ROUNDTRIPS["kcat"](broker.bootstrap("SSL"), "inline", security, 5)
    assert got == values("inline", 5)


def _handshake_ok(port: int, ca: str) -> bool:
    context = ssl.create_default_context(cafile=ca)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock, \
                context.wrap_socket(sock, server_hostname="127.0.0.1"):
            return True
    except (ssl.SSLError, OSError):
        return False


def test_key_store_reloads_when_the_file_changes(
    secure_broker: StartSecure, certs: Certs, other_certs: Certs, tmp_path: Path
) -> None:
    key_store = tmp_path / "broker.pem"
    shutil.copyfile(certs["broker.pem"], key_store)
    broker = secure_broker(["SSL"], tls_settings(certs) | {
        "ssl.keystore.location": str(key_store)})
    port = broker.ports["SSL"]
    assert _handshake_ok(port, certs["ca.pem"])
    assert not _handshake_ok(port, other_certs["ca.pem"])
    # A half-written file is refused and the old certificate stays.
    (tmp_path / "garbage.pem").write_text("-----BEGIN PRIVATE KEY-----\nnot pem\n")
    os.replace(tmp_path / "garbage.pem", key_store)
    broker.wait_for_log("changed but does not load")
    assert _handshake_ok(port, certs["ca.pem"])
    # The new certificate (another CA's) is presented to new connections within a tick.
    shutil.copyfile(other_certs["broker.pem"], tmp_path / "new.pem")
    os.replace(tmp_path / "new.pem", key_store)
    broker.wait_for_log(r"ssl.keystore.location \S+ reloaded")
    assert _handshake_ok(port, other_certs["ca.pem"])
    assert not _handshake_ok(port, certs["ca.pem"])
    security = Security("SSL", ca=other_certs["ca.pem"])
    assert ROUNDTRIPS["kcat"](broker.bootstrap("SSL"), "reloaded", security, 3) == values(
        "reloaded", 3)


def test_enabled_protocols_and_cipher_suites(secure_broker: StartSecure, certs: Certs) -> None:
    broker = secure_broker(["SSL"], tls_settings(certs) | {
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "ECDHE-ECDSA-AES256-GCM-SHA384",  # the certs are P-256 keys
    })
    context = ssl.create_default_context(cafile=certs["ca.pem"])
    with socket.create_connection(("127.0.0.1", broker.ports["SSL"]), timeout=10) as sock, \
            context.wrap_socket(sock, server_hostname="127.0.0.1") as tls:
        assert tls.version() == "TLSv1.2"
        assert tls.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
    only_13 = ssl.create_default_context(cafile=certs["ca.pem"])
    only_13.minimum_version = ssl.TLSVersion.TLSv1_3
    with socket.create_connection(("127.0.0.1", broker.ports["SSL"]), timeout=10) as sock, \
            pytest.raises(ssl.SSLError):
        only_13.wrap_socket(sock, server_hostname="127.0.0.1")
