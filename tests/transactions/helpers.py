"""Shared pieces of the transaction tests: clients' settings, consumers that read until a
condition holds (with a deadline), and raw requests (ListOffsets with an isolation level)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode as KioErrorCode

from broker.raw import RawClient, request_module
from tidelog.protocol.api_keys import ApiKey

DEADLINE_S = 30.0


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=DEADLINE_S)


def txn_producer(bootstrap: str, txn_id: str, **settings: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5, **settings})
    producer.init_transactions(DEADLINE_S)
    return producer


def consumer(bootstrap: str, isolation: str, **settings: Any) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": isolation, **settings,
    })


def read_values(
    bootstrap: str, topic: str, isolation: str, until: Callable[[list[bytes]], bool],
    partitions: int = 1, deadline_s: float = DEADLINE_S,
) -> list[bytes]:
    """Values of the topic from offset 0 until `until(values)` holds; fails at the deadline.
    After it holds, reads on for a short quiet period so extra records would be seen."""
    reader = consumer(bootstrap, isolation)
    reader.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + deadline_s
    quiet_until: float | None = None
    try:
        while True:
            message = reader.poll(0.2)
            now = time.monotonic()
            if message is not None and not message.error():
                values.append(message.value())
            if quiet_until is None and until(values):
                quiet_until = now + 1.0
            if quiet_until is not None and now >= quiet_until:
                return values
            assert now < deadline, f"{isolation} read of {topic}: only {values!r}"
    finally:
        reader.close()


def list_offset(bootstrap: str, topic: str, isolation_level: int, partition: int = 0) -> int:
    """ListOffsets v4 latest (-1) of a partition with the isolation level: HW or LSO."""
    module = request_module(ApiKey.LIST_OFFSETS, 4)
    with RawClient(bootstrap) as client:
        answer = client.call(ApiKey.LIST_OFFSETS, 4, module.ListOffsetsRequest(
            replica_id=-1, isolation_level=isolation_level,
            topics=(module.ListOffsetsTopic(name=topic, partitions=(
                module.ListOffsetsPartition(partition_index=partition, timestamp=-1,
                                            current_leader_epoch=-1),
            )),),
        ))
    partition = answer.topics[0].partitions[0]
    assert partition.error_code == KioErrorCode.none
    return int(partition.offset)


def wait_for(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
