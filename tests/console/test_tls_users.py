"""Mutual TLS with a client certificate per console user (`[tls_users.NAME]`): each user signs
in with their console password and the console then connects as their certificate (librdkafka's
connections and the hand-made ones), so the broker's ACLs for that certificate's principal
decide what they see; a wrong password, an unknown user and a certificate from a CA the broker
does not trust are refused in words; config checks."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest

from tidelog.console.config import ConsoleConfig, ConsoleConfigError, load_console_config

from . import identities
from .conftest import TLS_PASSWORDS, OAuthEnv, TlsEnv
from .identities import token
from .test_api import error_of
from .test_e2e import ARTIFACTS, CHROMIUM, WEB


def sign_in(url: str, user: str, password: str) -> tuple[httpx.Client, httpx.Response]:
    client = httpx.Client(base_url=url, timeout=30)
    csrf = client.get("/api/session").json()["csrf_token"]
    response = client.post("/api/session", json={"user": user, "password": password},
                           headers={"X-CSRF-Token": csrf})
    if response.status_code == 200:
        client.headers["X-CSRF-Token"] = response.json()["csrf_token"]
    return client, response


def test_each_user_connects_as_their_certificate(tls_env: TlsEnv) -> None:
    url = tls_env.console.url
    admin, r = sign_in(url, "admin", TLS_PASSWORDS["admin"])
    carol: httpx.Client | None = None
    try:
        assert r.status_code == 200, r.text
        session = admin.get("/api/session").json()
        assert session["user"] == "admin" and session["client_certificates"] is True
        topic = f"mtls-{uuid.uuid4().hex[:6]}"
        assert admin.post("/api/topics", json={"name": topic}).status_code == 201
        assert admin.post(f"/api/topics/{topic}/messages",
                          json={"value": "hello"}).status_code == 201
        # The hand-made connections present the certificate too (DescribeAcls).
        assert admin.get("/api/acls").json()["enabled"] is True

        carol, r = sign_in(url, "carol", TLS_PASSWORDS["carol"])
        assert r.status_code == 200, r.text
        assert topic not in [t["name"] for t in carol.get("/api/topics").json()["topics"]]
        assert "TOPIC_AUTHORIZATION_FAILED" in error_of(carol.get(f"/api/topics/{topic}"), 403)
        assert "CLUSTER_AUTHORIZATION_FAILED" in error_of(carol.get("/api/acls"), 403)
        r = admin.post("/api/acls/template", json={
            "template": "consumer", "principal": "User:carol", "topic": topic,
            "group": f"{topic}-readers"})
        assert r.status_code == 201, r.text
        page = carol.get(f"/api/topics/{topic}/messages", params={"start": "oldest"}).json()
        assert [m["value"] for m in page["messages"]] == ["hello"]
        assert "not allowed to produce" in error_of(
            carol.post(f"/api/topics/{topic}/messages", json={"value": "x"}), 403)
    finally:
        admin.close()
        if carol is not None:
            carol.close()
    audit = [json.loads(line) for line in tls_env.console.audit_path.read_text().splitlines()]
    assert ("carol", "produce", False) in [(a["user"], a["action"], a["ok"]) for a in audit]


def test_refused_sign_ins(tls_env: TlsEnv) -> None:
    url = tls_env.console.url
    for user, password, status, words in [
            ("carol", "wrong", 401, "wrong user name or password"),
            ("nobody", "x", 401, "wrong user name or password"),
            ("mallory", TLS_PASSWORDS["mallory"], 401, "refused mallory's client certificate"),
            ("", "x", 400, "user and password")]:
        client, r = sign_in(url, user, password)
        client.close()
        assert r.status_code == status and words in r.json()["error"], (user, r.text)
    audit = [json.loads(line) for line in tls_env.console.audit_path.read_text().splitlines()]
    refused = {a["user"] for a in audit if a["action"] == "sign-in" and not a["ok"]}
    assert {"carol", "nobody", "mallory"} <= refused


def test_tls_users_config(tmp_path: Path) -> None:
    def load(text: str) -> ConsoleConfig:
        path = tmp_path / "c.toml"
        path.write_text(text)
        return load_console_config(path)

    user = '[tls_users.a]\npassword = "p"\n"ssl.certificate.location" = "a.pem"\n'
    ssl = '[client]\n"security.protocol" = "SSL"\n'
    assert load(ssl + user).tls_users["a"]["password"] == "p"
    for text, words in [
            (user, "needs security.protocol SSL"),
            ('password = "x"\n' + ssl + user, "exclude each other"),
            (ssl + '"ssl.certificate.location" = "c.pem"\n' + user, "leave these out of"),
            (ssl + '[tls_users.a]\npassword = "p"\n',
             "needs a password and an ssl.certificate.location"),
            (ssl + user + '"sasl.username" = "a"\n', "unknown settings")]:
        with pytest.raises(ConsoleConfigError, match=words):
            load(text)


def test_identity_sign_in_pages_in_chromium(oauth_env: OAuthEnv, tls_env: TlsEnv) -> None:
    """The sign-in page asks for a token on an OAUTHBEARER console (a token the broker refuses
    first, told in words) and for a console user on a tls_users one, in headless Chromium."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} missing: run scripts/setup (Debian chromium)")
    env = {**os.environ, "OAUTH_URL": oauth_env.console.url, "TLS_URL": tls_env.console.url,
           "TOKEN": token("carol"), "BAD_TOKEN": token("carol", key=identities.OTHER_KEY),
           "TLS_USER": "carol", "TLS_PASSWORD": TLS_PASSWORDS["carol"],
           "ARTIFACTS": str(ARTIFACTS / "identities"), "CHROMIUM": CHROMIUM}
    result = subprocess.run(["node", str(WEB / "e2e" / "identities.e2e.mjs")], cwd=WEB, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    for name in ("00-token-refused", "01-token-signed-in", "02-certificate-signed-in"):
        assert (ARTIFACTS / "identities" / f"{name}.png").stat().st_size > 5000, name
