"""Helpers for the share-group client tests: share consumer child processes, topics, configs."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

DEADLINE_S = 30.0
CHILD = Path(__file__).with_name("share_child.py")
# Broker settings for these tests: short locks allowed, fast heartbeats and member expiry.
SHARE_SETTINGS = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.session.timeout.ms": "1000",  # room for a group's own (Kafka's: 45 s)
    "errors.deadletterqueue.auto.create.topics.enable": "true",
}


def wait_for(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> list[str]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = [f"{topic}-{i}" for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % partitions)
    assert producer.flush(30) == 0
    return values


def set_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("group", group, incremental_configs=[
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


class Child:
    """A share consumer process (share_child.py); its JSON lines read without blocking."""

    def __init__(self, bootstrap: str, group: str, topic: str, mode: str,
                 max_poll: int = 500, delay_ms: int = 0) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), bootstrap, group, topic, mode, str(max_poll),
             str(delay_ms)],
            # SHARE_CHILD_DEBUG=protocol,fetch: librdkafka's debug log on the test's stderr
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=None if os.environ.get("SHARE_CHILD_DEBUG") else subprocess.DEVNULL,
        )
        assert self.process.stdout is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        self._buffer = b""
        self.records: list[dict[str, Any]] = []
        self.ready = False

    def pump(self) -> list[dict[str, Any]]:
        assert self.process.stdout is not None
        try:
            chunk = self.process.stdout.read()
        except BlockingIOError:
            chunk = None
        if chunk:
            self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            item = json.loads(line)
            if item.get("ready"):
                self.ready = True
            else:
                self.records.append(item)
        return self.records

    def stop(self) -> None:
        """Close stdin (the child closes its consumer: last acks, leave) and wait."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.pump()

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


def pump_all(children: list[Child], selector_timeout_s: float = 0.05) -> None:
    selector = selectors.DefaultSelector()
    for child in children:
        if child.process.stdout is not None and child.process.poll() is None:
            selector.register(child.process.stdout, selectors.EVENT_READ)
    if selector.get_map():
        selector.select(selector_timeout_s)
    selector.close()
    for child in children:
        child.pump()
