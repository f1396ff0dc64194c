"""Against a SASL cluster every signed-in user talks to the cluster as themselves: their session
gets its own `Cluster` (admin, producer and browsing consumers) made with their credentials, so
the cluster's ACLs decide what they see and do.

Bounded: at most `limit` sessions have clients open; the least recently used are closed first
(and made again from the session's credentials on its next call). Sign-out and expiry close
them at once. Sign-in is checked by a real SASL handshake (`verify_credentials`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from tidelog.console.cluster import Cluster
from tidelog.console.config import TLS_USER_CERTIFICATE, ConsoleConfig
from tidelog.console.errors import BadRequest, ClusterError, Unauthenticated, describe_error
from tidelog.console.kafka_raw import API_VERSIONS, RawConnection, schema_module

MakeCluster = Callable[[Mapping[str, Any]], Cluster]
# librdkafka retries a refused SASL handshake for ever; these errors end the sign-in at once.
_AUTHENTICATION_ERRORS = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}


def sasl_settings(credentials: tuple[str, str], mechanism: str = "PLAIN") -> dict[str, Any]:
    """The client settings that make a client authenticate as the signed-in user: a name and
    password, or (OAUTHBEARER) the user's token, handed to librdkafka by `oauth_cb` (also read
    by kafka_raw's hand-made connections)."""
    user, secret = credentials
    if mechanism != "OAUTHBEARER":
        return {"sasl.username": user, "sasl.password": secret}
    expires = token_expiry(secret)

    def oauth_cb(_config: object) -> tuple[str, float, str, dict[str, str]]:
        # librdkafka asks again at 80% of the lifetime: the same token (a user signs in again
        # with a fresh one; the session ends when this one expires).
        return secret, expires, user, {}

    return {"oauth_cb": oauth_cb}


MAX_TOKEN_CHARS = 16384


def token_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT, NOT verified (the broker verifies the signature): only to name the
    user and the session's end. BadRequest for anything that is not a JWS compact token."""
    parts = token.split(".")
    if len(token) > MAX_TOKEN_CHARS or len(parts) != 3 or not all(parts[:2]):
        raise BadRequest(f"token must be a JWT (header.claims.signature, at most "
                         f"{MAX_TOKEN_CHARS} characters)")
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        raise BadRequest("token must be a JWT: its claims are not base64url JSON") from None
    if not isinstance(claims, dict):
        raise BadRequest("token must be a JWT: its claims are not a JSON object")
    return claims


def token_expiry(token: str) -> float:
    exp = token_claims(token).get("exp")
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        raise BadRequest("token has no exp claim (the broker refuses such tokens)")
    return float(exp)


SettingsFor = Callable[[tuple[str, str]], dict[str, Any]]


def tls_user_settings(config: ConsoleConfig) -> SettingsFor:
    """Mutual TLS with a certificate per console user: a session's clients present its
    user's certificate (`tls_users`), so the broker's principal is theirs."""
    def settings(credentials: tuple[str, str]) -> dict[str, Any]:
        table = config.tls_users[credentials[0]]
        return {k: v for k, v in table.items() if k in TLS_USER_CERTIFICATE}

    return settings


class SessionClusters:
    def __init__(self, make: MakeCluster, limit: int,
                 settings_for: SettingsFor = sasl_settings) -> None:
        self._make = make
        self._limit = limit
        self._settings_for = settings_for
        self._open: OrderedDict[str, Cluster] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str, credentials: tuple[str, str]) -> Cluster:
        evicted: list[Cluster] = []
        with self._lock:
            cluster = self._open.get(session_id)
            if cluster is None:
                cluster = self._make(self._settings_for(credentials))
                self._open[session_id] = cluster
                while len(self._open) > self._limit:
                    evicted.append(self._open.popitem(last=False)[1])
            self._open.move_to_end(session_id)
        for old in evicted:
            _close_later(old)
        return cluster

    def drop(self, session_id: str) -> None:
        with self._lock:
            cluster = self._open.pop(session_id, None)
        if cluster is not None:
            _close_later(cluster)

    def close_all(self) -> None:
        with self._lock:
            clusters = list(self._open.values())
            self._open.clear()
        for cluster in clusters:
            cluster.close()

    def __len__(self) -> int:
        return len(self._open)


def _close_later(cluster: Cluster) -> None:
    """Closing flushes the producer (up to a second): never on the event loop, which is where
    sessions expire and are evicted."""
    threading.Thread(target=cluster.close, name="close-session-clients", daemon=True).start()


def verify_credentials(base: Mapping[str, Any], credentials: tuple[str, str],
                       mechanism: str, timeout_s: float) -> None:
    """A SASL handshake with the user's credentials (librdkafka's, as every later call makes
    it), then one request (DescribeCluster): any answer, a CLUSTER_AUTHORIZATION_FAILED
    included, proves the user authenticated."""
    failures: list[KafkaError] = []

    def on_error(error: KafkaError) -> None:
        if error.code() in _AUTHENTICATION_ERRORS:
            failures.append(error)

    settings: dict[str, Any] = {**base, **sasl_settings(credentials, mechanism),
                                "error_cb": on_error,
                                "client.id": "tidelog-console-sign-in"}
    admin = AdminClient(settings)
    future = admin.describe_cluster(request_timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while not failures and not future.done() and time.monotonic() < deadline:
        admin.poll(0.05)
    if failures:
        future.cancel()
        what = "token" if mechanism == "OAUTHBEARER" else "user name or password"
        raise Unauthenticated(f"wrong {what}: the cluster refused the "
                              f"{mechanism} sign-in ({_words(failures[0])})")
    if not future.done():
        raise ClusterError("signing in: the cluster did not answer in time", 503)
    try:
        future.result(0)
    except KafkaException as error:
        kafka_error = error.args[0] if error.args else None
        if isinstance(kafka_error, KafkaError) and \
                kafka_error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
            return  # authenticated; the ACLs just do not let this user describe the cluster
        raise describe_error(error, "signing in") from None


def _words(error: KafkaError) -> str:
    """librdkafka's "host/bootstrap: SASL authentication error: TEXT (after 107ms in state
    AUTH_REQ)" without the address and the timing."""
    text = error.str()
    text = text.split("SASL authentication error: ", 1)[-1]
    return re.sub(r" \(after \d+ms in state \w+\)$", "", text)


def verify_certificate(settings: Mapping[str, Any], user: str, timeout_s: float) -> None:
    """One request (DescribeCluster) over mutual TLS with the user's certificate: any answer,
    a CLUSTER_AUTHORIZATION_FAILED included, proves the broker took the certificate."""
    failures: list[KafkaError] = []

    def on_error(error: KafkaError) -> None:
        if error.code() in (KafkaError._SSL, KafkaError._AUTHENTICATION):
            failures.append(error)

    # librdkafka reports a refused certificate only as "all brokers down": a TLS handshake of
    # our own names the broker's alert first (TLS 1.3 tells it on the first read).
    first = str(settings.get("bootstrap.servers", "")).split(",")[0].strip()
    host, _, port = first.rpartition(":")
    try:
        with RawConnection(host.strip("[]"), int(port), settings, timeout_s) as conn:
            module = schema_module(API_VERSIONS, 3)
            conn.call(API_VERSIONS, 3, module.ApiVersionsRequest(
                client_software_name="tidelog-console", client_software_version="1"))
    except ValueError:
        raise ClusterError(f"bootstrap server {first!r} is not HOST:PORT", 503) from None
    except ClusterError as error:
        text = str(error)
        if any(word in text.lower() for word in ("alert", "certificate")):
            raise Unauthenticated(f"the cluster refused {user}'s client certificate "
                                  f"({text})") from None
        if text.endswith("closed the connection"):
            # TLS 1.3: the client's side of the handshake ends before the broker checks the
            # certificate; a broker refusing it just closes the connection.
            raise Unauthenticated(f"the cluster refused {user}'s client certificate (it "
                                  f"closed the connection after the TLS handshake)") from None
        raise

    conf: dict[str, Any] = {**settings, "error_cb": on_error,
                            "client.id": "tidelog-console-sign-in"}
    try:
        admin = AdminClient(conf)
    except KafkaException as error:  # e.g. an unreadable certificate or key file
        raise ClusterError(f"{user}'s client certificate: {error.args[0].str()}") from None
    future = admin.describe_cluster(request_timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while not failures and not future.done() and time.monotonic() < deadline:
        admin.poll(0.05)
    if failures:
        future.cancel()
        raise Unauthenticated(f"the cluster refused {user}'s client certificate "
                              f"({failures[0].str()})")
    if not future.done():
        raise ClusterError("signing in: the cluster did not answer in time", 503)
    try:
        future.result(0)
    except KafkaException as error:
        kafka_error = error.args[0] if error.args else None
        if isinstance(kafka_error, KafkaError) and \
                kafka_error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
            return
        raise describe_error(error, "signing in") from None
