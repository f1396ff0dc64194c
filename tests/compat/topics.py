"""Create topics through the Kafka admin API (CreateTopics), as any Kafka tool would."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=configs)],
        operation_timeout=10,
        request_timeout=15,
    )
    try:
        futures[name].result(timeout=20)
    except KafkaException as error:
        raise AssertionError(f"CreateTopics {name} failed: {error}") from error
