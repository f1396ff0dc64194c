"""The classic protocol answered by a consumer group: classic members of a mixed group.

While a group is migrated online (KIP-848) some members still speak JoinGroup / SyncGroup /
Heartbeat / LeaveGroup. As in Kafka (GroupMetadataManager.classicGroup*ToConsumerGroup), the
consumer-group state machine serves them: there is no leader and no join phase. A JoinGroup
updates the member (subscription read from its embedded ConsumerProtocolSubscription, owned
partitions included), bumps the group epoch if the subscription changed, recomputes the target
with the server-side assignor and reconciles the member, then answers at once with generation
= member epoch, no leader and no member list; SyncGroup answers the member's current
assignment, serialised in its protocol's version. Heartbeat answers REBALANCE_IN_PROGRESS
when the member must rejoin: the group epoch moved past it, it must revoke partitions, or
partitions it waited for were released. Partitions move revoke-first exactly as for consumer
members, so no partition has two owners.

A static member (group.instance.id) rejoining under a new member id takes its old
incarnation's place, assignment included, without a rebalance (Kafka's replaceMember).

Timers: the member's classic session timeout (SESSION_TIMER), the rebalance timeout to rejoin
after REBALANCE_IN_PROGRESS (JOIN_TIMER) and to SyncGroup after the JoinGroup (SYNC_TIMER);
each fences the member when it passes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tidelog.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    reconcile,
)
from tidelog.coordinator.consumer_heartbeat import (
    _advance_epoch_and_target,
    _refresh_subscription_metadata,
    fence_member,
)
from tidelog.coordinator.consumer_protocol import (
    parse_subscription,
    protocol_version,
    serialize_assignment,
)
from tidelog.coordinator.consumer_static import Scratch, replace_member
from tidelog.coordinator.messages import (
    JOIN_TIMER,
    SESSION_TIMER,
    SYNC_TIMER,
    GroupConfig,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMember,
    Result,
    SyncGroupRequest,
    SyncGroupResponse,
    TimerKey,
    TimerRequest,
    TopicsImage,
)
from tidelog.coordinator.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
)
from tidelog.errors import CorruptRecordError, ErrorCode, KafkaError


def supports_protocols(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: type `consumer`, and one protocol every
    classic member also supports."""
    if protocol_type != "consumer" or not names:
        return False
    for member in group.members.values():
        if member.classic is not None:
            names = names & {p.name for p in member.classic.supported_protocols}
    return bool(names)


def _join_error(code: ErrorCode, member_id: str = "") -> Result[JoinGroupResponse]:
    return Result(response=JoinGroupResponse(code, member_id=member_id))


def _arm(
    deadlines: dict[TimerKey, int], key: TimerKey, deadline: int | None, result: Result[Any]
) -> None:
    if deadline is None:
        if deadlines.pop(key, None) is not None:
            result.timers.append(TimerRequest(key, None))
        return
    deadlines[key] = deadline
    result.timers.append(TimerRequest(key, deadline))


def join_group(
    group: ConsumerGroup,
    request: JoinGroupRequest,
    topics: TopicsImage,
    config: GroupConfig,
    deadlines: dict[TimerKey, int],
    now_ms: int,
) -> Result[JoinGroupResponse]:
    group_id = group.group_id
    unknown = not request.member_id
    member_id = request.new_member_id if unknown else request.member_id
    existing = group.members.get(member_id)
    if existing is None and len(group.members) >= config.consumer_max_size:
        return _join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
    names = {name for name, _ in request.protocols}
    if not supports_protocols(group, request.protocol_type, names):
        return _join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
    if unknown and request.require_known_member_id and request.group_instance_id is None:
        return _join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id)
    if existing is not None and existing.classic is None:
        return _join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
    try:
        subscription = parse_subscription(request.protocols[0][1])
    except CorruptRecordError:
        return _join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
    result: Result[JoinGroupResponse] = Result()
    base = group
    if request.group_instance_id is not None:
        holder = next(
            (m for m in group.members.values() if m.instance_id == request.group_instance_id),
            None,
        )
        if holder is not None and holder.member_id != member_id:
            if not unknown:
                return _join_error(ErrorCode.FENCED_INSTANCE_ID, member_id)
            # A static member back under a new id takes its old incarnation's place and
            # assignment (no rebalance), whichever protocol the old one used (Kafka).
            replaced, existing, cancelled = replace_member(group, holder, member_id, deadlines)
            result.records.extend(replaced.records)
            result.timers.extend(cancelled)
            base = replaced.group
    scratch = Scratch(base)
    current = existing or ConsumerMember(member_id)
    updated = replace(
        current,
        client_id=request.client_id or current.client_id,
        client_host=request.client_host or current.client_host,
        subscribed_topic_names=tuple(subscription.topics),
        subscribed_topic_regex=None,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        instance_id=(
            request.group_instance_id
            if request.group_instance_id is not None
            else current.instance_id
        ),
        rack_id=subscription.rack_id if subscription.rack_id is not None else current.rack_id,
        server_assignor=None,
        classic=ClassicMemberMetadata(
            request.session_timeout_ms,
            tuple(ClassicProtocol(name, data) for name, data in request.protocols),
        ),
    )
    bump = existing is None
    if existing is None or updated.metadata_value() != current.metadata_value():
        scratch.emit(ConsumerGroupMemberMetadataKey(group_id, member_id), updated.metadata_value())
        bump = bump or updated.subscribed_topic_names != current.subscribed_topic_names
    bump = _refresh_subscription_metadata(scratch, topics) or bump
    try:
        _advance_epoch_and_target(scratch, config, bump)
    except KafkaError as exc:
        return _join_error(exc.code, member_id)
    owned = {
        topics[name][0]: frozenset(indexes)
        for name, indexes in (subscription.owned or {}).items()
        if name in topics
    }
    before = scratch.group.members[member_id]
    after = before
    for _ in range(3):  # revoke-then-assign may take two steps when nothing is owned
        following = reconcile(
            after,
            scratch.group.target.get(member_id, {}),
            scratch.group.assignment_epoch,
            owned,
            scratch.group.owners(member_id),
        )
        if following == after:
            break
        after = following
    if existing is None or after != before:
        key = ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id)
        scratch.emit(key, after.assignment_value())
    result.records.extend(scratch.records)
    session = now_ms + request.session_timeout_ms
    _arm(deadlines, (SESSION_TIMER, group_id, member_id), session, result)
    _arm(deadlines, (JOIN_TIMER, group_id, member_id), None, result)
    rebalance_timeout = max(request.rebalance_timeout_ms, 1)
    _arm(deadlines, (SYNC_TIMER, group_id, member_id), now_ms + rebalance_timeout, result)
    result.response = JoinGroupResponse(
        ErrorCode.NONE,
        member_id=member_id,
        generation_id=after.member_epoch,
        protocol_type="consumer",
        protocol_name=request.protocols[0][0],
        leader="",
    )
    return result


def _member(
    group: ConsumerGroup, member_id: str, instance_id: str | None
) -> tuple[ConsumerMember | None, ErrorCode]:
    """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is not None:
        holder = next((m for m in group.members.values() if m.instance_id == instance_id), None)
        if holder is None:
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        if holder.member_id != member_id:
            return None, ErrorCode.FENCED_INSTANCE_ID
        member = holder
    else:
        found = group.members.get(member_id)
        if found is None:
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        member = found
    if member.classic is None:
        return None, ErrorCode.UNKNOWN_MEMBER_ID
    return member, ErrorCode.NONE


def _session(
    group: ConsumerGroup, member: ConsumerMember, deadlines: dict[TimerKey, int],
    now_ms: int, result: Result[Any],
) -> None:
    assert member.classic is not None
    deadline = now_ms + member.classic.session_timeout_ms
    _arm(deadlines, (SESSION_TIMER, group.group_id, member.member_id), deadline, result)


def _must_rejoin(group: ConsumerGroup, member: ConsumerMember) -> bool:
    if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS:
        return True
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        wanted = {
            (t, p) for t, items in group.target.get(member.member_id, {}).items() for p in items
        }
        held = {(t, p) for t, items in member.assigned.items() for p in items}
        return not (wanted - held) & group.owners(member.member_id)  # released: come get them
    return False


def _ask_rejoin(
    group: ConsumerGroup, member: ConsumerMember, deadlines: dict[TimerKey, int],
    now_ms: int, result: Result[Any],
) -> None:
    key: TimerKey = (JOIN_TIMER, group.group_id, member.member_id)
    if key not in deadlines:
        _arm(deadlines, key, now_ms + max(member.rebalance_timeout_ms, 1), result)


def sync_group(
    group: ConsumerGroup,
    request: SyncGroupRequest,
    deadlines: dict[TimerKey, int],
    now_ms: int,
) -> Result[SyncGroupResponse]:
    result: Result[SyncGroupResponse] = Result()
    member, error = _member(group, request.member_id, request.group_instance_id)
    if member is None:
        result.response = SyncGroupResponse(error)
        return result
    assert member.classic is not None
    protocols = {p.name: p.metadata for p in member.classic.supported_protocols}
    if request.generation_id != member.member_epoch:
        error = ErrorCode.ILLEGAL_GENERATION
    elif (request.protocol_type is not None and request.protocol_type != "consumer") or (
        request.protocol_name is not None and request.protocol_name not in protocols
    ):
        error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    elif (
        group.group_epoch > member.member_epoch
        and member.state is not MemberState.UNREVOKED_PARTITIONS
    ):
        error = ErrorCode.REBALANCE_IN_PROGRESS
        _ask_rejoin(group, member, deadlines, now_ms, result)
    if error is not ErrorCode.NONE:
        result.response = SyncGroupResponse(error)
        return result
    _arm(deadlines, (SYNC_TIMER, group.group_id, member.member_id), None, result)
    _session(group, member, deadlines, now_ms, result)
    names = {topic_id: name for name, (topic_id, _) in group.subscription_metadata.items()}
    assigned = {names[t]: p for t, p in member.assigned.items() if t in names}
    first = member.classic.supported_protocols[0]
    result.response = SyncGroupResponse(
        ErrorCode.NONE,
        serialize_assignment(protocol_version(first.metadata), assigned),
        request.protocol_type or "consumer",
        request.protocol_name or first.name,
    )
    return result


def heartbeat(
    group: ConsumerGroup,
    request: HeartbeatRequest,
    deadlines: dict[TimerKey, int],
    now_ms: int,
) -> Result[ErrorCode]:
    result: Result[ErrorCode] = Result()
    member, error = _member(group, request.member_id, request.group_instance_id)
    if member is None:
        result.response = error
        return result
    if request.generation_id != member.member_epoch:
        result.response = ErrorCode.ILLEGAL_GENERATION
        return result
    _session(group, member, deadlines, now_ms, result)
    result.response = ErrorCode.NONE
    if _must_rejoin(group, member):
        result.response = ErrorCode.REBALANCE_IN_PROGRESS
        _ask_rejoin(group, member, deadlines, now_ms, result)
    return result


def leave_group(
    group: ConsumerGroup,
    request: LeaveGroupRequest,
    topics: TopicsImage,
    config: GroupConfig,
    deadlines: dict[TimerKey, int],
) -> Result[LeaveGroupResponse]:
    """Each leaving classic member is fenced (its partitions go back to the assignor)."""
    result: Result[LeaveGroupResponse] = Result()
    current = group
    outcomes: list[tuple[LeaveMember, ErrorCode]] = []
    for leaving in request.members:
        if leaving.group_instance_id is not None:
            holder = next(
                (m for m in current.members.values() if m.instance_id == leaving.group_instance_id),
                None,
            )
            if holder is None:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif leaving.member_id and leaving.member_id != holder.member_id:
                error = ErrorCode.FENCED_INSTANCE_ID
            else:
                classic = holder.classic is not None
                error = ErrorCode.NONE if classic else ErrorCode.UNKNOWN_MEMBER_ID
            member_id = holder.member_id if holder is not None else leaving.member_id
        else:
            member_id = leaving.member_id
            found = current.members.get(member_id)
            ok = found is not None and found.classic is not None
            error = ErrorCode.NONE if ok else ErrorCode.UNKNOWN_MEMBER_ID
        if error is ErrorCode.NONE:
            fenced = fence_member(current, member_id, topics, config, deadlines)
            for kind in (JOIN_TIMER, SYNC_TIMER):
                _arm(deadlines, (kind, group.group_id, member_id), None, fenced)
            result.records.extend(fenced.records)
            result.timers.extend(fenced.timers)
            scratch = Scratch(current)
            for record in fenced.records:
                scratch.group.replay(record)
            current = scratch.group
        outcomes.append((leaving, error))
    result.response = LeaveGroupResponse(ErrorCode.NONE, tuple(outcomes))
    return result
