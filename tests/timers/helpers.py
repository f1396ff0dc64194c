"""Clients for the delayed-delivery tests: admin, a raw Produce, and a reader that waits."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.raw import RawClient, request_module
from tidelog.protocol.api_keys import ApiKey
from tidelog.records.builder import NewRecord, build_batch

_QUIET = logging.getLogger("tests.timers.librdkafka")  # clients outlive their module's broker
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def now_ms() -> int:
    return int(time.time() * 1000)


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": _QUIET})
    topic = NewTopic(name, partitions, 1, config=configs or {})
    admin.create_topics([topic], operation_timeout=10)[name].result(timeout=15)


DELAY_TOPIC = {"tidelog.delivery.delay.enable": "true"}


@dataclass(frozen=True)
class Received:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int
    received_ms: int

    def header(self, name: str) -> bytes | None:
        return dict(self.headers).get(name)


class Reader:
    """Reads a topic from the beginning of its partitions (assign, no group)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = 1) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": "timer-tests",
            "enable.auto.commit": False, "fetch.wait.max.ms": 50, "logger": _QUIET,
            "topic.metadata.refresh.interval.ms": 1000,
        })
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.records: list[Received] = []

    def read_until(self, predicate: Any, timeout_s: float = 30.0) -> list[Received]:
        """Poll until `predicate(records so far)` holds; fail after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self.records):
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met in {timeout_s} s; read {self.records}")
            for message in self.consumer.consume(500, 0.02):
                if message.error():
                    continue
                self.records.append(Received(
                    message.partition(), message.offset(), message.key(), message.value(),
                    list(message.headers() or []), message.timestamp()[1], now_ms(),
                ))
        return self.records

    def read_count(self, count: int, timeout_s: float = 30.0) -> list[Received]:
        return self.read_until(lambda records: len(records) >= count, timeout_s)

    def close(self) -> None:
        self.consumer.close()


def raw_produce(bootstrap: str, topic: str, records: list[NewRecord], *, partition: int = 0,
                producer_id: int = -1, base_sequence: int = -1) -> Any:
    """One Produce v9 (acks=1) with one batch; returns the partition's answer."""
    batch = bytes(build_batch(records, producer_id=producer_id,
                              producer_epoch=0 if producer_id >= 0 else -1,
                              base_sequence=base_sequence, now_ms=now_ms()))
    module = request_module(ApiKey.PRODUCE, 9)
    body = module.ProduceRequest(
        transactional_id=None, acks=1, timeout=timedelta(seconds=5),
        topic_data=(module.TopicProduceData(name=topic, partition_data=(
            module.PartitionProduceData(index=partition, records=batch),)),),
    )
    with RawClient(bootstrap) as client:
        answer = client.call(ApiKey.PRODUCE, 9, body)
    return answer.responses[0].partition_responses[0]
