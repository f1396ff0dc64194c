"""Retention in a running broker: retention.ms and retention.bytes delete whole sealed segments,
advance the log start offset seen by clients, and never touch the active segment."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def _low_watermark(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "retention-probe"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()


def _produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for index in range(count):
        producer.produce(topic, value=bytes([index % 251]) * size)
        producer.poll(0)
    assert producer.flush(30) == 0


def _wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def test_retention_ms_and_bytes_advance_log_start(broker_factory: Any) -> None:
    broker = broker_factory(settings={"log.retention.check.interval.ms": "200"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    small_segments = {"segment.bytes": "4096"}
    futures = admin.create_topics(
        [
            NewTopic("by-time", 1, 1, config={**small_segments, "retention.ms": "1500"}),
            NewTopic("by-size", 1, 1, config={**small_segments, "retention.bytes": "16384"}),
        ]
    )
    for future in futures.values():
        future.result(10)

    _produce(broker.bootstrap, "by-time", 60, 1000)
    _produce(broker.bootstrap, "by-size", 60, 1000)

    # Size: the partition shrinks to about retention.bytes; the end offset is untouched.
    assert _wait_for(lambda: _low_watermark(broker.bootstrap, "by-size")[0] > 0, 15)
    low, high = _low_watermark(broker.bootstrap, "by-size")
    assert high == 60
    assert 60 - low <= 16384 // 1000 + 8  # what fits in retention.bytes plus the active segment

    # Time: every sealed segment expires; the active segment (the newest records) stays.
    # Segments expire one retention check at a time (their timestamps differ by a few ms), so
    # wait for the last sealed one: after that the log start offset cannot move again.
    active = broker.data_dir / "by-time-0"
    assert _wait_for(
        lambda: _low_watermark(broker.bootstrap, "by-time")[0]
        == max(int(p.stem) for p in active.glob("*.log") if p.stem.isdigit()),
        20,
    )
    low, high = _low_watermark(broker.bootstrap, "by-time")
    assert high == 60 and 50 <= low < 60

    # A consumer starting from the beginning begins at the new log start offset.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "retention-reader"})
    try:
        consumer.assign([TopicPartition("by-time", 0, OFFSET_BEGINNING)])
        first = None
        deadline = time.monotonic() + 15
        while first is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                first = message.offset()
        assert first == low
    finally:
        consumer.close()
