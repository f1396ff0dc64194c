"""Group admin APIs: ListGroups, DescribeGroups, DeleteGroups, OffsetDelete,
ConsumerGroupDescribe. Translation only, like `handlers/groups.py` (which merges these).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from tidelog.broker.groups.service import GroupService
from tidelog.broker.handlers.authorization import Op, Type, cluster_allowed, resource_operations
from tidelog.broker.handlers.context import (
    ALL_GROUP_OPERATIONS,
    HandlerTable,
    RequestContext,
)
from tidelog.broker.handlers.groups_common import (
    GroupDeps,
    classes,
    may,
    require_group,
    response,
)
from tidelog.coordinator.coordinator import GroupCoordinatorShard
from tidelog.coordinator.messages import DescribedGroup, Result
from tidelog.coordinator.records import TopicPartitions
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.authorizer import Authorizer


def _describe(
    groups_service: GroupService,
    group_id: str,
    how: Callable[[GroupCoordinatorShard, str], DescribedGroup],
) -> DescribedGroup:
    """One group's description, or its coordinator error (cluster mode: NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS) in that group's entry."""
    try:
        return how(groups_service.shard_of(group_id), group_id)
    except KafkaError as error:
        return DescribedGroup(group_id, error.code)


async def handle_list_groups(deps: GroupDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = classes(ApiKey.LIST_GROUPS, version)
    states = getattr(request, "states_filter", ()) or ()  # v4+
    types = getattr(request, "types_filter", ()) or ()  # v5+: "classic" / "consumer"
    listed = []
    # DESCRIBE on the cluster lists every group; else each group needs DESCRIBE (KafkaApis).
    filtered = deps.authorizer is not None and not cluster_allowed(
        deps.authorizer, context, Op.DESCRIBE
    )
    for shard in deps.groups().shards.values():
        for group in shard.list_groups(states, types):
            if filtered and not may(deps, context, Op.DESCRIBE, Type.GROUP, group.group_id):
                continue
            listed.append(
                responses.build(
                    module.ListedGroup,
                    group_id=group.group_id,
                    protocol_type=group.protocol_type,
                    group_state=group.state,
                    group_type=group.group_type,
                )
            )
    return response(ApiKey.LIST_GROUPS, version, error_code=ErrorCode.NONE, groups=tuple(listed))


async def handle_describe_groups(deps: GroupDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = classes(ApiKey.DESCRIBE_GROUPS, version)
    groups_service = deps.groups()
    wants_operations = getattr(request, "include_authorized_operations", False)
    described = []
    for group_id in request.groups:
        if may(deps, context, Op.DESCRIBE, Type.GROUP, group_id):
            group = _describe(groups_service, group_id, GroupCoordinatorShard.describe_group)
        else:
            group = DescribedGroup(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        members = tuple(
            responses.build(
                module.DescribedGroupMember,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in group.members
        )
        error, message = group.error, None
        if version >= 6 and error == ErrorCode.NONE and group.state == "Dead":
            # KIP-1043: v6 names an unknown group (Kafka's GroupIdNotFoundException text).
            error, message = ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
        described.append(
            responses.build(
                module.DescribedGroup,
                error_code=error,
                error_message=message,
                group_id=group_id,
                group_state=group.state,
                protocol_type=group.protocol_type,
                protocol_data=group.protocol_data,
                members=members,
                authorized_operations=resource_operations(
                    deps.authorizer,
                    context,
                    wants_operations and error == ErrorCode.NONE,
                    Type.GROUP,
                    group_id,
                    ALL_GROUP_OPERATIONS,
                ),
            )
        )
    return response(ApiKey.DESCRIBE_GROUPS, version, groups=tuple(described))


async def handle_delete_groups(deps: GroupDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = classes(ApiKey.DELETE_GROUPS, version)
    groups_service = deps.groups()
    results = []
    for group_id in request.groups_names:
        if not may(deps, context, Op.DELETE, Type.GROUP, group_id):
            refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
            results.append(
                responses.build(module.DeletableGroupResult, group_id=group_id, error_code=refused)
            )
            continue
        try:
            outcome = await groups_service.run(group_id, _delete_one(group_id))
        except KafkaError as refused:  # cluster mode: not this broker's group
            outcome = [(group_id, refused.code)]
        for deleted_id, error in outcome:
            results.append(
                responses.build(module.DeletableGroupResult, group_id=deleted_id, error_code=error)
            )
    return response(ApiKey.DELETE_GROUPS, version, results=tuple(results))


def _delete_one(
    group_id: str,
) -> Callable[[GroupCoordinatorShard, int], Result[list[tuple[str, ErrorCode]]]]:
    return lambda shard, _: shard.delete_groups([group_id])


async def handle_offset_delete(deps: GroupDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = classes(ApiKey.OFFSET_DELETE, version)
    require_group(deps, context, Op.DELETE, request.group_id)
    # Topics the caller may not READ are refused before existence is looked at; Kafka's
    # handler answers topics the broker does not know itself (UNKNOWN_TOPIC_OR_PARTITION)
    # and asks the coordinator about the others.
    readable = [t for t in request.topics if may(deps, context, Op.READ, Type.TOPIC, t.name)]
    known = [t for t in readable if deps.topics.get(t.name) is not None]
    unknown = [
        (t.name, p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        for t in readable
        if deps.topics.get(t.name) is None
        for p in t.partitions
    ] + [
        (t.name, p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for t in request.topics
        if t not in readable
        for p in t.partitions
    ]
    partitions = tuple((t.name, p.partition_index) for t in known for p in t.partitions)
    answer = await deps.groups().run(
        request.group_id, lambda shard, _: shard.offset_delete(request.group_id, partitions)
    )
    outcomes = list(answer.partitions)
    if answer.error == ErrorCode.NONE:
        outcomes += unknown
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, error in outcomes:
        by_topic.setdefault(topic, []).append(
            responses.build(
                module.OffsetDeleteResponsePartition, partition_index=partition, error_code=error
            )
        )
    topics = tuple(
        responses.build(module.OffsetDeleteResponseTopic, name=name, partitions=tuple(items))
        for name, items in by_topic.items()
    )
    return response(ApiKey.OFFSET_DELETE, version, error_code=answer.error, topics=topics)


async def handle_consumer_group_describe(
    deps: GroupDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    module = classes(ApiKey.CONSUMER_GROUP_DESCRIBE, version)
    groups_service = deps.groups()
    names = {topic_id: name for name, (topic_id, _) in groups_service.topics_image().items()}
    wants_operations = request.include_authorized_operations
    described = [
        _described_consumer_group(
            module,
            _visible_consumer_group(deps, context, groups_service, g, names),
            names,
            wants_operations,
            deps.authorizer,
            context,
        )
        for g in request.group_ids
    ]
    return response(ApiKey.CONSUMER_GROUP_DESCRIBE, version, groups=tuple(described))


def _visible_consumer_group(
    deps: GroupDeps,
    context: RequestContext,
    groups_service: GroupService,
    group_id: str,
    names: dict[uuid.UUID, str],
) -> DescribedGroup:
    """DESCRIBE on the group, and on every topic its members subscribe to or are assigned,
    else the group is answered GROUP_/TOPIC_AUTHORIZATION_FAILED without members
    (KafkaApis.handleConsumerGroupDescribe)."""
    if not may(deps, context, Op.DESCRIBE, Type.GROUP, group_id):
        return DescribedGroup(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    group = _describe(groups_service, group_id, GroupCoordinatorShard.describe_consumer_group)
    if deps.authorizer is None:
        return group
    topics = {name for member in group.members for name in member.subscribed_topic_names}
    topics |= {
        names.get(item.topic_id, "")
        for member in group.members
        for item in (*member.assigned, *member.target)
    }
    topics.discard("")
    if any(not may(deps, context, Op.DESCRIBE, Type.TOPIC, name) for name in topics):
        return DescribedGroup(group_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return group


def _described_consumer_group(
    module: Any,
    group: DescribedGroup,
    names: dict[uuid.UUID, str],
    wants_operations: bool,
    authorizer: Authorizer | None,
    context: RequestContext,
) -> Any:
    def assignment(items: tuple[TopicPartitions, ...]) -> Any:
        return responses.build(
            module.Assignment,
            topic_partitions=tuple(
                responses.build(
                    module.TopicPartitions,
                    topic_id=t.topic_id,
                    topic_name=names.get(t.topic_id, ""),
                    partitions=t.partitions,
                )
                for t in items
            ),
        )

    members = tuple(
        responses.build(
            module.Member,
            member_id=m.member_id,
            instance_id=m.group_instance_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=assignment(m.assigned),
            target_assignment=assignment(m.target),
            member_type=0 if m.classic else 1,  # v1: 0 classic protocol, 1 consumer protocol
        )
        for m in group.members
    )
    return responses.build(
        module.DescribedGroup,
        error_code=group.error,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor_name,
        members=members,
        authorized_operations=resource_operations(
            authorizer,
            context,
            wants_operations and group.error == ErrorCode.NONE,
            Type.GROUP,
            group.group_id,
            ALL_GROUP_OPERATIONS,
        ),
    )


def handlers(deps: GroupDeps) -> HandlerTable:
    return {
        ApiKey.LIST_GROUPS: partial(handle_list_groups, deps),
        ApiKey.DESCRIBE_GROUPS: partial(handle_describe_groups, deps),
        ApiKey.DELETE_GROUPS: partial(handle_delete_groups, deps),
        ApiKey.OFFSET_DELETE: partial(handle_offset_delete, deps),
        ApiKey.CONSUMER_GROUP_DESCRIBE: partial(handle_consumer_group_describe, deps),
    }
