"""Metadata (key 3, v0-13): this node as the only broker, leader and controller of everything.

Clients dial the host:port returned here, so it is the advertised listener (COMPATIBILITY.md
trap 2). Topic ids are the stable ids in topics.json; the leader epoch is 0 on a single node.
Unknown topics are created with num.partitions when auto.create.topics.enable and the request
allows it (v4+ `allow_auto_topic_creation`; always allowed before v4, as in Kafka).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from tidelog.broker.config import BrokerConfig, advertised_endpoint
from tidelog.broker.handlers.authorization import (
    Op,
    Type,
    allowed,
    allowed_names,
    cluster_allowed,
    cluster_operations,
    resource_operations,
)
from tidelog.broker.handlers.context import (
    ALL_TOPIC_OPERATIONS,
    HandlerTable,
    RequestContext,
)
from tidelog.broker.metadata import TopicInfo, validate_topic_name
from tidelog.broker.services import ClusterIdentity
from tidelog.broker.topic_registry import TopicRegistry
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.authorizer import Authorizer

LEADER_EPOCH = 0
log = logging.getLogger("tidelog.broker.metadata")


@dataclass(frozen=True, slots=True)
class MetadataDeps:
    config: BrokerConfig  # node id and advertised listener
    identity: ClusterIdentity
    topics: TopicRegistry
    authorizer: Authorizer | None = None  # None: no ACL checks (authorizer.class.name unset)


def requested_names(registry: TopicRegistry, request: Any, version: int) -> list[str] | None:
    """Topic names asked for; None means every topic."""
    topics = request.topics
    if topics is None or (version == 0 and not topics):
        return None
    names = []
    for topic in topics:
        name = getattr(topic, "name", None)
        if name is None and getattr(topic, "topic_id", None) is not None:
            info = registry.by_id(topic.topic_id)
            name = info.name if info else None
        if name is not None:
            names.append(name)
    return names


def unknown_topic_ids(registry: TopicRegistry, request: Any) -> list[Any]:
    """Topic ids asked for (v10+, without a name) that no topic has."""
    return [
        topic.topic_id
        for topic in request.topics or ()
        if getattr(topic, "name", None) is None
        and getattr(topic, "topic_id", None) is not None
        and registry.by_id(topic.topic_id) is None
    ]


def _topic_entry(deps: MetadataDeps, module: Any, info: TopicInfo, operations: int) -> Any:
    node_id = deps.config.node_id
    partitions = tuple(
        responses.build(
            module.MetadataResponsePartition,
            error_code=ErrorCode.NONE,
            partition_index=index,
            leader_id=node_id,
            leader_epoch=LEADER_EPOCH,
            replica_nodes=(node_id,),
            isr_nodes=(node_id,),
            offline_replicas=(),
        )
        for index in range(info.partitions)
    )
    return responses.build(
        module.MetadataResponseTopic,
        error_code=ErrorCode.NONE,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.internal,
        partitions=partitions,
        topic_authorized_operations=operations,
    )


def _error_entry(module: Any, name: str, code: ErrorCode) -> Any:
    return responses.build(
        module.MetadataResponseTopic, error_code=code, name=name, topic_id=None, partitions=()
    )


def described_topics(
    authorizer: Authorizer | None, context: RequestContext, names: Iterable[str]
) -> set[str]:
    """The topics the caller may DESCRIBE: the only ones Metadata names (the others are left
    out of an all-topics answer, TOPIC_AUTHORIZATION_FAILED when named). Every one without an
    authorizer. Shared with the cluster handler (cluster.py)."""
    wanted = set(names)
    if authorizer is None:
        return wanted
    return allowed_names(authorizer, context, Op.DESCRIBE, Type.TOPIC, wanted)


def may_auto_create(authorizer: Authorizer | None, context: RequestContext, name: str) -> bool:
    """Auto-creation needs CREATE on the cluster or on the topic (KafkaApis)."""
    return (
        authorizer is None
        or cluster_allowed(authorizer, context, Op.CREATE)
        or allowed(authorizer, context, Op.CREATE, Type.TOPIC, name)
    )


def topic_operations(
    authorizer: Authorizer | None, context: RequestContext, request: Any, name: str
) -> int:
    """KIP-430 topic_authorized_operations for `name`."""
    return resource_operations(
        authorizer, context, getattr(request, "include_topic_authorized_operations", False),
        Type.TOPIC, name, ALL_TOPIC_OPERATIONS,
    )


async def handle_metadata(deps: MetadataDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.METADATA, version)
    names = requested_names(deps.topics, request, version)
    allow_auto_create = version < 4 or bool(getattr(request, "allow_auto_topic_creation", True))
    authorizer = deps.authorizer

    entries = []
    if names is None:
        every = deps.topics.all()
        if authorizer is not None:  # topics the caller may not DESCRIBE are left out silently
            visible = described_topics(authorizer, context, (info.name for info in every))
            every = [info for info in every if info.name in visible]
        entries = [
            _topic_entry(deps, module, info, topic_operations(authorizer, context, request,
                                                               info.name))
            for info in every
        ]
    else:
        refused = set(names) - described_topics(authorizer, context, names)
        for name in dict.fromkeys(names):
            if refused and name in refused:
                entries.append(_error_entry(module, name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            info = deps.topics.get(name)
            if info is None:
                try:
                    # Kafka checks the name before looking further, auto-creation or not.
                    validate_topic_name(name)
                except KafkaError as error:
                    entries.append(_error_entry(module, name, error.code))
                    continue
            if (info is None and allow_auto_create and deps.config.auto_create_topics
                    and not may_auto_create(authorizer, context, name)):
                entries.append(_error_entry(module, name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if info is None and allow_auto_create:
                try:
                    info = deps.topics.auto_create(name)
                except KafkaError as error:
                    entries.append(_error_entry(module, name, error.code))
                    continue
                if info is not None:
                    # Kafka answers LEADER_NOT_AVAILABLE the first time; here the topic is
                    # ready at once, so the client can use it without a retry round.
                    log.info("auto-created topic %s", name)
            if info is None:
                entries.append(_error_entry(module, name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                entries.append(_topic_entry(
                    deps, module, info, topic_operations(authorizer, context, request, name)
                ))
        entries += [
            responses.build(
                module.MetadataResponseTopic, error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                topic_id=topic_id, partitions=(),
            )
            for topic_id in dict.fromkeys(unknown_topic_ids(deps.topics, request))
        ]
    config = deps.config
    this_broker = responses.build(
        module.MetadataResponseBroker,
        node_id=config.node_id,
        host=advertised_endpoint(config, context.listener_name)[0],
        port=advertised_endpoint(config, context.listener_name)[1],
        rack=None,
    )
    return responses.build(
        responses.response_class(ApiKey.METADATA, version),
        throttle_time=0,
        brokers=(this_broker,),
        cluster_id=deps.identity.cluster_id,
        controller_id=config.node_id,
        topics=tuple(entries),
        cluster_authorized_operations=cluster_operations(
            authorizer,
            context,
            getattr(request, "include_cluster_authorized_operations", False),
        ),
        error_code=ErrorCode.NONE,
    )


def handlers(deps: MetadataDeps) -> HandlerTable:
    return {ApiKey.METADATA: partial(handle_metadata, deps)}
