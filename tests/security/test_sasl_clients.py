"""SASL with real clients: every mechanism each client supports (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512), over SASL_PLAINTEXT and SASL_SSL; a wrong password and an unknown user are
refused with the same message and nothing is written. Users come from `tidelog users add`
before the first start (alice: SCRAM-SHA-256, bob512: SCRAM-SHA-512; PLAIN checks both)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from conftest import BrokerFactory

from .conftest import USERS, Certs, SecureBroker, tidelog, tls_settings
from .tls_sasl_clients import ROUNDTRIPS, Security, create_topic, end_offset, values

LOGIN = {"PLAIN": "alice", "SCRAM-SHA-256": "alice", "SCRAM-SHA-512": "bob512"}


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[SecureBroker]:
    tmp: Path = tmp_path_factory.mktemp("sasl")
    data_dir = tmp / "data"
    for name, (mechanism, password) in USERS.items():
        tidelog("users", "add", name, "--password", password, "--mechanism", mechanism,
                "--data-dir", str(data_dir))
    factory = BrokerFactory(tmp)
    settings = tls_settings(certs) | {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "connection.failed.authentication.delay.ms": "100",
    }
    try:
        process = factory(data_dir, settings=settings, listen=None)
        ports = {m.group(1): int(m.group(2)) for m in
                 re.finditer(r"listener (\S+) \(\S+\) on \S+:(\d+)", process.log_text())}
        yield SecureBroker(process, ports)
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


def _security(protocol: str, mechanism: str, certs: Certs, password: str | None = None,
              username: str | None = None) -> Security:
    user = username or LOGIN[mechanism]
    return Security(
        protocol, mechanism=mechanism, username=user,
        password=password if password is not None else USERS[LOGIN[mechanism]][1],
        ca=certs["ca.pem"] if protocol == "SASL_SSL" else None,
    )


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("client", sorted(ROUNDTRIPS))
def test_produce_and_consume_with_each_mechanism(
    sasl_broker: SecureBroker, certs: Certs, client: str, mechanism: str, protocol: str
) -> None:
    topic = f"sasl-{client}-{mechanism}-{protocol}".lower()
    security = _security(protocol, mechanism, certs)
    got = ROUNDTRIPS[client](sasl_broker.bootstrap(protocol), topic, security)
    assert got == values(topic, 20)
    assert end_offset(sasl_broker.bootstrap("PLAINTEXT"), topic) == 20


def test_plain_checks_a_scram_sha_512_only_user(sasl_broker: SecureBroker, certs: Certs) -> None:
    security = Security("SASL_PLAINTEXT", mechanism="PLAIN", username="bob512",
                        password=USERS["bob512"][1])
    got = ROUNDTRIPS["confluent"](sasl_broker.bootstrap("SASL_PLAINTEXT"), "plain-512",
                                  security, 3)
    assert got == values("plain-512", 3)


def _confluent_refusal(bootstrap: str, topic: str, security: Security) -> list[str]:
    """Produce once; returns the authentication errors librdkafka reported (delivery fails)."""
    errors: list[str] = []

    def on_error(error: confluent_kafka.KafkaError) -> None:
        if error.code() == confluent_kafka.KafkaError._AUTHENTICATION:
            errors.append(error.str())

    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, **security.librdkafka(), "message.timeout.ms": 5000,
        "error_cb": on_error,
    })
    outcomes: list[object] = []
    producer.produce(topic, b"must not be written", partition=0,
                     on_delivery=lambda error, _m: outcomes.append(error))
    producer.flush(20)
    assert len(outcomes) == 1 and outcomes[0] is not None
    return errors


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_and_unknown_user_are_refused_alike(
    sasl_broker: SecureBroker, certs: Certs, mechanism: str, protocol: str
) -> None:
    topic = f"refused-{mechanism}-{protocol}".lower()
    create_topic(sasl_broker.bootstrap("PLAINTEXT"), topic)
    wrong_password = _confluent_refusal(
        sasl_broker.bootstrap(protocol), topic,
        _security(protocol, mechanism, certs, password="not-the-password"),
    )
    unknown_user = _confluent_refusal(
        sasl_broker.bootstrap(protocol), topic,
        _security(protocol, mechanism, certs, username="nobody", password="whatever"),
    )
    expected = ("Authentication failed during authentication due to invalid credentials with"
                f" SASL mechanism {mechanism}")
    assert wrong_password and all(expected in error for error in wrong_password), wrong_password
    assert unknown_user and all(expected in error for error in unknown_user), unknown_user
    assert end_offset(sasl_broker.bootstrap("PLAINTEXT"), topic) == 0


def test_kafka_python_refused_with_a_wrong_password(sasl_broker: SecureBroker,
                                                    certs: Certs) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    create_topic(sasl_broker.bootstrap("PLAINTEXT"), "refused-kafka-python")
    security = _security("SASL_PLAINTEXT", "SCRAM-SHA-256", certs, password="wrong")
    failure = "SASL SCRAM-SHA-256 authentication failed: SCRAM: wrong password for 'alice'"
    before = sasl_broker.log_text().count(failure)
    with pytest.raises(KafkaError):
        producer = KafkaProducer(bootstrap_servers=sasl_broker.bootstrap("SASL_PLAINTEXT"),
                                 max_block_ms=5000, **security.kafka_python())
        try:
            producer.send("refused-kafka-python", b"x", partition=0).get(timeout=10)
        finally:
            producer.close(timeout=5)
    # kafka-python reports "Unable to bootstrap"; the broker says why it refused.
    _wait_for_count(sasl_broker, failure, before + 1)
    assert end_offset(sasl_broker.bootstrap("PLAINTEXT"), "refused-kafka-python") == 0


def test_aiokafka_refused_with_an_unknown_user(sasl_broker: SecureBroker, certs: Certs) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    create_topic(sasl_broker.bootstrap("PLAINTEXT"), "refused-aiokafka")
    security = _security("SASL_SSL", "PLAIN", certs, username="nobody", password="x")
    failure = "SASL PLAIN authentication failed: PLAIN: unknown user 'nobody'"
    before = sasl_broker.log_text().count(failure)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=sasl_broker.bootstrap("SASL_SSL"),
                                    request_timeout_ms=5000, **security.aiokafka())
        try:
            await producer.start()
            await producer.send_and_wait("refused-aiokafka", b"x", partition=0)
        finally:
            await producer.stop()

    with pytest.raises(KafkaError):
        asyncio.run(run())
    _wait_for_count(sasl_broker, failure, before + 1)
    assert end_offset(sasl_broker.bootstrap("PLAINTEXT"), "refused-aiokafka") == 0


def _wait_for_count(broker: SecureBroker, line: str, count: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while broker.log_text().count(line) < count:
        assert time.monotonic() < deadline, f"{line!r} logged fewer than {count} times"
        time.sleep(0.05)
