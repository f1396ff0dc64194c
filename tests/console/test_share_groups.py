"""The console's share-group API (KIP-932) against a real Tidelog broker with confluent-kafka's
ShareConsumer consuming: the group and its member appear, lag goes to 0 once consumed, a reset
is refused while the consumer is in and applied once it left, delete; bad input in words."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from .conftest import ConsoleEnv, wait_for
from .test_api import create_topic, error_of


def _share_group(env: ConsoleEnv, group: str) -> dict[str, Any] | None:
    listed = env.client.get("/api/share-groups")
    assert listed.status_code == 200, listed.text
    assert listed.json()["supported"] is True
    return next((g for g in listed.json()["groups"] if g["group_id"] == group), None)


def _detail(env: ConsoleEnv, group: str) -> dict[str, Any]:
    r = env.client.get(f"/api/share-groups/{group}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def share_auto_offset_reset_earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest for the group (Kafka's default is latest)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("group", group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def test_share_group_lifecycle(console_env: ConsoleEnv) -> None:
    env = console_env
    bootstrap = env.broker.bootstrap
    topic = create_topic(env, partitions=2)
    group = f"share-{uuid.uuid4().hex[:8]}"
    share_auto_offset_reset_earliest(bootstrap, group)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(6):
        producer.produce(topic, f"job-{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    closed = False
    try:
        consumer.subscribe([topic])
        got: list[str] = []

        def consumed() -> bool:
            got.extend(m.value().decode() for m in consumer.poll(0.3) if m.error() is None)
            return len(got) >= 6

        wait_for(consumed, 30, "the share consumer to receive 6 records")
        assert sorted(got) == [f"job-{i}" for i in range(6)]
        # The last poll's records stay acquired until the next poll acknowledges them: the
        # detail shows them from the broker's /metrics (scraped every second).
        wait_for(lambda: sum(p["acquired"] or 0 for p in _detail(env, group)["partitions"]),
                 30, "acquired records in the detail")

        def listed_at_zero() -> dict[str, Any] | None:
            consumer.poll(0.1)  # sends the implicit acknowledgements
            row = _share_group(env, group)
            return row if row and row["members"] == 1 and row["lag"] == 0 \
                and row["partitions"] == 2 else None

        row = wait_for(listed_at_zero, 30, "the share group listed with 1 member and lag 0")
        assert row["state"] == "STABLE" and row["topics"] == [topic]
        detail = wait_for(lambda: (lambda d: d if [(p["acquired"], p["in_flight"])
                                                   for p in d["partitions"]] == [(0, 0)] * 2
                                   else None)(_detail(env, group)),
                          30, "no record acquired or in flight once acknowledged")
        assert len(detail["members"]) == 1
        member = detail["members"][0]
        assert sorted((a["topic"], a["partition"]) for a in member["assignment"]) == \
            [(topic, 0), (topic, 1)]
        assert [(p["partition"], p["start_offset"], p["log_end_offset"], p["lag"],
                 p["members"]) for p in detail["partitions"]] == \
            [(0, 3, 3, 0, [member["member_id"]]), (1, 3, 3, 0, [member["member_id"]])]

        # A reset while the consumer is in: previewed (can_apply false), refused in words.
        preview = env.client.post(f"/api/share-groups/{group}/reset-preview",
                                  json={"strategy": "earliest", "topic": topic})
        assert preview.status_code == 200, preview.text
        assert preview.json()["can_apply"] is False
        assert "NON_EMPTY_GROUP" in error_of(env.client.post(
            f"/api/share-groups/{group}/reset", json={"strategy": "earliest"}), 409)
    finally:
        consumer.close()
        closed = True
    assert closed
    wait_for(lambda: _detail(env, group)["state"] == "EMPTY", 30, "the group to be empty")

    preview = env.client.post(f"/api/share-groups/{group}/reset-preview",
                              json={"strategy": "offset", "value": 1, "topic": topic,
                                    "partition": 1})
    assert preview.status_code == 200, preview.text
    assert preview.json()["can_apply"] is True
    assert [(r["partition"], r["old"], r["new"], r["lag_after"])
            for r in preview.json()["offsets"]] == [(1, 3, 1, 2)]
    applied = env.client.post(f"/api/share-groups/{group}/reset",
                              json={"strategy": "earliest", "topic": topic})
    assert applied.status_code == 200, applied.text
    detail = _detail(env, group)
    assert [(p["start_offset"], p["lag"]) for p in detail["partitions"]] == [(0, 3), (0, 3)]
    # What the lag-over-time chart samples: per partition the log end minus the SPSO (the
    # broker's own figure here), with the time the sample was taken.
    assert all(p["lag"] == p["log_end_offset"] - p["start_offset"] and
               p["lag_source"] == "broker" for p in detail["partitions"]), detail
    later = _detail(env, group)
    assert 0 < detail["sampled_at"] <= later["sampled_at"] <= time.time() * 1000 + 1
    assert later["lag"] == detail["lag"] == 6
    assert _share_group(env, group)["lag"] == 6  # type: ignore[index]

    # Delete: confirmation required, then gone.
    error_of(env.client.request("DELETE", f"/api/share-groups/{group}", json={}), 400)
    deleted = env.client.request("DELETE", f"/api/share-groups/{group}",
                                 json={"confirm": group})
    assert deleted.status_code == 200, deleted.text
    assert "does not exist" in error_of(env.client.get(f"/api/share-groups/{group}"), 404)
    assert _share_group(env, group) is None
    audit = [json.loads(line) for line in env.console.audit_path.read_text().splitlines()]
    mine = [(a["action"], a["ok"]) for a in audit if a["target"] == group]
    assert mine == [("reset-share-offsets", False), ("reset-share-offsets", True),
                    ("delete-share-group", True)], mine


def test_share_group_bad_input(console_env: ConsoleEnv) -> None:
    env = console_env
    unknown = f"no-such-share-{uuid.uuid4().hex[:6]}"
    assert "GROUP_ID_NOT_FOUND" in error_of(env.client.get(f"/api/share-groups/{unknown}"), 404)
    error_of(env.client.request("DELETE", f"/api/share-groups/{unknown}",
                                json={"confirm": unknown}), 404)
    error_of(env.client.post(f"/api/share-groups/{unknown}/reset",
                             json={"strategy": "earliest"}), 404)
    base = f"/api/share-groups/{unknown}/reset-preview"
    for body, words in (({"strategy": "shift", "value": 1}, "strategy"),
                        ({"strategy": "offset"}, "value is required"),
                        ({"strategy": "offset", "value": "ten"}, "integer"),
                        ({"strategy": "offset", "value": -1}, "at least 0"),
                        ({"strategy": "timestamp", "value": 1.5}, "integer"),
                        ({"strategy": "earliest", "partition": -2}, "at least 0"),
                        ({"strategy": "earliest", "topic": ["x"]}, "topic")):
        assert words in error_of(env.client.post(base, json=body), 400), body
    assert "JSON" in error_of(env.client.post(base, content=b"{nope"), 400)
    no_token = httpx.Client(base_url=env.console.url, cookies=env.client.cookies)
    try:
        assert "CSRF" in error_of(no_token.post(f"/api/share-groups/{unknown}/reset",
                                                json={"strategy": "earliest"}), 403)
        assert "CSRF" in error_of(no_token.request("DELETE", f"/api/share-groups/{unknown}",
                                                   json={"confirm": unknown}), 403)
    finally:
        no_token.close()
    paths = env.client.get("/api/openapi.json").json()["paths"]
    assert {"get", "delete"} <= set(paths["/api/share-groups/{group}"])
    assert "post" in paths["/api/share-groups/{group}/reset"]
