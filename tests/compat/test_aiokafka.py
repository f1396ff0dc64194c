"""aiokafka (old, non-flexible protocol versions) against a real `tidelog serve`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from .messages import COMPRESSIONS, Message, assert_same, make_messages
from .topics import create_topic

if TYPE_CHECKING:
    from conftest import BrokerProcess


async def _roundtrip(
    bootstrap: str, topic: str, messages: list[Message], compression: str, acks: int | str
) -> list[Message]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if compression == "none" else compression,
        acks=acks,
        enable_idempotence=acks == "all",
        linger_ms=5,
    )
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                value=message.value,
                key=message.key,
                partition=0,
                headers=list(message.headers),
                timestamp_ms=message.timestamp_ms,
            )
            for message in messages
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50
    )
    await consumer.start()
    received: list[Message] = []
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        for _ in range(100):
            if len(received) >= len(messages):
                break
            batches = await consumer.getmany(partition, timeout_ms=200)
            for record in batches.get(partition, []):
                assert record.offset == len(received)
                received.append(
                    Message(
                        record.key,
                        record.value or b"",
                        tuple((name, value) for name, value in record.headers),
                        record.timestamp,
                    )
                )
    finally:
        await consumer.stop()
    return received


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_every_compression_and_acks_roundtrip(
    broker: BrokerProcess, compression: str, acks: int | str
) -> None:
    topic = f"aiokafka-{compression}-{acks}"
    create_topic(broker.bootstrap, topic)
    messages = make_messages(200, seed=11 + COMPRESSIONS.index(compression))
    received = asyncio.run(_roundtrip(broker.bootstrap, topic, messages, compression, acks))
    assert_same(messages, received)
