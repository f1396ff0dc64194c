"""One broker for the console's per-user identity tests (test_oauthbearer.py,
test_tls_users.py), started once per package: a SASL_PLAINTEXT listener taking OAUTHBEARER
(RS256 JWTs checked against a JWKS file) and an SSL listener requiring client certificates
(CN mapped to the principal), with the ACL authorizer; `ops-admin` (a token) and `admin` (a
certificate) are super users. Helpers make the tokens and certificates."""

from __future__ import annotations

import base64
import datetime
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from conftest import BrokerFactory, BrokerProcess
from tidelog.cli.certs import certs_command
from tidelog.cluster.zookeeper_server import free_port

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ISSUER, AUDIENCE = "https://issuer.example", "kafka"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwks() -> str:
    numbers = KEY.public_key().public_numbers()
    n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
    return json.dumps({"keys": [{"kty": "RSA", "kid": "k1", "use": "sig", "n": b64(n),
                                 "e": b64(numbers.e.to_bytes(3, "big"))}]})


def token(sub: str | None, *, lifetime_s: float = 600, key: Any = KEY) -> str:
    """An RS256 JWT as an identity provider would issue it."""
    claims: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "iat": int(time.time()) - 5,
                              "exp": int(time.time() + lifetime_s)}
    if sub is not None:
        claims["sub"] = sub
    header = b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": "k1"}).encode())
    signed = f"{header}.{b64(json.dumps(claims).encode())}"
    signature = key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signed}.{b64(signature)}"


def issue(directory: Path, cn: str, ca_cert: x509.Certificate, ca_key: Any) -> None:
    """A client certificate for `cn` signed by the CA: {cn}-cert.pem and {cn}-key.pem."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Tidelog"),
                         x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "clients"),
                         x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
            .sign(ca_key, hashes.SHA256()))
    (directory / f"{cn}-cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / f"{cn}-key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))


def self_signed(directory: Path, cn: str) -> None:
    """A client certificate from a CA of its own (the broker does not trust it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{cn} CA")])
    now = datetime.datetime.now(datetime.UTC)
    ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
          .public_key(key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
          .sign(key, hashes.SHA256()))
    issue(directory, cn, ca, key)


@dataclass
class IdentityBroker:
    broker: BrokerProcess
    oauth_bootstrap: str  # SASL_PLAINTEXT, OAUTHBEARER
    tls_bootstrap: str  # SSL, client certificates required
    certs: Path  # ca.pem; admin-, carol- and mallory-cert.pem/-key.pem


def start_identity_broker(factory: BrokerFactory, tmp: Path) -> IdentityBroker:
    certs = tmp / "certs"
    certs_command.main(["--dir", str(certs)], standalone_mode=False)  # `tidelog certs`
    ca_cert = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((certs / "ca-key.pem").read_bytes(), None)
    for cn in ("admin", "carol"):
        issue(certs, cn, ca_cert, ca_key)
    self_signed(certs, "mallory")
    (tmp / "jwks.json").write_text(jwks())
    sasl_port, ssl_port = free_port(), free_port()
    broker = factory(None, listen=None, settings={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},SSL://127.0.0.1:{ssl_port}",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.jwks.endpoint.url": f"file://{tmp / 'jwks.json'}",
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "broker.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=clients,.*$/$1/,DEFAULT",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ops-admin;User:admin",
        "connection.failed.authentication.delay.ms": "10",
        "group.initial.rebalance.delay.ms": "0"})
    return IdentityBroker(broker, f"127.0.0.1:{sasl_port}", f"127.0.0.1:{ssl_port}", certs)
