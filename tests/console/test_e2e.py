"""The console end to end in Debian's headless Chromium (playwright-core, console/web/e2e).

Screenshots of every page land in tests/console/artifacts/ (git-ignored) for a human look."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer

from .conftest import PASSWORD, ConsoleEnv, wait_for
from .test_share_groups import share_auto_offset_reset_earliest

REPO = Path(__file__).resolve().parents[2]
WEB = REPO / "console" / "web"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"


def _prepare_group(bootstrap: str, topic: str, group: str) -> None:
    """A group that consumed 5 messages, then 3 more arrived: empty, lag 3."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce(topic, f"before-{i}".encode())
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        got, deadline = 0, time.monotonic() + 30
        while got < 5 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            got += m is not None and m.error() is None
        assert got == 5
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    for i in range(3):
        producer.produce(topic, f"after-{i}".encode())
    producer.flush(30)


def _prepare_share_group(bootstrap: str, topic: str, group: str) -> None:
    """A share group that consumed 4 records and left, then 2 more arrived: empty, lag 2."""
    share_auto_offset_reset_earliest(bootstrap, group)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(4):
        producer.produce(topic, f"task-{i}".encode())
    assert producer.flush(30) == 0
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []

        def consumed() -> bool:
            got.extend(m.value() for m in consumer.poll(0.3) if m.error() is None)
            return len(got) >= 4

        wait_for(consumed, 30, "the share consumer to receive 4 records")
        consumer.commit_sync(10)  # the implicit acknowledgements, before leaving
    finally:
        consumer.close()
    for i in range(2):
        producer.produce(topic, f"late-{i}".encode())
    assert producer.flush(30) == 0


def test_console_in_chromium(console_env: ConsoleEnv) -> None:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} missing: run scripts/setup (Debian chromium)")
    if not (WEB / "node_modules" / "playwright-core").is_dir():
        pytest.fail("console/web/node_modules missing: run scripts/setup (npm ci)")
    suffix = uuid.uuid4().hex[:6]
    group_topic, group = f"e2e-jobs-{suffix}", f"e2e-workers-{suffix}"
    r = console_env.client.post("/api/topics", json={"name": group_topic, "partitions": 1})
    assert r.status_code == 201, r.text
    _prepare_group(console_env.broker.bootstrap, group_topic, group)
    share_topic, share_group = f"e2e-tasks-{suffix}", f"e2e-sharers-{suffix}"
    r = console_env.client.post("/api/topics", json={"name": share_topic, "partitions": 1})
    assert r.status_code == 201, r.text
    begun = time.monotonic()
    _prepare_share_group(console_env.broker.bootstrap, share_topic, share_group)
    print(f"share group prepared in {time.monotonic() - begun:.2f} s")
    many_topic = f"e2e-many-{suffix}"
    r = console_env.client.post("/api/topics", json={"name": many_topic, "partitions": 1})
    assert r.status_code == 201, r.text
    producer = Producer({"bootstrap.servers": console_env.broker.bootstrap, "linger.ms": 5})
    for i in range(300):
        producer.produce(many_topic, json.dumps({"n": i}).encode(), key=f"k{i}".encode())
    assert producer.flush(30) == 0
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    env = {**os.environ, "CONSOLE_URL": console_env.console.url, "CONSOLE_PASSWORD": PASSWORD,
           "ARTIFACTS": str(ARTIFACTS), "TOPIC": f"e2e-orders-{suffix}", "GROUP": group,
           "CHROMIUM": CHROMIUM, "SHARE_GROUP": share_group, "MANY_TOPIC": many_topic}
    result = subprocess.run(["node", str(WEB / "e2e" / "console.e2e.mjs")], cwd=WEB, env=env,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    print(result.stdout)  # the steps with their times (pytest -rP shows them)
    for name in ["00-sign-in", "01-overview", "02-topics", "03-topic-detail", "04-messages",
                 "06-groups", "07-group-reset-preview", "08-group-after-reset", "09-audit",
                 "10-share-groups", "11-share-group-reset-preview", "12-share-group-lag-chart",
                 "13-messages-window"]:
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 5000, name
