"""A consumer SIGKILLed mid-group, and a broker restarted (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .members import ConfluentMember, Ledger, wait_until
from .test_rebalance_clients import GROUP_SETTINGS

if TYPE_CHECKING:
    from conftest import BrokerFactory

CHILD = Path(__file__).with_name("consumer_child.py")


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def test_sigkilled_consumer_loses_its_partitions_after_the_session_timeout(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(settings=GROUP_SETTINGS)
    _create(broker.bootstrap, "killed", 12)
    child = subprocess.Popen(
        [sys.executable, str(CHILD), broker.bootstrap, "killed", "kill-group"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().startswith("assigned")
        ledger = Ledger()
        survivor = ConfluentMember(
            "survivor",
            ledger,
            broker.bootstrap,
            "killed",
            {"group.id": "kill-group", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500},
        )
        survivor.start()
        wait_until(lambda: len(ledger.snapshot().get("survivor", ())) == 6, 30, "a 6/6 split")
        os.kill(child.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        wait_until(lambda: len(ledger.snapshot().get("survivor", ())) == 12, 30, "takeover")
        # The coordinator waited for the dead member's session to expire (6 s), not less.
        assert time.monotonic() - killed_at >= 4.0
        survivor.leave()
        assert ledger.violations == []
    finally:
        child.kill()
        child.wait()


def _consume(bootstrap: str, group: str, count: int, protocol: str = "classic") -> list[Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "consumer":
        settings["group.protocol"] = "consumer"
    consumer = Consumer(settings)
    consumer.subscribe(["restart"])
    seen: list[Any] = []
    deadline = time.monotonic() + 30
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append((message.partition(), message.offset()))
    consumer.commit(asynchronous=False)
    consumer.close()
    return seen


def _committed(bootstrap: str, group: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        partitions = consumer.committed([TopicPartition("restart", p) for p in range(2)], 15)
        return [max(p.offset, 0) for p in partitions]  # -1001: nothing committed yet
    finally:
        consumer.close()


def test_offsets_and_groups_survive_sigterm_and_sigkill(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings=GROUP_SETTINGS)
    _create(broker.bootstrap, "restart", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for number in range(200):
        producer.produce("restart", b"%d" % number, partition=number % 2)
    assert producer.flush(15) == 0
    first = _consume(broker.bootstrap, "classic-g", 60)
    _consume(broker.bootstrap, "consumer-g", 30, protocol="consumer")
    committed = _committed(broker.bootstrap, "classic-g")
    assert sum(committed) >= 60

    broker.stop(signal.SIGTERM)
    broker = broker_factory(broker.data_dir, settings=GROUP_SETTINGS)
    assert _committed(broker.bootstrap, "classic-g") == committed
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = {g.group_id for g in admin.list_consumer_groups().result(15).valid}
    assert {"classic-g", "consumer-g"} <= listed
    second = _consume(broker.bootstrap, "classic-g", 20)
    assert not set(first) & set(second)  # resumed from the commits, nothing re-read
    committed = _committed(broker.bootstrap, "classic-g")

    broker.kill()
    broker = broker_factory(broker.data_dir, settings=GROUP_SETTINGS)
    assert _committed(broker.bootstrap, "classic-g") == committed
    rest = _consume(broker.bootstrap, "classic-g", 200 - sum(committed))
    assert len(rest) == 200 - sum(committed)
    assert not set(rest) & (set(first) | set(second))


def test_static_member_restart_keeps_its_partitions_without_a_rebalance(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(settings=GROUP_SETTINGS)
    _create(broker.bootstrap, "static", 4)
    ledger = Ledger()
    settings = {
        "group.id": "static-group",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "range",
    }
    dynamic = ConfluentMember("dynamic", ledger, broker.bootstrap, "static", dict(settings))
    dynamic.start()
    wait_until(lambda: len(ledger.snapshot().get("dynamic", ())) == 4, 30, "first member")
    static = ConfluentMember(
        "static-1", ledger, broker.bootstrap, "static", {**settings, "group.instance.id": "s1"}
    )
    static.start()
    wait_until(lambda: len(ledger.snapshot().get("static-1", ())) == 2, 30, "a 2/2 split")
    kept = ledger.snapshot()["static-1"]
    events_before = len(ledger.events)
    static.leave()  # a static member closes without LeaveGroup (KIP-345)
    again = ConfluentMember(
        "static-2", ledger, broker.bootstrap, "static", {**settings, "group.instance.id": "s1"}
    )
    again.start()
    wait_until(lambda: ledger.snapshot().get("static-2") == kept, 30, "the same partitions back")
    later = ledger.events[events_before:]
    assert not [e for e in later if e[1] == "dynamic"], "the other member saw a rebalance"
    again.leave()
    dynamic.leave()
    assert ledger.violations == []
