"""Cluster-mode AlterConfigs, IncrementalAlterConfigs, DeleteRecords and InitProducerId.

In the handler table with the other cluster handlers, only with `--zookeeper`.

- Topic configs live in ZooKeeper, `/config/topics/<t>` = `{"version":1,"config":{...}}`
  (Kafka's layout), with Kafka's change notification `/config/changes/config_change_<seq>` =
  `{"version":2,"entity_path":"topics/<t>"}`. Any broker validates the whole new set (LogConfig
  names through `topic_configs`, plus min.insync.replicas / unclean.leader.election.enable),
  writes it, and applies it at once; every broker's data watch on the znode re-reads the view
  and `Replication.on_view` applies the change to its open logs. Broker resources keep the
  single-node rules (static; describing works, changing answers INVALID_CONFIG), except the
  replication throttle rates (`leader.replication.throttled.rate`,
  `follower.replication.throttled.rate`): dynamic, in `/config/brokers/<id>` or `<default>`.
- DeleteRecords is answered by the partition's leader (Kafka's rule; clients send each
  partition to its leader, others answer NOT_LEADER_OR_FOLLOWER): the offset must be at most
  the high watermark (-1 = the high watermark); followers raise their log start offset to the
  leader's, which every Fetch response carries (`ReplicaFetcher`).
- InitProducerId: producer ids come from blocks claimed in ZooKeeper
  (`ClusterAgent.claim_producer_id_block`, Kafka's `/latest_producer_id_block`), so two
  brokers never hand out the same id (the single node's on-disk blocks are per broker).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from functools import partial
from typing import Any

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from tidelog.broker.handlers import admin_configs
from tidelog.broker.handlers.admin_common import duplicates, failure, guard, log, require
from tidelog.broker.handlers.authorization import Op, Type
from tidelog.broker.handlers.cluster_as_admin import admin_deps
from tidelog.broker.handlers.cluster_common import (
    ClusterDeps,
    check_replication_config,
    joined,
)
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.handlers.producer import idempotent_write_refused
from tidelog.broker.internal_topics import INTERNAL_TOPICS
from tidelog.broker.replication.replica_manager import REPLICATION_TOPIC_CONFIGS, Replication
from tidelog.broker.replication.throttle import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    RATE_CONFIGS,
    check_replicas_value,
    parse_rate,
)
from tidelog.broker.topic_configs import ResourceType, apply_incremental, validate_overrides
from tidelog.cluster.zk_admin import DEFAULT_BROKER
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.types import TopicPartition

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock size
HIGH_WATERMARK = -1
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations allowed on replication configs


def _current(replication: Replication, topic: str) -> dict[str, str]:
    view = replication.view
    assert view is not None
    if topic not in view.topics:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic!r}")
    return dict(view.configs.get(topic, {}))


def _split(configs: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    log_configs = {k: v for k, v in configs.items() if k not in REPLICATION_TOPIC_CONFIGS}
    return log_configs, {k: v for k, v in configs.items() if k in REPLICATION_TOPIC_CONFIGS}


def _incremental(deps: ClusterDeps, current: dict[str, str], resource: Any) -> dict[str, str]:
    operations = [(c.name, c.config_operation, c.value) for c in resource.configs]
    log_current, replication_configs = _split(current)
    log_operations = [op for op in operations if op[0] not in REPLICATION_TOPIC_CONFIGS]
    new_log = apply_incremental(deps.config, log_current, log_operations)
    for name, operation, value in operations:
        if name not in REPLICATION_TOPIC_CONFIGS:
            continue
        if operation == DELETE:
            replication_configs.pop(name, None)
        elif operation == SET:
            check_replication_config(name, value)
            replication_configs[name] = str(value)
        else:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} is not a list config")
    return {**new_log, **replication_configs}


def _replacing(deps: ClusterDeps, resource: Any) -> dict[str, str]:
    given = {c.name: c.value for c in resource.configs}
    if duplicates(c.name for c in resource.configs):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "duplicate config keys")
    log_given, replication_configs = _split(given)
    for name, value in replication_configs.items():
        check_replication_config(name, value)
    return {**validate_overrides(deps.config, log_given), **replication_configs}


async def _alter_topic(
    deps: ClusterDeps, context: RequestContext, resource: Any, incremental: bool,
    validate_only: bool,
) -> dict[str, Any]:
    # ALTER_CONFIGS on the topic, before anything about it is revealed (the single node's
    # check, authorization.REQUIRED).
    admin_configs._require_config_access(
        admin_deps(deps), context, Op.ALTER_CONFIGS, resource
    )
    replication = joined(deps)
    agent = replication.agent
    assert agent is not None
    name = resource.resource_name
    current = _current(replication, name)
    new = _incremental(deps, current, resource) if incremental else _replacing(deps, resource)
    for throttled in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
        try:
            check_replicas_value(new.get(throttled, ""))
        except ValueError as error:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(error)) from None
    if not validate_only:
        await asyncio.to_thread(agent.set_topic_config, name, new)
        deps.topics.set_topic_configs(name, _split(new)[0])  # the watch brings it to the others
        log.info("topic %s configs now %s (ZooKeeper)", name, new)
    return {"error_code": ErrorCode.NONE, "error_message": None}


async def _alter(deps: ClusterDeps, context: RequestContext, request: Any, api_key: int) -> Any:
    version = context.header.api_version
    module = responses.response_module(api_key, version)
    incremental = api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS
    repeated = duplicates((r.resource_type, r.resource_name) for r in request.resources)
    results = []
    for resource in request.resources:
        if (resource.resource_type, resource.resource_name) in repeated:
            outcome = failure(KafkaError(ErrorCode.INVALID_REQUEST, "duplicate resource"))
        elif resource.resource_type == ResourceType.BROKER and _throttle_rates_only(resource):
            try:
                outcome = await _alter_broker(
                    deps, context, resource, incremental, request.validate_only
                )
            except KafkaError as error:
                outcome = failure(error)
        elif resource.resource_type != ResourceType.TOPIC:
            # broker resources: the single-node rules (overrides_for is for topics only)
            outcome = guard(
                admin_configs._alter_resource, admin_deps(deps), resource, lambda _r, _i: {},
                request.validate_only, context,
            )
        else:
            try:
                outcome = await _alter_topic(
                    deps, context, resource, incremental, request.validate_only
                )
            except KafkaError as error:
                outcome = failure(error)
        results.append(responses.build(
            module.AlterConfigsResourceResponse, resource_type=resource.resource_type,
            resource_name=resource.resource_name, **outcome,
        ))
    cls = responses.response_class(api_key, version)
    return responses.build(cls, throttle_time=0, responses=tuple(results))


def _throttle_rates_only(resource: Any) -> bool:
    return bool(resource.configs) and all(c.name in RATE_CONFIGS for c in resource.configs)


async def _alter_broker(
    deps: ClusterDeps, context: RequestContext, resource: Any, incremental: bool,
    validate_only: bool,
) -> dict[str, Any]:
    """The replication throttle rates, Kafka's dynamic broker configs: `/config/brokers/<id>`
    (the resource names this broker, as Kafka's ZooKeeper mode requires: clients send a
    broker's configs to that broker) or `<default>` (an empty name), watched by the brokers."""
    admin_configs._require_config_access(admin_deps(deps), context, Op.ALTER_CONFIGS, resource)
    name = resource.resource_name
    if name not in ("", str(deps.config.node_id)):
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Unexpected broker id, expected {deps.config.node_id}, but received "
                         f"{name}")
    agent = joined(deps).agent
    assert agent is not None
    entity = name or DEFAULT_BROKER
    if duplicates(c.name for c in resource.configs):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "duplicate config keys")
    current = await asyncio.to_thread(agent.broker_config, entity) if incremental else {}
    for config in resource.configs:
        operation = config.config_operation if incremental else SET
        if operation == DELETE:
            current.pop(config.name, None)
            continue
        if operation != SET:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{config.name} is not a list config")
        try:
            rate = parse_rate(config.value)
        except ValueError:
            rate = None
        if rate is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Invalid value {config.value} for configuration {config.name}")
        current[config.name] = str(rate)
    if not validate_only:
        await asyncio.to_thread(agent.set_broker_config, entity, current)
        log.info("broker %s dynamic configs now %s (ZooKeeper)", entity, current)
    return {"error_code": ErrorCode.NONE, "error_message": None}


async def handle_alter_configs(deps: ClusterDeps, context: RequestContext, request: Any) -> Any:
    return await _alter(deps, context, request, ApiKey.ALTER_CONFIGS)


async def handle_incremental_alter_configs(
    deps: ClusterDeps, context: RequestContext, request: Any
) -> Any:
    return await _alter(deps, context, request, ApiKey.INCREMENTAL_ALTER_CONFIGS)


async def _delete_records_and_wait(
    deps: ClusterDeps, context: RequestContext, topic: str, partition: int, offset: int,
    timeout_ms: int,
) -> dict[str, Any]:
    """Kafka's DelayedDeleteRecords, approximated: answered once every ISR follower has
    fetched twice after the deletion (the response to the first carries the new log start
    offset, and a follower applies a response before it fetches again)."""
    outcome = guard(_delete_records, deps, context, topic, partition, offset)
    if outcome.get("error_code", ErrorCode.NONE) != ErrorCode.NONE:
        return outcome
    tp = TopicPartition(topic, partition)
    deps.append_waiters.notify(tp)  # parked follower fetches answer now, with the new start
    try:
        synced = await joined(deps).wait_for_isr_fetches(tp, 2, timeout_ms)
    except KafkaError as error:
        return failure(error)
    if not synced:
        return {**failure(KafkaError(ErrorCode.REQUEST_TIMED_OUT, "followers lag")),
                "low_watermark": outcome["low_watermark"]}
    return outcome


def _delete_records(
    deps: ClusterDeps, context: RequestContext, topic: str, partition: int, offset: int
) -> dict[str, Any]:
    require(admin_deps(deps), context, Op.DELETE, Type.TOPIC, topic)  # before leadership
    if topic in INTERNAL_TOPICS:
        # Kafka's ReplicaManager.deleteRecordsOnLocalLog: clients cannot truncate them.
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot delete records of internal topic {topic}"
        )
    replication = joined(deps)
    high_watermark = replication.high_watermark(TopicPartition(topic, partition))  # leader only
    target = high_watermark if offset == HIGH_WATERMARK else offset
    if not 0 <= target <= high_watermark:
        raise KafkaError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} is outside [0, high watermark {high_watermark}]",
        )
    low_watermark = deps.topics.partition_log(topic, partition).delete_records_before(target)
    return {"error_code": ErrorCode.NONE, "low_watermark": low_watermark}


async def handle_delete_records(deps: ClusterDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DELETE_RECORDS, version)
    timeout = request.timeout
    timeout_ms = int(timeout.total_seconds() * 1000) if isinstance(timeout, timedelta) else timeout
    topics = []
    for topic in request.topics:
        partitions = []
        for item in topic.partitions:
            outcome = await _delete_records_and_wait(
                deps, context, topic.name, item.partition_index, item.offset, timeout_ms
            )
            outcome.setdefault("low_watermark", -1)
            partitions.append(responses.build(
                module.DeleteRecordsPartitionResult, partition_index=item.partition_index,
                **outcome,
            ))
        topics.append(responses.build(
            module.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(partitions)
        ))
    cls = responses.response_class(ApiKey.DELETE_RECORDS, version)
    return responses.build(cls, throttle_time=0, topics=tuple(topics))


class ClusterProducerIds:
    """Producer ids from ZooKeeper blocks; one claim in flight (runs on the event loop)."""

    def __init__(self) -> None:
        self._next_id = 0
        self._block_end = 0
        self._lock = asyncio.Lock()

    async def allocate(self, replication: Replication) -> int:
        async with self._lock:
            if self._next_id >= self._block_end:
                agent = replication.agent
                assert agent is not None
                self._next_id, self._block_end = await asyncio.to_thread(
                    agent.claim_producer_id_block, PRODUCER_ID_BLOCK_SIZE
                )
            producer_id = self._next_id
            self._next_id += 1
            return producer_id


async def handle_init_producer_id(
    deps: ClusterDeps, allocator: ClusterProducerIds, context: RequestContext, request: Any
) -> Any:
    cls = responses.response_class(ApiKey.INIT_PRODUCER_ID, context.header.api_version)
    if idempotent_write_refused(deps.authorizer, context, request):  # the single node's check
        return responses.build(
            cls, throttle_time=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            producer_id=-1, producer_epoch=-1,
        )
    if request.transactional_id is not None:  # server.py routes these to producer.py
        return responses.build(
            cls, throttle_time=0, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            producer_id=-1, producer_epoch=-1,
        )
    replication = joined(deps)
    try:
        producer_id = await allocator.allocate(replication)
    except (KazooException, KazooTimeoutError) as error:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(error)) from None
    return responses.build(
        cls, throttle_time=0, error_code=ErrorCode.NONE, producer_id=producer_id,
        producer_epoch=0,
    )


def handlers(deps: ClusterDeps) -> HandlerTable:
    return {
        ApiKey.DELETE_RECORDS: partial(handle_delete_records, deps),
        # One producer id allocator per broker instance (a test process may run several).
        ApiKey.INIT_PRODUCER_ID: partial(handle_init_producer_id, deps, ClusterProducerIds()),
        ApiKey.ALTER_CONFIGS: partial(handle_alter_configs, deps),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: partial(handle_incremental_alter_configs, deps),
    }
