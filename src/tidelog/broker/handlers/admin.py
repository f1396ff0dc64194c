"""Admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs, DescribeCluster.

Runs on the event loop; every storage and topics.json call here is short blocking file I/O.
Each topic or resource in a request succeeds or fails on its own with Kafka's error code, in
its own result entry; nothing about one entry is written when its validation fails. Codes follow
Kafka: INVALID_TOPIC_EXCEPTION (name rules, '.'/'_' collisions), TOPIC_ALREADY_EXISTS,
INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR (a single node holds one replica),
INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_REQUEST (duplicates, contradictory fields),
UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID, OFFSET_OUT_OF_RANGE. Internal topics are answered
with TOPIC_AUTHORIZATION_FAILED on delete: an unsecured Kafka would delete them, but no client
may remove `__consumer_offsets` here, and that is the code clients already read as "not allowed".
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from tidelog.broker import responses
from tidelog.broker.metadata import TopicInfo, validate_topic_name
from tidelog.broker.topic_configs import (
    ConfigEntry,
    ResourceType,
    apply_incremental,
    describe_broker_configs,
    describe_topic_configs,
    validate_overrides,
)
from tidelog.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from tidelog.broker.router import RequestContext
    from tidelog.broker.state import Broker

log = logging.getLogger("tidelog.broker.admin")

CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
CREATE_PARTITIONS = 37
INCREMENTAL_ALTER_CONFIGS = 44
DESCRIBE_CLUSTER = 60

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# Each partition holds open files and an fsync checkpoint entry; bound what one request can ask.
MAX_PARTITIONS_PER_TOPIC = 4096
HIGH_WATERMARK = -1  # DeleteRecords: "up to the high watermark"
_ZERO_UUID = uuid.UUID(int=0)
_ENDPOINT_BROKERS = 1


def _failure(error: KafkaError) -> dict[str, Any]:
    return {"error_code": error.code, "error_message": error.message or error.code.name}


def _guard(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one entry's work; its KafkaError (or a storage OSError) becomes that entry's error."""
    try:
        return work()
    except KafkaError as error:
        return _failure(error)
    except OSError as error:
        log.exception("admin operation failed on storage")
        return _failure(KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(error)))


def _duplicates(names: Iterable[Any]) -> set[Any]:
    return {name for name, count in Counter(names).items() if count > 1}


def _is_internal(info: TopicInfo) -> bool:
    return info.internal or info.name in INTERNAL_TOPICS


def _require_topic(broker: Broker, name: str) -> TopicInfo:
    info = broker.topics.get(name)
    if info is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
    return info


def _check_single_replica(broker: Broker, partition: int, broker_ids: Iterable[int]) -> None:
    replicas = list(broker_ids)
    if replicas != [broker.config.node_id]:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"partition {partition}: replicas {replicas}; this single-node cluster has only "
            f"broker {broker.config.node_id}",
        )


def _check_partition_count(count: int) -> None:
    if count <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be larger than 0")
    if count > MAX_PARTITIONS_PER_TOPIC:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"{count} partitions requested; at most {MAX_PARTITIONS_PER_TOPIC} per topic",
        )


# --- CreateTopics -------------------------------------------------------------------------
def _check_new_name(broker: Broker, name: str) -> None:
    validate_topic_name(name)
    if broker.topics.get(name) is not None:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    if name in INTERNAL_TOPICS:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"{name!r} is internal; the broker creates it on demand"
        )
    # Metric names replace '.' with '_', so Kafka refuses topics that differ only there.
    folded = name.replace(".", "_")
    for existing in broker.topics.all():
        if existing.name.replace(".", "_") == folded:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"topic {name!r} collides with existing topic {existing.name!r}",
            )


def _partitions_and_replication(broker: Broker, topic: Any) -> tuple[int, int]:
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "num_partitions and replication_factor must be -1 with a replica assignment",
            )
        indexes = sorted(assignment.partition_index for assignment in topic.assignments)
        if indexes != list(range(len(indexes))):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"assigned partitions {indexes} must be numbered 0..{len(indexes) - 1}",
            )
        for assignment in topic.assignments:
            _check_single_replica(broker, assignment.partition_index, assignment.broker_ids)
        _check_partition_count(len(indexes))
        return len(indexes), 1
    partitions = (
        broker.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    )
    _check_partition_count(partitions)
    replication = topic.replication_factor
    if replication == -1:
        replication = broker.config.default_replication_factor
    if replication <= 0:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "replication factor must be larger than 0, or -1 for the broker default",
        )
    if replication > 1:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication} cannot be reached: only 1 broker is registered",
        )
    return partitions, replication


def _create_one(broker: Broker, module: Any, topic: Any, validate_only: bool) -> dict[str, Any]:
    name = topic.name
    _check_new_name(broker, name)
    partitions, replication = _partitions_and_replication(broker, topic)
    overrides = validate_overrides(broker.config, {c.name: c.value for c in topic.configs})
    topic_id = None
    if not validate_only:
        topic_id = broker.create_topic(name, partitions, overrides).topic_id
    configs = tuple(
        responses.build(
            module.CreatableTopicConfigs,
            name=entry.name,
            value=entry.value,
            read_only=entry.read_only,
            config_source=int(entry.source),
            is_sensitive=entry.is_sensitive,
        )
        for entry in describe_topic_configs(broker.config, overrides)
    )
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "topic_id": topic_id,
        "num_partitions": partitions,
        "replication_factor": replication,
        "configs": configs,
    }


async def handle_create_topics(broker: Broker, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(CREATE_TOPICS, version)
    duplicates = _duplicates(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        if topic.name in duplicates:
            outcome = _failure(KafkaError(ErrorCode.INVALID_REQUEST, "duplicate topic name"))
        else:
            outcome = _guard(lambda t=topic: _create_one(broker, module, t, request.validate_only))
        outcome.setdefault("num_partitions", -1)
        outcome.setdefault("replication_factor", -1)
        results.append(responses.build(module.CreatableTopicResult, name=topic.name, **outcome))
    cls = responses.response_class(CREATE_TOPICS, version)
    return responses.build(cls, throttle_time=0, topics=tuple(results))


# --- DeleteTopics -------------------------------------------------------------------------
def _delete_one(broker: Broker, name: str | None, topic_id: uuid.UUID | None) -> dict[str, Any]:
    if name is not None and topic_id is not None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "give a topic name or a topic id, not both")
    if topic_id is not None:
        info = broker.topics.by_id(topic_id)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {topic_id}")
    elif name is not None:
        info = _require_topic(broker, name)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "neither topic name nor id given")
    if _is_internal(info):
        raise KafkaError(
            ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"internal topic {info.name!r} cannot be deleted"
        )
    broker.delete_topic(info.name)
    return {"error_code": ErrorCode.NONE, "name": info.name, "topic_id": info.topic_id}


async def handle_delete_topics(broker: Broker, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(DELETE_TOPICS, version)
    targets: list[tuple[str | None, uuid.UUID | None]]
    if version >= 6:
        targets = [
            (state.name, state.topic_id if state.topic_id not in (None, _ZERO_UUID) else None)
            for state in request.topics
        ]
    else:
        targets = [(name, None) for name in request.topic_names]
    duplicates = _duplicates(targets)
    results = []
    for name, topic_id in targets:
        if (name, topic_id) in duplicates:
            outcome = _failure(KafkaError(ErrorCode.INVALID_REQUEST, "duplicate topic"))
        else:
            outcome = _guard(lambda n=name, i=topic_id: _delete_one(broker, n, i))
        fields = {"name": name, "topic_id": topic_id or _ZERO_UUID} | outcome
        results.append(responses.build(module.DeletableTopicResult, **fields))
    cls = responses.response_class(DELETE_TOPICS, version)
    return responses.build(cls, throttle_time=0, responses=tuple(results))


# --- CreatePartitions ---------------------------------------------------------------------
def _add_partitions(broker: Broker, topic: Any, validate_only: bool) -> dict[str, Any]:
    info = _require_topic(broker, topic.name)
    if topic.count < info.partitions:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"topic has {info.partitions} partitions, more than the requested {topic.count}; "
            "partitions can only be added",
        )
    if topic.count == info.partitions:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS, f"topic already has {info.partitions} partitions"
        )
    _check_partition_count(topic.count)
    if topic.assignments is not None:
        added = topic.count - info.partitions
        if len(topic.assignments) != added:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"adding {added} partitions but {len(topic.assignments)} assignments given",
            )
        for offset, assignment in enumerate(topic.assignments):
            _check_single_replica(broker, info.partitions + offset, assignment.broker_ids)
    if not validate_only:
        broker.add_partitions(topic.name, topic.count)
        log.info("topic %s now has %d partitions", topic.name, topic.count)
    return {"error_code": ErrorCode.NONE, "error_message": None}


async def handle_create_partitions(broker: Broker, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(CREATE_PARTITIONS, version)
    duplicates = _duplicates(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        if topic.name in duplicates:
            outcome = _failure(KafkaError(ErrorCode.INVALID_REQUEST, "duplicate topic name"))
        else:
            outcome = _guard(lambda t=topic: _add_partitions(broker, t, request.validate_only))
        results.append(
            responses.build(module.CreatePartitionsTopicResult, name=topic.name, **outcome)
        )
    cls = responses.response_class(CREATE_PARTITIONS, version)
    return responses.build(cls, throttle_time=0, results=tuple(results))


# --- DeleteRecords ------------------------------------------------------------------------
def _delete_records(broker: Broker, topic: str, partition: int, offset: int) -> dict[str, Any]:
    partition_log = broker.partition_log(topic, partition)
    high_watermark = partition_log.log_end_offset  # single node: every append is committed
    target = high_watermark if offset == HIGH_WATERMARK else offset
    if not 0 <= target <= high_watermark:
        raise KafkaError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} is outside [0, high watermark {high_watermark}]",
        )
    low_watermark = partition_log.delete_records_before(target)
    return {"error_code": ErrorCode.NONE, "low_watermark": low_watermark}


async def handle_delete_records(broker: Broker, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(DELETE_RECORDS, version)
    topics = []
    for topic in request.topics:
        partitions = []
        for item in topic.partitions:
            outcome = _guard(
                lambda p=item: _delete_records(broker, topic.name, p.partition_index, p.offset)
            )
            outcome.setdefault("low_watermark", -1)
            partitions.append(
                responses.build(
                    module.DeleteRecordsPartitionResult,
                    partition_index=item.partition_index,
                    **outcome,
                )
            )
        topics.append(
            responses.build(
                module.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(partitions)
            )
        )
    cls = responses.response_class(DELETE_RECORDS, version)
    return responses.build(cls, throttle_time=0, topics=tuple(topics))


# --- DescribeConfigs ----------------------------------------------------------------------
def _check_broker_name(broker: Broker, resource_name: str) -> None:
    if resource_name not in ("", str(broker.config.node_id)):
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"unexpected broker id {resource_name!r}; this is broker {broker.config.node_id}",
        )


def _config_entries(broker: Broker, resource: Any) -> list[ConfigEntry]:
    keys = resource.configuration_keys or None  # null or empty: every config
    if resource.resource_type == ResourceType.TOPIC:
        info = _require_topic(broker, resource.resource_name)
        return describe_topic_configs(broker.config, info.configs, keys)
    if resource.resource_type == ResourceType.BROKER:
        _check_broker_name(broker, resource.resource_name)
        return describe_broker_configs(broker.config, keys)
    raise KafkaError(
        ErrorCode.INVALID_REQUEST, f"unsupported resource type {resource.resource_type}"
    )


async def handle_describe_configs(broker: Broker, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(DESCRIBE_CONFIGS, version)
    synonyms_wanted = getattr(request, "include_synonyms", False)
    documentation_wanted = getattr(request, "include_documentation", False)

    def describe(resource: Any) -> dict[str, Any]:
        configs = tuple(
            responses.build(
                module.DescribeConfigsResourceResult,
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=int(entry.source),
                is_sensitive=entry.is_sensitive,
                synonyms=tuple(
                    responses.build(
                        module.DescribeConfigsSynonym,
                        name=synonym.name,
                        value=synonym.value,
                        source=int(synonym.source),
                    )
                    for synonym in entry.synonyms
                )
                if synonyms_wanted
                else (),
                config_type=int(entry.config_type),
                documentation=entry.documentation if documentation_wanted else None,
            )
            for entry in _config_entries(broker, resource)
        )
        return {"error_code": ErrorCode.NONE, "error_message": None, "configs": configs}

    results = []
    for resource in request.resources:
        outcome = _guard(lambda r=resource: describe(r))
        results.append(
            responses.build(
                module.DescribeConfigsResult,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                **outcome,
            )
        )
    cls = responses.response_class(DESCRIBE_CONFIGS, version)
    return responses.build(cls, throttle_time=0, results=tuple(results))


# --- AlterConfigs / IncrementalAlterConfigs -----------------------------------------------
def _alter_resource(
    broker: Broker,
    resource: Any,
    new_overrides: Callable[[TopicInfo], dict[str, str]],
    validate_only: bool,
) -> dict[str, Any]:
    if resource.resource_type == ResourceType.BROKER:
        _check_broker_name(broker, resource.resource_name)
        if resource.configs:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                "broker configs cannot be updated dynamically: set them in the config file or "
                "with `tidelog serve --set` and restart",
            )
        return {"error_code": ErrorCode.NONE, "error_message": None}
    if resource.resource_type != ResourceType.TOPIC:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"unsupported resource type {resource.resource_type}"
        )
    info = _require_topic(broker, resource.resource_name)
    overrides = new_overrides(info)
    if not validate_only:
        broker.set_topic_configs(info.name, overrides)
        log.info("topic %s config overrides now %s", info.name, overrides)
    return {"error_code": ErrorCode.NONE, "error_message": None}


async def _alter_configs(
    broker: Broker,
    context: RequestContext,
    request: Any,
    api_key: int,
    overrides_for: Callable[[Any, TopicInfo], dict[str, str]],
) -> Any:
    version = context.header.api_version
    module = responses.response_module(api_key, version)
    duplicates = _duplicates((r.resource_type, r.resource_name) for r in request.resources)
    results = []
    for resource in request.resources:
        if (resource.resource_type, resource.resource_name) in duplicates:
            outcome = _failure(KafkaError(ErrorCode.INVALID_REQUEST, "duplicate resource"))
        else:
            outcome = _guard(
                lambda r=resource: _alter_resource(
                    broker, r, lambda info: overrides_for(r, info), request.validate_only
                )
            )
        results.append(
            responses.build(
                module.AlterConfigsResourceResponse,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                **outcome,
            )
        )
    cls = responses.response_class(api_key, version)
    return responses.build(cls, throttle_time=0, responses=tuple(results))


async def handle_incremental_alter_configs(
    broker: Broker, context: RequestContext, request: Any
) -> Any:
    def overrides_for(resource: Any, info: TopicInfo) -> dict[str, str]:
        operations = [(c.name, c.config_operation, c.value) for c in resource.configs]
        return apply_incremental(broker.config, info.configs, operations)

    return await _alter_configs(broker, context, request, INCREMENTAL_ALTER_CONFIGS, overrides_for)


async def handle_alter_configs(broker: Broker, context: RequestContext, request: Any) -> Any:
    """Legacy AlterConfigs: the given set replaces every override of the topic."""

    def overrides_for(resource: Any, info: TopicInfo) -> dict[str, str]:
        names = [c.name for c in resource.configs]
        if _duplicates(names):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "duplicate config keys")
        return validate_overrides(broker.config, {c.name: c.value for c in resource.configs})

    return await _alter_configs(broker, context, request, ALTER_CONFIGS, overrides_for)


# --- DescribeCluster ----------------------------------------------------------------------
async def handle_describe_cluster(broker: Broker, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(DESCRIBE_CLUSTER, version)
    cls = responses.response_class(DESCRIBE_CLUSTER, version)
    config = broker.config
    if getattr(request, "endpoint_type", _ENDPOINT_BROKERS) != _ENDPOINT_BROKERS:
        return responses.build(
            cls,
            throttle_time=0,
            error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            error_message="this node is a broker; ask for broker endpoints",
            cluster_id=broker.cluster_id,
        )
    node = responses.build(
        module.DescribeClusterBroker,
        broker_id=config.node_id,
        host=config.advertised_host,
        port=config.advertised_port,
        rack=None,
    )
    return responses.build(
        cls,
        throttle_time=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=_ENDPOINT_BROKERS,
        cluster_id=broker.cluster_id,
        controller_id=config.node_id,
        brokers=(node,),
        cluster_authorized_operations=-(2**31),
    )


HANDLERS = {
    CREATE_TOPICS: handle_create_topics,
    DELETE_TOPICS: handle_delete_topics,
    DELETE_RECORDS: handle_delete_records,
    DESCRIBE_CONFIGS: handle_describe_configs,
    ALTER_CONFIGS: handle_alter_configs,
    CREATE_PARTITIONS: handle_create_partitions,
    INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    DESCRIBE_CLUSTER: handle_describe_cluster,
}
