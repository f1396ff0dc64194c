"""Fixtures for the console tests: a real `tidelog serve` broker (with /metrics) and a real
`tidelog console` process in front of it, signed in through httpx like a browser would."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import (
    BrokerFactory,
    BrokerProcess,
    _read_ready_line,  # the root conftest's ready-line reader
)
from tidelog.cluster.zookeeper_server import free_port

from .identities import IdentityBroker, start_identity_broker, token

PASSWORD = "tide-secret"
CONSOLE_READY = "tidelog console on "


@dataclass
class ConsoleProcess:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    audit_path: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def log_text(self) -> str:
        return self.log_path.read_text("utf-8", "replace") if self.log_path.exists() else ""


def start_broker(factory: BrokerFactory, data_dir: Path | None = None, *, port: int = 0,
                 metrics_port: int | None = None) -> BrokerProcess:
    metrics_port = metrics_port or free_port()
    args = ["--metrics", f"127.0.0.1:{metrics_port}"]
    if port:
        args += ["--listen", f"127.0.0.1:{port}"]
    # A new group's first join would wait 3 s (Kafka's default delay): the tests make several.
    broker = factory(data_dir, extra_args=args,
                     settings={"group.initial.rebalance.delay.ms": "0"})
    broker.metrics_port = metrics_port  # type: ignore[attr-defined]
    return broker


def start_console(tmp: Path, bootstrap: str, metrics_port: int | None,
                  password: str | None = PASSWORD, timeout_s: float = 5.0,
                  client: dict[str, str] | None = None, tables: str = "") -> ConsoleProcess:
    config = tmp / "console.toml"
    audit = tmp / "audit.jsonl"
    lines = [f'audit_log = "{audit}"', "metrics_interval = 1.0", f"timeout = {timeout_s}"]
    if metrics_port is not None:
        lines.append(f'metrics = ["http://127.0.0.1:{metrics_port}/metrics"]')
    if password:
        lines.append(f'password = "{password}"')
    if client:
        lines.append("[client]")
        lines += [f'"{k}" = "{v}"' for k, v in client.items()]
    config.write_text("\n".join(lines) + "\n" + tables)  # tables: more TOML tables
    log_path = tmp / "console.log"
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "tidelog.cli.main", "console", "--bootstrap", bootstrap,
             "--listen", "127.0.0.1:0", "--config", str(config)],
            stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL)
    console = ConsoleProcess("", process, log_path, audit)
    line = _read_ready_line(process, 30.0)
    if not line.startswith(CONSOLE_READY):
        console.stop()
        pytest.fail(f"console did not start: {line!r}\n{console.log_text()}")
    console.url = line[len(CONSOLE_READY):].strip()
    return console


def sign_in(url: str, password: str = PASSWORD, user: str = "tester") -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=30)
    token = client.get("/api/session").json()["csrf_token"]
    response = client.post("/api/session", json={"password": password, "user": user},
                           headers={"X-CSRF-Token": token})
    assert response.status_code == 200, response.text
    client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return client


def wait_for(check: Callable[[], Any], timeout_s: float = 30.0, what: str = "condition") -> Any:
    """Poll `check` until it returns a truthy value; fail with `what` after the deadline."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")


@dataclass
class ConsoleEnv:
    broker: BrokerProcess
    console: ConsoleProcess
    client: httpx.Client


@pytest.fixture(scope="package")
def console_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleEnv]:
    """One broker and console shared by test_api.py and test_e2e.py (each test uses its own
    topic and group names)."""
    tmp = tmp_path_factory.mktemp("console")
    factory = BrokerFactory(tmp)
    console: ConsoleProcess | None = None
    try:
        broker = start_broker(factory)
        console = start_console(tmp, broker.bootstrap, broker.metrics_port)  # type: ignore[attr-defined]
        client = sign_in(console.url)
        yield ConsoleEnv(broker, console, client)
        client.close()
    finally:
        if console is not None:
            console.stop()
            text = console.log_text()
            assert "Traceback" not in text, text[-4000:]
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


# -- a SASL cluster with the ACL authorizer (tests/console/test_security.py) -------------------

SASL_ADMIN = ("admin", "admin-secret")  # the broker's super user, added offline
SASL_USERS = {"alice": "alice-secret", "bob": "bob-secret"}  # added through the console
SASL_CLIENT = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256"}


def sasl_sign_in(url: str, user: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=30)
    token = client.get("/api/session").json()["csrf_token"]
    response = client.post("/api/session", json={"user": user, "password": password},
                           headers={"X-CSRF-Token": token})
    assert response.status_code == 200, response.text
    client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return client


@dataclass
class SaslEnv:
    broker: BrokerProcess
    console: ConsoleProcess
    admin: httpx.Client  # signed in as the super user
    ca: str  # the CA file clients trust

    def client_settings(self, user: str, password: str) -> dict[str, str]:
        return {"bootstrap.servers": self.broker.bootstrap, **SASL_CLIENT,
                "ssl.ca.location": self.ca, "sasl.username": user, "sasl.password": password}


@pytest.fixture(scope="module")
def sasl_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslEnv]:
    """One SASL_SSL broker with the ACL authorizer (super user admin) and one console whose
    users sign in with SCRAM-SHA-256 over TLS (librdkafka's and the hand-made connections);
    alice and bob are created through the console."""
    tmp = tmp_path_factory.mktemp("console-sasl")
    data_dir, certs = tmp / "data", tmp / "certs"
    for args in (["users", "add", SASL_ADMIN[0], "--password", SASL_ADMIN[1], "--data-dir",
                  str(data_dir)], ["certs", "--dir", str(certs)]):
        result = subprocess.run([sys.executable, "-m", "tidelog.cli.main", *args],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
    ca = str(certs / "ca.pem")
    factory = BrokerFactory(tmp)
    console: ConsoleProcess | None = None
    try:
        broker = factory(data_dir, listen=None, settings={
            "listeners": "SASL_SSL://127.0.0.1:0",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs / "broker.pem"),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{SASL_ADMIN[0]}",
            "connection.failed.authentication.delay.ms": "10",
            "group.initial.rebalance.delay.ms": "0"})
        console = start_console(tmp, broker.bootstrap, None, password=None,
                                client={**SASL_CLIENT, "ssl.ca.location": ca})
        admin = sasl_sign_in(console.url, *SASL_ADMIN)
        for user, password in SASL_USERS.items():
            r = admin.post("/api/users", json={"name": user, "password": password})
            assert r.status_code == 201, r.text
        yield SaslEnv(broker, console, admin, ca)
        admin.close()
    finally:
        if console is not None:
            console.stop()
            text = console.log_text()
            assert "Traceback" not in text, text[-4000:]
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


# -- one broker for the per-user identity tests (test_oauthbearer.py, test_tls_users.py) --------

@pytest.fixture(scope="package")
def identity_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityBroker]:
    """OAUTHBEARER on a SASL_PLAINTEXT listener and mutual TLS on an SSL listener, with ACLs
    (tests/console/identities.py)."""
    tmp = tmp_path_factory.mktemp("console-identities")
    factory = BrokerFactory(tmp)
    try:
        yield start_identity_broker(factory, tmp)
    finally:
        bad = factory.stop_all()
    if bad:
        pytest.fail("broker logged a traceback:\n" + "\n".join(bad))


# -- consoles in front of it: users sign in with tokens, or to their client certificates -----

OAUTH_CLIENT = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}


def token_sign_in(url: str, jwt: str) -> httpx.Response:
    client = httpx.Client(base_url=url, timeout=30)
    csrf = client.get("/api/session").json()["csrf_token"]
    response = client.post("/api/session", json={"token": jwt},
                           headers={"X-CSRF-Token": csrf})
    response.extensions["client"] = client  # the caller closes it
    if response.status_code == 200:
        client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return response


def signed_in(url: str, jwt: str) -> httpx.Client:
    response = token_sign_in(url, jwt)
    assert response.status_code == 200, response.text
    client: httpx.Client = response.extensions["client"]
    return client


@dataclass
class OAuthEnv:
    console: ConsoleProcess
    admin: httpx.Client  # the super user's token


@pytest.fixture(scope="package")
def oauth_env(identity_broker: IdentityBroker,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthEnv]:
    tmp = tmp_path_factory.mktemp("console-oauth")
    console = start_console(tmp, identity_broker.oauth_bootstrap, None, password=None,
                            client=OAUTH_CLIENT)
    try:
        admin = signed_in(console.url, token("ops-admin"))
        yield OAuthEnv(console, admin)
        admin.close()
    finally:
        console.stop()
        text = console.log_text()
        assert "Traceback" not in text, text[-4000:]


TLS_PASSWORDS = {"admin": "admin-console", "carol": "carol-console", "mallory": "mallory-console"}


@dataclass
class TlsEnv:
    console: ConsoleProcess


@pytest.fixture(scope="package")
def tls_env(identity_broker: IdentityBroker,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsEnv]:
    tmp = tmp_path_factory.mktemp("console-mtls")
    certs = identity_broker.certs
    tables = "".join(
        f'[tls_users.{cn}]\npassword = "{TLS_PASSWORDS[cn]}"\n'
        f'"ssl.certificate.location" = "{certs / f"{cn}-cert.pem"}"\n'
        f'"ssl.key.location" = "{certs / f"{cn}-key.pem"}"\n' for cn in TLS_PASSWORDS)
    console = start_console(tmp, identity_broker.tls_bootstrap, None, password=None,
                            tables=tables, client={"security.protocol": "SSL",
                                                   "ssl.ca.location": str(certs / "ca.pem")})
    try:
        yield TlsEnv(console)
    finally:
        console.stop()
        text = console.log_text()
        assert "Traceback" not in text, text[-4000:]
