"""What a listener asks of its connections (name, TLS, SASL, principal mapping), and the
principal of a TLS client certificate. Pure values and functions; the connection applies them.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from tidelog.broker.net.sasl_authenticator import SaslSettings
from tidelog.security.principal import KafkaPrincipal
from tidelog.security.ssl_principal import MappingRule, map_principal, subject_dn


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """What a listener asks of its connections: its name (in every RequestContext), TLS,
    SASL, and how a TLS client certificate becomes a principal."""

    listener_name: str = "PLAINTEXT"
    tls: bool = False
    sasl: SaslSettings | None = None
    principal_rules: tuple[MappingRule, ...] = ()  # ssl.principal.mapping.rules
    sasl_max_receive_bytes: int = 524_288  # sasl.server.max.receive.size (Kafka's default)


PLAINTEXT_SECURITY = ListenerSecurity()


@dataclass(frozen=True, slots=True)
class CertificatePrincipal:
    dn: str  # RFC 2253, as Kafka writes it
    kafka: KafkaPrincipal  # after ssl.principal.mapping.rules


def certificate_principal(
    ssl_object: ssl.SSLObject | None, rules: tuple[MappingRule, ...]
) -> CertificatePrincipal | None:
    """SSL listener: the client certificate's subject through the mapping rules, or None when
    the client sent none (ssl.client.auth=none|requested: the connection stays ANONYMOUS).
    Raises PrincipalMappingError when no rule matches (the connection is refused)."""
    certificate = ssl_object.getpeercert() if ssl_object is not None else None
    subject = certificate.get("subject") if certificate else None
    if not subject:
        return None
    dn = subject_dn(subject)  # type: ignore[arg-type]
    return CertificatePrincipal(dn, map_principal(dn, rules))
