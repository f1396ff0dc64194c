"""Admin APIs against a live broker through confluent-kafka's AdminClient (librdkafka)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from .conftest import error_name, make_admin

# librdkafka names error 17 (INVALID_TOPIC_EXCEPTION) "TOPIC_EXCEPTION".


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(admin: AdminClient, topic: NewTopic, validate_only: bool = False) -> str:
    futures = admin.create_topics([topic], validate_only=validate_only, operation_timeout=10)
    return error_name(futures[topic.topic])


def describe(admin: AdminClient, name: str) -> Any:
    """DescribeTopics (Metadata naming the topic); None for an unknown topic."""
    future = admin.describe_topics(TopicCollection([name]), request_timeout=10)[name]
    if error_name(future) == "UNKNOWN_TOPIC_OR_PART":
        return None
    return future.result()


def exists(admin: AdminClient, name: str) -> bool:
    return describe(admin, name) is not None


def partition_count(admin: AdminClient, name: str) -> int:
    return len(describe(admin, name).partitions)


def topic_configs(admin: AdminClient, name: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    result = admin.describe_configs([resource], request_timeout=10)  # librdkafka asks synonyms
    configs: dict[str, Any] = result[resource].result(timeout=10)
    return configs


def incremental(
    admin: AdminClient, name: str, *entries: ConfigEntry, validate: bool = False
) -> str:
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=list(entries))
    futures = admin.incremental_alter_configs([resource], validate_only=validate)
    return error_name(futures[resource])


def earliest_latest(admin: AdminClient, name: str, partition: int = 0) -> tuple[int, int]:
    tp = TopicPartition(name, partition)
    earliest = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(timeout=10).offset
    latest = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(timeout=10).offset
    return earliest, latest


def produce(bootstrap: str, name: str, count: int, size: int = 100) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for index in range(count):
        producer.produce(name, value=bytes([index % 256]) * size, partition=0)
        producer.poll(0)
    assert producer.flush(15) == 0


def test_create_list_and_duplicate(admin: AdminClient) -> None:
    name = unique("orders")
    assert create(admin, NewTopic(name, num_partitions=3, replication_factor=1)) == ""
    partitions = describe(admin, name).partitions
    assert [part.id for part in partitions] == [0, 1, 2]
    assert all(part.leader.id == 0 and [n.id for n in part.replicas] == [0] for part in partitions)
    assert create(admin, NewTopic(name, num_partitions=1)) == "TOPIC_ALREADY_EXISTS"


def test_broker_defaults_apply_with_minus_one(admin: AdminClient) -> None:
    name = unique("defaults")
    assert create(admin, NewTopic(name)) == ""  # -1 partitions, -1 replication factor
    assert partition_count(admin, name) == 1


@pytest.mark.parametrize("name", [".", "..", "bad/name", "spaced name", "a" * 250, "ünïcode"])
def test_illegal_names(admin: AdminClient, name: str) -> None:
    assert (
        create(admin, NewTopic(name, num_partitions=1)) == "TOPIC_EXCEPTION"
    )  # librdkafka's name for 17


def test_longest_legal_name_and_dot_underscore_collision(admin: AdminClient) -> None:
    longest = "x" * 249
    assert create(admin, NewTopic(longest, num_partitions=1)) == ""
    base = unique("collide")
    assert create(admin, NewTopic(f"{base}.a", num_partitions=1)) == ""
    assert (
        create(admin, NewTopic(f"{base}_a", num_partitions=1)) == "TOPIC_EXCEPTION"
    )  # librdkafka's name for 17


def test_replication_factor_must_fit_one_node(admin: AdminClient) -> None:
    topic = NewTopic(unique("replicated"), num_partitions=1, replication_factor=3)
    assert create(admin, topic) == "INVALID_REPLICATION_FACTOR"


@pytest.mark.parametrize(
    "config",
    [{"retention.ms": "soon"}, {"no.such.config": "1"}, {"segment.bytes": "1"}],
)
def test_invalid_configs_create_nothing(admin: AdminClient, config: dict[str, str]) -> None:
    name = unique("badconfig")
    assert create(admin, NewTopic(name, num_partitions=1, config=config)) == "INVALID_CONFIG"
    assert not exists(admin, name)


def test_validate_only_creates_nothing(admin: AdminClient) -> None:
    name = unique("dryrun")
    topic = NewTopic(name, num_partitions=2, config={"retention.ms": "1000"})
    assert create(admin, topic, validate_only=True) == ""
    assert not exists(admin, name)
    bad = NewTopic(name, num_partitions=1, config={"retention.ms": "x"})
    assert create(admin, bad, validate_only=True) == "INVALID_CONFIG"
    existing = unique("dryrun")
    assert create(admin, NewTopic(existing, num_partitions=1)) == ""
    assert create(admin, NewTopic(existing, num_partitions=1), True) == "TOPIC_ALREADY_EXISTS"


def test_delete_and_unknown_delete(admin: AdminClient, broker: Any) -> None:
    name = unique("doomed")
    assert create(admin, NewTopic(name, num_partitions=2)) == ""
    produce(broker.bootstrap, name, 5)
    assert error_name(admin.delete_topics([name], operation_timeout=10)[name]) == ""
    assert not exists(admin, name)
    again = admin.delete_topics([name], operation_timeout=10)[name]
    assert error_name(again) == "UNKNOWN_TOPIC_OR_PART"
    # the name is free again, and a new topic starts empty
    assert create(admin, NewTopic(name, num_partitions=1)) == ""
    fresh = make_admin(broker.bootstrap)  # librdkafka caches the deleted topic's metadata
    assert earliest_latest(fresh, name) == (0, 0)


def test_create_partitions(admin: AdminClient) -> None:
    name = unique("growing")
    assert create(admin, NewTopic(name, num_partitions=1)) == ""

    def grow(count: int, validate_only: bool = False, topic: str = name) -> str:
        futures = admin.create_partitions(
            [NewPartitions(topic, count)], validate_only=validate_only, operation_timeout=10
        )
        return error_name(futures[topic])

    assert grow(3, validate_only=True) == ""
    assert partition_count(admin, name) == 1
    assert grow(3) == ""
    assert partition_count(admin, name) == 3
    assert grow(3) == "INVALID_PARTITIONS"
    assert grow(2) == "INVALID_PARTITIONS"
    assert grow(5, topic=unique("missing")) == "UNKNOWN_TOPIC_OR_PART"


def test_describe_topic_configs_sources_and_synonyms(admin: AdminClient) -> None:
    name = unique("described")
    config = {"retention.ms": "123456", "cleanup.policy": "compact"}
    assert create(admin, NewTopic(name, num_partitions=1, config=config)) == ""
    configs = topic_configs(admin, name)
    assert {"segment.bytes", "retention.bytes", "max.message.bytes", "durability"} <= set(configs)
    retention = configs["retention.ms"]
    assert retention.value == "123456"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_read_only and not retention.is_sensitive
    assert [s.name for s in retention.synonyms.values()] == ["retention.ms", "log.retention.ms"]
    segment = configs["segment.bytes"]
    assert segment.source == ConfigSource.DEFAULT_CONFIG.value
    assert segment.value == str(1 << 30)
    missing = ConfigResource(ResourceType.TOPIC, unique("missing"))
    future = admin.describe_configs([missing], request_timeout=10)[missing]
    assert error_name(future) == "UNKNOWN_TOPIC_OR_PART"


def test_describe_broker_configs(admin: AdminClient) -> None:
    resource = ConfigResource(ResourceType.BROKER, "0")
    configs = admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=10)
    assert configs["num.partitions"].value == "1"
    assert configs["log.segment.bytes"].value == str(1 << 30)
    assert configs["node.id"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert all(entry.is_read_only for entry in configs.values())


def test_incremental_alter_configs(admin: AdminClient) -> None:
    name = unique("altered")
    assert create(admin, NewTopic(name, num_partitions=1, config={"segment.ms": "60000"})) == ""
    set_retention = ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET)
    assert incremental(admin, name, set_retention, validate=True) == ""
    assert topic_configs(admin, name)["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    delete_segment_ms = ConfigEntry(
        "segment.ms", None, incremental_operation=AlterConfigOpType.DELETE
    )
    append_policy = ConfigEntry(
        "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
    )
    assert incremental(admin, name, set_retention, delete_segment_ms, append_policy) == ""
    configs = topic_configs(admin, name)
    assert configs["retention.ms"].value == "5000"
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert set(configs["cleanup.policy"].value.split(",")) == {"compact", "delete"}
    subtract = ConfigEntry(
        "cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT
    )
    assert incremental(admin, name, subtract) == ""
    assert topic_configs(admin, name)["cleanup.policy"].value == "compact"

    bad_value = ConfigEntry("retention.ms", "later", incremental_operation=AlterConfigOpType.SET)
    assert incremental(admin, name, bad_value) == "INVALID_CONFIG"
    append_scalar = ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)
    assert incremental(admin, name, append_scalar) == "INVALID_CONFIG"
    unknown = ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)
    assert incremental(admin, name, unknown) == "INVALID_CONFIG"
    assert topic_configs(admin, name)["retention.ms"].value == "5000"  # failures changed nothing
    assert incremental(admin, unique("missing"), set_retention) == "UNKNOWN_TOPIC_OR_PART"


def test_broker_configs_are_static(admin: AdminClient) -> None:
    entry = ConfigEntry("num.partitions", "4", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[entry])
    future = admin.incremental_alter_configs([resource])[resource]
    assert error_name(future) == "INVALID_REQUEST"  # Kafka's "cannot update dynamically"


def segment_files(data_dir: Path, name: str) -> list[Path]:
    return sorted((data_dir / f"{name}-0").glob("*.log"))


def test_segment_bytes_and_max_message_bytes_apply_live(admin: AdminClient, broker: Any) -> None:
    name = unique("live")
    assert create(admin, NewTopic(name, num_partitions=1)) == ""
    produce(broker.bootstrap, name, 10)
    assert len(segment_files(broker.data_dir, name)) == 1
    small = ConfigEntry("segment.bytes", "1024", incremental_operation=AlterConfigOpType.SET)
    assert incremental(admin, name, small) == ""
    produce(broker.bootstrap, name, 40)  # ~7 KiB of batches: several 1 KiB segments
    assert len(segment_files(broker.data_dir, name)) >= 3
    assert earliest_latest(admin, name) == (0, 50)

    tiny = ConfigEntry("max.message.bytes", "500", incremental_operation=AlterConfigOpType.SET)
    assert incremental(admin, name, tiny) == ""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 100_000})
    outcomes: list[str] = []
    producer.produce(
        name,
        value=b"x" * 2000,
        partition=0,
        on_delivery=lambda error, message: outcomes.append(error.name() if error else ""),
    )
    producer.flush(15)
    assert outcomes == ["MSG_SIZE_TOO_LARGE"]  # librdkafka's name for MESSAGE_TOO_LARGE
    assert earliest_latest(admin, name) == (0, 50)


def test_delete_records(admin: AdminClient, broker: Any) -> None:
    name = unique("trimmed")
    assert create(admin, NewTopic(name, num_partitions=1)) == ""
    produce(broker.bootstrap, name, 20)
    tp = TopicPartition(name, 0, 5)
    deleted = admin.delete_records([tp], operation_timeout=10)[tp].result(timeout=10)
    assert deleted.low_watermark == 5
    assert earliest_latest(admin, name) == (5, 20)
    beyond = TopicPartition(name, 0, 21)
    future = admin.delete_records([beyond], operation_timeout=10)[beyond]
    assert error_name(future) == "OFFSET_OUT_OF_RANGE"
    to_end = TopicPartition(name, 0, -1)  # -1: up to the high watermark
    deleted = admin.delete_records([to_end], operation_timeout=10)[to_end].result(timeout=10)
    assert deleted.low_watermark == 20
    assert earliest_latest(admin, name) == (20, 20)


def test_describe_cluster(admin: AdminClient, broker: Any) -> None:
    cluster = admin.describe_cluster(request_timeout=10).result(timeout=10)
    assert cluster.cluster_id
    assert cluster.controller.id == 0
    assert [(node.id, node.host, node.port) for node in cluster.nodes] == [
        (0, broker.host, broker.port)
    ]
