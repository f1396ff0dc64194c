"""`tidelog certs --dir DIR`: a throw-away CA, a broker certificate and a client certificate,
in PEM, for trying TLS and mutual TLS (docs/security.md). Not for production.

    ca.pem              the CA certificate (ssl.truststore.location for both sides)
    ca-key.pem          its private key
    broker.pem          broker private key + certificate + CA (ssl.keystore.location)
    broker-key.pem, broker-cert.pem   the same, apart (for clients that want them so)
    client.pem, client-key.pem, client-cert.pem   a client (CN from --client-cn)

The broker certificate names --host (DNS or IP) and localhost/127.0.0.1 as subject
alternative names, so clients that verify the host name accept it.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import Any

import click


@click.command("certs")
@click.option("--dir", "directory", type=click.Path(path_type=Path, file_okay=False),
              required=True, help="Where to write the PEM files (created).")
@click.option("--host", "hosts", multiple=True, default=("localhost", "127.0.0.1"),
              show_default=True, help="Broker host name or IP for the certificate (repeat).")
@click.option("--client-cn", default="client", show_default=True,
              help="The client certificate's common name.")
@click.option("--days", type=int, default=365, show_default=True)
def certs_command(directory: Path, hosts: tuple[str, ...], client_cn: str, days: int) -> None:
    """Make a CA, a broker and a client certificate (PEM) for TLS and mutual TLS."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    not_after = now + datetime.timedelta(days=days)

    def key() -> Any:
        return ec.generate_private_key(ec.SECP256R1())

    def name(common_name: str, unit: str) -> x509.Name:
        return x509.Name([
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Tidelog"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ])

    ca_key = key()
    ca_name = name("Tidelog test CA", "CA")
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False),
                       critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(common_name: str, unit: str, usage: Any, alt_names: list[Any]) -> tuple[Any, Any]:
        leaf_key = key()
        builder = (
            x509.CertificateBuilder().subject_name(name(common_name, unit))
            .issuer_name(ca_name).public_key(leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if alt_names:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names),
                                            critical=False)
        return leaf_key, builder.sign(ca_key, hashes.SHA256())

    alt_names: list[Any] = []
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    broker_key, broker_cert = leaf(hosts[0], "broker", ExtendedKeyUsageOID.SERVER_AUTH,
                                   alt_names)
    client_key, client_cert = leaf(client_cn, "clients", ExtendedKeyUsageOID.CLIENT_AUTH, [])

    def key_pem(private_key: Any) -> bytes:
        return bytes(private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ))

    def cert_pem(certificate: Any) -> bytes:
        return bytes(certificate.public_bytes(serialization.Encoding.PEM))

    files = {
        "ca.pem": cert_pem(ca_cert),
        "ca-key.pem": key_pem(ca_key),
        "broker.pem": key_pem(broker_key) + cert_pem(broker_cert) + cert_pem(ca_cert),
        "broker-key.pem": key_pem(broker_key),
        "broker-cert.pem": cert_pem(broker_cert),
        "client.pem": key_pem(client_key) + cert_pem(client_cert) + cert_pem(ca_cert),
        "client-key.pem": key_pem(client_key),
        "client-cert.pem": cert_pem(client_cert),
    }
    for file_name, data in files.items():
        path = directory / file_name
        path.write_bytes(data)
        if file_name.endswith(("key.pem",)) or file_name in ("broker.pem", "client.pem"):
            path.chmod(0o600)
    click.echo(f"wrote {', '.join(files)} to {directory}")
    click.echo(f"broker: ssl.keystore.type=PEM ssl.keystore.location={directory}/broker.pem"
               f" ssl.truststore.type=PEM ssl.truststore.location={directory}/ca.pem")
