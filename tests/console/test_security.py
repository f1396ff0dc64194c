"""The console against a SASL cluster with the ACL authorizer: sign-in with Kafka credentials
(a real SCRAM handshake), every call made as the signed-in user so the cluster's ACLs decide,
the Security API (ACLs, SCRAM users), the Transactions API, and the pages in Chromium.

One broker and one console for the module (`sasl_env`); each test uses its own names."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from tidelog.console.auth import SESSION_TTL_S, Sessions
from tidelog.console.cluster import Cluster
from tidelog.console.cluster_sessions import SessionClusters
from tidelog.console.config import ConsoleConfigError, load_console_config

from .conftest import (
    SASL_ADMIN,
    SASL_CLIENT,
    SASL_USERS,
    SaslEnv,
    sasl_sign_in,
    start_console,
    wait_for,
)

WEB = Path(__file__).resolve().parents[2] / "console" / "web"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts" / "security"
CHROMIUM = "/usr/bin/chromium"


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def error_of(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    message = response.json()["error"]
    assert isinstance(message, str) and message and "Traceback" not in message
    return str(message)


def create_topic(env: SaslEnv, prefix: str = "sec") -> str:
    name = new_name(prefix)
    r = env.admin.post("/api/topics", json={"name": name, "partitions": 1})
    assert r.status_code == 201, r.text
    return name


def acl(resource_type: str, name: str, principal: str, operation: str,
        pattern_type: str = "LITERAL") -> dict[str, str]:
    return {"resource_type": resource_type, "name": name, "pattern_type": pattern_type,
            "principal": principal, "host": "*", "operation": operation, "permission": "ALLOW"}


# -- configuration -----------------------------------------------------------------------------

def test_config_names_the_security_protocol(tmp_path: Path) -> None:
    def load(text: str) -> Any:
        path = tmp_path / "c.toml"
        path.write_text(text)
        return load_console_config(path)

    config = load('[client]\n"security.protocol" = "SASL_SSL"\n'
                  '"sasl.mechanism" = "SCRAM-SHA-512"\n"ssl.ca.location" = "ca.pem"\n')
    assert config.sasl_mechanism == "SCRAM-SHA-512"
    assert load("").sasl_mechanism is None
    for text, words in [
        ('[client]\n"security.protocol" = "SASL_PLAINTEXT"\n', "sasl.mechanism must be one of"),
        ('[client]\n"security.protocol" = "SASL_SSL"\n"sasl.mechanism" = "GSSAPI"\n',
         "sasl.mechanism must be one of"),
        ('[client]\n"security.protocol" = "TLS"\n', "security.protocol must be one of"),
        ('password = "x"\n[client]\n"security.protocol" = "SASL_SSL"\n'
         '"sasl.mechanism" = "PLAIN"\n', "password is the sign-in for clusters without SASL"),
        ('[client]\n"security.protocol" = "SASL_SSL"\n"sasl.mechanism" = "PLAIN"\n'
         '"sasl.username" = "a"\n', "each user signs in with their own"),
        ("max_session_clients = 0\n", "max_session_clients must be at least 1"),
    ]:
        with pytest.raises(ConsoleConfigError, match=words):
            load(text)


def test_session_clients_are_bounded_and_dropped() -> None:
    """Each signed-in user's clients: at most `limit` sessions keep theirs, least recently
    used closed first; a dropped (signed-out, expired) session's are closed at once."""
    made: list[dict[str, str]] = []

    def make(extra: Any) -> Cluster:
        made.append(dict(extra))
        return Cluster("127.0.0.1:1", 1.0, {**extra})  # clients are made lazily: no traffic

    pool = SessionClusters(make, limit=2)
    a = pool.get("s1", ("alice", "pw-a"))
    pool.get("s2", ("bob", "pw-b"))
    assert pool.get("s1", ("alice", "pw-a")) is a  # s1 is now the most recently used
    pool.get("s3", ("carol", "pw-c"))  # evicts s2, the least recently used
    assert len(pool) == 2
    assert pool.get("s1", ("alice", "pw-a")) is a
    pool.get("s2", ("bob", "pw-b"))  # made again from the session's credentials
    assert [m["sasl.username"] for m in made] == ["alice", "bob", "carol", "bob"]
    pool.drop("s2")
    pool.drop("s2")
    assert len(pool) == 1
    pool.close_all()
    assert len(pool) == 0


def test_expired_and_signed_out_sessions_close_their_clients() -> None:
    dropped: list[str] = []
    sessions = Sessions(None, dropped.append)
    expired = sessions.create("alice", ("alice", "pw"))
    expired.created -= SESSION_TTL_S + 1
    assert sessions.get(expired.id) is None
    assert dropped == [expired.id]
    # A password no random session id or token can contain by chance (a short one did).
    signed_out = sessions.create("bob", ("bob", "bob-password-9f3#"))
    sessions.drop(signed_out.id)
    sessions.drop(signed_out.id)
    assert dropped == [expired.id, signed_out.id]
    assert "bob-password-9f3#" not in repr(signed_out)  # credentials stay out of reprs


# -- sign-in -----------------------------------------------------------------------------------

def test_sign_in_with_kafka_credentials(sasl_env: SaslEnv) -> None:
    url = sasl_env.console.url
    with httpx.Client(base_url=url, timeout=30) as anonymous:
        session = anonymous.get("/api/session").json()
        assert session["signed_in"] is False and session["sasl_mechanism"] == "SCRAM-SHA-256"
        assert session["password_required"] is True
        cookie = anonymous.get("/api/session").headers.get("set-cookie", "").lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert "sign in" in error_of(anonymous.get("/api/topics"), 401)
        token = {"X-CSRF-Token": session["csrf_token"]}
        # No CSRF token: refused before any handshake.
        assert "CSRF" in error_of(anonymous.post("/api/session", json={
            "user": "alice", "password": SASL_USERS["alice"]}), 403)
        for body, status, words in [
            ({"user": "alice", "password": "wrong"}, 401, "wrong user name or password"),
            ({"user": "nobody", "password": "x"}, 401, "invalid credentials"),
            ({"user": "alice"}, 400, "password must be your Kafka password"),
            ({"user": "", "password": "x"}, 400, "user must be your Kafka user name"),
            ({"user": "a" * 300, "password": "x"}, 400, "user must be"),
        ]:
            assert words in error_of(anonymous.post("/api/session", json=body, headers=token),
                                     status)
    alice = sasl_sign_in(url, "alice", SASL_USERS["alice"])
    try:
        assert alice.get("/api/session").json()["user"] == "alice"
        assert alice.get("/api/cluster").json()["reachable"] is True
        assert alice.delete("/api/session").status_code == 200
        error_of(alice.get("/api/topics"), 401)
    finally:
        alice.close()
    audit = sasl_env.admin.get("/api/audit").json()["entries"]
    mine = [(e["user"], e["action"], e["ok"]) for e in audit if e["user"] == "alice"]
    assert ("alice", "sign-in", True) in mine and ("alice", "sign-in", False) in mine
    assert ("alice", "sign-out", True) in mine


def test_the_clusters_acls_decide_what_each_user_sees_and_does(sasl_env: SaslEnv) -> None:
    topic = create_topic(sasl_env)
    r = sasl_env.admin.post(f"/api/topics/{topic}/messages", json={"value": "hello"})
    assert r.status_code == 201, r.text
    bob = sasl_sign_in(sasl_env.console.url, "bob", SASL_USERS["bob"])
    try:
        assert topic not in [t["name"] for t in bob.get("/api/topics").json()["topics"]]
        assert error_of(bob.get(f"/api/topics/{topic}"), 403) == (
            f"You are not allowed to describe topic '{topic}' (TOPIC_AUTHORIZATION_FAILED)")
        assert "You are not allowed to create topic" in error_of(
            bob.post("/api/topics", json={"name": new_name("bob")}), 403)
        assert error_of(bob.get("/api/acls"), 403) == (
            "You are not allowed to list ACLs (CLUSTER_AUTHORIZATION_FAILED)")
        # The admin lets bob consume the topic: bob now browses it, but may not produce.
        r = sasl_env.admin.post("/api/acls/template", json={
            "template": "consumer", "principal": "User:bob", "topic": topic,
            "group": f"{topic}-readers"})
        assert r.status_code == 201, r.text
        assert topic in [t["name"] for t in bob.get("/api/topics").json()["topics"]]
        page = bob.get(f"/api/topics/{topic}/messages", params={"start": "oldest"}).json()
        assert [m["value"] for m in page["messages"]] == ["hello"]
        assert error_of(bob.post(f"/api/topics/{topic}/messages", json={"value": "x"}), 403) \
            == f"You are not allowed to produce to topic '{topic}' (TOPIC_AUTHORIZATION_FAILED)"
        audit = sasl_env.admin.get("/api/audit").json()["entries"]
        refused = [e for e in audit if e["user"] == "bob" and e["action"] == "produce"]
        assert refused and refused[0]["ok"] is False and "not allowed" in refused[0]["error"]
    finally:
        bob.close()


def test_sign_in_with_plain(sasl_env: SaslEnv, tmp_path: Path) -> None:
    """A console whose users sign in with PLAIN (over TLS): librdkafka's handshake and the
    hand-made connections' PLAIN both work, and refusals read the same."""
    console = start_console(tmp_path, sasl_env.broker.bootstrap, None, password=None, client={
        **SASL_CLIENT, "sasl.mechanism": "PLAIN", "ssl.ca.location": sasl_env.ca})
    try:
        with httpx.Client(base_url=console.url, timeout=30) as anonymous:
            session = anonymous.get("/api/session").json()
            assert session["sasl_mechanism"] == "PLAIN"
            assert "refused the PLAIN sign-in" in error_of(anonymous.post(
                "/api/session", json={"user": "alice", "password": "wrong"},
                headers={"X-CSRF-Token": session["csrf_token"]}), 401)
        alice = sasl_sign_in(console.url, "alice", SASL_USERS["alice"])
        try:
            assert alice.get("/api/topics").status_code == 200
            assert error_of(alice.get("/api/acls"), 403) == (
                "You are not allowed to list ACLs (CLUSTER_AUTHORIZATION_FAILED)")
            assert alice.get("/api/transactions").status_code == 200
        finally:
            alice.close()
    finally:
        console.stop()
    assert "Traceback" not in console.log_text()


# -- ACLs --------------------------------------------------------------------------------------

def test_acls_api(sasl_env: SaslEnv) -> None:
    c = sasl_env.admin
    prefix = new_name("orders")
    preview = c.post("/api/acls/template", json={
        "template": "producer", "principal": "User:alice", "topic": prefix,
        "pattern_type": "prefixed", "preview": True}).json()["preview"]
    assert sorted(a["operation"] for a in preview) == ["CREATE", "DESCRIBE", "WRITE"]
    assert {a["pattern_type"] for a in preview} == {"PREFIXED"}
    listed = c.get("/api/acls", params={"name": prefix}).json()
    assert listed == {"enabled": True, "acls": []}  # a preview creates nothing
    r = c.post("/api/acls/template", json={"template": "producer", "principal": "User:alice",
                                           "topic": prefix, "pattern_type": "PREFIXED"})
    assert r.status_code == 201, r.text
    single = acl("GROUP", prefix, "User:alice", "READ")
    assert c.post("/api/acls", json={"acls": [single]}).status_code == 201
    admin_tpl = c.post("/api/acls/template", json={"template": "admin", "principal":
                                                   "User:alice", "prefix": prefix})
    assert admin_tpl.status_code == 201, admin_tpl.text
    everything = c.get("/api/acls", params={"principal": "User:alice"}).json()["acls"]
    mine = [a for a in everything if a["name"] == prefix]
    assert len(mine) == 3 + 1 + 3
    topics = c.get("/api/acls", params={"resource_type": "topic", "name": prefix,
                                        "pattern_type": "prefixed",
                                        "operation": "write"}).json()["acls"]
    assert [(a["operation"], a["pattern_type"]) for a in topics] == [("WRITE", "PREFIXED")]
    # MATCH: every ACL that applies to a topic named with the prefix.
    matched = c.get("/api/acls", params={"resource_type": "TOPIC", "name": f"{prefix}-eu",
                                         "pattern_type": "match"}).json()["acls"]
    assert {a["operation"] for a in matched} >= {"WRITE", "DESCRIBE", "CREATE", "ALL"}
    # Bad input, in words.
    for body, words in [
        ({"acls": [{**single, "operation": "FLY"}]}, "operation must be one of"),
        ({"acls": [{**single, "principal": "alice"}]}, "principal must look like User:alice"),
        ({"acls": [{**single, "resource_type": "CLUSTER", "name": "x"}]}, "kafka-cluster"),
        ({"acls": []}, "non-empty list"),
        ({"acls": [single] * 101}, "at most 100"),
        ({"acls": ["x"]}, "each ACL must be an object"),
    ]:
        assert words in error_of(c.post("/api/acls", json=body), 400)
    assert "template must be one of" in error_of(
        c.post("/api/acls/template", json={"template": "root", "principal": "User:a"}), 400)
    assert "group must be" in error_of(c.post("/api/acls/template", json={
        "template": "consumer", "principal": "User:a", "topic": "t"}), 400)
    assert "MATCH needs a name" in error_of(c.get("/api/acls?pattern_type=MATCH"), 400)
    assert "resource_type must be one of" in error_of(c.get("/api/acls?resource_type=x"), 400)
    # Deleting needs confirm: true and exact ACLs; a CSRF-less delete is refused.
    assert "confirm must be true" in error_of(
        c.request("DELETE", "/api/acls", json={"acls": [single]}), 400)
    with httpx.Client(base_url=sasl_env.console.url, cookies=c.cookies) as no_token:
        assert "CSRF" in error_of(no_token.request(
            "DELETE", "/api/acls", json={"acls": [single], "confirm": True}), 403)
        assert "CSRF" in error_of(no_token.post("/api/acls", json={"acls": [single]}), 403)
        assert "CSRF" in error_of(no_token.post("/api/acls/template", json={
            "template": "admin", "principal": "User:x", "prefix": "x"}), 403)
    deleted = c.request("DELETE", "/api/acls", json={"acls": [single], "confirm": True})
    assert deleted.json()["deleted"] == [single]
    left = c.get("/api/acls", params={"principal": "User:alice", "name": prefix}).json()["acls"]
    assert single not in left and len(left) == 6
    actions = [e["action"] for e in c.get("/api/audit").json()["entries"]
               if e["user"] == "admin" and "acls" in e["action"]]
    assert "create-acls" in actions and "delete-acls" in actions


# -- SCRAM users -------------------------------------------------------------------------------

def test_users_api(sasl_env: SaslEnv) -> None:
    c = sasl_env.admin
    name = new_name("carol")
    r = c.post("/api/users", json={"name": name, "password": "first-pw",
                                   "mechanism": "SCRAM-SHA-512", "iterations": 8192})
    assert r.status_code == 201, r.text
    users = {u["name"]: u["mechanisms"] for u in c.get("/api/users").json()["users"]}
    assert users[name] == [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]
    assert set(SASL_USERS) | {"admin"} <= set(users)
    assert "already has a SCRAM-SHA-512 credential" in error_of(
        c.post("/api/users", json={"name": name, "password": "x",
                                   "mechanism": "SCRAM-SHA-512"}), 409)
    # The console signs in with SCRAM-SHA-256; carol's 512 credential is checked directly.
    settings = sasl_env.client_settings(name, "first-pw") | {"sasl.mechanism": "SCRAM-SHA-512"}
    assert _authenticates(settings)
    r = c.put(f"/api/users/{name}/password", json={"password": "second-pw",
                                                   "mechanism": "SCRAM-SHA-512"})
    assert r.status_code == 200, r.text
    assert not _authenticates(settings)
    assert _authenticates(settings | {"sasl.password": "second-pw"})
    for method, path, body, status, words in [
        ("PUT", f"/api/users/{name}/password", {"password": "x"}, 404,
         "has no SCRAM-SHA-256 credential"),
        ("PUT", "/api/users/nobody-here/password", {"password": "x"}, 404, "no SCRAM-SHA-256"),
        ("POST", "/api/users", {"name": "x", "password": "x", "iterations": 10}, 400,
         "iterations must be at least 4096"),
        ("POST", "/api/users", {"name": "x", "password": "x", "mechanism": "MD5"}, 400,
         "mechanism must be one of"),
        ("POST", "/api/users", {"name": "x"}, 400, "password must be a non-empty string"),
        ("POST", "/api/users", {"password": "x"}, 400, "name must be a non-empty string"),
        ("DELETE", f"/api/users/{name}", {}, 400, "type the user's name in confirm"),
        ("DELETE", "/api/users/nobody-here", {"confirm": "nobody-here"}, 404,
         "has no SCRAM credentials"),
    ]:
        assert words in error_of(c.request(method, path, json=body), status)
    bob = sasl_sign_in(sasl_env.console.url, "bob", SASL_USERS["bob"])
    try:
        assert error_of(bob.post("/api/users", json={"name": "eve", "password": "x"}), 403) \
            == "You are not allowed to create user 'eve' (CLUSTER_AUTHORIZATION_FAILED)"
        assert "not allowed to describe SCRAM users" in error_of(bob.get("/api/users"), 403)
    finally:
        bob.close()
    with httpx.Client(base_url=sasl_env.console.url, cookies=c.cookies) as no_token:
        assert "CSRF" in error_of(no_token.put(f"/api/users/{name}/password",
                                               json={"password": "x"}), 403)
    r = c.request("DELETE", f"/api/users/{name}", json={"confirm": name})
    assert r.json() == {"deleted": name, "mechanisms": ["SCRAM-SHA-512"]}
    assert name not in {u["name"] for u in c.get("/api/users").json()["users"]}
    entries = [(e["action"], e["ok"]) for e in c.get("/api/audit").json()["entries"]
               if e["target"] == name]
    assert ("create-user", True) in entries and ("rotate-password", True) in entries
    assert ("delete-user", True) in entries
    assert all("password" not in str(e["details"]) for e in c.get("/api/audit").json()["entries"]
               if e["target"] == name)


def test_a_session_whose_password_was_rotated(sasl_env: SaslEnv) -> None:
    """The hand-made requests authenticate each time: once the admin rotates the user's
    password, they answer 401 in words (the user signs in again)."""
    name = new_name("erin")
    c = sasl_env.admin
    assert c.post("/api/users", json={"name": name, "password": "old-pw"}).status_code == 201
    erin = sasl_sign_in(sasl_env.console.url, name, "old-pw")
    try:
        assert "not allowed to list ACLs" in error_of(erin.get("/api/acls"), 403)
        assert c.put(f"/api/users/{name}/password", json={"password": "new-pw"}).status_code \
            == 200
        assert "refused the SCRAM-SHA-256 sign-in" in error_of(erin.get("/api/acls"), 401)
    finally:
        erin.close()
    sasl_sign_in(sasl_env.console.url, name, "new-pw").close()


def _authenticates(settings: dict[str, str]) -> bool:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    failed: list[KafkaError] = []
    admin = AdminClient({**settings, "error_cb": failed.append})
    future = admin.describe_cluster(request_timeout=10)
    wait_for(lambda: (admin.poll(0.05), failed or future.done())[1], 15, "a SASL answer")
    return not failed


# -- transactions ------------------------------------------------------------------------------

def test_transactions_api(sasl_env: SaslEnv) -> None:
    c = sasl_env.admin
    topic = create_topic(sasl_env, "txn")
    txn_id = new_name("txn")
    producer = Producer({**sasl_env.client_settings(*SASL_ADMIN), "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"uncommitted")
    assert producer.flush(30) == 0

    def listed() -> dict[str, Any] | None:
        rows = c.get("/api/transactions").json()["transactions"]
        found = [t for t in rows if t["transactional_id"] == txn_id]
        return found[0] if found and found[0].get("partitions") else None

    txn = wait_for(listed, 20, "the open transaction")
    assert txn["state"] == "Ongoing" and txn["producer_epoch"] >= 0
    assert txn["start_time_ms"] > 0 and txn["duration_ms"] >= 0
    assert txn["partitions"] == [{"topic": topic, "partition": 0, "start_offset": 0}]
    bob = sasl_sign_in(sasl_env.console.url, "bob", SASL_USERS["bob"])
    try:
        assert txn_id not in [t["transactional_id"] for t in
                              bob.get("/api/transactions").json()["transactions"]]
        sasl_env.admin.post("/api/acls", json={"acls": [acl("TOPIC", topic, "User:bob",
                                                            "READ")]})
        assert error_of(bob.post("/api/transactions/abort", json={
            "topic": topic, "partition": 0, "start_offset": 0}), 403) == (
            f"You are not allowed to abort the transaction on {topic}-0 "
            f"(CLUSTER_AUTHORIZATION_FAILED)")
    finally:
        bob.close()
    for body, status, words in [
        ({"topic": topic, "partition": 0}, 400, "start_offset is required"),
        ({"topic": topic, "partition": -1, "start_offset": 0}, 400, "partition must be at least"),
        ({"topic": topic, "partition": "x", "start_offset": 0}, 400, "must be an integer"),
        ({"partition": 0, "start_offset": 0}, 400, "topic must be a non-empty string"),
        ({"topic": topic, "partition": 0, "start_offset": 7}, 404, "no open transaction starts"),
        ({"topic": topic, "partition": 5, "start_offset": 0}, 404, "has no partition 5"),
    ]:
        assert words in error_of(c.post("/api/transactions/abort", json=body), status)
    with httpx.Client(base_url=sasl_env.console.url, cookies=c.cookies) as no_token:
        assert "CSRF" in error_of(no_token.post("/api/transactions/abort", json={
            "topic": topic, "partition": 0, "start_offset": 0}), 403)
    r = c.post("/api/transactions/abort", json={"topic": topic, "partition": 0,
                                                "start_offset": 0})
    assert r.status_code == 200, r.text
    assert r.json()["aborted"]["producer_epoch"] == txn["producer_epoch"]
    after = wait_for(listed, 20, "the transaction after the abort")
    assert "start_offset" not in after["partitions"][0]  # no open transaction there any more
    entry = [e for e in c.get("/api/audit").json()["entries"]
             if e["action"] == "abort-transaction" and e["target"] == f"{topic}-0"]
    assert [(e["user"], e["ok"]) for e in entry][:1] == [("admin", True)]
    del producer  # its transaction was aborted under it; nothing to commit


def test_openapi_documents_the_new_endpoints(sasl_env: SaslEnv) -> None:
    paths = sasl_env.admin.get("/api/openapi.json").json()["paths"]
    for path, method in [("/api/acls", "get"), ("/api/acls", "post"), ("/api/acls", "delete"),
                         ("/api/acls/template", "post"), ("/api/users", "get"),
                         ("/api/users", "post"), ("/api/users/{user}/password", "put"),
                         ("/api/users/{user}", "delete"), ("/api/transactions", "get"),
                         ("/api/transactions/abort", "post")]:
        assert method in paths[path], (path, method)
        if method != "get":
            assert "X-CSRF-Token" in [p["name"] for p in paths[path][method]["parameters"]]


# -- Chromium ----------------------------------------------------------------------------------

def test_security_pages_in_chromium(sasl_env: SaslEnv) -> None:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} missing: run scripts/setup (Debian chromium)")
    if not (WEB / "node_modules" / "playwright-core").is_dir():
        pytest.fail("console/web/node_modules missing: run scripts/setup (npm ci)")
    topic = create_topic(sasl_env, "e2e-sec")
    # A hanging transaction for the Transactions page to abort.
    txn_topic, txn_id = create_topic(sasl_env, "e2e-txn"), new_name("e2e-txn")
    producer = Producer({**sasl_env.client_settings(*SASL_ADMIN), "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(txn_topic, b"hanging")
    assert producer.flush(30) == 0
    wait_for(lambda: any(t["transactional_id"] == txn_id and "start_offset" in
                         (t.get("partitions") or [{}])[0]
                         for t in sasl_env.admin.get("/api/transactions").json()["transactions"]),
             20, "the hanging transaction listed")
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    env = {**os.environ, "CONSOLE_URL": sasl_env.console.url, "ARTIFACTS": str(ARTIFACTS),
           "CHROMIUM": CHROMIUM, "TOPIC": topic, "ADMIN_USER": SASL_ADMIN[0],
           "ADMIN_PASSWORD": SASL_ADMIN[1], "BOB_PASSWORD": SASL_USERS["bob"],
           "NEW_USER": new_name("dave"), "TXN_TOPIC": txn_topic}
    result = subprocess.run(["node", str(WEB / "e2e" / "security.e2e.mjs")], cwd=WEB, env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    acls = sasl_env.admin.get("/api/acls", params={"name": topic}).json()["acls"]
    assert {(a["principal"], a["operation"]) for a in acls} == {
        ("User:bob", "WRITE"), ("User:bob", "DESCRIBE"), ("User:bob", "CREATE"),
        ("User:alice", "READ")}  # the last made with the keyboard only
    aborted = [e for e in sasl_env.admin.get("/api/audit").json()["entries"]
               if e["action"] == "abort-transaction" and e["target"] == f"{txn_topic}-0"]
    assert [(e["user"], e["ok"]) for e in aborted] == [("admin", True)]
    del producer
    for name in ["s0-sign-in", "s1-security-acls", "s2-acls-created", "s3-users",
                 "s4-transactions", "s5-denied"]:
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 5000, name


def test_share_groups_api_with_acls(sasl_env: SaslEnv) -> None:
    """The share-group requests over TLS and SCRAM (kafka_raw), and the cluster's ACLs deciding:
    bob sees no share group and is refused one in words until he may describe it."""
    from confluent_kafka import ShareConsumer

    c = sasl_env.admin
    topic = create_topic(sasl_env, "share")
    group = new_name("sharers")
    consumer = ShareConsumer({**sasl_env.client_settings(*SASL_ADMIN), "group.id": group})
    try:
        consumer.subscribe([topic])
        consumer.poll(0.5)  # joins: the group exists with one member
        wait_for(lambda: any(g["group_id"] == group and g["members"] == 1
                             for g in c.get("/api/share-groups").json()["groups"]),
                 20, "the share group listed for admin")
    finally:
        consumer.close()
    bob = sasl_sign_in(sasl_env.console.url, "bob", SASL_USERS["bob"])
    try:
        listed = bob.get("/api/share-groups")
        assert listed.status_code == 200, listed.text
        assert group not in [g["group_id"] for g in listed.json()["groups"]]
        message = error_of(bob.get(f"/api/share-groups/{group}"), 403)
        assert message.startswith("You are not allowed to") and \
            "GROUP_AUTHORIZATION_FAILED" in message, message
        sasl_env.admin.post("/api/acls", json={"acls": [acl("GROUP", group, "User:bob",
                                                            "DESCRIBE")]})
        detail = wait_for(lambda: (lambda r: r.json() if r.status_code == 200 else None)(
            bob.get(f"/api/share-groups/{group}")), 20, "bob describing the share group")
        # He may describe the group, not its topic: no log end offsets, said in words.
        assert detail["group_id"] == group and "log end offsets unknown" in detail["warning"]
    finally:
        bob.close()
