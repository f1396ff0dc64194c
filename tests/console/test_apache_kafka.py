"""The console against Apache Kafka (scripts/kafka, D18): it is a plain client, so the same
API works; Kafka has no /metrics endpoint, so there are no charts and no sizes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer

import kafka_peer

from .conftest import ConsoleProcess, sign_in, start_console, wait_for


@pytest.fixture(scope="module")
def kafka_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    with kafka_peer.running_kafka(tmp_path_factory.mktemp("kafka")) as peer:
        tmp: Path = tmp_path_factory.mktemp("console")
        # No metrics endpoint on Kafka: point at a closed port and expect "down", not errors.
        console = start_console(tmp, peer.bootstrap, metrics_port=1)
        console.bootstrap = peer.bootstrap  # type: ignore[attr-defined]
        try:
            yield console
        finally:
            console.stop()
    assert "Traceback" not in console.log_text(), console.log_text()[-4000:]


def test_console_against_apache_kafka(kafka_console: ConsoleProcess) -> None:
    c = sign_in(kafka_console.url)
    try:
        cluster = c.get("/api/cluster").json()
        assert cluster["reachable"] and cluster["cluster_id"] and cluster["brokers"][0]["up"]
        r = c.post("/api/topics", json={"name": "ak-orders", "partitions": 2,
                                        "configs": {"retention.ms": "3600000"}})
        assert r.status_code == 201, r.text
        error_status = c.post("/api/topics", json={"name": "ak-orders"}).status_code
        assert error_status == 409
        wait_for(lambda: c.get("/api/topics/ak-orders").status_code == 200,
                 what="topic metadata on every broker")
        for i in range(4):
            r = c.post("/api/topics/ak-orders/messages",
                       json={"key": f"k{i % 2}", "value": f'{{"n": {i}}}',
                             "headers": [["h", str(i)]], "partition": i % 2})
            assert r.status_code == 201, r.text
        page = c.get("/api/topics/ak-orders/messages",
                     params={"start": "oldest", "filter": "value.n >= 2"}).json()
        assert sorted(m["value"] for m in page["messages"]) == ['{"n": 2}', '{"n": 3}']
        detail = c.get("/api/topics/ak-orders").json()
        assert [p["log_end_offset"] for p in detail["partitions"]] == [2, 2]
        configs = {e["name"]: e["value"] for e in detail["configs"]}
        assert configs["retention.ms"] == "3600000"
        assert c.patch("/api/topics/ak-orders/configs",
                       json={"set": {"retention.ms": "7200000"}}).status_code == 200
        assert c.get("/api/topics/no-such").status_code == 404

        consumer = Consumer({"bootstrap.servers": kafka_console.bootstrap,  # type: ignore[attr-defined]
                             "group.id": "ak-group", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        try:
            consumer.subscribe(["ak-orders"])
            got, deadline = 0, time.monotonic() + 60
            while got < 4 and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                got += m is not None and m.error() is None
            assert got == 4
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        group = wait_for(lambda: (lambda r: r.json() if r.status_code == 200
                                  and r.json()["state"] == "EMPTY" else None)(
            c.get("/api/groups/ak-group")), timeout_s=60, what="the group, empty")
        assert group["lag"] == 0
        r = c.post("/api/groups/ak-group/reset", json={"strategy": "earliest"})
        assert r.status_code == 200, r.text
        assert c.get("/api/groups/ak-group").json()["lag"] == 4
        assert any(g["group_id"] == "ak-group" for g in c.get("/api/groups").json()["groups"])
        r = c.request("DELETE", "/api/topics/ak-orders", json={"confirm": "ak-orders"})
        assert r.status_code == 200, r.text
    finally:
        c.close()


def test_security_and_transactions_against_apache_kafka(kafka_console: ConsoleProcess) -> None:
    """The hand-made requests (DescribeAcls, DescribeUserScramCredentials, the transaction
    APIs) and the admin API's SCRAM calls, against Kafka itself."""
    from confluent_kafka import Producer

    bootstrap = kafka_console.bootstrap  # type: ignore[attr-defined]
    c = sign_in(kafka_console.url)
    try:
        acls = c.get("/api/acls").json()
        assert acls["enabled"] is False and "no authorizer" in acls["reason"]
        r = c.post("/api/users", json={"name": "ak-carol", "password": "first-pw",
                                       "mechanism": "SCRAM-SHA-512", "iterations": 8192})
        assert r.status_code == 201, r.text
        # Kafka's brokers describe users from their metadata image, which follows the
        # controller's commit a moment later.
        users = wait_for(lambda: (lambda u: u if "ak-carol" in u else None)(
            {u["name"]: u["mechanisms"] for u in c.get("/api/users").json()["users"]}),
            30, "ak-carol in Kafka's metadata")
        assert users["ak-carol"] == [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]
        r = c.put("/api/users/ak-carol/password", json={"password": "second-pw",
                                                        "mechanism": "SCRAM-SHA-512"})
        assert r.status_code == 200, r.text
        r = c.request("DELETE", "/api/users/ak-carol", json={"confirm": "ak-carol"})
        assert r.status_code == 200, r.text

        assert c.post("/api/topics", json={"name": "ak-txn"}).status_code == 201
        wait_for(lambda: c.get("/api/topics/ak-txn").status_code == 200, what="ak-txn")
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ak-txn-1"})
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce("ak-txn", b"hanging")
        assert producer.flush(60) == 0

        def open_txn() -> dict[str, object] | None:
            rows = c.get("/api/transactions").json()["transactions"]
            found = [t for t in rows if t["transactional_id"] == "ak-txn-1"
                     and t.get("partitions") and "start_offset" in t["partitions"][0]]
            return found[0] if found else None

        txn = wait_for(open_txn, 60, "the open transaction on Kafka")
        assert txn["state"] == "Ongoing"
        r = c.post("/api/transactions/abort", json={"topic": "ak-txn", "partition": 0,
                                                    "start_offset": 0})
        assert r.status_code == 200, r.text
        assert "no open transaction" in c.post("/api/transactions/abort", json={
            "topic": "ak-txn", "partition": 0, "start_offset": 0}).json()["error"]
        del producer
    finally:
        c.close()


def test_share_groups_against_apache_kafka(kafka_console: ConsoleProcess) -> None:
    """The share-group requests (ListGroups v5, ShareGroupDescribe, DescribeShareGroupOffsets)
    against Kafka itself, with a ShareConsumer consuming."""
    from confluent_kafka import Producer, ShareConsumer

    from .test_share_groups import share_auto_offset_reset_earliest

    bootstrap = kafka_console.bootstrap  # type: ignore[attr-defined]
    c = sign_in(kafka_console.url)
    consumer = None
    try:
        listed = c.get("/api/share-groups")
        assert listed.status_code == 200, listed.text
        assert listed.json()["supported"] is True, listed.json()
        assert c.post("/api/topics", json={"name": "ak-share"}).status_code == 201
        wait_for(lambda: c.get("/api/topics/ak-share").status_code == 200, what="ak-share")
        share_auto_offset_reset_earliest(bootstrap, "ak-sharers")
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(3):
            producer.produce("ak-share", f"s{i}".encode())
        assert producer.flush(60) == 0
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "ak-sharers"})
        consumer.subscribe(["ak-share"])
        got: list[bytes] = []

        def drained() -> dict[str, object] | None:
            got.extend(m.value() for m in consumer.poll(0.3) if m.error() is None)
            r = c.get("/api/share-groups/ak-sharers")
            body = r.json() if r.status_code == 200 else None
            # Kafka's share coordinator writes the start offset a moment after the fetch; it
            # may keep 0 with lag 0 after the acknowledgements, so only the lag is checked.
            return body if len(got) >= 3 and body and body["members"] and [
                (p["start_offset"] is not None, p["lag"]) for p in body["partitions"]] == \
                [(True, 0)] else None

        detail = wait_for(drained, 60, "Kafka's share group with a member and lag 0")
        assert detail["state"] == "STABLE"
        assert [p["topic"] for p in detail["partitions"]] == ["ak-share"]
        assert detail["members"][0]["assignment"] == [{"topic": "ak-share", "partition": 0}]
        listed_row = [g for g in c.get("/api/share-groups").json()["groups"]
                      if g["group_id"] == "ak-sharers"]
        assert listed_row and listed_row[0]["members"] == 1, listed_row
        assert "NON_EMPTY_GROUP" in c.post("/api/share-groups/ak-sharers/reset",
                                           json={"strategy": "earliest"}).json()["error"]
        assert c.get("/api/share-groups/ak-no-such").status_code == 404
    finally:
        if consumer is not None:
            consumer.close()
        c.close()


def test_share_groups_switched_off_in_apache_kafka(kafka_console: ConsoleProcess) -> None:
    """Kafka keeps advertising the share APIs with share.version 0 (its describe answers
    UNSUPPORTED_VERSION): the console reads the finalized feature and says share groups are
    off, in words, on the list (200, supported false) and the rest (501). Runs last in this
    module: it leaves the feature at 0."""
    bootstrap = kafka_console.bootstrap  # type: ignore[attr-defined]
    kafka_peer.run_tool("kafka-features", "--bootstrap-server", bootstrap, "downgrade",
                        "--feature", "share.version=0")
    c = sign_in(kafka_console.url)
    try:
        listed = wait_for(lambda: (lambda r: r.json() if r.status_code == 200 and
                                   r.json()["supported"] is False else None)(
            c.get("/api/share-groups")), 30, "the share groups list to say they are off")
        assert "switched off" in listed["reason"] and "share.version" in listed["reason"]
        assert listed["groups"] == []
        for r in (c.get("/api/share-groups/ak-sharers"),
                  c.post("/api/share-groups/ak-sharers/reset-preview",
                         json={"strategy": "earliest"})):
            assert r.status_code == 501, r.text
            assert "switched off" in r.json()["error"]
    finally:
        c.close()
