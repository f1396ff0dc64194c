"""ListOffsets by timestamp names the exact record, even inside a multi-record batch
(compressed or not)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

BASE_MS = 1_700_000_000_000


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_offsets_for_times_inside_one_batch(broker: Any, compression: str) -> None:
    topic = f"times-{compression}"
    # linger so the ten records travel as one batch: a batch-level answer would say offset 0.
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 200, "compression.type": compression}
    )
    timestamps = [BASE_MS + 1000 * index for index in range(10)]
    timestamps[7] = BASE_MS + 50_000  # the maximum sits in the middle
    for index, timestamp in enumerate(timestamps):
        producer.produce(topic, value=b"v%d" % index, timestamp=timestamp)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "times"})
    try:
        asked = [TopicPartition(topic, 0, BASE_MS + 3500)]
        (answer,) = consumer.offsets_for_times(asked, timeout=10)
        assert answer.offset == 4  # first record with timestamp >= 3.5 s after the base
        asked = [TopicPartition(topic, 0, BASE_MS)]
        (answer,) = consumer.offsets_for_times(asked, timeout=10)
        assert answer.offset == 0
        asked = [TopicPartition(topic, 0, BASE_MS + 60_000)]
        (answer,) = consumer.offsets_for_times(asked, timeout=10)
        assert answer.offset == -1  # no record that late: Kafka answers -1
    finally:
        consumer.close()
