"""Classic group protocol, part one: JoinGroup and the rebalance machinery.

`classic_sync.py` holds SyncGroup, Heartbeat, LeaveGroup and the timers. Each function takes
the group, the request, the `GroupConfig` and `now_ms`, changes the group's in-memory rebalance
state, and returns a `Result`: the GroupMetadataValue record when a rebalance outcome must be
persisted, the response (or None while the request is parked), answers for parked requests,
and timers. Error codes and their order follow Kafka's GroupCoordinator.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tidelog.coordinator.group import ClassicGroup, ClassicMember, GroupState
from tidelog.coordinator.messages import (
    HEARTBEAT_TIMER,
    JOIN_TIMER,
    PENDING_TIMER,
    SYNC_TIMER,
    GroupConfig,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    Result,
    SyncGroupResponse,
    TimerRequest,
)
from tidelog.coordinator.records import CoordinatorRecord, GroupMetadataKey
from tidelog.errors import ErrorCode


def _join_error(code: ErrorCode, member_id: str = "") -> Result[JoinGroupResponse]:
    return Result(response=JoinGroupResponse(code, member_id=member_id))


def join_group(
    group: ClassicGroup, request: JoinGroupRequest, config: GroupConfig, now_ms: int
) -> Result[JoinGroupResponse]:
    if (
        not config.min_session_timeout_ms
        <= request.session_timeout_ms
        <= (config.max_session_timeout_ms)
    ):
        return _join_error(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
    if group.state is GroupState.DEAD:
        return _join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, request.member_id)
    names = {name for name, _ in request.protocols}
    if not group.supports_protocols(request.protocol_type, names):
        return _join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
    result: Result[JoinGroupResponse] = Result()
    if not request.member_id:
        _join_unknown_member(group, request, config, now_ms, result)
    else:
        _join_known_member(group, request, config, now_ms, result)
    return result


def _new_member(request: JoinGroupRequest, member_id: str) -> ClassicMember:
    return ClassicMember(
        member_id=member_id,
        client_id=request.client_id,
        client_host=request.client_host,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=request.protocols,
        group_instance_id=request.group_instance_id,
    )


def _join_unknown_member(
    group: ClassicGroup,
    request: JoinGroupRequest,
    config: GroupConfig,
    now_ms: int,
    result: Result[JoinGroupResponse],
) -> None:
    member_id = request.new_member_id
    instance_id = request.group_instance_id
    if instance_id is not None and instance_id in group.static_members:
        _replace_static_member(group, request, member_id, config, now_ms, result)
        return
    if len(group.members) + len(group.pending_members) >= config.max_group_size:
        result.response = JoinGroupResponse(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=member_id)
        return
    if instance_id is None and request.require_known_member_id:
        # JoinGroup v4+: hand out the id first, so a retried join cannot leave a ghost member.
        group.pending_members.add(member_id)
        key = (PENDING_TIMER, group.group_id, member_id)
        result.timers.append(TimerRequest(key, now_ms + request.session_timeout_ms))
        result.response = JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
        return
    _add_member_and_rebalance(
        group, _new_member(request, member_id), request, config, now_ms, result
    )


def _join_known_member(
    group: ClassicGroup,
    request: JoinGroupRequest,
    config: GroupConfig,
    now_ms: int,
    result: Result[JoinGroupResponse],
) -> None:
    member_id = request.member_id
    if member_id in group.pending_members:
        group.pending_members.discard(member_id)
        result.timers.append(TimerRequest((PENDING_TIMER, group.group_id, member_id), None))
        member = _new_member(request, member_id)
        _add_member_and_rebalance(group, member, request, config, now_ms, result)
        return
    if group.is_static_fenced(member_id, request.group_instance_id):
        result.response = JoinGroupResponse(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id)
        return
    known = group.members.get(member_id)
    if known is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
        result.response = JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        return
    member = known
    touch(group, member, now_ms, result)
    same_protocols = member.protocols == request.protocols
    if group.state is GroupState.PREPARING_REBALANCE:
        _update_member(member, request, result)
        maybe_complete_join(group, config, now_ms, result)
    elif group.state is GroupState.COMPLETING_REBALANCE and same_protocols:
        result.response = join_response(group, member)  # the member missed the response
    elif group.state is GroupState.STABLE and same_protocols and member_id != group.leader_id:
        result.response = join_response(group, member)
    else:
        # Changed metadata, or the leader rejoining to force a rebalance (Kafka semantics).
        _update_member(member, request, result)
        prepare_rebalance(group, config, now_ms, result)


def _update_member(member: ClassicMember, request: JoinGroupRequest, result: Result[Any]) -> None:
    if member.join_waiter is not None:  # a retried join replaces the parked one
        stale = JoinGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id)
        result.completions.append((member.join_waiter, stale))
    member.protocols = request.protocols
    member.rebalance_timeout_ms = request.rebalance_timeout_ms
    member.session_timeout_ms = request.session_timeout_ms
    member.join_waiter = request.waiter_id


def _add_member_and_rebalance(
    group: ClassicGroup,
    member: ClassicMember,
    request: JoinGroupRequest,
    config: GroupConfig,
    now_ms: int,
    result: Result[JoinGroupResponse],
) -> None:
    member.join_waiter = request.waiter_id
    if not group.members:
        group.protocol_type = request.protocol_type
    group.members[member.member_id] = member
    if member.group_instance_id is not None:
        group.static_members[member.group_instance_id] = member.member_id
    if group.leader_id is None:
        group.leader_id = member.member_id
    group.new_member_added = True
    touch(group, member, now_ms, result)
    if group.state is GroupState.PREPARING_REBALANCE:
        maybe_complete_join(group, config, now_ms, result)
    else:
        prepare_rebalance(group, config, now_ms, result)


def _replace_static_member(
    group: ClassicGroup,
    request: JoinGroupRequest,
    member_id: str,
    config: GroupConfig,
    now_ms: int,
    result: Result[JoinGroupResponse],
) -> None:
    """A static member came back with a new member id: the old id is fenced."""
    instance_id = request.group_instance_id
    assert instance_id is not None
    old_id = group.static_members[instance_id]
    old = group.members.pop(old_id)
    fenced = JoinGroupResponse(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id)
    for waiter in (old.join_waiter, old.sync_waiter):
        if waiter is not None:
            result.completions.append((waiter, fenced))
    result.timers.append(TimerRequest((HEARTBEAT_TIMER, group.group_id, old_id), None))
    group.pending_sync.discard(old_id)
    member = _new_member(request, member_id)
    member.assignment = old.assignment
    group.members[member_id] = member
    group.static_members[instance_id] = member_id
    if group.leader_id == old_id:
        group.leader_id = member_id
    touch(group, member, now_ms, result)
    if group.state is GroupState.STABLE and old.protocols == request.protocols:
        # Nothing changed but the id: persist it and hand back the current generation.
        result.records.append(
            CoordinatorRecord(GroupMetadataKey(group.group_id), group.to_record(now_ms))
        )
        # As Kafka: the leader still gets the member list, but is told to skip assigning.
        result.response = replace(
            join_response(group, member), skip_assignment=member_id == group.leader_id
        )
        return
    member.join_waiter = request.waiter_id
    if group.state is GroupState.PREPARING_REBALANCE:
        maybe_complete_join(group, config, now_ms, result)
    else:
        prepare_rebalance(group, config, now_ms, result)


def join_response(group: ClassicGroup, member: ClassicMember) -> JoinGroupResponse:
    members: tuple[JoinGroupMember, ...] = ()
    if member.member_id == group.leader_id:
        members = tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
            for m in group.members.values()
        )
    return JoinGroupResponse(
        ErrorCode.NONE,
        member_id=member.member_id,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader=group.leader_id or "",
        members=members,
    )


def touch(group: ClassicGroup, member: ClassicMember, now_ms: int, result: Result[Any]) -> None:
    """Any request from a member proves it alive: push its session deadline out."""
    member.session_deadline_ms = now_ms + member.session_timeout_ms
    key = (HEARTBEAT_TIMER, group.group_id, member.member_id)
    result.timers.append(TimerRequest(key, member.session_deadline_ms))


def prepare_rebalance(
    group: ClassicGroup, config: GroupConfig, now_ms: int, result: Result[Any]
) -> None:
    if group.state is GroupState.COMPLETING_REBALANCE:
        # Members waiting for the old generation's assignment must rejoin.
        for member in group.members.values():
            if member.sync_waiter is not None:
                error = SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS)
                result.completions.append((member.sync_waiter, error))
                member.sync_waiter = None
        result.timers.append(TimerRequest((SYNC_TIMER, group.group_id, ""), None))
        group.sync_deadline_ms = None
    if group.state is GroupState.EMPTY and config.initial_rebalance_delay_ms > 0:
        # Kafka's InitialDelayedJoin: wait for more members before the first generation.
        delay = config.initial_rebalance_delay_ms
        group.initial_delay_remaining_ms = max(0, group.max_rebalance_timeout_ms() - delay)
        group.initial_delay_active = True
        group.new_member_added = False
    else:
        delay = group.max_rebalance_timeout_ms()
        group.initial_delay_remaining_ms = 0
        group.initial_delay_active = False
    group.transition(GroupState.PREPARING_REBALANCE, now_ms)
    group.pending_sync.clear()
    group.join_deadline_ms = now_ms + delay
    result.timers.append(TimerRequest((JOIN_TIMER, group.group_id, ""), group.join_deadline_ms))
    maybe_complete_join(group, config, now_ms, result)


def maybe_complete_join(
    group: ClassicGroup, config: GroupConfig, now_ms: int, result: Result[Any]
) -> None:
    # During the initial rebalance delay only the timer completes the join phase.
    if (
        group.state is GroupState.PREPARING_REBALANCE
        and not group.initial_delay_active
        and group.all_members_joined()
    ):
        complete_join(group, now_ms, result)


def complete_join(group: ClassicGroup, now_ms: int, result: Result[Any]) -> None:
    result.timers.append(TimerRequest((JOIN_TIMER, group.group_id, ""), None))
    group.join_deadline_ms = None
    group.initial_delay_remaining_ms = 0
    group.initial_delay_active = False
    for member_id, member in list(group.members.items()):
        if member.join_waiter is None and member.group_instance_id is None:
            drop_member(group, member_id, result)
    group.generation_id += 1
    if not any(m.join_waiter is not None for m in group.members.values()):
        group.members.clear()
        group.static_members.clear()
        group.protocol_name = None
        group.leader_id = None
        group.transition(GroupState.EMPTY, now_ms)
        record = CoordinatorRecord(GroupMetadataKey(group.group_id), group.to_record(now_ms))
        result.records.append(record)
        return
    group.protocol_name = group.select_protocol()
    leader = group.members.get(group.leader_id or "")
    if leader is None or leader.join_waiter is None:
        group.leader_id = next(m for m, v in group.members.items() if v.join_waiter is not None)
    group.transition(GroupState.COMPLETING_REBALANCE, now_ms)
    for member in group.members.values():
        if member.join_waiter is not None:
            result.completions.append((member.join_waiter, join_response(group, member)))
            member.join_waiter = None
            group.pending_sync.add(member.member_id)
            touch(group, member, now_ms, result)
    group.sync_deadline_ms = now_ms + group.max_rebalance_timeout_ms()
    result.timers.append(TimerRequest((SYNC_TIMER, group.group_id, ""), group.sync_deadline_ms))


def drop_member(group: ClassicGroup, member_id: str, result: Result[Any]) -> None:
    member = group.members.pop(member_id)
    if member.group_instance_id is not None:
        group.static_members.pop(member.group_instance_id, None)
    if member.join_waiter is not None:
        gone = JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        result.completions.append((member.join_waiter, gone))
    if member.sync_waiter is not None:
        result.completions.append(
            (member.sync_waiter, SyncGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID))
        )
    group.pending_sync.discard(member_id)
    result.timers.append(TimerRequest((HEARTBEAT_TIMER, group.group_id, member_id), None))
    if group.leader_id == member_id:
        group.leader_id = next(iter(group.members), None)


def remove_member(
    group: ClassicGroup, member_id: str, config: GroupConfig, now_ms: int, result: Result[Any]
) -> None:
    """Leave or session expiry: drop the member, then rebalance the rest."""
    drop_member(group, member_id, result)
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        prepare_rebalance(group, config, now_ms, result)
    else:
        maybe_complete_join(group, config, now_ms, result)
