"""confluent-kafka (librdkafka 2.x) against a real `tidelog serve`: every byte comes back."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from .messages import COMPRESSIONS, Message, assert_same, make_messages
from .topics import create_topic

if TYPE_CHECKING:
    from conftest import BrokerFactory, BrokerProcess


def produce(bootstrap: str, topic: str, messages: list[Message], **config: object) -> list[int]:
    """Produce all messages to partition 0; returns their offsets from delivery reports."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    offsets: list[int] = []
    errors: list[object] = []

    def on_delivery(error: object, message: object) -> None:
        if error is not None:
            errors.append(error)
        else:
            offsets.append(message.offset())  # type: ignore[attr-defined]

    for message in messages:
        producer.produce(
            topic,
            value=message.value,
            key=message.key,
            partition=0,
            headers=list(message.headers),
            timestamp=message.timestamp_ms,
            on_delivery=on_delivery,
        )
        producer.poll(0)
    assert producer.flush(30) == 0, "messages left undelivered"
    assert not errors, errors
    return offsets


def consume(
    bootstrap: str, topic: str, count: int, *, partition: int = 0, offset: int = 0
) -> list[Message]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"assign-{topic}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    consumer.assign([TopicPartition(topic, partition, offset)])
    received: list[Message] = []
    try:
        idle_polls = 0
        while len(received) < count and idle_polls < 100:
            batch = consumer.consume(num_messages=1000, timeout=0.2)
            idle_polls = 0 if batch else idle_polls + 1
            for record in batch:
                assert record.error() is None, record.error()
                assert record.offset() == offset + len(received)
                received.append(
                    Message(
                        record.key(),
                        record.value() or b"",
                        tuple(record.headers() or ()),
                        record.timestamp()[1],
                    )
                )
    finally:
        consumer.close()
    return received


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_compression_and_acks_roundtrip(
    broker: BrokerProcess, compression: str, acks: str
) -> None:
    topic = f"confluent-{compression}-{acks}"
    create_topic(broker.bootstrap, topic)
    messages = make_messages(300, seed=len(topic) * 31 + COMPRESSIONS.index(compression))
    config: dict[str, object] = {"compression.type": compression, "acks": acks}
    if acks == "all":
        config["enable.idempotence"] = True
    produce(broker.bootstrap, topic, messages, **config)
    assert_same(messages, consume(broker.bootstrap, topic, len(messages)))


def test_large_messages_up_to_one_mebibyte(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(settings={"message.max.bytes": str(2 << 20)})
    create_topic(broker.bootstrap, "big")
    sizes = [1, 1000, 100_000, 512 * 1024, 1 << 20]
    messages = [
        Message(b"k%d" % size, bytes([size % 251]) * size, (("n", b"%d" % size),), 1_700_000_000)
        for size in sizes
    ]
    produce(broker.bootstrap, "big", messages, **{"message.max.bytes": 2 << 20, "acks": "all"})
    assert_same(messages, consume(broker.bootstrap, "big", len(messages)))


def test_thirty_two_partitions(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "wide", partitions=32)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    sent: dict[int, list[bytes]] = {partition: [] for partition in range(32)}
    for index in range(32 * 20):
        partition = index % 32
        value = b"p%d-%d" % (partition, index)
        sent[partition].append(value)
        producer.produce("wide", value=value, partition=partition)
    assert producer.flush(30) == 0
    for partition in (0, 13, 31):
        got = consume(broker.bootstrap, "wide", 20, partition=partition)
        assert [message.value for message in got] == sent[partition]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
    try:
        for partition in range(32):
            low, high = consumer.get_watermark_offsets(TopicPartition("wide", partition), 10)
            assert (low, high) == (0, 20)
    finally:
        consumer.close()


def test_offsets_for_times(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "times")
    messages = make_messages(50, seed=5)
    produce(broker.bootstrap, "times", messages, **{"linger.ms": 0, "batch.num.messages": 1})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "times"})
    try:
        for index in (0, 17, 49):
            wanted = TopicPartition("times", 0, messages[index].timestamp_ms)
            (found,) = consumer.offsets_for_times([wanted], timeout=10)
            assert found.offset == index
        after_last = TopicPartition("times", 0, messages[-1].timestamp_ms + 1)
        (found,) = consumer.offsets_for_times([after_last], timeout=10)
        assert found.offset == -1  # no such message: librdkafka's OFFSET_END
    finally:
        consumer.close()
    got = consume(broker.bootstrap, "times", 33, offset=17)
    assert_same(messages[17:], got)
