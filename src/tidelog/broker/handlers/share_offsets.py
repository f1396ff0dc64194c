"""Share-group offsets admin: DescribeShareGroupOffsets (90, v0-1), AlterShareGroupOffsets
(91, v0), DeleteShareGroupOffsets (92, v0).

A share group's "offset" per partition is its share-partition start offset (SPSO). Describe
answers it (-1 without state) and, from v1, the lag: records between the SPSO and the high
watermark not yet acknowledged or archived; an unknown group is answered as one without
state (-1), as Kafka 4.3 does. Alter and Delete need the group empty (NON_EMPTY_GROUP): Alter
restarts each named share partition at the given offset (within the log: else
OFFSET_OUT_OF_RANGE), Delete drops the state of every partition of each named topic (a
tombstone in `__share_group_state`); for them a group unknown as a share group (no members,
no state) is GROUP_ID_NOT_FOUND.

Cluster mode: served by the group's coordinator (NOT_COORDINATOR elsewhere; clients find it
with FindCoordinator), which asks the share coordinators for the state
(ReadShareGroupStateSummary), re-initializes it for Alter (InitializeShareGroupState with a new
state epoch, fencing the partition's leader) and deletes it for Delete.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from tidelog.broker.handlers.authorization import Op, Type, allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.handlers.share_common import ShareDeps, not_coordinator
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.types import TopicPartition


def _may(deps: ShareDeps, context: RequestContext, op: Any, resource: Any, name: str) -> bool:
    return deps.authorizer is None or allowed(deps.authorizer, context, op, resource, name)


async def handle_describe(deps: ShareDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version)
    service = deps.shares()
    groups = []
    for group in request.groups:
        group_id = group.group_id
        if not _may(deps, context, Op.DESCRIBE, Type.GROUP, group_id):
            groups.append(responses.build(
                module.DescribeShareGroupOffsetsResponseGroup, group_id=group_id,
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=()))
            continue
        elsewhere = not_coordinator(deps, context.listener_name, group_id)
        if elsewhere is not None:
            groups.append(responses.build(
                module.DescribeShareGroupOffsetsResponseGroup, group_id=group_id,
                error_code=elsewhere, topics=()))
            continue
        # An unknown group is answered like a group without state (Kafka 4.3 does too).
        wanted: dict[str, list[int]] = {}
        if group.topics is None:  # every partition with state
            for topic_id, index in sorted(await service.state_keys(group_id)):
                info = deps.topics.by_id(topic_id)
                if info is not None:
                    wanted.setdefault(info.name, []).append(index)
        else:
            for topic in group.topics:
                wanted.setdefault(topic.topic_name, []).extend(topic.partitions)
        summaries = await service.summaries(group_id, [
            (info.topic_id, index) for name, indexes in wanted.items()
            if (info := deps.topics.get(name)) is not None
            for index in indexes if 0 <= index < info.partitions])
        topics = []
        for name, indexes in wanted.items():
            info = deps.topics.get(name)
            partitions = []
            refused = not _may(deps, context, Op.DESCRIBE, Type.TOPIC, name)
            for index in indexes:
                if refused or info is None or not 0 <= index < info.partitions:
                    partitions.append(responses.build(
                        module.DescribeShareGroupOffsetsResponsePartition, partition_index=index,
                        start_offset=-1, leader_epoch=-1,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED if refused
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                start, done = summaries[(info.topic_id, index)]
                lag = -1
                if start is not None:
                    lag = max(0, _high_watermark(deps, name, index) - start - done)
                partitions.append(responses.build(
                    module.DescribeShareGroupOffsetsResponsePartition, partition_index=index,
                    start_offset=-1 if start is None else start, leader_epoch=0, lag=lag,
                    error_code=ErrorCode.NONE))
            topics.append(responses.build(
                module.DescribeShareGroupOffsetsResponseTopic, topic_name=name,
                topic_id=info.topic_id if info else None, partitions=tuple(partitions)))
        groups.append(responses.build(
            module.DescribeShareGroupOffsetsResponseGroup, group_id=group_id,
            error_code=ErrorCode.NONE, topics=tuple(topics)))
    cls = responses.response_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version)
    return responses.build(cls, throttle_time=0, groups=tuple(groups))


def _high_watermark(deps: ShareDeps, name: str, index: int) -> int:
    """The partition's high watermark; in a cluster, of the topic's log here (a follower's
    may trail the leader's by a fetch: the lag is an estimate, as Kafka's)."""
    try:
        return deps.replication.high_watermark(TopicPartition(name, index))
    except KafkaError:  # led by another broker
        return deps.topics.partition_log(name, index).log_end_offset


async def _group_error(deps: ShareDeps, context: RequestContext, group_id: str,
                       op: Any) -> ErrorCode:
    service = deps.shares()
    if not _may(deps, context, op, Type.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    elsewhere = not_coordinator(deps, context.listener_name, group_id)
    if elsewhere is not None:
        return elsewhere
    if not service.knows_group(group_id) and (
        service.persister is None or not await service.state_keys(group_id)
    ):
        return ErrorCode.GROUP_ID_NOT_FOUND
    if not service.is_empty(group_id):
        return ErrorCode.NON_EMPTY_GROUP
    return ErrorCode.NONE


async def handle_alter(deps: ShareDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.ALTER_SHARE_GROUP_OFFSETS, version)
    cls = responses.response_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS, version)
    error = await _group_error(deps, context, request.group_id, Op.READ)
    if error is not ErrorCode.NONE:
        return responses.build(cls, throttle_time=0, error_code=error, responses=())
    service = deps.shares()
    topics = []
    for topic in request.topics:
        info = deps.topics.get(topic.topic_name)
        partitions = []
        for entry in topic.partitions:
            index, offset = int(entry.partition_index), int(entry.start_offset)
            if info is None or not 0 <= index < info.partitions:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not _may(deps, context, Op.READ, Type.TOPIC, info.name):
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                partition_log = deps.topics.partition_log(info.name, index)
                if not partition_log.log_start_offset <= offset <= partition_log.log_end_offset:
                    code = ErrorCode.OFFSET_OUT_OF_RANGE
                else:
                    await service.reset_start(request.group_id, info.name, info.topic_id,
                                              index, offset)
                    code = ErrorCode.NONE
            partitions.append(responses.build(
                module.AlterShareGroupOffsetsResponsePartition, partition_index=index,
                error_code=code))
        topics.append(responses.build(
            module.AlterShareGroupOffsetsResponseTopic, topic_name=topic.topic_name,
            topic_id=info.topic_id if info else None, partitions=tuple(partitions)))
    return responses.build(cls, throttle_time=0, error_code=ErrorCode.NONE,
                           responses=tuple(topics))


async def handle_delete(deps: ShareDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = responses.response_module(ApiKey.DELETE_SHARE_GROUP_OFFSETS, version)
    cls = responses.response_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS, version)
    error = await _group_error(deps, context, request.group_id, Op.DELETE)
    if error is not ErrorCode.NONE:
        return responses.build(cls, throttle_time=0, error_code=error, responses=())
    service = deps.shares()
    topics = []
    for topic in request.topics:
        info = deps.topics.get(topic.topic_name)
        code = ErrorCode.NONE
        if info is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif not _may(deps, context, Op.READ, Type.TOPIC, info.name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            for topic_id, index in sorted(await service.state_keys(request.group_id)):
                if topic_id == info.topic_id:
                    await service.forget_partition(request.group_id, topic_id, index)
        topics.append(responses.build(
            module.DeleteShareGroupOffsetsResponseTopic, topic_name=topic.topic_name,
            topic_id=info.topic_id if info else None, error_code=code))
    return responses.build(cls, throttle_time=0, error_code=ErrorCode.NONE,
                           responses=tuple(topics))


def handlers(deps: ShareDeps) -> HandlerTable:
    return {
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: partial(handle_describe, deps),
        ApiKey.ALTER_SHARE_GROUP_OFFSETS: partial(handle_alter, deps),
        ApiKey.DELETE_SHARE_GROUP_OFFSETS: partial(handle_delete, deps),
    }
