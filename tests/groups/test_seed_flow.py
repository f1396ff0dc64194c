"""The seed's client flow with confluent-kafka: delivery callbacks, subscribe/poll, sync and
async commits with on_commit, seek to an offset and to a timestamp."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .test_rebalance_clients import GROUP_SETTINGS

if TYPE_CHECKING:
    from conftest import BrokerFactory


def test_seed_client_flow(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings=GROUP_SETTINGS)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("seed", 1, 1)])["seed"].result(15)

    delivered: list[int] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    base_ms = int(time.time() * 1000) - 100_000
    for number in range(100):
        producer.produce(
            "seed",
            b"value-%d" % number,
            timestamp=base_ms + number * 1000,
            on_delivery=lambda error, message: (
                delivered.append(message.offset()) if error is None else None
            ),
        )
        producer.flush(15)  # one batch per message, so each record has its own timestamp entry
    assert producer.flush(15) == 0
    assert sorted(delivered) == list(range(100))

    commits: list[Any] = []
    committed_event = threading.Event()

    def on_commit(error: Any, partitions: list[TopicPartition]) -> None:
        commits.append((error, [(p.partition, p.offset) for p in partitions]))
        committed_event.set()

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "seed-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "on_commit": on_commit,
        }
    )
    consumer.subscribe(["seed"])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 50 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
            if len(values) == 25:
                sync = consumer.commit(message=message, asynchronous=False)
                assert [(p.partition, p.offset) for p in sync] == [(0, 25)]
    assert values == [b"value-%d" % n for n in range(50)]
    # Explicit offsets: polling below (which serves on_commit) moves the position on.
    consumer.commit(offsets=[TopicPartition("seed", 0, 50)], asynchronous=True)
    deadline = time.monotonic() + 15
    while not committed_event.is_set() and time.monotonic() < deadline:
        consumer.poll(0.1)  # on_commit is served from poll
    assert commits and commits[-1] == (None, [(0, 50)])
    assert consumer.committed([TopicPartition("seed", 0)], 15)[0].offset == 50

    consumer.seek(TopicPartition("seed", 0, 10))
    message = consumer.poll(10)
    assert message is not None and message.offset() == 10

    wanted = consumer.offsets_for_times([TopicPartition("seed", 0, base_ms + 70_000)], 15)
    assert wanted[0].offset == 70
    consumer.seek(wanted[0])
    message = consumer.poll(10)
    assert message is not None and message.offset() == 70 and message.value() == b"value-70"
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
        consumer.commit(offsets=[TopicPartition("no-such-topic", 0, 5)], asynchronous=False)
    consumer.close()
