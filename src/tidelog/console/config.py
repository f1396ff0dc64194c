"""Console settings: command-line options over an optional TOML file.

    bootstrap = "127.0.0.1:9092"
    listen = "127.0.0.1:8080"
    password = "secret"          # optional sign-in when the cluster has no SASL
    metrics = ["http://127.0.0.1:9644/metrics"]
    audit_log = "console-audit.jsonl"
    timeout = 10.0
    [client]                     # Kafka client settings for every client the console makes
    "security.protocol" = "SASL_SSL"    # SASL_*: users sign in with their Kafka credentials
    "sasl.mechanism" = "SCRAM-SHA-256"  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER
    "ssl.ca.location" = "ca.pem"

With OAUTHBEARER users sign in by pasting a token (a JWT); `oauthbearer_principal_claim`
names the claim shown as the user (the broker's `sasl.oauthbearer.sub.claim.name`).

Mutual TLS with a certificate per console user (security.protocol SSL):

    [tls_users.alice]            # alice signs in with this password; the console then
    password = "alice-console"   # connects with her certificate, so the broker's principal
    "ssl.certificate.location" = "alice-cert.pem"   # (and its ACLs) is hers
    "ssl.key.location" = "alice-key.pem"
    # "ssl.key.password" = "..."
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SIGN_IN_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# librdkafka settings that would make it fetch or forge its own token instead of the user's.
OWN_TOKEN_SETTINGS = ("sasl.oauthbearer.", "enable.sasl.oauthbearer.unsecure.jwt")
# What a [tls_users.NAME] table may hold: its console password and its client certificate.
TLS_USER_CERTIFICATE = ("ssl.certificate.location", "ssl.key.location", "ssl.key.password")


class ConsoleConfigError(ValueError):
    pass


@dataclass
class ConsoleConfig:
    bootstrap: str = "127.0.0.1:9092"
    listen: str = "127.0.0.1:8080"
    password: str | None = None
    metrics: list[str] = field(default_factory=list)
    audit_log: Path = Path("tidelog-console-audit.jsonl")
    timeout: float = 10.0
    metrics_interval: float = 5.0
    client: dict[str, str] = field(default_factory=dict)
    max_session_clients: int = 32  # signed-in users whose clients stay open at once (SASL)
    oauthbearer_principal_claim: str = "sub"  # the token claim shown as the user (OAUTHBEARER)
    # Mutual TLS, a certificate per console user: name -> {password, ssl.* of the certificate}
    tls_users: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def security_protocol(self) -> str:
        return self.client.get("security.protocol", "PLAINTEXT").upper()

    @property
    def sasl_mechanism(self) -> str | None:
        """The mechanism users sign in with, or None when the cluster has no SASL."""
        if not self.security_protocol.startswith("SASL_"):
            return None
        return self.client.get("sasl.mechanism", "").upper()


def load_console_config(path: Path | None, **overrides: Any) -> ConsoleConfig:
    values: dict[str, Any] = {}
    if path is not None:
        try:
            values = tomllib.loads(path.read_text("utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise ConsoleConfigError(f"{path}: {error}") from None
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = set(ConsoleConfig.__dataclass_fields__)
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConsoleConfigError(f"unknown console settings: {', '.join(unknown)}")
    config = ConsoleConfig(**values)
    try:
        if isinstance(config.metrics, str):
            config.metrics = [config.metrics]
        config.metrics = [str(url) for url in config.metrics]
        config.audit_log = Path(config.audit_log)
        config.timeout = float(config.timeout)
        config.metrics_interval = float(config.metrics_interval)
        config.client = {str(k): str(v) for k, v in dict(config.client).items()}
        if config.password is not None:
            config.password = str(config.password)
        config.max_session_clients = int(config.max_session_clients)
        config.oauthbearer_principal_claim = str(config.oauthbearer_principal_claim)
        config.tls_users = {str(name): {str(k): str(v) for k, v in dict(table).items()}
                            for name, table in dict(config.tls_users).items()}
    except (TypeError, ValueError) as error:
        raise ConsoleConfigError(f"bad console setting: {error}") from None
    if config.timeout <= 0 or config.metrics_interval <= 0:
        raise ConsoleConfigError("timeout and metrics_interval must be positive")
    _check_security(config)
    return config


def _check_security(config: ConsoleConfig) -> None:
    protocol = config.security_protocol
    if protocol not in SECURITY_PROTOCOLS:
        raise ConsoleConfigError(f"security.protocol must be one of "
                                 f"{', '.join(SECURITY_PROTOCOLS)}, got {protocol!r}")
    if config.tls_users:
        _check_tls_users(config)
    if config.max_session_clients < 1:
        raise ConsoleConfigError("max_session_clients must be at least 1")
    mechanism = config.sasl_mechanism
    if mechanism is None:
        return
    if mechanism not in SIGN_IN_MECHANISMS:
        raise ConsoleConfigError(
            f"sasl.mechanism must be one of {', '.join(SIGN_IN_MECHANISMS)} (users sign in "
            f"with a name and password, or a token), got {mechanism or 'nothing'!r}")
    own_token = sorted(k for k in config.client if k.startswith(OWN_TOKEN_SETTINGS))
    if own_token:
        raise ConsoleConfigError(f"{', '.join(own_token)}: with OAUTHBEARER each user signs in "
                                 f"with their own token; leave these out of [client]")
    given = sorted(set(config.client) & {"sasl.username", "sasl.password", "sasl.jaas.config"})
    if given:
        raise ConsoleConfigError(f"{', '.join(given)}: with SASL each user signs in with their "
                                 f"own Kafka credentials; leave these out of [client]")
    if config.password is not None:
        raise ConsoleConfigError("password is the sign-in for clusters without SASL; with "
                                 "SASL users sign in with their Kafka credentials")


def _check_tls_users(config: ConsoleConfig) -> None:
    if config.security_protocol != "SSL":
        raise ConsoleConfigError("tls_users (a client certificate per console user) needs "
                                 "security.protocol SSL (mutual TLS)")
    if config.password is not None:
        raise ConsoleConfigError("password and tls_users exclude each other: with tls_users "
                                 "each user signs in with their own password")
    shared = sorted(set(config.client) & set(TLS_USER_CERTIFICATE))
    if shared:
        raise ConsoleConfigError(f"{', '.join(shared)}: with tls_users each user's certificate "
                                 f"is in their table; leave these out of [client]")
    for name, table in config.tls_users.items():
        unknown = sorted(set(table) - {"password", *TLS_USER_CERTIFICATE})
        if unknown:
            raise ConsoleConfigError(f"tls_users.{name}: unknown settings {', '.join(unknown)}")
        if not table.get("password") or not table.get("ssl.certificate.location"):
            raise ConsoleConfigError(f"tls_users.{name} needs a password and an "
                                     f"ssl.certificate.location")
