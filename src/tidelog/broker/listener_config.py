"""Listeners as Kafka configures them: `listeners`, `advertised.listeners`,
`listener.security.protocol.map`, `inter.broker.listener.name`.

    listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093
    listeners=CLIENT://:9094,REPLICATION://10.0.0.5:9095
    listener.security.protocol.map=CLIENT:SASL_SSL,REPLICATION:SSL

A listener's name is its own security protocol unless the map says otherwise (Kafka's default
map is the identity on the four protocols). An empty host binds every interface; a port of 0
picks a free one. Pure: parsing and validation only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from tidelog.errors import TidelogError


class ListenerConfigError(TidelogError):
    """A listener setting is malformed; the message names the setting."""


class SecurityProtocol(Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    name: str  # upper case, as Kafka normalises it: "PLAINTEXT", "CLIENT"
    security_protocol: SecurityProtocol
    host: str  # "" binds every interface
    port: int
    advertised_host: str
    advertised_port: int  # 0 until bound when the listener's port is 0

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_protocol_map(text: str) -> dict[str, SecurityProtocol]:
    mapping: dict[str, SecurityProtocol] = {p.value: p for p in SecurityProtocol}
    for item in _items(text):
        name, separator, protocol = item.partition(":")
        if not separator or not name.strip():
            raise ListenerConfigError(
                f"listener.security.protocol.map: expected NAME:PROTOCOL, got {item!r}"
            )
        mapping[name.strip().upper()] = _protocol("listener.security.protocol.map", protocol)
    return mapping


def parse_endpoints(setting: str, text: str) -> list[tuple[str, str, int]]:
    """`NAME://host:port,...` -> [(NAME, host, port)]; names must be unique (as in Kafka)."""
    endpoints: list[tuple[str, str, int]] = []
    for item in _items(text):
        name, separator, address = item.partition("://")
        if not separator or not name:
            raise ListenerConfigError(f"{setting}: expected NAME://HOST:PORT, got {item!r}")
        host, colon, port_text = address.rpartition(":")
        if not colon or not port_text.isdigit() or int(port_text) > 65535:
            raise ListenerConfigError(f"{setting}: expected NAME://HOST:PORT, got {item!r}")
        name = name.upper()
        if any(name == seen for seen, _, _ in endpoints):
            raise ListenerConfigError(f"{setting}: listener name {name} appears twice")
        endpoints.append((name, host.strip("[]"), int(port_text)))
    if not endpoints:
        raise ListenerConfigError(f"{setting}: no listener given")
    return endpoints


def build_listeners(
    listeners: str,
    advertised: str | None,
    protocol_map: str | None,
    advertisable: str,
) -> tuple[ListenerSpec, ...]:
    """The listeners, first one first (the ready line and cluster registration use it).
    `advertisable`: the host advertised for a wildcard bind when advertised.listeners is
    silent."""
    protocols = parse_protocol_map(protocol_map or "")
    bound = parse_endpoints("listeners", listeners)
    advertised_by_name = {
        name: (host, port)
        for name, host, port in (parse_endpoints("advertised.listeners", advertised)
                                 if advertised else [])
    }
    names = {name for name, _, _ in bound}
    for name in advertised_by_name:
        if name not in names:
            raise ListenerConfigError(
                f"advertised.listeners: {name} is not one of the listeners ({', '.join(names)})"
            )
    specs = []
    for name, host, port in bound:
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerConfigError(
                f"listeners: {name} is not a security protocol and"
                " listener.security.protocol.map does not map it"
            )
        advertised_host, advertised_port = advertised_by_name.get(
            name, (host if host not in ("", "0.0.0.0", "::") else advertisable, port)
        )
        specs.append(
            ListenerSpec(name, protocol, host, port, advertised_host, advertised_port)
        )
    return tuple(specs)


def _protocol(setting: str, text: str) -> SecurityProtocol:
    try:
        return SecurityProtocol(text.strip().upper())
    except ValueError:
        known = ", ".join(p.value for p in SecurityProtocol)
        raise ListenerConfigError(
            f"{setting}: unknown security protocol {text!r} (known: {known})"
        ) from None


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


# Security settings a listener may override as `listener.name.<name>.<setting>` (Kafka's rule).
SECURITY_SETTINGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.cipher.suites", "ssl.principal.mapping.rules", "ssl.protocol",
    "ssl.endpoint.identification.algorithm", "ssl.handshake.timeout.ms",
    "sasl.enabled.mechanisms", "connection.failed.authentication.delay.ms",
    "sasl.server.max.receive.size", "connections.max.reauth.ms",
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.jaas.config",  # the inter-broker client's credentials (net/inter_broker.py)
})
# Which listener and mechanism brokers use between themselves (net/inter_broker.py).
INTER_BROKER_SETTINGS = frozenset({
    "inter.broker.listener.name", "security.inter.broker.protocol",
    "sasl.mechanism.inter.broker.protocol",
})
LISTENER_SETTINGS = frozenset({"listeners", "advertised.listeners",
                               "listener.security.protocol.map"})
_LISTENER_PREFIX = "listener.name."
_JAAS_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"})


def is_security_setting(name: str) -> bool:
    """A name `load_config` accepts for listeners and their security."""
    if name in SECURITY_SETTINGS or name in INTER_BROKER_SETTINGS or name in LISTENER_SETTINGS:
        return True
    if name.startswith(_LISTENER_PREFIX):
        _, _, setting = name[len(_LISTENER_PREFIX):].partition(".")
        mechanism, _, rest = setting.partition(".")
        # listener.name.<l>.<mechanism>.sasl.jaas.config: Kafka's per-mechanism JAAS line
        return setting in SECURITY_SETTINGS or (
            rest == "sasl.jaas.config" and mechanism.upper() in _JAAS_MECHANISMS)
    return False


def listener_setting(raw: Mapping[str, str], listener: str, name: str) -> str | None:
    """`listener.name.<listener>.<name>` if set, else `<name>`, else None (Kafka's lookup;
    the listener part is lower case, as Kafka writes it, or as given)."""
    for prefix in (f"{_LISTENER_PREFIX}{listener.lower()}.", f"{_LISTENER_PREFIX}{listener}."):
        value = raw.get(prefix + name)
        if value is not None:
            return value
    return raw.get(name)
