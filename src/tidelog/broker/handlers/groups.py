"""Group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete, ConsumerGroupHeartbeat,
ConsumerGroupDescribe.

The admin APIs are in `group_admin.py` (merged by `handlers()` below). Each handler only
translates: kio request (any version) -> coordinator message -> `GroupService`
-> coordinator response -> kio response of the same version. The rules live in
`tidelog.coordinator`. A single node coordinates every group; in cluster mode the
coordinator of a group is the leader of its `__consumer_offsets` partition
(`GroupDeps.find_coordinator`), and the others answer NOT_COORDINATOR.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import replace
from datetime import timedelta
from functools import partial
from typing import Any

from tidelog.broker import clock
from tidelog.broker.handlers import group_admin
from tidelog.broker.handlers.authorization import Op, Type, cluster_allowed
from tidelog.broker.handlers.context import HandlerTable, RequestContext
from tidelog.broker.handlers.groups_common import (
    GroupDeps,
    classes,
    may,
    require_group,
    response,
)
from tidelog.coordinator.messages import (
    CommitPartition,
    ConsumerGroupHeartbeatRequest,
    FetchedOffset,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveMember,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
)
from tidelog.coordinator.records import TopicPartitions
from tidelog.errors import ErrorCode, KafkaError
from tidelog.protocol import responses
from tidelog.protocol.api_keys import ApiKey
from tidelog.security.acl import AclOperation


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000) if isinstance(value, timedelta) else int(value)


_GROUP_KEY, _TRANSACTION_KEY, _SHARE_KEY = 0, 1, 2


def _host(context: RequestContext) -> str:
    return f"/{context.client_host}"


async def handle_find_coordinator(deps: GroupDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    deps.groups()  # the coordinator (and __consumer_offsets) exist first
    keys = [request.key] if version < 4 else list(request.coordinator_keys)
    key_type = getattr(request, "key_type", _GROUP_KEY)
    if key_type in (_GROUP_KEY, _TRANSACTION_KEY) or (
        key_type == _SHARE_KEY and deps.find_share_coordinator is not None
    ):
        answers = [_coordinator_of(deps, context, key_type, key) for key in keys]
    else:  # Kafka: a key type that does not exist is INVALID_REQUEST, no coordinator
        invalid = {"error_code": ErrorCode.INVALID_REQUEST, "node_id": -1, "host": "",
                   "port": -1}
        answers = [invalid for _ in keys]
    if version < 4:
        return response(ApiKey.FIND_COORDINATOR, version, **answers[0])
    module = classes(ApiKey.FIND_COORDINATOR, version)
    coordinators = tuple(
        responses.build(module.Coordinator, key=key, **answer)
        for key, answer in zip(keys, answers, strict=True)
    )
    return response(ApiKey.FIND_COORDINATOR, version, coordinators=coordinators)


def _coordinator_of(
    deps: GroupDeps, context: RequestContext, key_type: int, key: str
) -> dict[str, Any]:
    # DESCRIBE on the group or transactional id, before anything is looked up (KafkaApis).
    if key_type == _GROUP_KEY and not may(deps, context, Op.DESCRIBE, Type.GROUP, key):
        refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return {"error_code": refused, "node_id": -1, "host": "", "port": -1}
    if key_type == _TRANSACTION_KEY and not may(
        deps, context, Op.DESCRIBE, Type.TRANSACTIONAL_ID, key
    ):
        refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return {"error_code": refused, "node_id": -1, "host": "", "port": -1}
    locate = deps.find_coordinator
    if key_type == _SHARE_KEY and deps.find_share_coordinator is not None:
        # Kafka: the share coordinator is found by brokers (CLUSTER_ACTION).
        if deps.authorizer is not None and not cluster_allowed(
            deps.authorizer, context, AclOperation.CLUSTER_ACTION
        ):
            refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return {"error_code": refused, "node_id": -1, "host": "", "port": -1}
        locate = deps.find_share_coordinator
    if key_type == _TRANSACTION_KEY and deps.find_transaction_coordinator is not None:
        locate = deps.find_transaction_coordinator
    error, where = locate(key, context.listener_name)
    return {"error_code": error, "node_id": where[0], "host": where[1], "port": where[2]}


async def handle_join_group(deps: GroupDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    require_group(deps, context, Op.READ, request.group_id)
    client_id = context.header.client_id or ""
    session_timeout_ms = _ms(request.session_timeout)
    message = JoinGroupRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=(
            _ms(request.rebalance_timeout) if version >= 1 else session_timeout_ms
        ),
        waiter_id=0,
        new_member_id=f"{client_id or 'member'}-{uuid.uuid4()}",
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=client_id,
        client_host=_host(context),
        require_known_member_id=version >= 4,
    )
    groups_service = deps.groups()
    answer = await groups_service.run(
        message.group_id,
        lambda shard, waiter: shard.join_group(
            replace(message, waiter_id=waiter), clock.now_ms(), groups_service.topics_image()
        ),
    )
    module = classes(ApiKey.JOIN_GROUP, version)
    members = tuple(
        responses.build(
            module.JoinGroupResponseMember,
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            metadata=m.metadata,
        )
        for m in answer.members
    )
    return response(
        ApiKey.JOIN_GROUP,
        version,
        error_code=answer.error,
        generation_id=answer.generation_id,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name if version >= 7 else (answer.protocol_name or ""),
        leader=answer.leader,
        skip_assignment=answer.skip_assignment and version >= 9,
        member_id=answer.member_id,
        members=members,
    )


async def handle_sync_group(deps: GroupDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    require_group(deps, context, Op.READ, request.group_id)
    message = SyncGroupRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        waiter_id=0,
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
    )
    answer = await deps.groups().run(
        message.group_id,
        lambda shard, waiter: shard.sync_group(replace(message, waiter_id=waiter), clock.now_ms()),
    )
    return response(
        ApiKey.SYNC_GROUP,
        version,
        error_code=answer.error,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name,
        assignment=answer.assignment,
    )


async def handle_heartbeat(deps: GroupDeps, context: RequestContext, request: Any) -> Any:
    require_group(deps, context, Op.READ, request.group_id)
    message = HeartbeatRequest(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
    )
    error = await deps.groups().run(
        message.group_id, lambda shard, _: shard.heartbeat(message, clock.now_ms())
    )
    return response(ApiKey.HEARTBEAT, context.header.api_version, error_code=error)


async def handle_leave_group(deps: GroupDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    require_group(deps, context, Op.READ, request.group_id)
    if version >= 3:
        leaving = tuple(LeaveMember(m.member_id, m.group_instance_id) for m in request.members)
    else:
        leaving = (LeaveMember(request.member_id),)
    message = LeaveGroupRequest(request.group_id, leaving)
    groups_service = deps.groups()
    answer = await groups_service.run(
        message.group_id,
        lambda shard, _: shard.leave_group(message, clock.now_ms(), groups_service.topics_image()),
    )
    if version < 3:
        error = answer.error
        if error is ErrorCode.NONE and answer.members:
            error = answer.members[0][1]
        return response(ApiKey.LEAVE_GROUP, version, error_code=error)
    module = classes(ApiKey.LEAVE_GROUP, version)
    members = tuple(
        responses.build(
            module.MemberResponse,
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            error_code=error,
        )
        for member, error in answer.members
    )
    return response(ApiKey.LEAVE_GROUP, version, error_code=answer.error, members=members)


async def handle_offset_commit(deps: GroupDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    retention = getattr(request, "retention_time", None)
    known: list[CommitPartition] = []
    unknown: list[tuple[str, int, ErrorCode]] = []
    # READ on the group (else every partition is refused), then READ on each topic, before
    # existence is looked at (KafkaApis.handleOffsetCommitRequest).
    group_refused = not may(deps, context, Op.READ, Type.GROUP, request.group_id)
    ids: dict[str, uuid.UUID | None] = {}  # v10+: the topic id each name answers with
    for topic in request.topics:
        name = _topic_name(deps, topic, ids)
        info = deps.topics.get(name)
        refused: ErrorCode | None = None
        if group_refused:
            refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif name.startswith(_UNKNOWN_ID):
            refused = ErrorCode.UNKNOWN_TOPIC_ID  # v10+: an id no topic has
        elif not may(deps, context, Op.READ, Type.TOPIC, name):
            refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for p in topic.partitions:
            if refused is not None:
                unknown.append((name, p.partition_index, refused))
                continue
            if info is None or not 0 <= p.partition_index < info.partitions:
                # As Kafka's KafkaApis: commits for partitions that do not exist are refused.
                unknown.append(
                    (name, p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                continue
            known.append(
                CommitPartition(
                    name,
                    p.partition_index,
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                )
            )
    message = OffsetCommitRequest(
        group_id=request.group_id,
        partitions=tuple(known),
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        retention_time_ms=-1 if retention is None else _ms(retention),
        api_version=version,
    )
    outcomes = list(unknown)
    if known:
        try:
            answer = await deps.groups().run(
                message.group_id, lambda shard, _: shard.offset_commit(message, clock.now_ms())
            )
        except KafkaError as refused:
            # No top-level error in OffsetCommit: every partition carries it (Kafka's answer
            # for NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE).
            outcomes.extend((p.topic, p.partition, refused.code) for p in known)
        else:
            outcomes.extend(answer.partitions)
    module = classes(ApiKey.OFFSET_COMMIT, version)
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, error in outcomes:
        by_topic.setdefault(topic, []).append(
            responses.build(
                module.OffsetCommitResponsePartition, partition_index=partition, error_code=error
            )
        )
    topics = tuple(
        responses.build(module.OffsetCommitResponseTopic, name=name, topic_id=ids.get(name),
                        partitions=tuple(items))
        for name, items in by_topic.items()
    )
    return response(ApiKey.OFFSET_COMMIT, version, topics=topics)


# OffsetCommit and OffsetFetch v10 (KIP-848's topic ids) name topics by id: resolved here to
# names (what the coordinator keys offsets by), answered by id. An id no topic has is kept
# under a placeholder name that cannot be a topic's ("<" is not a legal topic character).
_UNKNOWN_ID = "<unknown topic id "


def _topic_name(deps: GroupDeps, topic: Any, ids: dict[str, uuid.UUID | None]) -> str:
    """A request topic's name: `name` (v0-9), or its `topic_id` resolved (v10+)."""
    if not hasattr(topic, "topic_id"):
        return str(topic.name)
    info = deps.topics.by_id(topic.topic_id) if topic.topic_id is not None else None
    name = info.name if info is not None else f"{_UNKNOWN_ID}{topic.topic_id}>"
    ids[name] = topic.topic_id
    return name


def _fetch_offsets(
    deps: GroupDeps,
    context: RequestContext,
    group_id: str,
    topics: Any,
    member: tuple[Any, int],
    require_stable: bool = False,
) -> Any:
    """The group's committed offsets. With an authorizer: DESCRIBE on the group, else
    GROUP_AUTHORIZATION_FAILED; topics the caller may not DESCRIBE are left out of an
    all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (KafkaApis)."""
    if not may(deps, context, Op.DESCRIBE, Type.GROUP, group_id):
        return OffsetFetchResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    wanted = None
    unknown_ids: list[FetchedOffset] = []
    if topics is not None:
        wanted = tuple((t.name, index) for t in topics if not t.name.startswith(_UNKNOWN_ID)
                       for index in t.partition_indexes)
        unknown_ids = [FetchedOffset(t.name, index, -1, error=ErrorCode.UNKNOWN_TOPIC_ID)
                       for t in topics if t.name.startswith(_UNKNOWN_ID)
                       for index in t.partition_indexes]
    message = OffsetFetchRequest(group_id, wanted, member[0], member[1])
    shard = deps.groups().shard_of(group_id)
    answer = shard.offset_fetch(message)
    if unknown_ids:
        answer = replace(answer, partitions=(*answer.partitions, *unknown_ids))
    if require_stable and answer.partitions:
        # OffsetFetch v7+ require_stable (KIP-447): an offset a transaction may still change
        # is UNSTABLE_OFFSET_COMMIT (the consumer retries until the transaction ends).
        pending = shard.pending_txn_offsets
        answer = dataclasses.replace(answer, partitions=tuple(
            dataclasses.replace(item, offset=-1, leader_epoch=-1, metadata="",
                                error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
            if pending.has_pending(group_id, item.topic, item.partition) else item
            for item in answer.partitions
        ))
    if deps.authorizer is None:
        return answer
    names = {item.topic for item in answer.partitions}
    visible = {name for name in names if may(deps, context, Op.DESCRIBE, Type.TOPIC, name)}
    if visible == names:
        return answer
    if wanted is None:
        kept = tuple(item for item in answer.partitions if item.topic in visible)
    else:
        kept = tuple(
            item if item.topic in visible
            else replace(item, offset=-1, leader_epoch=-1, metadata="",
                         error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for item in answer.partitions
        )
    return replace(answer, partitions=kept)


async def handle_offset_fetch(deps: GroupDeps, context: RequestContext, request: Any) -> Any:
    version = context.header.api_version
    module = classes(ApiKey.OFFSET_FETCH, version)
    if version < 8:
        answer = _fetch_offsets(deps, context, request.group_id, request.topics, (None, -1),
                                bool(getattr(request, "require_stable", False)))
        if version < 2 and answer.error != ErrorCode.NONE and request.topics is not None:
            # v1 has no top-level error: each requested partition carries it (Kafka's v0-1).
            answer = replace(answer, partitions=tuple(
                FetchedOffset(t.name, index, -1, error=answer.error)
                for t in request.topics
                for index in t.partition_indexes
            ))
        topics = _fetched_topics(
            module, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition", answer
        )
        return response(ApiKey.OFFSET_FETCH, version, topics=topics, error_code=answer.error)
    groups = []
    for group in request.groups:
        member = (getattr(group, "member_id", None), getattr(group, "member_epoch", -1))
        ids: dict[str, uuid.UUID | None] = {}
        wanted = group.topics
        if version >= 10 and wanted is not None:
            wanted = [_NamedTopic(_topic_name(deps, t, ids), t.partition_indexes)
                      for t in wanted]
        try:
            answer = _fetch_offsets(deps, context, group.group_id, wanted, member,
                                    bool(getattr(request, "require_stable", False)))
        except KafkaError as error:
            groups.append(responses.build(
                module.OffsetFetchResponseGroup, group_id=group.group_id, topics=(),
                error_code=error.code,
            ))
            continue
        if version >= 10:
            for item in answer.partitions:
                if item.topic not in ids:
                    info = deps.topics.get(item.topic)
                    ids[item.topic] = info.topic_id if info is not None else None
        topics = _fetched_topics(
            module, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions", answer, ids
        )
        groups.append(
            responses.build(
                module.OffsetFetchResponseGroup,
                group_id=group.group_id,
                topics=topics,
                error_code=answer.error,
            )
        )
    return response(ApiKey.OFFSET_FETCH, version, groups=tuple(groups))


@dataclasses.dataclass(frozen=True, slots=True)
class _NamedTopic:
    """An OffsetFetch v10 topic with its id resolved to a name."""

    name: str
    partition_indexes: Any


def _fetched_topics(
    module: Any, topic_class: str, partition_class: str, answer: Any,
    ids: dict[str, uuid.UUID | None] | None = None,
) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for item in answer.partitions:
        by_topic.setdefault(item.topic, []).append(
            responses.build(
                getattr(module, partition_class),
                partition_index=item.partition,
                committed_offset=item.offset,
                committed_leader_epoch=item.leader_epoch,
                metadata=item.metadata,
                error_code=item.error,
            )
        )
    return tuple(
        responses.build(getattr(module, topic_class), name=name,
                        topic_id=(ids or {}).get(name), partitions=tuple(items))
        for name, items in by_topic.items()
    )


async def handle_consumer_group_heartbeat(
    deps: GroupDeps, context: RequestContext, request: Any
) -> Any:
    version = context.header.api_version
    require_group(deps, context, Op.READ, request.group_id)
    subscribed = request.subscribed_topic_names or ()
    if any(not may(deps, context, Op.DESCRIBE, Type.TOPIC, name) for name in subscribed):
        # KafkaApis.handleConsumerGroupHeartbeat: DESCRIBE on every subscribed topic
        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    owned = None
    if request.topic_partitions is not None:
        owned = tuple(
            TopicPartitions(t.topic_id, tuple(t.partitions)) for t in request.topic_partitions
        )
    rebalance_timeout_ms = _ms(request.rebalance_timeout)
    message = ConsumerGroupHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        new_member_id=str(uuid.uuid4()),
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=(
            None
            if request.subscribed_topic_names is None
            else tuple(request.subscribed_topic_names)
        ),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),  # v1+
        server_assignor=request.server_assignor,
        owned=owned,
        client_id=context.header.client_id or "",
        client_host=_host(context),
        member_id_required=version >= 1,
    )
    groups_service = deps.groups()
    answer = await groups_service.run(
        message.group_id,
        lambda shard, _: shard.consumer_group_heartbeat(
            message, groups_service.topics_image(), clock.now_ms()
        ),
    )
    module = classes(ApiKey.CONSUMER_GROUP_HEARTBEAT, version)
    assignment = None
    if answer.assignment is not None:
        assignment = responses.build(
            module.Assignment,
            topic_partitions=tuple(
                responses.build(
                    module.TopicPartitions, topic_id=t.topic_id, partitions=t.partitions
                )
                for t in answer.assignment
            ),
        )
    return response(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        version,
        error_code=answer.error,
        error_message=answer.error_message,
        member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        heartbeat_interval=timedelta(milliseconds=answer.heartbeat_interval_ms),
        assignment=assignment,
    )


def handlers(deps: GroupDeps) -> HandlerTable:
    return {
        ApiKey.FIND_COORDINATOR: partial(handle_find_coordinator, deps),
        ApiKey.JOIN_GROUP: partial(handle_join_group, deps),
        ApiKey.SYNC_GROUP: partial(handle_sync_group, deps),
        ApiKey.HEARTBEAT: partial(handle_heartbeat, deps),
        ApiKey.LEAVE_GROUP: partial(handle_leave_group, deps),
        ApiKey.OFFSET_COMMIT: partial(handle_offset_commit, deps),
        ApiKey.OFFSET_FETCH: partial(handle_offset_fetch, deps),
        ApiKey.CONSUMER_GROUP_HEARTBEAT: partial(handle_consumer_group_heartbeat, deps),
    } | group_admin.handlers(deps)
