"""Admin handlers called in-process on a real Broker (real storage, real topics.json).

Covers request shapes the client libraries do not send: DeleteTopics by topic id,
contradictory fields, legacy AlterConfigs (not advertised yet), documentation, endpoint types.
Each response is also encoded, as the connection would, to prove every version serializes.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema

from tidelog.broker.config import load_config
from tidelog.broker.handlers import admin
from tidelog.broker.handlers.admin_common import AdminDeps
from tidelog.broker.handlers.context import RequestContext
from tidelog.broker.metadata import TopicInfo
from tidelog.broker.state import Broker
from tidelog.errors import ErrorCode
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.codec import RequestHeader, encode_response


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    instance = Broker(load_config(None, {}, data_dir=tmp_path / "data"))
    try:
        yield instance
    finally:
        instance.close()


def request_types(api_key: int, version: int) -> tuple[type, Any]:
    schema = load_request_schema(api_key, version)
    return schema, sys.modules[schema.__module__]


def call(broker: Broker, api_key: int, version: int, request: Any) -> Any:
    header = RequestHeader(api_key, version, 7, "test", bool(type(request).__flexible__))
    table = admin.handlers(AdminDeps(broker.config, broker.identity, broker.topics))
    response = asyncio.run(table[api_key](RequestContext(header, "", 0), request))
    assert encode_response(header, response)  # every version must serialize
    return response


def create_topic(broker: Broker, name: str, partitions: int = 1) -> None:
    broker.create_topic(name, partitions, {})


def topic(broker: Broker, name: str) -> TopicInfo:
    info = broker.topics.get(name)
    assert info is not None, f"no topic {name}"
    return info


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_every_version(broker: Broker, version: int) -> None:
    schema, module = request_types(ApiKey.CREATE_TOPICS, version)
    config = module.CreatableTopicConfig(name="retention.ms", value="1000")
    topic = module.CreatableTopic(
        name=f"v{version}",
        num_partitions=2,
        replication_factor=1,
        assignments=(),
        configs=(config,),
    )
    response = call(broker, ApiKey.CREATE_TOPICS, version, schema(topics=(topic,)))
    [result] = response.topics
    assert result.error_code == ErrorCode.NONE
    info = broker.topics.get(f"v{version}")
    assert info is not None and info.partitions == 2 and info.configs == {"retention.ms": "1000"}


def test_create_topics_contradictory_assignment(broker: Broker) -> None:
    schema, module = request_types(ApiKey.CREATE_TOPICS, 7)
    assignment = module.CreatableReplicaAssignment(partition_index=0, broker_ids=(0,))
    topic = module.CreatableTopic(
        name="both", num_partitions=3, replication_factor=1, assignments=(assignment,), configs=()
    )
    [result] = call(broker, ApiKey.CREATE_TOPICS, 7, schema(topics=(topic,))).topics
    assert result.error_code == ErrorCode.INVALID_REQUEST
    assert broker.topics.get("both") is None


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_every_version(broker: Broker, version: int) -> None:
    create_topic(broker, "gone")
    schema, module = request_types(ApiKey.DELETE_TOPICS, version)
    if version >= 6:
        request = schema(topics=(module.DeleteTopicState(name="gone", topic_id=None),), timeout=0)
    else:
        request = schema(topic_names=("gone",), timeout=0)
    [result] = call(broker, ApiKey.DELETE_TOPICS, version, request).responses
    assert result.error_code == ErrorCode.NONE
    assert broker.topics.get("gone") is None


def test_delete_topics_by_id(broker: Broker) -> None:
    create_topic(broker, "by-id")
    info = broker.topics.get("by-id")
    assert info is not None
    schema, module = request_types(ApiKey.DELETE_TOPICS, 6)
    states = (
        module.DeleteTopicState(name=None, topic_id=info.topic_id),
        module.DeleteTopicState(name=None, topic_id=uuid.uuid4()),
        module.DeleteTopicState(name="x", topic_id=uuid.uuid4()),
    )
    results = call(broker, ApiKey.DELETE_TOPICS, 6, schema(topics=states, timeout=0)).responses
    assert [(r.name, r.error_code) for r in results] == [
        ("by-id", ErrorCode.NONE),
        (None, ErrorCode.UNKNOWN_TOPIC_ID),
        ("x", ErrorCode.INVALID_REQUEST),
    ]
    assert results[0].topic_id == info.topic_id
    assert broker.topics.get("by-id") is None


def test_legacy_alter_configs_replaces_overrides(broker: Broker) -> None:
    broker.create_topic("legacy", 1, {"retention.ms": "1000", "segment.ms": "5000"})
    schema, module = request_types(ApiKey.ALTER_CONFIGS, 2)

    def alter(configs: dict[str, str | None], validate_only: bool = False) -> Any:
        resource = module.AlterConfigsResource(
            resource_type=2,
            resource_name="legacy",
            configs=tuple(module.AlterableConfig(name=k, value=v) for k, v in configs.items()),
        )
        request = schema(resources=(resource,), validate_only=validate_only)
        [result] = call(broker, ApiKey.ALTER_CONFIGS, 2, request).responses
        return result.error_code

    assert alter({"retention.bytes": "4096"}, validate_only=True) == ErrorCode.NONE
    assert topic(broker, "legacy").configs == {"retention.ms": "1000", "segment.ms": "5000"}
    assert alter({"retention.bytes": "4096"}) == ErrorCode.NONE
    assert topic(broker, "legacy").configs == {"retention.bytes": "4096"}
    assert broker.partition_log("legacy", 0).config.retention_bytes == 4096  # applied live
    assert alter({"retention.bytes": None}) == ErrorCode.INVALID_CONFIG
    assert alter({"retention.bytes": "many"}) == ErrorCode.INVALID_CONFIG
    assert topic(broker, "legacy").configs == {"retention.bytes": "4096"}


def test_describe_configs_documentation_types_and_bad_resources(broker: Broker) -> None:
    create_topic(broker, "documented")
    schema, module = request_types(ApiKey.DESCRIBE_CONFIGS, 4)
    resources = (
        module.DescribeConfigsResource(
            resource_type=2, resource_name="documented", configuration_keys=("cleanup.policy",)
        ),
        module.DescribeConfigsResource(resource_type=4, resource_name="3", configuration_keys=None),
        module.DescribeConfigsResource(resource_type=8, resource_name="0", configuration_keys=None),
    )
    request = schema(resources=resources, include_synonyms=True, include_documentation=True)
    topic, other_broker, logger = call(
        broker, ApiKey.DESCRIBE_CONFIGS, 4, request
    ).results
    [entry] = topic.configs
    assert (entry.name, entry.value, entry.config_type) == ("cleanup.policy", "delete", 7)
    assert entry.documentation and [s.source for s in entry.synonyms] == [5]
    assert other_broker.error_code == ErrorCode.INVALID_REQUEST
    assert logger.error_code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions_assignments(broker: Broker, version: int) -> None:
    create_topic(broker, "grow")
    schema, module = request_types(ApiKey.CREATE_PARTITIONS, version)

    def grow(count: int, assignments: Any) -> Any:
        topic = module.CreatePartitionsTopic(name="grow", count=count, assignments=assignments)
        request = schema(topics=(topic,), timeout=0, validate_only=False)
        [result] = call(broker, ApiKey.CREATE_PARTITIONS, version, request).results
        return result.error_code

    one = module.CreatePartitionsAssignment(broker_ids=(0,))
    assert grow(3, (one,)) == ErrorCode.INVALID_REPLICA_ASSIGNMENT  # 2 added, 1 assignment
    other = module.CreatePartitionsAssignment(broker_ids=(5,))
    assert grow(2, (other,)) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert grow(3, (one, one)) == ErrorCode.NONE
    assert topic(broker, "grow").partitions == 3
    assert broker.partition_log("grow", 2).log_end_offset == 0


@pytest.mark.parametrize("version", range(0, 3))
def test_delete_records_every_version(broker: Broker, version: int) -> None:
    create_topic(broker, "records")
    schema, module = request_types(ApiKey.DELETE_RECORDS, version)
    partitions = (
        module.DeleteRecordsPartition(partition_index=0, offset=-1),
        module.DeleteRecordsPartition(partition_index=0, offset=-7),
        module.DeleteRecordsPartition(partition_index=3, offset=0),
    )
    request = schema(
        topics=(module.DeleteRecordsTopic(name="records", partitions=partitions),), timeout=0
    )
    [topic] = call(broker, ApiKey.DELETE_RECORDS, version, request).topics
    assert [(p.error_code, p.low_watermark) for p in topic.partitions] == [
        (ErrorCode.NONE, 0),
        (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
    ]


def test_describe_cluster_endpoint_types(broker: Broker) -> None:
    schema, _ = request_types(ApiKey.DESCRIBE_CLUSTER, 1)
    brokers = call(
        broker, ApiKey.DESCRIBE_CLUSTER, 1, schema(include_cluster_authorized_operations=False)
    )
    assert brokers.error_code == ErrorCode.NONE and brokers.cluster_id == broker.cluster_id
    assert [(b.broker_id, b.port) for b in brokers.brokers] == [(0, 9092)]
    controllers = call(
        broker,
        ApiKey.DESCRIBE_CLUSTER,
        1,
        schema(include_cluster_authorized_operations=False, endpoint_type=2),
    )
    assert controllers.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
