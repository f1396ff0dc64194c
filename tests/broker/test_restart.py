"""Clean (SIGTERM) and unclean (SIGKILL) restarts: acknowledged messages survive intact."""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, Producer, TopicPartition

if TYPE_CHECKING:
    from conftest import BrokerFactory

FILLER = b"." * 180


def value(index: int) -> bytes:
    return b"m%08d" % index + FILLER


def read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    idle = 0
    try:
        while idle < 15:
            batch = consumer.consume(num_messages=5000, timeout=0.2)
            idle = 0 if batch else idle + 1
            for message in batch:
                assert message.error() is None, message.error()
                values.append(message.value())
            if len(values) >= expected and not batch:
                break
    finally:
        consumer.close()
    return values


def test_sigterm_exits_zero_and_restart_keeps_everything(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    for index in range(5000):
        producer.produce("clean", value=value(index), partition=0)
    assert producer.flush(30) == 0
    assert broker.stop(signal.SIGTERM) == 0
    assert (broker.data_dir / ".clean-shutdown").exists()
    assert "stopped cleanly" in broker.log_text()
    again = broker_factory(data_dir=broker.data_dir)
    assert read_all(again.bootstrap, "clean", 5000) == [value(i) for i in range(5000)]


def test_sigkill_during_sync_production_loses_no_acknowledged_message(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(settings={"log.durability": "sync"})
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 3000,
        }
    )
    acknowledged: list[bytes] = []

    def on_delivery(error: object, message: object) -> None:
        if error is None:
            acknowledged.append(message.value())  # type: ignore[attr-defined]

    index = 0
    killed_at = -1
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            producer.produce("crash", value=value(index), partition=0, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.01)
            continue
        index += 1
        producer.poll(0)
        if killed_at < 0 and len(acknowledged) >= 3000:
            broker.kill()  # mid-production: batches are in flight
            killed_at = index
        if killed_at >= 0 and index >= killed_at + 500:
            break
    assert killed_at > 0, "producer never reached 3000 acknowledged messages"
    producer.flush(5)
    producer.purge()
    acked = list(acknowledged)
    again = broker_factory(data_dir=broker.data_dir)
    stored = read_all(again.bootstrap, "crash", len(acked))
    stored_set = set(stored)
    missing = [v for v in acked if v not in stored_set]
    assert not missing, f"{len(missing)} acknowledged messages lost, first {missing[0]!r}"
    assert all(v.endswith(FILLER) for v in stored)
    # The log keeps producer order: acknowledged values appear in the order they were sent.
    positions = [stored.index(v) for v in acked[:: max(1, len(acked) // 200)]]
    assert positions == sorted(positions)
