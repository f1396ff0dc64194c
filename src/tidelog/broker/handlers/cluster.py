"""Cluster-mode handlers: Metadata and the topic admin APIs over ZooKeeper.

In the broker's handler table only when it runs with `--zookeeper` (`server.py` adds
`handlers()` over the single-node ones), so a single node advertises and answers as before.

- Metadata (v0-13): every live broker, each partition's leader, leader epoch, replicas, ISR and
  offline replicas from the cluster view; the controller id. Unknown topics are auto-created
  through ZooKeeper and answered LEADER_NOT_AVAILABLE until their state exists (as Kafka).
- CreateTopics (v2-7): placement over the live brokers, assignment and configs written to
  ZooKeeper (any broker may; the controller creates the partition states). The call returns
  once the assignment is written; clients wait for leaders through Metadata, as with Kafka.
- OffsetForLeaderEpoch is list_offsets.py's, over `Replication` (the leader's epoch cache).
- DeleteTopics: `/admin/delete_topics/<t>` (Kafka's path); the controller deletes the znodes,
  every broker deletes its logs when the topic leaves its view; answered once this broker's
  view no longer has the topic, or REQUEST_TIMED_OUT at the request's timeout.
- CreatePartitions: new partitions placed over the live brokers (same replication factor)
  and the grown assignment written; the controller creates their states (Kafka's
  AdminZkClient.addPartitions). Manual assignments are refused.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from functools import partial
from typing import Any

from tidelog.broker import clock
from tidelog.broker.handlers import metadata as metadata_handler
from tidelog.broker.handlers.admin_common import require
from tidelog.broker.handlers.authorization import (
    Op,
    Type,
    allowed,
    cluster_allowed,
    cluster_operations,
)
from tidelog.broker.handlers.cluster_as_admin import admin_deps
from tidelog.broker.handlers.cluster_common import (
    ClusterDeps,
    check_replication_config,
    joined,
)
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.replication.cluster_agent import topic_uuid
from tidelog.broker.replication.replica_manager import REPLICATION_TOPIC_CONFIGS, Replication
from tidelog.broker.topic_configs import validate_overrides
from tidelog.cluster.zk_layout import NO_LEADER
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.types import TopicPartition

log = logging.getLogger("tidelog.broker.cluster_handlers")
DELETION_POLL_S = 0.05
_ZERO_UUID = uuid.UUID(int=0)


def _partition_entry(module: Any, replication: Replication, tp: TopicPartition,
                     replicas: tuple[int, ...]) -> Any:
    view = replication.view
    assert view is not None
    versioned = view.states.get(tp)
    if versioned is None:
        return responses.build(
            module.MetadataResponsePartition, error_code=ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=tp.partition, leader_id=NO_LEADER, leader_epoch=-1,
            replica_nodes=replicas, isr_nodes=(), offline_replicas=(),
        )
    state = versioned.state
    leader_alive = state.leader in view.brokers
    return responses.build(
        module.MetadataResponsePartition,
        error_code=ErrorCode.NONE if leader_alive else ErrorCode.LEADER_NOT_AVAILABLE,
        partition_index=tp.partition,
        leader_id=state.leader if leader_alive else NO_LEADER,
        leader_epoch=state.leader_epoch,
        replica_nodes=replicas,
        isr_nodes=state.isr,
        offline_replicas=tuple(b for b in replicas if b not in view.brokers),
    )


async def handle_metadata(deps: ClusterDeps, context: RequestContext, request: Any) -> Any:
    replication = joined(deps)
    view = replication.view
    assert view is not None and replication.agent is not None
    version = context.header.api_version
    module = responses.response_module(ApiKey.METADATA, version)
    requested = metadata_handler.requested_names(deps.topics, request, version)
    authorizer = deps.authorizer
    # The single node's rules (metadata.py): DESCRIBE per topic, the others left out of an
    # all-topics answer or refused when named; auto-creation needs CREATE.
    if requested is None:
        names = sorted(metadata_handler.described_topics(authorizer, context, view.topics))
        refused: set[str] = set()
    else:
        names = requested
        refused = set(names) - metadata_handler.described_topics(authorizer, context, names)
    allow_auto_create = version < 4 or bool(getattr(request, "allow_auto_topic_creation", True))
    entries = []
    for name in dict.fromkeys(names):
        assignment = view.topics.get(name)
        if name in refused or assignment is None:
            code = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if name in refused
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and allow_auto_create and (
                deps.config.auto_create_topics
            ):
                code = (await _auto_create(deps, replication, name)
                        if metadata_handler.may_auto_create(authorizer, context, name)
                        else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            entries.append(responses.build(
                module.MetadataResponseTopic, error_code=code, name=name, topic_id=None,
                partitions=()))
            continue
        info = deps.topics.get(name)
        entries.append(responses.build(
            module.MetadataResponseTopic,
            error_code=ErrorCode.NONE,
            name=name,
            topic_id=info.topic_id if info else None,
            is_internal=bool(info and info.internal),
            partitions=tuple(
                _partition_entry(module, replication, TopicPartition(name, p), replicas)
                for p, replicas in sorted(assignment.partitions.items())
            ),
            topic_authorized_operations=metadata_handler.topic_operations(
                authorizer, context, request, name
            ),
        ))
    # Each broker's endpoint on the listener this request came through; a broker without
    # that listener is left out (Kafka's rule: clients only see what they can reach).
    endpoints = ((b, view.endpoint(b, context.listener_name)) for b in sorted(view.brokers))
    brokers = tuple(
        responses.build(module.MetadataResponseBroker, node_id=b, host=where[0], port=where[1],
                        rack=None)
        for b, where in endpoints if where is not None
    )
    return responses.build(
        responses.response_class(ApiKey.METADATA, version),
        throttle_time=0,
        brokers=brokers,
        cluster_id=deps.identity.cluster_id,
        controller_id=view.controller_id,
        topics=tuple(entries),
        cluster_authorized_operations=cluster_operations(
            authorizer, context, getattr(request, "include_cluster_authorized_operations", False)
        ),
        error_code=ErrorCode.NONE,
    )


async def _auto_create(deps: ClusterDeps, replication: Replication, name: str) -> ErrorCode:
    agent = replication.agent
    assert agent is not None
    live = len(replication.view.brokers) if replication.view else 0
    factor = min(deps.config.default_replication_factor, max(live, 1))
    try:
        await asyncio.to_thread(agent.create_topic, name, deps.config.num_partitions, factor, {})
    except KafkaError as error:
        if error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            return error.code
    else:
        log.info("auto-created topic %s through ZooKeeper", name)
    return ErrorCode.LEADER_NOT_AVAILABLE


def _split_configs(deps: ClusterDeps, topic: Any) -> dict[str, str]:
    given = {c.name: c.value for c in topic.configs}
    replication_configs = {k: v for k, v in given.items() if k in REPLICATION_TOPIC_CONFIGS}
    for name, value in replication_configs.items():
        check_replication_config(name, value)
    log_configs = validate_overrides(
        deps.config, {k: v for k, v in given.items() if k not in REPLICATION_TOPIC_CONFIGS}
    )
    return {**log_configs, **{k: str(v) for k, v in replication_configs.items()}}


async def handle_create_topics(deps: ClusterDeps, context: RequestContext, request: Any) -> Any:
    replication = joined(deps)
    agent = replication.agent
    assert agent is not None
    version = context.header.api_version
    module = responses.response_module(ApiKey.CREATE_TOPICS, version)
    results = []
    admin = admin_deps(deps)
    authorizer = deps.authorizer
    # CREATE on the cluster, or else on each topic (the single node's check, admin.py).
    cluster_create = authorizer is None or cluster_allowed(authorizer, context, Op.CREATE)
    for topic in request.topics:
        fields: dict[str, Any] = {"num_partitions": -1, "replication_factor": -1}
        try:
            if not cluster_create:
                require(admin, context, Op.CREATE, Type.TOPIC, topic.name)
            if topic.assignments:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "manual assignments not supported")
            partitions = (deps.config.num_partitions if topic.num_partitions == -1
                          else topic.num_partitions)
            factor = (deps.config.default_replication_factor if topic.replication_factor == -1
                      else topic.replication_factor)
            configs = _split_configs(deps, topic)
            topic_id = None
            if not request.validate_only:
                assignment = await asyncio.to_thread(
                    agent.create_topic, topic.name, partitions, factor, configs
                )
                topic_id = topic_uuid(assignment.topic_id)
            fields.update(error_code=ErrorCode.NONE, error_message=None, topic_id=topic_id)
            if authorizer is None or allowed(
                authorizer, context, Op.DESCRIBE_CONFIGS, Type.TOPIC, topic.name
            ):
                fields.update(num_partitions=partitions, replication_factor=factor)
            elif hasattr(module, "CreatableTopicConfigs"):
                # Kafka echoes these only to a caller who may DESCRIBE_CONFIGS the topic.
                fields["topic_config_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        except KafkaError as error:
            fields.update(error_code=error.code, error_message=error.message or None)
        if hasattr(module, "CreatableTopicConfigs"):  # v5+: a list (Java's Admin reads it)
            fields.setdefault("configs", ())
        results.append(responses.build(module.CreatableTopicResult, name=topic.name, **fields))
    cls = responses.response_class(ApiKey.CREATE_TOPICS, version)
    return responses.build(cls, throttle_time=0, topics=tuple(results))


async def _request_deletion(
    deps: ClusterDeps, context: RequestContext, replication: Replication, name: str | None,
    topic_id: uuid.UUID | None,
) -> str:
    if topic_id is not None:
        if name is not None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "give a topic name or id, not both")
        info = deps.topics.by_id(topic_id)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {topic_id}")
        name = info.name
    if name is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "neither topic name nor id given")
    # DELETE on the topic, before its existence is looked at (the single node's check).
    require(admin_deps(deps), context, Op.DELETE, Type.TOPIC, name)
    info = deps.topics.get(name)
    if info is not None and info.internal:
        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"internal topic {name!r}")
    agent = replication.agent
    assert agent is not None
    await asyncio.to_thread(agent.request_topic_deletion, name)
    return name


async def handle_delete_topics(deps: ClusterDeps, context: RequestContext, request: Any) -> Any:
    replication = joined(deps)
    version = context.header.api_version
    module = responses.response_module(ApiKey.DELETE_TOPICS, version)
    if version >= 6:
        targets = [(t.name, t.topic_id if t.topic_id not in (None, _ZERO_UUID) else None)
                   for t in request.topics]
    else:
        targets = [(name, None) for name in request.topic_names]
    repeated = {t for t, count in Counter(targets).items() if count > 1}
    results: list[dict[str, Any]] = []
    for name, topic_id in targets:
        fields: dict[str, Any] = {"name": name, "topic_id": topic_id or _ZERO_UUID}
        try:
            if (name, topic_id) in repeated:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "duplicate topic")
            fields["name"] = await _request_deletion(deps, context, replication, name, topic_id)
            fields["error_code"] = ErrorCode.NONE
        except KafkaError as error:
            fields.update(error_code=error.code, error_message=error.message or None)
        results.append(fields)
    # As Kafka: answer once the deletions are done (here: gone from this broker's view).
    deadline_ms = clock.monotonic_ms() + int(request.timeout.total_seconds() * 1000)
    pending = [f for f in results if f.get("error_code") == ErrorCode.NONE]
    while clock.monotonic_ms() < deadline_ms and any(
        replication.view is not None and f["name"] in replication.view.topics for f in pending
    ):
        await asyncio.sleep(DELETION_POLL_S)
    for fields in pending:
        if replication.view is not None and fields["name"] in replication.view.topics:
            fields["error_code"] = ErrorCode.REQUEST_TIMED_OUT
    cls = responses.response_class(ApiKey.DELETE_TOPICS, version)
    return responses.build(cls, throttle_time=0, responses=tuple(
        responses.build(module.DeletableTopicResult, **fields) for fields in results))


async def handle_create_partitions(deps: ClusterDeps, context: RequestContext, request: Any) -> Any:
    replication = joined(deps)
    agent = replication.agent
    assert agent is not None
    version = context.header.api_version
    module = responses.response_module(ApiKey.CREATE_PARTITIONS, version)
    repeated = {n for n, c in Counter(t.name for t in request.topics).items() if c > 1}
    results = []
    for topic in request.topics:
        fields: dict[str, Any] = {"name": topic.name, "error_code": ErrorCode.NONE}
        try:
            if topic.name in repeated:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "duplicate topic name")
            require(admin_deps(deps), context, Op.ALTER, Type.TOPIC, topic.name)
            if topic.assignments is not None:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 "manual assignments are not supported in cluster mode")
            await asyncio.to_thread(
                agent.add_partitions, topic.name, topic.count, bool(request.validate_only)
            )
        except KafkaError as error:
            fields.update(error_code=error.code, error_message=error.message or None)
        results.append(responses.build(module.CreatePartitionsTopicResult, **fields))
    cls = responses.response_class(ApiKey.CREATE_PARTITIONS, version)
    return responses.build(cls, throttle_time=0, results=tuple(results))


def handlers(deps: ClusterDeps) -> HandlerTable:
    """Cluster mode: these replace the single-node handlers of the same keys (and add
    OffsetForLeaderEpoch); the config, DeleteRecords and InitProducerId ones are in
    cluster_admin."""
    return {
        ApiKey.METADATA: partial(handle_metadata, deps),
        ApiKey.CREATE_TOPICS: partial(handle_create_topics, deps),
        ApiKey.DELETE_TOPICS: partial(handle_delete_topics, deps),
        ApiKey.CREATE_PARTITIONS: partial(handle_create_partitions, deps),
    }
