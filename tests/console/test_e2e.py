"""The console end to end in Debian's headless Chromium (playwright-core, console/web/e2e).

Screenshots of every page land in tests/console/artifacts/ (git-ignored) for a human look."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from .conftest import PASSWORD, ConsoleEnv

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
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    env = {**os.environ, "CONSOLE_URL": console_env.console.url, "CONSOLE_PASSWORD": PASSWORD,
           "ARTIFACTS": str(ARTIFACTS), "TOPIC": f"e2e-orders-{suffix}", "GROUP": group,
           "CHROMIUM": CHROMIUM}
    result = subprocess.run(["node", str(WEB / "e2e" / "console.e2e.mjs")], cwd=WEB, env=env,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    for name in ["00-sign-in", "01-overview", "02-topics", "03-topic-detail", "04-messages",
                 "06-groups", "07-group-reset-preview", "08-group-after-reset", "09-audit"]:
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 5000, name
