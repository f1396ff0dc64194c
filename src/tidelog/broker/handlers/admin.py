"""Topic admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, DescribeCluster.

`handlers()` also returns the config APIs of `admin_configs` (DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs), so the whole admin family is registered at once.

Runs on the event loop; every storage and topics.json call here is short blocking file I/O.
Each topic in a request succeeds or fails on its own with Kafka's error code, in its own result
entry; nothing of an entry is written when its validation fails. Codes follow Kafka:
INVALID_TOPIC_EXCEPTION (name rules, '.'/'_' collisions), TOPIC_ALREADY_EXISTS,
INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR (a single node holds one replica),
INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_REQUEST (duplicates, contradictory fields),
UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID, OFFSET_OUT_OF_RANGE. Deleting an internal topic
answers TOPIC_AUTHORIZATION_FAILED: an unsecured Kafka would delete it, but no client may remove
`__consumer_offsets` here, and that is the code clients already read as "not allowed".
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from functools import partial
from typing import Any

from tidelog.broker.config import advertised_endpoint
from tidelog.broker.handlers import admin_configs
from tidelog.broker.handlers.admin_common import (
    AdminDeps,
    each_entry,
    guard,
    is_internal,
    log,
    require,
    require_topic,
)
from tidelog.broker.handlers.authorization import (
    Op,
    Type,
    allowed,
    cluster_allowed,
    cluster_operations,
)
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.internal_topics import INTERNAL_TOPICS
from tidelog.broker.metadata import validate_topic_name
from tidelog.broker.topic_configs import describe_topic_configs, validate_overrides
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey

# Each partition holds open files and checkpoint entries; bound what one request can ask for.
MAX_PARTITIONS_PER_TOPIC = 4096
HIGH_WATERMARK = -1  # DeleteRecords: "up to the high watermark"
_ZERO_UUID = uuid.UUID(int=0)
_ENDPOINT_BROKERS, _ENDPOINT_CONTROLLERS = 1, 2


def _check_single_replica(deps: AdminDeps, partition: int, broker_ids: Iterable[int]) -> None:
    replicas = list(broker_ids)
    if replicas != [deps.config.node_id]:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"partition {partition}: replicas {replicas}; this single-node cluster has only "
            f"broker {deps.config.node_id}",
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
def _check_new_name(deps: AdminDeps, name: str) -> None:
    validate_topic_name(name)
    if deps.topics.get(name) is not None:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    if name in INTERNAL_TOPICS:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"{name!r} is internal; the broker creates it on demand"
        )
    # Metric names replace '.' with '_', so Kafka refuses topics that differ only there.
    folded = name.replace(".", "_")
    for existing in deps.topics.all():
        if existing.name.replace(".", "_") == folded:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"topic {name!r} collides with existing topic {existing.name!r}",
            )


def _partitions_and_replication(deps: AdminDeps, topic: Any) -> tuple[int, int]:
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
            _check_single_replica(deps, assignment.partition_index, assignment.broker_ids)
        _check_partition_count(len(indexes))
        return len(indexes), 1
    partitions = (
        deps.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    )
    _check_partition_count(partitions)
    replication = topic.replication_factor
    if replication == -1:
        replication = deps.config.default_replication_factor
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


def _create_one(
    deps: AdminDeps,
    module: Any,
    topic: Any,
    validate_only: bool,
    context: RequestContext,
    cluster_create: bool,
) -> dict[str, Any]:
    name = topic.name
    if not cluster_create:  # CREATE on the cluster, or else on this topic (KafkaApis)
        require(deps, context, Op.CREATE, Type.TOPIC, name)
    _check_new_name(deps, name)
    partitions, replication = _partitions_and_replication(deps, topic)
    overrides = validate_overrides(deps.config, {c.name: c.value for c in topic.configs})
    configs: tuple[Any, ...] | None = None
    config_class = getattr(module, "CreatableTopicConfigs", None)  # v5+ echoes the configs
    configs_error = ErrorCode.NONE
    if config_class is not None and deps.authorizer is not None and not allowed(
        deps.authorizer, context, Op.DESCRIBE_CONFIGS, Type.TOPIC, name
    ):
        # Kafka echoes configs, partitions and replication factor only to a caller who may
        # DESCRIBE_CONFIGS the topic (includeConfigsAndMetadata).
        configs_error, config_class = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
        configs = ()
    if config_class is not None:
        configs = tuple(
            responses.build(
                config_class,
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=int(entry.source),
                is_sensitive=entry.is_sensitive,
            )
            for entry in describe_topic_configs(deps.config, overrides)
        )
    topic_id = None
    deps.topics.check_partition_budget(partitions)  # validate_only answers as a create would
    if not validate_only:
        topic_id = deps.topics.create_topic(name, partitions, overrides).topic_id
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "topic_id": topic_id,
        "num_partitions": partitions if configs_error == ErrorCode.NONE else -1,
        "replication_factor": replication if configs_error == ErrorCode.NONE else -1,
        "configs": configs,
        "topic_config_error_code": configs_error,
    }


async def handle_create_topics(deps: AdminDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.CREATE_TOPICS, version)
    results = []
    cluster_create = deps.authorizer is None or cluster_allowed(
        deps.authorizer, context, Op.CREATE
    )
    for topic, outcome in each_entry(
        request.topics,
        lambda topic: topic.name,
        lambda topic: _create_one(
            deps, module, topic, request.validate_only, context, cluster_create
        ),
        "duplicate topic name",
    ):
        outcome.setdefault("num_partitions", -1)
        outcome.setdefault("replication_factor", -1)
        if hasattr(module, "CreatableTopicConfigs"):
            outcome.setdefault("configs", ())  # v5+: Kafka's empty list for a failed topic
        results.append(responses.build(module.CreatableTopicResult, name=topic.name, **outcome))
    cls = responses.response_class(ApiKey.CREATE_TOPICS, version)
    return responses.build(cls, throttle_time=0, topics=tuple(results))


# --- DeleteTopics -------------------------------------------------------------------------
def _delete_one(
    deps: AdminDeps, context: RequestContext, name: str | None, topic_id: uuid.UUID | None
) -> dict[str, Any]:
    if name is not None and topic_id is not None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "give a topic name or a topic id, not both")
    if topic_id is not None:
        info = deps.topics.by_id(topic_id)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {topic_id}")
        require(deps, context, Op.DELETE, Type.TOPIC, info.name)
    elif name is not None:
        require(deps, context, Op.DELETE, Type.TOPIC, name)  # before existence: no leak
        info = require_topic(deps.topics, name)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "neither topic name nor id given")
    if is_internal(info):
        raise KafkaError(
            ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"internal topic {info.name!r} cannot be deleted"
        )
    deps.topics.delete_topic(info.name)
    return {"error_code": ErrorCode.NONE, "name": info.name, "topic_id": info.topic_id}


async def handle_delete_topics(deps: AdminDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DELETE_TOPICS, version)
    targets: list[tuple[str | None, uuid.UUID | None]]
    if version >= 6:
        targets = [
            (state.name, state.topic_id if state.topic_id not in (None, _ZERO_UUID) else None)
            for state in request.topics
        ]
    else:
        targets = [(name, None) for name in request.topic_names]
    results = []
    for (name, topic_id), outcome in each_entry(
        targets,
        lambda target: target,
        lambda target: _delete_one(deps, context, *target),
        "duplicate topic",
    ):
        fields = {"name": name, "topic_id": topic_id or _ZERO_UUID} | outcome
        results.append(responses.build(module.DeletableTopicResult, **fields))
    cls = responses.response_class(ApiKey.DELETE_TOPICS, version)
    return responses.build(cls, throttle_time=0, responses=tuple(results))


# --- CreatePartitions ---------------------------------------------------------------------
def _add_partitions(
    deps: AdminDeps, topic: Any, validate_only: bool, context: RequestContext
) -> dict[str, Any]:
    require(deps, context, Op.ALTER, Type.TOPIC, topic.name)
    info = require_topic(deps.topics, topic.name)
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
            _check_single_replica(deps, info.partitions + offset, assignment.broker_ids)
    deps.topics.check_partition_budget(topic.count - info.partitions)
    if not validate_only:
        deps.topics.add_partitions(topic.name, topic.count)
        log.info("topic %s now has %d partitions", topic.name, topic.count)
    return {"error_code": ErrorCode.NONE, "error_message": None}


async def handle_create_partitions(deps: AdminDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.CREATE_PARTITIONS, version)
    results = []
    for topic, outcome in each_entry(
        request.topics,
        lambda topic: topic.name,
        lambda topic: _add_partitions(deps, topic, request.validate_only, context),
        "duplicate topic name",
    ):
        results.append(
            responses.build(module.CreatePartitionsTopicResult, name=topic.name, **outcome)
        )
    cls = responses.response_class(ApiKey.CREATE_PARTITIONS, version)
    return responses.build(cls, throttle_time=0, results=tuple(results))


# --- DeleteRecords ------------------------------------------------------------------------
def _delete_records(
    deps: AdminDeps, context: RequestContext, topic: str, partition: int, offset: int
) -> dict[str, Any]:
    require(deps, context, Op.DELETE, Type.TOPIC, topic)
    if topic in INTERNAL_TOPICS:
        # Kafka's ReplicaManager.deleteRecordsOnLocalLog: clients cannot truncate them.
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot delete records of internal topic {topic}"
        )
    partition_log = deps.topics.partition_log(topic, partition)
    high_watermark = partition_log.log_end_offset  # single node: every append is committed
    target = high_watermark if offset == HIGH_WATERMARK else offset
    if not 0 <= target <= high_watermark:
        raise KafkaError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} is outside [0, high watermark {high_watermark}]",
        )
    low_watermark = partition_log.delete_records_before(target)
    return {"error_code": ErrorCode.NONE, "low_watermark": low_watermark}


async def handle_delete_records(deps: AdminDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DELETE_RECORDS, version)
    topics = []
    for topic in request.topics:
        partitions = []
        for item in topic.partitions:
            outcome = guard(
                _delete_records, deps, context, topic.name, item.partition_index, item.offset
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
    cls = responses.response_class(ApiKey.DELETE_RECORDS, version)
    return responses.build(cls, throttle_time=0, topics=tuple(topics))


# --- DescribeCluster ----------------------------------------------------------------------
async def handle_describe_cluster(deps: AdminDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DESCRIBE_CLUSTER, version)
    cls = responses.response_class(ApiKey.DESCRIBE_CLUSTER, version)
    config = deps.config
    if deps.authorizer is not None and not cluster_allowed(
        deps.authorizer, context, Op.DESCRIBE
    ):
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    endpoint_type = getattr(request, "endpoint_type", _ENDPOINT_BROKERS)
    if endpoint_type != _ENDPOINT_BROKERS:
        # Kafka: a controller request to a broker is MISMATCHED, a type that does not exist
        # UNSUPPORTED (KafkaApis.handleDescribeCluster).
        mismatched = endpoint_type == _ENDPOINT_CONTROLLERS
        return responses.build(
            cls,
            throttle_time=0,
            error_code=(ErrorCode.MISMATCHED_ENDPOINT_TYPE if mismatched
                        else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
            error_message=("this node is a broker; ask for broker endpoints" if mismatched
                           else f"unknown endpoint type {endpoint_type}"),
            cluster_id=deps.identity.cluster_id,
        )
    host, port = advertised_endpoint(config, context.listener_name)
    controller_id, live = config.node_id, [(config.node_id, host, port)]
    if deps.live_brokers is not None:
        # A cluster: every live broker on the caller's listener, and the ZooKeeper
        # controller's id (what a ZooKeeper-mode Kafka broker answers).
        controller_id, live = deps.live_brokers(context.listener_name)
    nodes = tuple(
        responses.build(
            module.DescribeClusterBroker, broker_id=node_id, host=node_host, port=node_port,
            rack=None,
        )
        for node_id, node_host, node_port in sorted(live)
    )
    return responses.build(
        cls,
        throttle_time=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=_ENDPOINT_BROKERS,
        cluster_id=deps.identity.cluster_id,
        controller_id=controller_id,
        brokers=nodes,
        cluster_authorized_operations=cluster_operations(
            deps.authorizer, context, request.include_cluster_authorized_operations
        ),
    )


def handlers(deps: AdminDeps) -> HandlerTable:
    return {
        ApiKey.CREATE_TOPICS: partial(handle_create_topics, deps),
        ApiKey.DELETE_TOPICS: partial(handle_delete_topics, deps),
        ApiKey.DELETE_RECORDS: partial(handle_delete_records, deps),
        ApiKey.CREATE_PARTITIONS: partial(handle_create_partitions, deps),
        ApiKey.DESCRIBE_CLUSTER: partial(handle_describe_cluster, deps),
    } | admin_configs.handlers(deps)
