"""The console's JSON API against a real Tidelog broker: every endpoint, good and bad input."""

from __future__ import annotations

import base64
import csv
import io
import json
import threading
import time
import uuid
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer

from .conftest import PASSWORD, ConsoleEnv, sign_in, wait_for


def new_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(env: ConsoleEnv, partitions: int = 1, **configs: str) -> str:
    name = new_name()
    r = env.client.post("/api/topics", json={"name": name, "partitions": partitions,
                                             "configs": configs})
    assert r.status_code == 201, r.text
    return name


def produce(env: ConsoleEnv, topic: str, value: str, key: str | None = None,
            headers: list[list[str]] | None = None, partition: int | None = None) -> Any:
    r = env.client.post(f"/api/topics/{topic}/messages", json={
        "key": key, "value": value, "headers": headers or [], "partition": partition})
    assert r.status_code == 201, r.text
    return r.json()


def error_of(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    message = response.json()["error"]
    assert isinstance(message, str) and message and "Traceback" not in message
    return message


# -- session, CSRF, OpenAPI --------------------------------------------------------------------

def test_sign_in_and_csrf(console_env: ConsoleEnv) -> None:
    url = console_env.console.url
    with httpx.Client(base_url=url) as anonymous:
        assert "sign in" in error_of(anonymous.get("/api/topics"), 401)
        session = anonymous.get("/api/session").json()
        assert session["password_required"] and not session["signed_in"]
        cookie = anonymous.get("/api/session").headers.get("set-cookie", "")
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        # A sign-in without the CSRF token, then with a wrong password.
        assert "CSRF" in error_of(anonymous.post("/api/session", json={"password": PASSWORD}),
                                  403)
        token = session["csrf_token"]
        error_of(anonymous.post("/api/session", json={"password": "nope"},
                                headers={"X-CSRF-Token": token}), 401)
    client = sign_in(url)
    try:
        # Signed in, but a state-changing call without (or with a wrong) token is refused.
        no_token = httpx.Client(base_url=url, cookies=client.cookies)
        assert "CSRF" in error_of(no_token.post("/api/topics", json={"name": "x"}), 403)
        deleted = no_token.request("DELETE", "/api/topics/x", json={"confirm": "x"})
        assert "CSRF" in error_of(deleted, 403)
        error_of(no_token.post("/api/topics", json={"name": "x"},
                               headers={"X-CSRF-Token": "forged"}), 403)
        assert no_token.get("/api/topics").status_code == 200
        no_token.close()
        assert client.delete("/api/session").status_code == 200
        error_of(client.get("/api/topics"), 401)
    finally:
        client.close()


def test_openapi_lists_every_endpoint(console_env: ConsoleEnv) -> None:
    spec = console_env.client.get("/api/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    paths = spec["paths"]
    for path, method in [("/api/topics", "post"), ("/api/topics/{topic}/messages", "get"),
                         ("/api/groups/{group}/reset-preview", "post"), ("/api/audit", "get"),
                         ("/api/topics/{topic}/tail", "get"), ("/api/reproduce", "post")]:
        assert method in paths[path], path
    error_of(console_env.client.get("/api/nothing-here"), 404)


def test_cluster_overview(console_env: ConsoleEnv) -> None:
    body = console_env.client.get("/api/cluster").json()
    assert body["reachable"] is True
    assert body["cluster_id"]
    assert [b["up"] for b in body["brokers"]] == [True]
    assert body["brokers"][0]["port"] == console_env.broker.port
    assert body["brokers"][0]["controller"] is True


def test_metrics_history_and_sizes(console_env: ConsoleEnv) -> None:
    topic = create_topic(console_env)
    for i in range(5):
        produce(console_env, topic, f"m{i}")
    points = wait_for(lambda: [p for p in console_env.client.get("/api/metrics").json()["points"]
                               if p["messages_in"] > 0], what="a throughput point")
    assert points[-1]["bytes_in"] > 0

    def sized() -> Any:
        rows = console_env.client.get("/api/topics").json()["topics"]
        return [t for t in rows if t["name"] == topic and t["size"]]

    wait_for(sized, what="topic size from /metrics")
    [endpoint] = console_env.client.get("/api/cluster").json()["metrics"]
    assert endpoint["up"] is True and endpoint["disk_bytes"] > 0


def test_metrics_stream(console_env: ConsoleEnv) -> None:
    topic = create_topic(console_env)
    deadline = time.monotonic() + 60
    with console_env.client.stream("GET", "/api/metrics/stream", timeout=30) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            assert time.monotonic() < deadline, "no metrics point streamed in 60 s"
            if line.startswith(": connected"):
                produce(console_env, topic, "tick")
            if line.startswith("data: "):
                point = json.loads(line[6:])
                assert {"t", "messages_in", "bytes_in", "messages_out", "bytes_out",
                        "produce_p99_ms", "fetch_p99_ms"} <= set(point)
                break


# -- topics ------------------------------------------------------------------------------------

def test_topic_create_describe_alter_delete(console_env: ConsoleEnv) -> None:
    c = console_env.client
    name = create_topic(console_env, partitions=3, **{"retention.ms": "3600000"})
    error_of(c.post("/api/topics", json={"name": name, "partitions": 3}), 409)
    rows = {t["name"]: t for t in c.get("/api/topics").json()["topics"]}
    assert rows[name]["partitions"] == 3 and rows[name]["messages"] == 0
    assert (rows[name]["replicas"], rows[name]["under_replicated"],
            rows[name]["retention_ms"]) == (1, 0, 3600000), rows[name]
    detail = c.get(f"/api/topics/{name}").json()
    assert [p["partition"] for p in detail["partitions"]] == [0, 1, 2]
    assert detail["partitions"][0]["isr"] == detail["partitions"][0]["replicas"]
    assert {(p["leader"], p["log_start_offset"], p["log_end_offset"])
            for p in detail["partitions"]} == {(detail["partitions"][0]["replicas"][0], 0, 0)}
    configs = {e["name"]: e for e in detail["configs"]}
    assert configs["retention.ms"]["value"] == "3600000"
    r = c.patch(f"/api/topics/{name}/configs", json={"set": {"retention.ms": "7200000"}})
    assert r.status_code == 200, r.text
    assert {e["name"]: e["value"] for e in r.json()["configs"]}["retention.ms"] == "7200000"
    r = c.patch(f"/api/topics/{name}/configs", json={"delete": ["retention.ms"]})
    assert {e["name"]: e for e in r.json()["configs"]}["retention.ms"]["default"] is True
    error_of(c.request("DELETE", f"/api/topics/{name}", json={"confirm": "wrong"}), 400)
    assert c.request("DELETE", f"/api/topics/{name}", json={"confirm": name}).status_code == 200
    wait_for(lambda: c.get(f"/api/topics/{name}").status_code == 404, what="topic gone")


def test_topic_bad_input(console_env: ConsoleEnv) -> None:
    c = console_env.client
    error_of(c.post("/api/topics", content=b"{not json", headers={"content-type": "x"}), 400)
    error_of(c.post("/api/topics", json=[1]), 400)
    error_of(c.post("/api/topics", json={"partitions": 1}), 400)
    assert "partitions" in error_of(c.post("/api/topics", json={"name": new_name(),
                                                                "partitions": "many"}), 400)
    error_of(c.post("/api/topics", json={"name": new_name(), "partitions": 0}), 400)
    error_of(c.post("/api/topics", json={"name": "bad name!"}), 400)
    error_of(c.post("/api/topics", json={"name": new_name(),
                                         "configs": {"retention.ms": "soon"}}), 400)
    assert "does not exist" in error_of(c.get("/api/topics/no-such-topic"), 404)
    error_of(c.request("DELETE", "/api/topics/no-such-topic",
                       json={"confirm": "no-such-topic"}), 404)
    error_of(c.patch("/api/topics/no-such-topic/configs", json={"set": {"a": "b"}}), 404)
    topic = create_topic(console_env)
    error_of(c.patch(f"/api/topics/{topic}/configs", json={}), 400)
    error_of(c.patch(f"/api/topics/{topic}/configs", json={"set": {"no.such.config": "1"}}),
             400)


# -- messages ----------------------------------------------------------------------------------

def test_produce_browse_decode(console_env: ConsoleEnv) -> None:
    c = console_env.client
    topic = create_topic(console_env, partitions=2)
    first = produce(console_env, topic, '{"user": {"id": 7}}', key="k1",
                    headers=[["trace", "abc"]], partition=0)
    assert first == {"topic": topic, "partition": 0, "offset": 0}
    for i in range(1, 6):
        produce(console_env, topic, f"plain {i}", key=f"k{i % 2}", partition=i % 2)
    r = c.post(f"/api/topics/{topic}/messages", json={
        "encoding": "base64", "key": None, "value": base64.b64encode(b"\xff\x00").decode()})
    assert r.status_code == 201
    page = c.get(f"/api/topics/{topic}/messages", params={"start": "oldest"}).json()
    assert len(page["messages"]) == 7
    m0 = next(m for m in page["messages"] if m["partition"] == 0 and m["offset"] == 0)
    assert m0["key"] == "k1" and m0["headers"] == [["trace", "abc"]]
    binary = next(m for m in page["messages"] if m["value_raw"]["base64"] == "/wA=")
    assert binary["value_raw"]["text"] is None and binary["key"] is None
    # compact=1 (the browser's pages): no key/value copies, base64 only for non-UTF-8 bytes.
    compact = c.get(f"/api/topics/{topic}/messages",
                    params={"start": "oldest", "compact": "1"}).json()["messages"]
    assert [(m["partition"], m["offset"]) for m in compact] == \
        [(m["partition"], m["offset"]) for m in page["messages"]]
    assert all("key" not in m and "value" not in m for m in compact)
    c0 = next(m for m in compact if m["partition"] == 0 and m["offset"] == 0)
    assert c0["value_raw"] == {"text": '{"user": {"id": 7}}', "size": 19}
    assert c0["key_raw"] == {"text": "k1", "size": 2}
    assert next(m for m in compact if m["value_raw"]["text"] is None)["value_raw"] == \
        {"text": None, "base64": "/wA=", "size": 2}
    # One partition from an offset; newest N; limit.
    p1 = c.get(f"/api/topics/{topic}/messages",
               params={"partition": "1", "start": "offset", "offset": "1"}).json()
    assert {m["partition"] for m in p1["messages"]} == {1}
    assert p1["messages"][0]["offset"] == 1
    newest = c.get(f"/api/topics/{topic}/messages", params={"start": "newest", "limit": "2"})
    assert len(newest.json()["messages"]) == 2
    # From a timestamp: everything produced after `mark`.
    mark = int(time.time() * 1000) + 1
    wait_for(lambda: int(time.time() * 1000) > mark + 5)
    late = produce(console_env, topic, "late", partition=1)
    by_time = c.get(f"/api/topics/{topic}/messages",
                    params={"start": "timestamp", "timestamp": str(mark)}).json()
    assert [(m["partition"], m["offset"]) for m in by_time["messages"]] == [
        (1, late["offset"])]


def test_pages_from_a_reused_browsing_consumer(console_env: ConsoleEnv) -> None:
    """The console keeps its browsing consumers between pages: each page still holds exactly
    its own records, whatever the page before read (another topic, a later offset, a page cut
    short by its limit while more was being fetched)."""
    c = console_env.client
    a, b = create_topic(console_env), create_topic(console_env)
    producer = Producer({"bootstrap.servers": console_env.broker.bootstrap, "linger.ms": 5})
    for topic in (a, b):
        for i in range(300):
            producer.produce(topic, f"{topic}:{i}".encode(), partition=0)
    assert producer.flush(30) == 0

    def page(topic: str, **params: Any) -> list[tuple[int, str]]:
        r = c.get(f"/api/topics/{topic}/messages", params={"partition": 0, **params})
        assert r.status_code == 200, r.text
        return [(m["offset"], m["value"]) for m in r.json()["messages"]]

    for topic, params, first, count in [
            (a, {"start": "offset", "offset": 250, "limit": 10}, 250, 10),
            (b, {"start": "oldest", "limit": 5}, 0, 5),
            (a, {"start": "offset", "offset": 3, "limit": 20}, 3, 20),
            (a, {"start": "newest", "limit": 7}, 293, 7),
            (b, {"start": "offset", "offset": 100, "limit": 200}, 100, 200),
            (a, {"start": "offset", "offset": 0, "limit": 2}, 0, 2)]:
        assert page(topic, **params) == [(o, f"{topic}:{o}") for o in range(first, first + count)]


def test_produce_bad_input(console_env: ConsoleEnv) -> None:
    c = console_env.client
    topic = create_topic(console_env)
    error_of(c.post("/api/topics/no-such-topic/messages", json={"value": "x"}), 404)
    assert "partition" in error_of(c.post(f"/api/topics/{topic}/messages",
                                          json={"value": "x", "partition": 5}), 404)
    error_of(c.post(f"/api/topics/{topic}/messages", json={"value": "x", "partition": -1}), 400)
    error_of(c.post(f"/api/topics/{topic}/messages",
                    json={"value": "***", "encoding": "base64"}), 400)
    error_of(c.post(f"/api/topics/{topic}/messages", json={"value": 5}), 400)
    error_of(c.post(f"/api/topics/{topic}/messages", json={"value": "x", "headers": "h"}), 400)


def test_browse_bad_input(console_env: ConsoleEnv) -> None:
    c = console_env.client
    topic = create_topic(console_env)
    base = f"/api/topics/{topic}/messages"
    assert "does not exist" in error_of(c.get("/api/topics/no-such-topic/messages"), 404)
    assert "offset" in error_of(c.get(base, params={"start": "offset", "offset": "abc"}), 400)
    error_of(c.get(base, params={"start": "offset"}), 400)
    error_of(c.get(base, params={"start": "offset", "offset": "-3"}), 400)
    error_of(c.get(base, params={"start": "timestamp", "timestamp": "yesterday"}), 400)
    error_of(c.get(base, params={"start": "sideways"}), 400)
    error_of(c.get(base, params={"limit": "0"}), 400)
    error_of(c.get(base, params={"limit": "100000"}), 400)
    error_of(c.get(base, params={"partition": "x"}), 400)
    error_of(c.get(base, params={"partition": "9"}), 404)
    for bad, words in [("key ==", "position 6"), ("nope == 1", "unknown field"),
                       ("key = 1", "unexpected character"), ('(key == "a"', "expected ')'"),
                       ('key == "a" junk', "unexpected"), ("header[x] == 1", "expected string")]:
        assert words in error_of(c.get(base, params={"filter": bad}), 400), bad
    error_of(c.get(f"{base}/export", params={"format": "xml"}), 400)
    error_of(c.get("/api/topics/no-such-topic/tail"), 404)
    error_of(c.get(f"/api/topics/{topic}/tail", params={"filter": "key =="}), 400)


def test_filter_and_export(console_env: ConsoleEnv) -> None:
    c = console_env.client
    topic = create_topic(console_env)
    produce(console_env, topic, '{"level": "error", "n": 3}', key="a", headers=[["src", "x"]])
    produce(console_env, topic, '{"level": "info", "n": 9}', key="b", headers=[["src", "y"]])
    produce(console_env, topic, "not json, has error", key="a")
    base = f"/api/topics/{topic}/messages"

    def offsets(expr: str) -> list[int]:
        r = c.get(base, params={"start": "oldest", "filter": expr})
        assert r.status_code == 200, r.text
        return [m["offset"] for m in r.json()["messages"]]

    assert offsets('key == "a"') == [0, 2]
    assert offsets('value contains "error"') == [0, 2]
    assert offsets('value.level == "error" or value.n > 5') == [0, 1]
    assert offsets('header["src"] == "y"') == [1]
    assert offsets('not key == "a" and header["src"] != null') == [1]
    r = c.get(f"{base}/export", params={"start": "oldest", "filter": 'key == "a"',
                                        "format": "json"})
    assert "attachment" in r.headers["content-disposition"]
    assert [m["value"] for m in r.json()] == ['{"level": "error", "n": 3}',
                                               "not json, has error"]
    r = c.get(f"{base}/export", params={"start": "oldest", "format": "csv"})
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [row["key"] for row in rows] == ["a", "b", "a"]
    assert json.loads(rows[0]["headers"]) == [["src", "x"]]


def test_reproduce(console_env: ConsoleEnv) -> None:
    c = console_env.client
    dlq, target = create_topic(console_env), create_topic(console_env)
    produce(console_env, dlq, "poison", key="k", headers=[["why", "timeout"]])
    r = c.post("/api/reproduce", json={"topic": dlq, "partition": 0, "offset": 0,
                                       "to_topic": target})
    assert r.status_code == 201, r.text
    [m] = c.get(f"/api/topics/{target}/messages", params={"start": "oldest"}).json()["messages"]
    assert (m["key"], m["value"], m["headers"]) == ("k", "poison", [["why", "timeout"]])
    error_of(c.post("/api/reproduce", json={"topic": dlq, "partition": 0, "offset": 5,
                                            "to_topic": target}), 404)
    error_of(c.post("/api/reproduce", json={"topic": dlq, "partition": 0, "offset": "x",
                                            "to_topic": target}), 400)
    error_of(c.post("/api/reproduce", json={"topic": dlq, "partition": 0, "offset": 0,
                                            "to_topic": "no-such-topic"}), 404)


def test_live_tail(console_env: ConsoleEnv) -> None:
    topic = create_topic(console_env)
    produce(console_env, topic, "before")
    seen: list[dict[str, Any]] = []
    connected = threading.Event()

    def listen() -> None:
        params = {"filter": 'value startswith "live"'}
        with console_env.client.stream("GET", f"/api/topics/{topic}/tail", params=params,
                                       timeout=30) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                connected.set()
                if line.startswith("data: "):
                    seen.extend(json.loads(line[6:])["messages"])
                    if any(m["value"] == "live 2" for m in seen):
                        return

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    assert connected.wait(20)
    # The tail starts at the end offsets it read before answering: nothing produced later is lost.
    for i in range(3):
        produce(console_env, topic, f"live {i}" if i else "skipped by filter")
    thread.join(30)
    assert not thread.is_alive(), seen
    assert [m["value"] for m in seen] == ["live 1", "live 2"]


def test_live_tail_samples_a_burst_and_counts_the_rest(console_env: ConsoleEnv) -> None:
    """20,000 messages at once: each event carries at most 50, and shown plus skipped
    accounts for every one (the unfiltered tail decodes only what it shows)."""
    from confluent_kafka import Producer

    topic = create_topic(console_env)
    events: list[dict[str, Any]] = []
    connected = threading.Event()
    total = 20_000

    def listen() -> None:
        with console_env.client.stream("GET", f"/api/topics/{topic}/tail", timeout=30) as r:
            for line in r.iter_lines():
                connected.set()
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                    if sum(len(e["messages"]) + e["skipped"] for e in events) >= total:
                        return

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    assert connected.wait(20)
    producer = Producer({"bootstrap.servers": console_env.broker.bootstrap, "linger.ms": 20})
    for i in range(total):
        producer.produce(topic, f"burst {i}".encode())
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    thread.join(30)
    assert not thread.is_alive(), f"{len(events)} events so far"
    assert sum(len(e["messages"]) + e["skipped"] for e in events) == total
    assert all(len(e["messages"]) <= 50 for e in events)
    assert events[-1]["messages"][-1]["value"] == f"burst {total - 1}"


# -- consumer groups ---------------------------------------------------------------------------

def _consume(env: ConsoleEnv, group: str, topic: str, count: int) -> None:
    consumer = Consumer({"bootstrap.servers": env.broker.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < count and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        assert got == count
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_groups_lag_and_reset(console_env: ConsoleEnv) -> None:
    c = console_env.client
    topic = create_topic(console_env, partitions=2)
    for i in range(6):
        produce(console_env, topic, f"v{i}", partition=i % 2)
    group = new_name("g")
    _consume(console_env, group, topic, 6)
    produce(console_env, topic, "new", partition=0)
    row = wait_for(lambda: [g for g in c.get("/api/groups").json()["groups"]
                            if g["group_id"] == group and g["state"] == "EMPTY"],
                   what="the group, empty")[0]
    assert row["lag"] == 1 and row["topics"] == [topic] and row["members"] == 0
    detail = c.get(f"/api/groups/{group}").json()
    assert [(o["partition"], o["committed"], o["log_end_offset"], o["lag"])
            for o in detail["offsets"]] == [(0, 3, 4, 1), (1, 3, 3, 0)]
    preview = c.post(f"/api/groups/{group}/reset-preview", json={"strategy": "earliest"})
    assert preview.status_code == 200, preview.text
    assert [(r["old"], r["new"]) for r in preview.json()["offsets"]] == [(3, 0), (3, 0)]
    assert preview.json()["can_apply"] is True
    # The preview changed nothing.
    assert c.get(f"/api/groups/{group}").json()["lag"] == 1
    shift = c.post(f"/api/groups/{group}/reset-preview", json={"strategy": "shift",
                                                               "value": -10}).json()
    assert [r["new"] for r in shift["offsets"]] == [0, 0]
    specific = c.post(f"/api/groups/{group}/reset-preview",
                      json={"strategy": "offset", "value": 2, "topic": topic}).json()
    assert [r["new"] for r in specific["offsets"]] == [2, 2]
    by_time = c.post(f"/api/groups/{group}/reset-preview",
                     json={"strategy": "timestamp", "value": 0}).json()
    assert [r["new"] for r in by_time["offsets"]] == [0, 0]
    r = c.post(f"/api/groups/{group}/reset", json={"strategy": "earliest"})
    assert r.status_code == 200, r.text
    assert c.get(f"/api/groups/{group}").json()["lag"] == 7
    r = c.post(f"/api/groups/{group}/reset", json={"strategy": "latest"})
    assert c.get(f"/api/groups/{group}").json()["lag"] == 0
    audit = c.get("/api/audit").json()["entries"]
    assert any(e["action"] == "reset-offsets" and e["target"] == group and e["user"] == "tester"
               for e in audit)
    assert c.request("DELETE", f"/api/groups/{group}").status_code == 200
    wait_for(lambda: group not in {g["group_id"] for g in c.get("/api/groups").json()["groups"]},
             what="group deleted")


def test_groups_bad_input(console_env: ConsoleEnv) -> None:
    c = console_env.client
    topic = create_topic(console_env)
    produce(console_env, topic, "x")
    error_of(c.get("/api/groups/no-such-group"), 404)
    group = new_name("g")
    _consume(console_env, group, topic, 1)
    base = f"/api/groups/{group}"
    error_of(c.post(f"{base}/reset-preview", json={"strategy": "sideways"}), 400)
    error_of(c.post(f"{base}/reset-preview", json={"strategy": "shift"}), 400)
    error_of(c.post(f"{base}/reset-preview", json={"strategy": "offset", "value": "ten"}), 400)
    error_of(c.post(f"{base}/reset-preview", json={"strategy": "timestamp", "value": -1}), 400)
    error_of(c.post(f"{base}/reset-preview", json={"strategy": "earliest",
                                                   "topic": "no-such-topic"}), 404)
    # An active group: the preview says so, and the reset is refused.
    consumer = Consumer({"bootstrap.servers": console_env.broker.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        wait_for(lambda: consumer.poll(0.2) is not None or consumer.assignment(),
                 what="the consumer joined")
        preview = c.post(f"{base}/reset-preview", json={"strategy": "earliest"}).json()
        assert preview["can_apply"] is False
        assert "members" in error_of(c.post(f"{base}/reset", json={"strategy": "earliest"}),
                                     409)
        error_of(c.request("DELETE", base), 409)
    finally:
        consumer.close()


def test_audit_log(console_env: ConsoleEnv) -> None:
    c = console_env.client
    name = create_topic(console_env)
    error_of(c.post("/api/topics", json={"name": name}), 409)
    entries = c.get("/api/audit").json()["entries"]
    mine = [e for e in entries if e["target"] == name]
    assert [(e["action"], e["ok"], e["user"]) for e in mine] == [
        ("create-topic", False, "tester"), ("create-topic", True, "tester")]
    assert "already exists" in mine[0]["error"]
    lines = console_env.console.audit_path.read_text().splitlines()
    assert any(json.loads(line)["target"] == name for line in lines)


@pytest.mark.parametrize("path", ["/", "/index.html"])
def test_frontend_served(console_env: ConsoleEnv, path: str) -> None:
    r = httpx.get(console_env.console.url + path)
    if r.status_code == 503:
        pytest.fail("frontend bundle not built: run scripts/setup")
    assert r.status_code == 200 and "<div id=\"root\">" in r.text


def test_security_and_transactions_without_an_authorizer(console_env: ConsoleEnv) -> None:
    """The plain broker has no authorizer: the ACL page says so; users and transactions list."""
    c = console_env.client
    acls = c.get("/api/acls").json()
    assert acls["enabled"] is False and "no authorizer" in acls["reason"]
    assert isinstance(c.get("/api/users").json()["users"], list)
    assert isinstance(c.get("/api/transactions").json()["transactions"], list)
    # Without SASL the console password stays the sign-in; the session says so.
    session = c.get("/api/session").json()
    assert session["sasl_mechanism"] is None and session["password_required"] is True
