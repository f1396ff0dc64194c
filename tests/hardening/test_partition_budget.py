"""max.broker.partitions: CreateTopics and CreatePartitions past the budget are refused with
INVALID_PARTITIONS (validate_only too), nothing is created, and the broker keeps serving."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


def test_partition_budget(broker_factory: Any) -> None:
    # __consumer_offsets takes offsets.topic.num.partitions of the budget.
    broker = broker_factory(settings={"max.broker.partitions": "10"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    internal = sum(
        len(t.partitions) for t in admin.list_topics(timeout=10).topics.values()
    )
    room = 10 - internal
    assert room > 2

    for validate_only in (True, False):
        future = admin.create_topics(
            [NewTopic("too-big", room + 1, 1)], validate_only=validate_only
        )["too-big"]
        with pytest.raises(KafkaException) as raised:
            future.result(10)
        assert raised.value.args[0].name() == "INVALID_PARTITIONS"
        assert "max.broker.partitions" in raised.value.args[0].str()

    admin.create_topics([NewTopic("fits", room - 1, 1)])["fits"].result(10)
    with pytest.raises(KafkaException) as raised:
        admin.create_partitions([NewPartitions("fits", room + 1)])["fits"].result(10)
    assert raised.value.args[0].name() == "INVALID_PARTITIONS"
    admin.create_partitions([NewPartitions("fits", room)])["fits"].result(10)

    topics = admin.list_topics(timeout=10).topics
    assert "too-big" not in topics
    assert len(topics["fits"].partitions) == room
