"""Classic group protocol, part two: SyncGroup, Heartbeat, LeaveGroup and the group timers.

Same contract as `classic.py` (group, request, config, now_ms) -> Result; the rebalance
machinery (prepare, complete join, drop member) lives there.
"""

from __future__ import annotations

from tidelog.coordinator.classic import (
    complete_join,
    drop_member,
    maybe_complete_join,
    prepare_rebalance,
    remove_member,
    touch,
)
from tidelog.coordinator.group import ClassicGroup, ClassicMember, GroupState
from tidelog.coordinator.messages import (
    HEARTBEAT_TIMER,
    JOIN_TIMER,
    PENDING_TIMER,
    SYNC_TIMER,
    GroupConfig,
    HeartbeatRequest,
    LeaveGroupRequest,
    LeaveGroupResponse,
    Result,
    SyncGroupRequest,
    SyncGroupResponse,
    TimerKey,
    TimerRequest,
)
from tidelog.coordinator.records import CoordinatorRecord, GroupMetadataKey
from tidelog.errors import ErrorCode


def sync_group(
    group: ClassicGroup, request: SyncGroupRequest, config: GroupConfig, now_ms: int
) -> Result[SyncGroupResponse]:
    result: Result[SyncGroupResponse] = Result()
    error = _member_error(
        group, request.member_id, request.group_instance_id, request.generation_id
    )
    if error is ErrorCode.NONE and (
        (request.protocol_type is not None and request.protocol_type != group.protocol_type)
        or (request.protocol_name is not None and request.protocol_name != group.protocol_name)
    ):
        error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    if error is ErrorCode.NONE and group.state is GroupState.PREPARING_REBALANCE:
        error = ErrorCode.REBALANCE_IN_PROGRESS
    if error is not ErrorCode.NONE:
        result.response = SyncGroupResponse(error)
        return result
    member = group.members[request.member_id]
    touch(group, member, now_ms, result)
    group.pending_sync.discard(member.member_id)
    if group.state is GroupState.STABLE:
        result.response = _sync_response(group, member)
        return result
    member.sync_waiter = request.waiter_id
    if member.member_id == group.leader_id:
        given = dict(request.assignments)
        for item in group.members.values():
            item.assignment = given.get(item.member_id, b"")
        group.transition(GroupState.STABLE, now_ms)
        record = CoordinatorRecord(GroupMetadataKey(group.group_id), group.to_record(now_ms))
        result.records.append(record)
        result.timers.append(TimerRequest((SYNC_TIMER, group.group_id, ""), None))
        group.sync_deadline_ms = None
        for item in group.members.values():
            if item.sync_waiter is not None:
                result.completions.append((item.sync_waiter, _sync_response(group, item)))
                item.sync_waiter = None
    return result


def _sync_response(group: ClassicGroup, member: ClassicMember) -> SyncGroupResponse:
    return SyncGroupResponse(
        ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
    )


def _member_error(
    group: ClassicGroup, member_id: str, instance_id: str | None, generation_id: int
) -> ErrorCode:
    if group.state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if group.is_static_fenced(member_id, instance_id):
        return ErrorCode.FENCED_INSTANCE_ID
    if member_id not in group.members or group.state is GroupState.EMPTY:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def heartbeat(
    group: ClassicGroup, request: HeartbeatRequest, config: GroupConfig, now_ms: int
) -> Result[ErrorCode]:
    result: Result[ErrorCode] = Result()
    error = _member_error(
        group, request.member_id, request.group_instance_id, request.generation_id
    )
    if error is ErrorCode.NONE:
        touch(group, group.members[request.member_id], now_ms, result)
        if group.state is GroupState.PREPARING_REBALANCE:
            error = ErrorCode.REBALANCE_IN_PROGRESS
    result.response = error
    return result


def leave_group(
    group: ClassicGroup, request: LeaveGroupRequest, config: GroupConfig, now_ms: int
) -> Result[LeaveGroupResponse]:
    result: Result[LeaveGroupResponse] = Result()
    if group.state is GroupState.DEAD:
        result.response = LeaveGroupResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return result
    outcomes = []
    for leaving in request.members:
        error = ErrorCode.NONE
        if leaving.group_instance_id is not None:
            member_id = group.static_members.get(leaving.group_instance_id)
            if member_id is None:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif leaving.member_id and leaving.member_id != member_id:
                error = ErrorCode.FENCED_INSTANCE_ID
            else:
                remove_member(group, member_id, config, now_ms, result)
        elif leaving.member_id in group.pending_members:
            group.pending_members.discard(leaving.member_id)
            key = (PENDING_TIMER, group.group_id, leaving.member_id)
            result.timers.append(TimerRequest(key, None))
            maybe_complete_join(group, config, now_ms, result)
        elif leaving.member_id in group.members:
            remove_member(group, leaving.member_id, config, now_ms, result)
        else:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        outcomes.append((leaving, error))
    result.response = LeaveGroupResponse(ErrorCode.NONE, tuple(outcomes))
    return result


def on_timer(group: ClassicGroup, key: TimerKey, config: GroupConfig, now_ms: int) -> Result[None]:
    """A deadline armed earlier passed; stale timers (state moved on) change nothing.

    A timer that fires before its deadline (clock granularity, a wall-clock step) is re-armed
    for the deadline instead of being dropped."""
    result: Result[None] = Result()
    kind, _, member_id = key
    if kind == JOIN_TIMER:
        deadline = group.join_deadline_ms
        if group.state is not GroupState.PREPARING_REBALANCE or deadline is None:
            return result
        if now_ms < deadline:
            result.timers.append(TimerRequest(key, deadline))
            return result
        if (
            group.initial_delay_active
            and group.initial_delay_remaining_ms > 0
            and (group.new_member_added)
        ):
            # More members arrived during the initial delay: wait another delay (bounded).
            extra = min(config.initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms -= extra
            group.new_member_added = False
            group.join_deadline_ms = now_ms + extra
            result.timers.append(TimerRequest(key, group.join_deadline_ms))
            return result
        complete_join(group, now_ms, result)
    elif kind == SYNC_TIMER:
        deadline = group.sync_deadline_ms
        if group.state is not GroupState.COMPLETING_REBALANCE or deadline is None:
            return result
        if now_ms < deadline:
            result.timers.append(TimerRequest(key, deadline))
        else:
            for missing in sorted(group.pending_sync):
                drop_member(group, missing, result)
            prepare_rebalance(group, config, now_ms, result)
    elif kind == HEARTBEAT_TIMER:
        member = group.members.get(member_id)
        if member is None:
            return result
        if now_ms < member.session_deadline_ms:
            result.timers.append(TimerRequest(key, member.session_deadline_ms))
            return result
        if member.join_waiter is not None or member.sync_waiter is not None:
            touch(group, member, now_ms, result)  # parked requests keep a member alive
            return result
        remove_member(group, member_id, config, now_ms, result)
    elif kind == PENDING_TIMER and member_id in group.pending_members:
        group.pending_members.discard(member_id)
        maybe_complete_join(group, config, now_ms, result)
    return result
