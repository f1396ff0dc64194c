"""Admin APIs through kafka-python's KafkaAdminClient (CreateTopics v7, DeleteTopics v6 path)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.admin import (
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewPartitions,
    NewTopic,
)
from kafka.structs import TopicPartition

from tidelog.errors import ErrorCode


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def client(broker: Any) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        yield admin
    finally:
        admin.close()


def create(client: KafkaAdminClient, topic: NewTopic, **options: Any) -> dict[str, Any]:
    result: dict[str, Any] = client.create_topics([topic], raise_errors=False, **options)
    [entry] = result["topics"]
    return entry


def test_negotiates_the_newest_admin_versions(client: KafkaAdminClient) -> None:
    assert client._manager.broker_version >= (2, 8)  # picks CreateTopics v7 / DeleteTopics v6


def test_create_echoes_partitions_configs_and_topic_id(client: KafkaAdminClient) -> None:
    name = unique("kp")
    entry = create(client, NewTopic(name, 2, 1, topic_configs={"retention.ms": "1000"}))
    assert entry["error_code"] == 0
    assert uuid.UUID(entry["topic_id"]).int != 0
    assert (entry["num_partitions"], entry["replication_factor"]) == (2, 1)
    assert entry["configs"]["retention.ms"]["value"] == "1000"
    assert entry["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert entry["configs"]["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    assert name in client.list_topics()
    again = create(client, NewTopic(name, 2, 1))
    assert again["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        (NewTopic("kp-zero", 0, 1), ErrorCode.INVALID_PARTITIONS),
        (NewTopic("kp-negative", -5, 1), ErrorCode.INVALID_PARTITIONS),
        (NewTopic("kp-huge", 100_000, 1), ErrorCode.INVALID_PARTITIONS),
        (NewTopic("kp-rf0", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
        (NewTopic("kp-rf2", 1, 2), ErrorCode.INVALID_REPLICATION_FACTOR),
        (NewTopic("..", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (NewTopic("kp-bad", 1, 1, topic_configs={"flush.ms": "-3"}), ErrorCode.INVALID_CONFIG),
        (NewTopic("kp-null", 1, 1, topic_configs={"retention.ms": None}), ErrorCode.INVALID_CONFIG),
    ],
)
def test_create_errors(client: KafkaAdminClient, topic: NewTopic, code: ErrorCode) -> None:
    entry = create(client, topic)
    assert entry["error_code"] == code, entry
    assert entry["error_message"]
    assert topic.name not in client.list_topics()


def test_create_internal_topic_is_refused(client: KafkaAdminClient) -> None:
    # The coordinator creates __consumer_offsets at start, so it already exists, as in Kafka.
    entry = create(client, NewTopic("__consumer_offsets", 1, 1))
    assert entry["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS, entry


def test_duplicate_names_in_one_request(client: KafkaAdminClient) -> None:
    name = unique("kp-dup")
    result = client.create_topics([NewTopic(name, 1, 1), NewTopic(name, 1, 1)], raise_errors=False)
    # One answer per distinct name, as Kafka keys its results.
    assert [entry["error_code"] for entry in result["topics"]] == [ErrorCode.INVALID_REQUEST]
    assert name not in client.list_topics()


def test_validate_only(client: KafkaAdminClient) -> None:
    name = unique("kp-dry")
    entry = create(client, NewTopic(name, 4, 1), validate_only=True)
    assert (entry["error_code"], entry["num_partitions"]) == (0, 4)
    assert name not in client.list_topics()


def test_delete_topics_v6(client: KafkaAdminClient) -> None:
    name, missing = unique("kp-del"), unique("kp-missing")
    assert create(client, NewTopic(name, 1, 1))["error_code"] == 0
    result = client.delete_topics([name, missing], raise_errors=False)
    codes = {entry["name"]: entry["error_code"] for entry in result["topics"]}
    assert codes == {name: 0, missing: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert name not in client.list_topics()


def test_create_partitions(client: KafkaAdminClient) -> None:
    name = unique("kp-grow")
    assert create(client, NewTopic(name, 1, 1))["error_code"] == 0

    def grow(count: int) -> int:
        response = client.create_partitions({name: NewPartitions(count)}, raise_errors=False)
        return int(response.results[0].error_code)

    assert grow(4) == 0
    assert grow(4) == ErrorCode.INVALID_PARTITIONS
    assert grow(2) == ErrorCode.INVALID_PARTITIONS
    [topic] = client.describe_topics([name])
    assert len(topic["partitions"]) == 4


def test_describe_configs_modified_only(client: KafkaAdminClient) -> None:
    name = unique("kp-conf")
    configs = {"retention.bytes": "1048576"}
    assert create(client, NewTopic(name, 1, 1, topic_configs=configs))["error_code"] == 0
    result = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    [(config_name, entry)] = result["topic"][name].items()  # only the override
    assert config_name == "retention.bytes"
    assert (entry["value"], entry["config_source"]) == ("1048576", "DYNAMIC_TOPIC_CONFIG")


def test_replica_assignment(client: KafkaAdminClient) -> None:
    name, bad = unique("kp-assigned"), unique("kp-assigned")
    result = client.create_topics(
        {name: {"assignments": {0: [0], 1: [0]}}, bad: {"assignments": {0: [0], 1: [7]}}},
        raise_errors=False,
    )
    codes = {entry["name"]: entry["error_code"] for entry in result["topics"]}
    assert codes == {name: 0, bad: ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    [topic] = client.describe_topics([name])
    assert len(topic["partitions"]) == 2


def test_delete_records_on_unknown_partition(client: KafkaAdminClient) -> None:
    name = unique("kp-records")
    assert create(client, NewTopic(name, 1, 1))["error_code"] == 0
    with pytest.raises(Exception) as raised:
        client.delete_records({TopicPartition(name, 5): 0}, partition_leader_id=0)
    assert "UnknownTopicOrPartition" in type(raised.value).__name__ + str(raised.value)
