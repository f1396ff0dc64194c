"""Producing test data with a real client and reading it back for comparison."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer, TopicPartition

BASE_TIMESTAMP_MS = 1_700_000_000_000


@dataclass(frozen=True)
class Sent:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


def produce(bootstrap: str, topic: str, count: int, partitions: int = 1,
            seed: int = 1, first_timestamp_ms: int = BASE_TIMESTAMP_MS) -> list[Sent]:
    """Produce `count` records round-robin over partitions; timestamp i is first + i*1000."""
    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    sent: list[Sent] = []
    for index in range(count):
        key = None if index % 7 == 3 else rng.randbytes(rng.randint(0, 16))
        value = None if index % 11 == 5 else rng.randbytes(rng.randint(0, 300))
        headers = () if index % 3 == 0 else (("h", rng.randbytes(4)), ("empty", None))
        record = Sent(index % partitions, key, value, headers, first_timestamp_ms + index * 1000)
        producer.produce(topic, value, key, partition=record.partition,
                         headers=list(headers) or None, timestamp=record.timestamp_ms)
        sent.append(record)
    assert producer.flush(30) == 0
    return sent


def by_partition(sent: list[Sent]) -> dict[int, list[Sent]]:
    result: dict[int, list[Sent]] = {}
    for record in sent:
        result.setdefault(record.partition, []).append(record)
    return result


def reader(spark, bootstrap: str, **options: str):  # type: ignore[no-untyped-def]
    frame = spark.read.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        frame = frame.option(key, value)
    return frame.load()


def read_to_end(bootstrap: str, topic: str, partitions: int = 1,
                isolation: str = "read_uncommitted") -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of `topic` up to its end (the LSO for read_committed).
    Done by position, not by the last record's offset: transactions leave control records
    (and, for read_committed, aborted ones) that the consumer skips."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-tests-check",
                         "enable.auto.commit": False, "isolation.level": isolation})
    try:
        ends = {}
        for partition in range(partitions):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10,
                                                        cached=False)
            ends[partition] = high
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 60
        while not all(tp.offset >= ends[tp.partition] for tp in consumer.position(wanted)):
            assert time.monotonic() < deadline, f"{topic}: not read to its end in 60 s"
            for message in consumer.consume(1000, timeout=0.5):
                assert message.error() is None, message.error()
                records.append((message.key(), message.value()))
        return records
    finally:
        consumer.close()
