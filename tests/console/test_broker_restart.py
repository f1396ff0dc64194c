"""The console keeps working while its broker dies and comes back: the API answers in words
(never a stack trace) and the overview shows the broker down, then up."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import BrokerFactory
from tidelog.cluster.zookeeper_server import free_port

from .conftest import sign_in, start_broker, start_console, wait_for


def test_broker_dies_and_comes_back(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    port, metrics_port = free_port(), free_port()
    broker = start_broker(broker_factory, port=port, metrics_port=metrics_port)
    # A short cluster timeout: every call made while the broker is down waits that long.
    console = start_console(tmp_path, broker.bootstrap, metrics_port, timeout_s=2.0)
    client = sign_in(console.url)
    try:
        r = client.post("/api/topics", json={"name": "survivor", "partitions": 1})
        assert r.status_code == 201, r.text
        assert client.post("/api/topics/survivor/messages", json={"value": "one"}).status_code \
            == 201
        assert client.get("/api/cluster").json()["brokers"][0]["up"] is True

        broker.kill()
        down = wait_for(lambda: (lambda b: b if not b["reachable"] else None)(
            client.get("/api/cluster").json()), what="the cluster shown unreachable")
        assert down["error"] and "Traceback" not in down["error"]
        assert [b["up"] for b in down["brokers"]] == [False]
        for path in ["/api/topics", "/api/topics/survivor/messages", "/api/groups"]:
            r = client.get(path)
            assert r.status_code in (502, 503), (path, r.status_code, r.text)
            assert "Traceback" not in r.text and r.json()["error"]
        cluster = client.get("/api/cluster").json()
        assert [m["up"] for m in cluster["metrics"]] in ([False], [None], [True])

        start_broker(broker_factory, broker.data_dir, port=port, metrics_port=metrics_port)
        wait_for(lambda: client.get("/api/cluster").json()["reachable"], timeout_s=60,
                 what="the cluster reachable again")
        wait_for(lambda: [b["up"] for b in client.get("/api/cluster").json()["brokers"]]
                 == [True], what="the broker shown up")
        page = wait_for(lambda: (lambda r: r.json() if r.status_code == 200 else None)(
            client.get("/api/topics/survivor/messages", params={"start": "oldest"})),
            what="messages readable again")
        assert [m["value"] for m in page["messages"]] == ["one"]
        r = client.post("/api/topics/survivor/messages", json={"value": "two"})
        assert r.status_code == 201, r.text
    finally:
        client.close()
        console.stop()
    if "Traceback" in console.log_text():
        pytest.fail(console.log_text()[-4000:])
