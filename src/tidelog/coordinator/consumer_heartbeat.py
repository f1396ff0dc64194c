"""ConsumerGroupHeartbeat (KIP-848) and consumer-member expiry as record-producing operations.

An operation copies the group into a scratch `ConsumerGroup`, emits records and replays each one
on the scratch copy as it goes, and answers from the scratch state. The caller appends the
records and replays them on the real group, so live state and a replayed log cannot diverge.

Order of records per heartbeat, as in Kafka: member metadata, subscribed topic metadata, group
epoch, target assignment (members then epoch), the member's current assignment.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

from tidelog.coordinator.assignors import AssignmentSpec, assignor
from tidelog.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    from_topic_partitions,
    partition_metadata_value,
    reconcile,
    to_topic_partitions,
    topic_regex,
)
from tidelog.coordinator.consumer_static import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Scratch,
    replace_member,
    replace_static,
    static_leave,
)
from tidelog.coordinator.messages import (
    JOIN_TIMER,
    REVOCATION_TIMER,
    SESSION_TIMER,
    SYNC_TIMER,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    GroupConfig,
    Result,
    TimerKey,
    TimerRequest,
    TopicsImage,
)
from tidelog.coordinator.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
)
from tidelog.errors import ErrorCode, KafkaError

LEAVE_GROUP_MEMBER_EPOCH = -1


def _error(
    code: ErrorCode, message: str, member_id: str = ""
) -> Result[ConsumerGroupHeartbeatResponse]:
    response = ConsumerGroupHeartbeatResponse(code, message, member_id or None)
    return Result(response=response)


def consumer_group_heartbeat(
    group: ConsumerGroup,
    request: ConsumerGroupHeartbeatRequest,
    topics: TopicsImage,
    config: GroupConfig,
    deadlines: dict[TimerKey, int],
    now_ms: int,
) -> Result[ConsumerGroupHeartbeatResponse]:
    """One heartbeat. `deadlines` is the caller's ephemeral timer table (session, revocation)."""
    if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
        leaving = group.members.get(request.member_id)
        if leaving is None:
            return _error(ErrorCode.UNKNOWN_MEMBER_ID, "unknown member", request.member_id)
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and leaving.instance_id:
            result = static_leave(group, leaving)
        else:
            result = fence_member(group, request.member_id, topics, config, deadlines)
        result.response = ConsumerGroupHeartbeatResponse(
            ErrorCode.NONE, None, request.member_id, request.member_epoch
        )
        return result
    if (
        request.server_assignor is not None
        and request.server_assignor not in config.consumer_assignors
    ):
        return _error(ErrorCode.UNSUPPORTED_ASSIGNOR, f"assignor {request.server_assignor!r}")
    if request.subscribed_topic_regex:
        try:
            topic_regex(request.subscribed_topic_regex)
        except re.error as exc:
            message = (
                f"SubscribedTopicRegex `{request.subscribed_topic_regex}` is not a valid "
                f"regular expression: {exc}."
            )
            return _error(ErrorCode.INVALID_REGULAR_EXPRESSION, message)
    member_id = request.member_id or request.new_member_id
    member = group.members.get(member_id)
    if request.member_epoch == 0:
        if member is None:
            if not member_id:
                return _error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                message = "SubscribedTopicNames or SubscribedTopicRegex must be set"
                return _error(ErrorCode.INVALID_REQUEST, message)
            if len(group.members) >= config.consumer_max_size:
                return _error(ErrorCode.GROUP_MAX_SIZE_REACHED, "group is full", member_id)
            for other in list(group.members.values()):
                if request.instance_id is not None and other.instance_id == request.instance_id:
                    if other.classic is not None:
                        # A classic static member rolled to the consumer protocol: replaced at
                        # once, whatever its epoch (Kafka's replaceMember).
                        scratch, replacement, _ = replace_member(
                            group, other, member_id, deadlines
                        )
                    elif other.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        message = "instance id in use"
                        return _error(ErrorCode.UNRELEASED_INSTANCE_ID, message, member_id)
                    else:
                        scratch, replacement = replace_static(group, other, member_id, deadlines)
                    return _heartbeat(
                        group,
                        replacement,
                        member_id,
                        request,
                        topics,
                        config,
                        deadlines,
                        now_ms,
                        scratch,
                    )
    elif member is None:
        return _error(ErrorCode.UNKNOWN_MEMBER_ID, "unknown member", member_id)
    elif request.member_epoch != member.member_epoch:
        owned = from_topic_partitions(request.owned) if request.owned is not None else None
        lost_response = (
            request.member_epoch == member.previous_member_epoch
            and owned is not None
            and all(items <= member.assigned.get(t, frozenset()) for t, items in owned.items())
        )
        if not lost_response:
            return _error(ErrorCode.FENCED_MEMBER_EPOCH, "member epoch is fenced", member_id)
    return _heartbeat(group, member, member_id, request, topics, config, deadlines, now_ms)


def _heartbeat(
    group: ConsumerGroup,
    member: ConsumerMember | None,
    member_id: str,
    request: ConsumerGroupHeartbeatRequest,
    topics: TopicsImage,
    config: GroupConfig,
    deadlines: dict[TimerKey, int],
    now_ms: int,
    scratch: Scratch | None = None,
) -> Result[ConsumerGroupHeartbeatResponse]:
    replacing = scratch is not None
    scratch = scratch or Scratch(group)
    result: Result[ConsumerGroupHeartbeatResponse] = Result()
    current = member or ConsumerMember(member_id)
    updated = replace(
        current,
        client_id=request.client_id or current.client_id,
        client_host=request.client_host or current.client_host,
        subscribed_topic_names=(
            tuple(request.subscribed_topic_names)
            if request.subscribed_topic_names is not None
            else current.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            request.subscribed_topic_regex or None
            if request.subscribed_topic_regex is not None
            else current.subscribed_topic_regex
        ),
        rebalance_timeout_ms=(
            request.rebalance_timeout_ms
            if request.rebalance_timeout_ms >= 0
            else current.rebalance_timeout_ms
        ),
        instance_id=request.instance_id if request.instance_id is not None else current.instance_id,
        rack_id=request.rack_id if request.rack_id is not None else current.rack_id,
        server_assignor=request.server_assignor or current.server_assignor,
        classic=None,  # a ConsumerGroupHeartbeat member speaks the consumer protocol
    )
    bump = member is None
    if member is None or updated.metadata_value() != current.metadata_value():
        scratch.emit(
            ConsumerGroupMemberMetadataKey(group.group_id, member_id), updated.metadata_value()
        )
        bump = bump or (updated.subscribed_topic_names, updated.subscribed_topic_regex) != (
            current.subscribed_topic_names,
            current.subscribed_topic_regex,
        )
    bump = _refresh_subscription_metadata(scratch, topics) or bump
    try:
        _advance_epoch_and_target(scratch, config, bump)
    except KafkaError as exc:
        return _error(exc.code, exc.message, member_id)
    before = scratch.group.members[member_id]
    owned = from_topic_partitions(request.owned) if request.owned is not None else None
    after = reconcile(
        before,
        scratch.group.target.get(member_id, {}),
        scratch.group.assignment_epoch,
        owned,
        scratch.group.owners(member_id),
    )
    if member is None or replacing or after != before:
        key = ConsumerGroupCurrentMemberAssignmentKey(group.group_id, member_id)
        scratch.emit(key, after.assignment_value())
    result.records = scratch.records
    _arm_timers(group.group_id, before, after, request, config, deadlines, now_ms, result)
    send_assignment = (
        request.member_epoch == 0
        or after.assigned != current.assigned
        or (owned is not None and owned != dict(after.assigned))
    )
    result.response = ConsumerGroupHeartbeatResponse(
        ErrorCode.NONE,
        None,
        member_id,
        after.member_epoch,
        config.consumer_heartbeat_interval_ms,
        to_topic_partitions(after.assigned) if send_assignment else None,
    )
    return result


def _arm_timers(
    group_id: str,
    before: ConsumerMember,
    after: ConsumerMember,
    request: ConsumerGroupHeartbeatRequest,
    config: GroupConfig,
    deadlines: dict[TimerKey, int],
    now_ms: int,
    result: Result[ConsumerGroupHeartbeatResponse],
) -> None:
    session: TimerKey = (SESSION_TIMER, group_id, after.member_id)
    deadlines[session] = now_ms + config.consumer_session_timeout_ms
    result.timers.append(TimerRequest(session, deadlines[session]))
    revocation: TimerKey = (REVOCATION_TIMER, group_id, after.member_id)
    if after.state is MemberState.UNREVOKED_PARTITIONS:
        if before.state is not MemberState.UNREVOKED_PARTITIONS or revocation not in deadlines:
            timeout = after.rebalance_timeout_ms if after.rebalance_timeout_ms > 0 else 300_000
            deadlines[revocation] = now_ms + timeout
            result.timers.append(TimerRequest(revocation, deadlines[revocation]))
    elif revocation in deadlines:
        del deadlines[revocation]
        result.timers.append(TimerRequest(revocation, None))


def _refresh_subscription_metadata(scratch: Scratch, topics: TopicsImage) -> bool:
    """Record the subscribed topics' ids and partition counts; True if they changed.

    Regexes are resolved here, against the broker's topics of this moment."""
    names = scratch.group.subscribed_topics(topics)
    metadata = {name: topics[name] for name in names if name in topics}
    if metadata == scratch.group.subscription_metadata:
        return False
    key = ConsumerGroupPartitionMetadataKey(scratch.group.group_id)
    scratch.emit(key, partition_metadata_value(metadata))
    return True


def _advance_epoch_and_target(scratch: Scratch, config: GroupConfig, bump: bool) -> None:
    group = scratch.group
    if bump:
        scratch.emit(
            ConsumerGroupMetadataKey(group.group_id),
            ConsumerGroupMetadataValue(group.group_epoch + 1),
        )
    if group.group_epoch <= group.assignment_epoch:
        return
    metadata = group.subscription_metadata
    spec = AssignmentSpec(
        members={
            member_id: frozenset(
                topic_id for name, (topic_id, _) in metadata.items() if member.subscribes_to(name)
            )
            for member_id, member in group.members.items()
        },
        partition_counts={topic_id: count for topic_id, count in metadata.values()},
        previous=group.target,
    )
    votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
    name = votes.most_common(1)[0][0] if votes else config.consumer_assignors[0]
    target = assignor(name)(spec)
    for member_id in sorted(target):
        if target[member_id] != group.target.get(member_id):
            key = ConsumerGroupTargetAssignmentMemberKey(group.group_id, member_id)
            scratch.emit(
                key,
                ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(target[member_id])),
            )
    for member_id in sorted(set(group.target) - set(target)):
        scratch.emit(ConsumerGroupTargetAssignmentMemberKey(group.group_id, member_id), None)
    scratch.emit(
        ConsumerGroupTargetAssignmentMetadataKey(group.group_id),
        ConsumerGroupTargetAssignmentMetadataValue(group.group_epoch),
    )


def fence_member(
    group: ConsumerGroup,
    member_id: str,
    topics: TopicsImage,
    config: GroupConfig,
    deadlines: dict[TimerKey, int],
) -> Result[ConsumerGroupHeartbeatResponse]:
    """Remove a member (leave, session expiry, revocation timeout) and re-target the rest."""
    scratch = Scratch(group)
    group_id = group.group_id
    scratch.emit(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None)
    scratch.emit(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None)
    scratch.emit(ConsumerGroupMemberMetadataKey(group_id, member_id), None)
    _refresh_subscription_metadata(scratch, topics)
    _advance_epoch_and_target(scratch, config, bump=True)
    result: Result[ConsumerGroupHeartbeatResponse] = Result(records=scratch.records)
    for kind in (SESSION_TIMER, REVOCATION_TIMER, JOIN_TIMER, SYNC_TIMER):
        key: TimerKey = (kind, group_id, member_id)
        if deadlines.pop(key, None) is not None:
            result.timers.append(TimerRequest(key, None))
    return result


def on_timer(
    group: ConsumerGroup,
    key: TimerKey,
    topics: TopicsImage,
    config: GroupConfig,
    deadlines: dict[TimerKey, int],
    now_ms: int,
) -> Result[ConsumerGroupHeartbeatResponse]:
    """Session or revocation deadline: fence the member if the deadline still stands."""
    deadline = deadlines.get(key)
    member_id = key[2]
    if deadline is None or member_id not in group.members:
        return Result()
    if now_ms < deadline:  # fired early (clock granularity): wait for the real deadline
        return Result(timers=[TimerRequest(key, deadline)])
    return fence_member(group, member_id, topics, config, deadlines)


def delete_records(group: ConsumerGroup) -> list[CoordinatorRecord]:
    """Tombstones for every record of an (empty) consumer group; group metadata last."""
    group_id = group.group_id
    records = [
        CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(group_id, m), None)
        for m in sorted(group.target)
    ]
    records.append(CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(group_id), None))
    records.append(CoordinatorRecord(ConsumerGroupPartitionMetadataKey(group_id), None))
    records.append(CoordinatorRecord(ConsumerGroupMetadataKey(group_id), None))
    return records


__all__ = [
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "consumer_group_heartbeat",
    "delete_records",
    "fence_member",
    "on_timer",
]
