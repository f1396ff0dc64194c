"""OAUTHBEARER with JWTs checked against a JWKS file: signature (RSA and EC), exp/nbf, iss,
aud, the principal claim; unsecured and HMAC tokens refused. Unit cases on the validator, then
confluent-kafka, kafka-python and aiokafka with a token, and an expired or
badly signed token refused with nothing written."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

from tidelog.security.oauthbearer import JwtValidator, OAuthBearerServer, load_jwks
from tidelog.security.sasl import SaslAuthenticationError

from .conftest import USERS, Certs, StartSecure, tls_settings
from .tls_sasl_clients import ROUNDTRIPS, Security, create_topic, end_offset, values

NOW = 1_800_000_000


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(value: int) -> str:
    return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwks() -> bytes:
    rsa_numbers = RSA_KEY.public_key().public_numbers()
    ec_numbers = EC_KEY.public_key().public_numbers()
    return json.dumps({"keys": [
        {"kty": "RSA", "kid": "rsa1", "use": "sig", "n": _int(rsa_numbers.n),
         "e": _int(rsa_numbers.e)},
        {"kty": "EC", "kid": "ec1", "crv": "P-256", "x": _int(ec_numbers.x),
         "y": _int(ec_numbers.y)},
    ]}).encode()


def jwt(claims: dict[str, Any], *, alg: str = "RS256", kid: str | None = "rsa1",
        key: Any = RSA_KEY) -> str:
    header: dict[str, Any] = {"alg": alg, "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    signed = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    if alg == "none":
        return signed + "."
    if alg.startswith("HS"):
        import hmac

        return signed + "." + _b64(hmac.digest(b"secret", signed.encode(), "sha256"))
    if alg.startswith("ES"):
        r, s = utils.decode_dss_signature(key.sign(signed.encode(), ec.ECDSA(hashes.SHA256())))
        return signed + "." + _b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))
    if alg.startswith("PS"):
        pss = padding.PSS(padding.MGF1(hashes.SHA256()), padding.PSS.DIGEST_LENGTH)
        return signed + "." + _b64(key.sign(signed.encode(), pss, hashes.SHA256()))
    return signed + "." + _b64(key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256()))


CLAIMS = {"sub": "svc-orders", "iss": "https://issuer.example", "aud": ["kafka", "other"],
          "exp": NOW + 600, "iat": NOW - 10}
VALIDATOR = JwtValidator(load_jwks(jwks()), expected_audience="kafka",
                         expected_issuer="https://issuer.example")


@pytest.mark.parametrize("token", [
    jwt(CLAIMS), jwt(CLAIMS, alg="ES256", kid="ec1", key=EC_KEY), jwt(CLAIMS, alg="PS256"),
])
def test_valid_tokens(token: str) -> None:
    assert VALIDATOR.validate(token, NOW * 1000) == "svc-orders"


@pytest.mark.parametrize("token", [
    jwt({**CLAIMS, "exp": NOW - 31}),  # expired beyond the 30 s skew
    jwt({k: v for k, v in CLAIMS.items() if k != "exp"}),  # no exp
    jwt({**CLAIMS, "nbf": NOW + 60}),  # not yet valid
    jwt(CLAIMS, key=OTHER_KEY),  # badly signed
    jwt(CLAIMS, alg="none"),  # unsecured JWS
    jwt(CLAIMS, alg="HS256"),  # HMAC: never with a public key
    jwt(CLAIMS, alg="ES256", kid="rsa1", key=EC_KEY),  # algorithm does not fit the key
    jwt(CLAIMS, kid="unknown"),
    jwt({**CLAIMS, "aud": "elsewhere"}),
    jwt({**CLAIMS, "iss": "https://evil.example"}),
    jwt({k: v for k, v in CLAIMS.items() if k != "sub"}),
    "not.a.jwt", "a.b", "", "e30.e30.",
])
def test_refused_tokens(token: str) -> None:
    with pytest.raises(SaslAuthenticationError):
        VALIDATOR.validate(token, NOW * 1000)


def test_principal_claim_and_message_framing() -> None:
    validator = JwtValidator(load_jwks(jwks()), principal_claim="client_id")
    token = jwt({"client_id": "app-7", "exp": NOW + 60})
    server = OAuthBearerServer(validator, lambda: NOW * 1000)
    assert server.evaluate(f"n,,\x01auth=Bearer {token}\x01\x01".encode()) == b""
    assert server.username == "app-7"
    for message in (f"n,,\x01auth=Bearer {token}\x01", f"n,a=other,\x01auth=Bearer {token}\x01\x01",
                    "n,,\x01auth=Basic abc\x01\x01", "garbage"):
        with pytest.raises(SaslAuthenticationError):
            OAuthBearerServer(validator, lambda: NOW * 1000).evaluate(message.encode())


@pytest.fixture
def oauth_broker(secure_broker: StartSecure, certs: Certs, tmp_path: Path) -> Any:
    (tmp_path / "jwks.json").write_bytes(jwks())
    settings = tls_settings(certs) | {
        "sasl.enabled.mechanisms": "OAUTHBEARER,SCRAM-SHA-256",
        "sasl.oauthbearer.jwks.endpoint.url": f"file://{tmp_path / 'jwks.json'}",
        "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.oauthbearer.expected.issuer": "https://issuer.example",
    }
    return secure_broker(["SASL_SSL", "PLAINTEXT"], settings)


def _live_claims() -> dict[str, Any]:
    return {**CLAIMS, "exp": int(time.time()) + 600, "iat": int(time.time()) - 5}


def _confluent_conf(broker: Any, certs: Certs, token: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "ssl.ca.location": certs["ca.pem"], "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token, time.time() + 600)}


def test_confluent_kafka_with_a_token(oauth_broker: Any, certs: Certs) -> None:
    conf = _confluent_conf(oauth_broker, certs, jwt(_live_claims()))
    producer = confluent_kafka.Producer(conf)
    for value in values("oauth", 10):
        producer.produce("oauth", value, partition=0)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({**conf, "group.id": "oauth-reader"})
    consumer.assign([confluent_kafka.TopicPartition("oauth", 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == values("oauth", 10)
    oauth_broker.wait_for_log("authenticated as User:svc-orders with OAUTHBEARER")


def test_kafka_python_with_a_token(oauth_broker: Any, certs: Certs) -> None:
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    token = jwt(_live_claims())

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return token

    producer = KafkaProducer(
        bootstrap_servers=oauth_broker.bootstrap("SASL_SSL"), security_protocol="SASL_SSL",
        ssl_cafile=certs["ca.pem"], sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=Provider(),
    )
    for value in values("oauth-kp", 5):
        producer.send("oauth-kp", value, partition=0).get(timeout=30)
    producer.close(timeout=10)
    assert end_offset(oauth_broker.bootstrap("PLAINTEXT"), "oauth-kp") == 5


@pytest.mark.parametrize("case", ["expired", "badly-signed"])
def test_bad_tokens_are_refused_and_write_nothing(oauth_broker: Any, certs: Certs,
                                                  case: str) -> None:
    topic = f"oauth-{case}"
    create_topic(oauth_broker.bootstrap("PLAINTEXT"), topic)
    claims = _live_claims()
    token = (jwt({**claims, "exp": int(time.time()) - 120}) if case == "expired"
             else jwt(claims, key=OTHER_KEY))
    errors: list[str] = []
    conf = _confluent_conf(oauth_broker, certs, token) | {
        "message.timeout.ms": 4000,
        "error_cb": lambda error: errors.append(error.str()),
    }
    producer = confluent_kafka.Producer(conf)
    outcomes: list[object] = []
    producer.produce(topic, b"must not be written", partition=0,
                     on_delivery=lambda error, _m: outcomes.append(error))
    producer.flush(20)
    assert len(outcomes) == 1 and outcomes[0] is not None
    assert any("Authentication failed" in error for error in errors), errors
    assert end_offset(oauth_broker.bootstrap("PLAINTEXT"), topic) == 0
    reason = "token expired" if case == "expired" else "bad signature"
    oauth_broker.wait_for_log(f"SASL OAUTHBEARER authentication failed: OAUTHBEARER: {reason}")
    # SCRAM users are still served on the same listener.
    scram = Security("SASL_SSL", "SCRAM-SHA-256", "alice", USERS["alice"][1],
                     ca=certs["ca.pem"])
    assert ROUNDTRIPS["confluent"](oauth_broker.bootstrap("SASL_SSL"), f"{topic}-scram", scram,
                                   3) == values(f"{topic}-scram", 3)


def test_aiokafka_with_a_token(oauth_broker: Any, certs: Certs) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider
    from aiokafka.helpers import create_ssl_context

    token = jwt(_live_claims())

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return token

    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=oauth_broker.bootstrap("SASL_SSL"), security_protocol="SASL_SSL",
            ssl_context=create_ssl_context(cafile=certs["ca.pem"]),
            sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider(),
        )
        await producer.start()
        try:
            for value in values("oauth-aio", 5):
                await producer.send_and_wait("oauth-aio", value, partition=0)
        finally:
            await producer.stop()

    asyncio.run(run())
    assert end_offset(oauth_broker.bootstrap("PLAINTEXT"), "oauth-aio") == 5
