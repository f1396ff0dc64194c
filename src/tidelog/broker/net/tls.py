"""A listener's security from Kafka's settings: the server SSLContext (PEM key stores only)
and the SASL settings. Read once when the listener starts; a bad file or value is a
ConfigError naming the setting.

    ssl.keystore.type=PEM            (JKS and PKCS12 are refused: convert with openssl)
    ssl.keystore.location            PEM: the private key and the certificate chain
    ssl.keystore.key / ssl.keystore.certificate.chain   the same, inline
    ssl.key.password                 decrypts an encrypted private key
    ssl.truststore.type=PEM, ssl.truststore.location (or ssl.truststore.certificates inline)
    ssl.client.auth=none|requested|required
    ssl.enabled.protocols=TLSv1.2,TLSv1.3   ssl.cipher.suites (OpenSSL names; TLS 1.2 suites:
                                     Python cannot restrict TLS 1.3 suites)

Every name may be given per listener as `listener.name.<listener>.<name>` (Kafka's rule).
The key store file is watched (`KeyStoreWatch`): a changed file is loaded for new handshakes.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path

from tidelog.broker.config import BrokerConfig, ConfigError
from tidelog.broker.listener_config import ListenerSpec, listener_setting
from tidelog.broker.net.sasl_authenticator import SaslSettings, enabled_mechanisms
from tidelog.broker.net.security import ListenerSecurity
from tidelog.security.oauthbearer import JwksError, JwtValidator, load_jwks
from tidelog.security.sasl import SUPPORTED_MECHANISMS, CredentialSource
from tidelog.security.ssl_principal import PrincipalMappingError, parse_rules

DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000  # ssl.handshake.timeout.ms (Tidelog's; bounds slow-loris)
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100  # Kafka's connection.failed.authentication...
DEFAULT_SASL_MAX_RECEIVE_BYTES = 524_288  # Kafka's sasl.server.max.receive.size
DEFAULT_SASL_MECHANISMS = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
log = logging.getLogger("tidelog.broker.tls")
Setting = Callable[[str], "str | None"]  # a listener's view of the settings
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class KeyStoreWatch:
    """Certificate reload without a restart: `poll()` (every broker tick; one stat) loads
    ssl.keystore.location into the listener's SSLContext again when the file changed, so new
    handshakes present the new certificate; open connections keep theirs. A file that does
    not load (half-written, wrong password) is logged and the old certificate stays."""

    def __init__(self, context: ssl.SSLContext, location: str, password: str | None) -> None:
        self._context = context
        self._location = location
        self._password = password
        self._stamp = self._read_stamp()

    def _read_stamp(self) -> tuple[int, int] | None:
        try:
            status = os.stat(self._location)
        except OSError:
            return None
        return status.st_mtime_ns, status.st_size

    def poll(self) -> bool:
        stamp = self._read_stamp()
        if stamp is None or stamp == self._stamp:
            return False
        try:
            self._context.load_cert_chain(self._location, password=self._password)
        except (ssl.SSLError, OSError) as error:
            log.warning("ssl.keystore.location %s changed but does not load: %s",
                        self._location, error)
            return False
        finally:
            self._stamp = stamp
        log.info("ssl.keystore.location %s reloaded", self._location)
        return True


def key_store_watch(
    config: BrokerConfig, spec: ListenerSpec, context: ssl.SSLContext | None
) -> KeyStoreWatch | None:
    """A watch on the listener's key store file (None without TLS or with an inline one)."""
    location = listener_setting(config.raw, spec.name, "ssl.keystore.location")
    if context is None or not location:
        return None
    password = (listener_setting(config.raw, spec.name, "ssl.key.password")
                or listener_setting(config.raw, spec.name, "ssl.keystore.password"))
    return KeyStoreWatch(context, location, password)


def listener_security(
    config: BrokerConfig, spec: ListenerSpec, credentials: CredentialSource
) -> tuple[ListenerSecurity, ssl.SSLContext | None, float]:
    """(what connections enforce, the SSLContext or None, the TLS handshake timeout in s)."""

    def setting(name: str) -> str | None:
        return listener_setting(config.raw, spec.name, name)

    protocol = spec.security_protocol
    context = server_context(setting, spec.name) if protocol.uses_tls else None
    sasl = None
    if protocol.uses_sasl:
        try:
            mechanisms = enabled_mechanisms(
                setting("sasl.enabled.mechanisms") or DEFAULT_SASL_MECHANISMS,
                SUPPORTED_MECHANISMS,
            )
        except ValueError as error:
            raise ConfigError(str(error)) from None
        sasl = SaslSettings(
            mechanisms,
            credentials,
            _milliseconds(setting, "connection.failed.authentication.delay.ms",
                          DEFAULT_FAILED_AUTHENTICATION_DELAY_MS),
            _milliseconds(setting, "connections.max.reauth.ms", 0),
            _jwt_validator(setting) if "OAUTHBEARER" in mechanisms else None,
        )
    try:
        rules = parse_rules(setting("ssl.principal.mapping.rules"))
    except PrincipalMappingError as error:
        raise ConfigError(str(error)) from None
    handshake_ms = _milliseconds(setting, "ssl.handshake.timeout.ms",
                                 DEFAULT_HANDSHAKE_TIMEOUT_MS)
    security = ListenerSecurity(
        listener_name=spec.name, tls=protocol.uses_tls, sasl=sasl, principal_rules=rules,
        sasl_max_receive_bytes=max(_milliseconds(setting, "sasl.server.max.receive.size",
                                                 DEFAULT_SASL_MAX_RECEIVE_BYTES), 64),
    )
    return security, context, max(handshake_ms, 1) / 1000


def server_context(setting: Setting, listener: str) -> ssl.SSLContext:
    for name in ("ssl.keystore.type", "ssl.truststore.type"):
        kind = (setting(name) or "PEM").upper()
        if kind != "PEM":
            raise ConfigError(f"{name}={kind}: only PEM stores are supported (docs/security.md)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_key_store(context, setting, listener)
    _load_trust_store(context, setting)
    client_auth = (setting("ssl.client.auth") or "none").strip().lower()
    modes = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
             "required": ssl.CERT_REQUIRED}
    if client_auth not in modes:
        raise ConfigError(f"ssl.client.auth: none, requested or required, got {client_auth!r}")
    context.verify_mode = modes[client_auth]
    if client_auth != "none" and not context.get_ca_certs():
        raise ConfigError(f"ssl.client.auth={client_auth} needs ssl.truststore.location")
    protocols = [p.strip() for p in (setting("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3")
                 .split(",") if p.strip()]
    unknown = [p for p in protocols if p not in _PROTOCOLS]
    if unknown or not protocols:
        raise ConfigError(f"ssl.enabled.protocols: {unknown or 'none'} (known: TLSv1.2, TLSv1.3)")
    versions = sorted(_PROTOCOLS[p] for p in protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    suites = setting("ssl.cipher.suites")
    if suites and suites.strip():
        try:
            context.set_ciphers(":".join(s.strip() for s in suites.split(",") if s.strip()))
        except ssl.SSLError:
            raise ConfigError(f"ssl.cipher.suites: no usable suite in {suites!r}") from None
    return context


def _load_key_store(context: ssl.SSLContext, setting: Setting, listener: str) -> None:
    location = setting("ssl.keystore.location")
    password = setting("ssl.key.password") or setting("ssl.keystore.password")
    key, chain = setting("ssl.keystore.key"), setting("ssl.keystore.certificate.chain")
    try:
        if location:
            context.load_cert_chain(location, password=password)
        elif key and chain:
            # load_cert_chain reads files only: a private temporary file, removed at once.
            with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as handle:
                os.chmod(handle.name, 0o600)
                handle.write(key.strip() + "\n" + chain.strip() + "\n")
            try:
                context.load_cert_chain(handle.name, password=password)
            finally:
                Path(handle.name).unlink()
        else:
            raise ConfigError(
                f"listener {listener} uses TLS: set ssl.keystore.location (a PEM file with the"
                " private key and certificate chain)"
            )
    except (ssl.SSLError, OSError) as error:
        raise ConfigError(f"ssl.keystore.location {location or '(inline)'}: {error}") from None


def _load_trust_store(context: ssl.SSLContext, setting: Setting) -> None:
    location = setting("ssl.truststore.location")
    inline = setting("ssl.truststore.certificates")
    try:
        if location:
            context.load_verify_locations(cafile=location)
        elif inline:
            context.load_verify_locations(cadata=inline)
    except (ssl.SSLError, OSError) as error:
        raise ConfigError(f"ssl.truststore.location {location or '(inline)'}: {error}") from None


def _jwt_validator(setting: Setting) -> JwtValidator:
    """OAUTHBEARER's token checks from Kafka's sasl.oauthbearer.* names (KIP-768); the keys
    come from a JWKS file (`file:///path/jwks.json` or a path), read at start."""
    url = setting("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise ConfigError("OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (a JWKS file)")
    if url.startswith(("http://", "https://")):
        raise ConfigError("sasl.oauthbearer.jwks.endpoint.url: only file: URLs are supported")
    path = url.removeprefix("file://")
    try:
        keys = load_jwks(Path(path).read_bytes())
    except OSError as error:
        raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url {url}: {error.strerror}") from None
    except JwksError as error:
        raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url {url}: {error}") from None
    return JwtValidator(
        keys,
        expected_audience=setting("sasl.oauthbearer.expected.audience") or None,
        expected_issuer=setting("sasl.oauthbearer.expected.issuer") or None,
        principal_claim=setting("sasl.oauthbearer.sub.claim.name") or "sub",
        clock_skew_s=_milliseconds(setting, "sasl.oauthbearer.clock.skew.seconds", 30),
    )


def _milliseconds(setting: Setting, name: str, default: int) -> int:
    """A non-negative integer setting (milliseconds or bytes)."""
    value = setting(name)
    if value is None:
        return default
    if not value.strip().isdigit():
        raise ConfigError(f"{name}: expected a non-negative integer, got {value!r}")
    return int(value)

