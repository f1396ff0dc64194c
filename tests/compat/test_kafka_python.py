"""kafka-python 3.x against a real `tidelog serve`: every compression, acks, idempotence."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

import cramjam
import kafka.codec
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from .messages import COMPRESSIONS, Message, assert_same, make_messages
from .topics import create_topic

if TYPE_CHECKING:
    from conftest import BrokerProcess

# kafka-python looks for python-snappy; cramjam (already a dependency) provides the same raw
# snappy block format, so a two-function shim replaces it (docs/decisions.md).
_SNAPPY_SHIM = types.SimpleNamespace(
    compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
    decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
)


@pytest.fixture(autouse=True)
def snappy_shim(monkeypatch: pytest.MonkeyPatch) -> None:
    if kafka.codec.snappy is None:
        monkeypatch.setattr(kafka.codec, "snappy", _SNAPPY_SHIM)


def _consume(bootstrap: str, topic: str, count: int) -> list[Message]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None, fetch_max_wait_ms=50
    )
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    received: list[Message] = []
    try:
        for _ in range(100):
            if len(received) >= count:
                break
            for records in consumer.poll(timeout_ms=200).values():
                for record in records:
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
        consumer.close()
    return received


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_every_compression_and_acks_roundtrip(
    broker: BrokerProcess, compression: str, acks: int | str
) -> None:
    topic = f"kafka-python-{compression}-{acks}"
    create_topic(broker.bootstrap, topic)
    messages = make_messages(200, seed=7 + COMPRESSIONS.index(compression))
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        compression_type=None if compression == "none" else compression,
        acks=acks,
        enable_idempotence=acks == "all",
        linger_ms=5,
    )
    futures = [
        producer.send(
            topic,
            value=message.value,
            key=message.key,
            headers=list(message.headers),
            partition=0,
            timestamp_ms=message.timestamp_ms,
        )
        for message in messages
    ]
    producer.flush(30)
    for future in futures:
        future.get(timeout=30)
    producer.close(5)
    assert_same(messages, _consume(broker.bootstrap, topic, len(messages)))
