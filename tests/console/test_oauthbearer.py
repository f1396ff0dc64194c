"""Signing in to the console with an OAuth bearer token (SASL OAUTHBEARER) against a real broker
that checks JWTs against a JWKS file and has the ACL authorizer: the console talks to the
cluster as the token's principal (librdkafka's connections and the hand-made ones), so the
ACLs decide what each user sees; bad, expired and malformed tokens are refused in words, and a
session ends when its token expires."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest

from tidelog.console.config import ConsoleConfig, ConsoleConfigError, load_console_config

from . import identities
from .conftest import OAuthEnv, signed_in, token_sign_in, wait_for
from .identities import b64, token
from .test_api import error_of


def test_the_token_principal_sees_what_its_acls_allow(oauth_env: OAuthEnv) -> None:
    env = oauth_env
    suffix = uuid.uuid4().hex[:6]
    open_topic, hidden_topic = f"oauth-open-{suffix}", f"oauth-hidden-{suffix}"
    session = env.admin.get("/api/session").json()
    assert session["user"] == "ops-admin" and session["sasl_mechanism"] == "OAUTHBEARER"
    for name in (open_topic, hidden_topic):
        r = env.admin.post("/api/topics", json={"name": name, "partitions": 1})
        assert r.status_code == 201, r.text
        r = env.admin.post(f"/api/topics/{name}/messages", json={"value": f"hello {name}"})
        assert r.status_code == 201, r.text
    # The hand-made connections authenticate with the token too (DescribeAcls).
    assert env.admin.get("/api/acls").json()["enabled"] is True
    r = env.admin.post("/api/acls/template", json={
        "template": "consumer", "principal": "User:carol", "topic": open_topic,
        "pattern_type": "LITERAL", "group": f"carol-{suffix}"})
    assert r.status_code == 201, r.text

    carol = signed_in(env.console.url, token("carol"))
    try:
        assert carol.get("/api/session").json()["user"] == "carol"
        names = [t["name"] for t in carol.get("/api/topics").json()["topics"]]
        assert open_topic in names and hidden_topic not in names, names
        browsed = carol.get(f"/api/topics/{open_topic}/messages",
                            params={"partition": 0, "start": "oldest"})
        assert browsed.status_code == 200, browsed.text
        assert [m["value"] for m in browsed.json()["messages"]] == [f"hello {open_topic}"]
        assert "TOPIC_AUTHORIZATION_FAILED" in error_of(
            carol.get(f"/api/topics/{hidden_topic}"), 403)
        assert "not allowed to produce" in error_of(
            carol.post(f"/api/topics/{open_topic}/messages", json={"value": "x"}), 403)
        assert "CLUSTER_AUTHORIZATION_FAILED" in error_of(carol.get("/api/acls"), 403)
    finally:
        carol.close()
    acls = env.admin.get("/api/acls", params={"principal": "User:carol"}).json()["acls"]
    assert {a["operation"] for a in acls} >= {"READ", "DESCRIBE"}
    audit = [json.loads(line) for line in env.console.audit_path.read_text().splitlines()]
    assert ("carol", "sign-in", True) in [(a["user"], a["action"], a["ok"]) for a in audit]
    assert ("carol", "produce", False) in [(a["user"], a["action"], a["ok"]) for a in audit]


def test_bad_tokens_are_refused_in_words(oauth_env: OAuthEnv) -> None:
    url = oauth_env.console.url
    cases = [
        (token("mallory", key=identities.OTHER_KEY), 401, "wrong token"),  # the broker refuses it
        (token("carol", lifetime_s=-120), 401, "expired"),
        (token(None), 400, "'sub' claim"),
        ("not-a-jwt", 400, "must be a JWT"),
        ("a." + b64(b"[1]") + ".c", 400, "JSON object"),
        ("x" * 20000, 400, "at most"),
        ("", 400, "token must be"),
    ]
    for jwt, status, words in cases:
        response = token_sign_in(url, jwt)
        response.extensions["client"].close()
        assert response.status_code == status, (jwt[:40], response.text)
        assert words in response.json()["error"], (jwt[:40], response.text)
    no_csrf = httpx.Client(base_url=url, timeout=30)
    try:
        no_csrf.get("/api/session")
        assert "CSRF" in error_of(no_csrf.post("/api/session", json={"token": token("carol")}),
                                  403)
        assert "sign in" in error_of(no_csrf.get("/api/topics"), 401)
    finally:
        no_csrf.close()
    audit = [json.loads(line) for line in oauth_env.console.audit_path.read_text().splitlines()]
    refused = [(a["user"], a["error"]) for a in audit if a["action"] == "sign-in" and not a["ok"]]
    assert ("mallory", refused[0][1]) in refused and ("carol", "token expired") in refused


def test_a_session_ends_with_its_token(oauth_env: OAuthEnv) -> None:
    client = signed_in(oauth_env.console.url, token("carol", lifetime_s=3))
    try:
        assert client.get("/api/topics").status_code == 200
        wait_for(lambda: client.get("/api/topics").status_code == 401, 15,
                 "the session to end when its token expires")
        assert client.get("/api/session").json()["signed_in"] is False
    finally:
        client.close()


def test_oauthbearer_config(tmp_path: Path) -> None:
    """OAUTHBEARER is a sign-in mechanism; settings that would make librdkafka fetch or forge
    its own token (instead of each user's) are refused at start, in words."""
    def load(text: str) -> ConsoleConfig:
        path = tmp_path / "c.toml"
        path.write_text('[client]\n"security.protocol" = "SASL_SSL"\n'
                        '"sasl.mechanism" = "OAUTHBEARER"\n' + text)
        return load_console_config(path)

    assert load("").sasl_mechanism == "OAUTHBEARER"
    for text in ('"sasl.oauthbearer.method" = "oidc"\n',
                 '"sasl.oauthbearer.config" = "principal=admin"\n',
                 '"enable.sasl.oauthbearer.unsecure.jwt" = "true"\n'):
        with pytest.raises(ConsoleConfigError, match="signs in with their own token"):
            load(text)
