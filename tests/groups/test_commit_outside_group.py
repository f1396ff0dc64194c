"""OffsetCommit from outside group management (Kafka's validateOffsetCommit): generation -1
to an EMPTY group is accepted whatever member id it carries, commit after commit."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def test_assigning_consumer_protocol_client_commits_again_and_again(broker: Any) -> None:
    topic, group = f"commit-out-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(30)
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group,
        "group.protocol": "consumer", "enable.auto.commit": False,
    })
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])  # no subscribe: no group membership
        for offset in (1, 2, 3):
            committed = consumer.commit(
                offsets=[TopicPartition(topic, 0, offset)], asynchronous=False
            )
            assert committed is not None and committed[0].error is None, committed
        [position] = consumer.committed([TopicPartition(topic, 0)], timeout=15)
        assert position.offset == 3 and position.error is None
    finally:
        consumer.close()
