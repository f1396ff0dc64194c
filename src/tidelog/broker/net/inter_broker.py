"""How this broker connects to the others, from Kafka's settings for the inter-broker listener
(`inter.broker.listener.name` or `security.inter.broker.protocol`; default: the first
listener). Read once at start; a bad value is a ConfigError naming the setting.

    TLS   the listener's ssl.truststore.location (PEM CA bundle; else the system CAs) checks
          the other broker's certificate; ssl.keystore.location is presented when set (mutual
          TLS); ssl.endpoint.identification.algorithm=https (Kafka's default) checks the host
          name, an empty value turns that check off
    SASL  sasl.mechanism.inter.broker.protocol = PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
          (Kafka's default, GSSAPI, is not built: it must be set), enabled on the listener;
          the credentials from listener.name.<listener>.<mechanism>.sasl.jaas.config, or
          sasl.jaas.config:  ...ScramLoginModule required username="broker" password="...";

The principal the others see must be allowed CLUSTER_ACTION (super.users, or an ACL).
"""

from __future__ import annotations

import ssl

from tidelog.broker.config import BrokerConfig, ConfigError
from tidelog.broker.listener_config import ListenerSpec, listener_setting
from tidelog.broker.net.tls import DEFAULT_SASL_MECHANISMS
from tidelog.broker.peer_client import PeerSecurity
from tidelog.security.sasl_client import CLIENT_MECHANISMS, jaas_credentials

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def inter_broker_listener(config: BrokerConfig) -> ListenerSpec:
    name = config.inter_broker_listener_name
    for spec in config.listeners:
        if name is None or spec.name == name:
            return spec
    raise ConfigError(f"inter.broker.listener.name: {name} is not a listener")


def inter_broker_security(config: BrokerConfig, spec: ListenerSpec) -> PeerSecurity:
    protocol = spec.security_protocol
    context = _client_context(config, spec) if protocol.uses_tls else None
    if not protocol.uses_sasl:
        return PeerSecurity(ssl_context=context)
    mechanism = (config.raw.get("sasl.mechanism.inter.broker.protocol") or "").strip().upper()
    if mechanism not in CLIENT_MECHANISMS:
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol={mechanism or '(unset: GSSAPI)'}: the"
            f" inter-broker listener {spec.name} uses {protocol.value}; set it to one of"
            f" {', '.join(CLIENT_MECHANISMS)}")
    enabled = (listener_setting(config.raw, spec.name, "sasl.enabled.mechanisms")
               or DEFAULT_SASL_MECHANISMS).upper()
    if mechanism not in {m.strip() for m in enabled.split(",")}:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism} is not in the"
                          f" sasl.enabled.mechanisms of listener {spec.name} ({enabled})")
    jaas = (listener_setting(config.raw, spec.name, f"{mechanism.lower()}.sasl.jaas.config")
            or listener_setting(config.raw, spec.name, "sasl.jaas.config"))
    if not jaas:
        raise ConfigError(
            f"listener.name.{spec.name.lower()}.{mechanism.lower()}.sasl.jaas.config: the"
            " broker's own credentials for the inter-broker listener are not set")
    try:
        username, password = jaas_credentials(jaas)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return PeerSecurity(ssl_context=context, sasl_mechanism=mechanism, username=username,
                        password=password)


def _client_context(config: BrokerConfig, spec: ListenerSpec) -> ssl.SSLContext:
    def setting(name: str) -> str | None:
        return listener_setting(config.raw, spec.name, name)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    trust = setting("ssl.truststore.location")
    inline = setting("ssl.truststore.certificates")
    try:
        if trust:
            context.load_verify_locations(cafile=trust)
        elif inline:
            context.load_verify_locations(cadata=inline)
        else:
            context.load_default_certs()
    except (ssl.SSLError, OSError) as error:
        raise ConfigError(f"ssl.truststore.location {trust or '(inline)'}: {error}") from None
    key_store = setting("ssl.keystore.location")
    if key_store:  # presented when the other broker asks (ssl.client.auth)
        password = setting("ssl.key.password") or setting("ssl.keystore.password")
        try:
            context.load_cert_chain(key_store, password=password)
        except (ssl.SSLError, OSError) as error:
            raise ConfigError(f"ssl.keystore.location {key_store}: {error}") from None
    algorithm = setting("ssl.endpoint.identification.algorithm")
    context.check_hostname = (algorithm if algorithm is not None else "https").strip() != ""
    protocols = [p.strip() for p in (setting("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3")
                 .split(",") if p.strip() in _PROTOCOLS]
    if protocols:
        versions = sorted(_PROTOCOLS[p] for p in protocols)
        context.minimum_version, context.maximum_version = versions[0], versions[-1]
    return context
