"""KIP-848 online migration: a group changes type while its members are rolled.

Upgrade (Kafka's convertToConsumerGroup): a non-empty classic group using the embedded consumer
protocol receives a ConsumerGroupHeartbeat, and `group.consumer.migration.policy` allows it. Its
members become consumer-group members that keep their JoinGroup metadata (`classic`): member
epoch = the classic generation, state STABLE, assigned = target = their last SyncGroup
assignment. Records: the GroupMetadata tombstone, then member metadata, group epoch, target
assignment, current assignments — replaying them rebuilds the same group after a failover.
Parked JoinGroup/SyncGroup requests answer REBALANCE_IN_PROGRESS (the members rejoin into the
consumer group; `classic_members.py` serves them).

Downgrade (Kafka's convertToClassicGroup): the last member using the consumer protocol leaves or
is fenced while classic members remain. Records: every consumer-group record tombstoned, then a
GroupMetadataValue of the classic group (generation = the group epoch, each member's target
assignment serialised in its protocol's version). The classic group is put in place directly
and starts a rebalance (PreparingRebalance): the members rejoin with JoinGroup, as in Kafka.
"""

from __future__ import annotations

from tidelog.coordinator import classic
from tidelog.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    to_topic_partitions,
)
from tidelog.coordinator.consumer_protocol import (
    parse_assignment,
    parse_subscription,
    protocol_version,
    serialize_assignment,
)
from tidelog.coordinator.group import ClassicGroup, ClassicMember, GroupState
from tidelog.coordinator.messages import (
    HEARTBEAT_TIMER,
    JOIN_TIMER,
    PENDING_TIMER,
    REVOCATION_TIMER,
    SESSION_TIMER,
    SYNC_TIMER,
    GroupConfig,
    JoinGroupRequest,
    JoinGroupResponse,
    Result,
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
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    GroupMetadataKey,
)
from tidelog.errors import CorruptRecordError, ErrorCode

CONSUMER_TIMERS = (SESSION_TIMER, REVOCATION_TIMER, JOIN_TIMER, SYNC_TIMER)


def uses_consumer_protocol(group: ClassicGroup) -> bool:
    return group.protocol_type == "consumer"


def can_upgrade(group: ClassicGroup, config: GroupConfig) -> bool:
    """Kafka's validateOnlineUpgrade."""
    return (
        config.upgrade_enabled()
        and uses_consumer_protocol(group)
        and len(group.members) <= config.consumer_max_size
    )


def can_downgrade(group: ConsumerGroup, leaving_member_id: str, config: GroupConfig) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember: the leaving member is the last one on
    the consumer protocol and classic members remain."""
    leaving = group.members.get(leaving_member_id)
    if leaving is None or leaving.classic is not None or len(group.members) <= 1:
        return False
    others = [m for m in group.members.values() if m.member_id != leaving_member_id]
    return (
        all(m.classic is not None for m in others)
        and config.downgrade_enabled()
        and len(others) <= config.max_group_size
    )


def replaced_last_consumer_member(
    group: ConsumerGroup, request: JoinGroupRequest, config: GroupConfig
) -> str | None:
    """Kafka's validateOnlineDowngradeWithReplacedMemberId: the member id a classic static
    member's JoinGroup replaces if that is the last consumer-protocol member and the policy
    allows a downgrade; else None."""
    if request.group_instance_id is None or request.member_id:
        return None
    holder = next(
        (m for m in group.members.values() if m.instance_id == request.group_instance_id), None
    )
    if holder is None or holder.classic is not None:
        return None
    others = [m for m in group.members.values() if m.member_id != holder.member_id]
    if any(m.classic is None for m in others):
        return None
    if not config.downgrade_enabled() or len(group.members) > config.max_group_size:
        return None
    return holder.member_id


def _member_metadata(group: ClassicGroup, member: ClassicMember) -> bytes:
    if group.protocol_name is not None:
        return member.metadata(group.protocol_name)
    return member.protocols[0][1] if member.protocols else b""


def to_consumer_group(
    group: ClassicGroup,
    topics: TopicsImage,
    deadlines: dict[TimerKey, int],
    now_ms: int,
) -> tuple[ConsumerGroup, Result[None]]:
    """The consumer group a classic group becomes, and the conversion's records, answers for
    parked requests and timers (`deadlines` gets the members' session deadlines).

    Raises CorruptRecordError when a member's embedded protocol bytes do not parse (Kafka then
    refuses the upgrade with GROUP_ID_NOT_FOUND)."""
    group_id = group.group_id
    result: Result[None] = Result()
    result.records.append(CoordinatorRecord(GroupMetadataKey(group_id), None))
    generation = group.generation_id
    members: list[ConsumerMember] = []
    for item in group.members.values():
        subscription = parse_subscription(_member_metadata(group, item))
        assigned_names = parse_assignment(item.assignment)
        assigned = {
            topics[name][0]: frozenset(p for p in indexes if 0 <= p < topics[name][1])
            for name, indexes in assigned_names.items()
            if name in topics
        }
        members.append(
            ConsumerMember(
                item.member_id,
                client_id=item.client_id,
                client_host=item.client_host,
                subscribed_topic_names=subscription.topics,
                rebalance_timeout_ms=item.rebalance_timeout_ms,
                instance_id=item.group_instance_id,
                rack_id=subscription.rack_id,
                member_epoch=generation,
                previous_member_epoch=generation,
                state=MemberState.STABLE,
                assigned={t: p for t, p in assigned.items() if p},
                classic=ClassicMemberMetadata(
                    item.session_timeout_ms,
                    tuple(ClassicProtocol(name, data) for name, data in item.protocols),
                ),
            )
        )
    for member in members:
        key = ConsumerGroupMemberMetadataKey(group_id, member.member_id)
        result.records.append(CoordinatorRecord(key, member.metadata_value()))
    epoch = ConsumerGroupMetadataValue(generation)
    result.records.append(CoordinatorRecord(ConsumerGroupMetadataKey(group_id), epoch))
    for member in members:
        key_t = ConsumerGroupTargetAssignmentMemberKey(group_id, member.member_id)
        value = ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(member.assigned))
        result.records.append(CoordinatorRecord(key_t, value))
    result.records.append(
        CoordinatorRecord(
            ConsumerGroupTargetAssignmentMetadataKey(group_id),
            ConsumerGroupTargetAssignmentMetadataValue(generation),
        )
    )
    for member in members:
        key_c = ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id)
        result.records.append(CoordinatorRecord(key_c, member.assignment_value()))
    converted = ConsumerGroup(group_id)
    for record in result.records[1:]:
        converted.replay(record)
    # The classic group's parked requests rejoin; its timers go; sessions carry over.
    for item in group.members.values():
        if item.join_waiter is not None:
            stale = JoinGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS, member_id=item.member_id)
            result.completions.append((item.join_waiter, stale))
        if item.sync_waiter is not None:
            stale_sync = SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS)
            result.completions.append((item.sync_waiter, stale_sync))
        result.timers.append(TimerRequest((HEARTBEAT_TIMER, group_id, item.member_id), None))
        session: TimerKey = (SESSION_TIMER, group_id, item.member_id)
        deadlines[session] = now_ms + item.session_timeout_ms
        result.timers.append(TimerRequest(session, deadlines[session]))
    for pending in group.pending_members:
        result.timers.append(TimerRequest((PENDING_TIMER, group_id, pending), None))
    result.timers.append(TimerRequest((JOIN_TIMER, group_id, ""), None))
    result.timers.append(TimerRequest((SYNC_TIMER, group_id, ""), None))
    return converted, result


def to_classic_group(
    group: ConsumerGroup,
    leaving_member_id: str,
    config: GroupConfig,
    deadlines: dict[TimerKey, int],
    now_ms: int,
    replacement: ConsumerMember | None = None,
) -> tuple[ClassicGroup, Result[None]]:
    """The classic group a consumer group becomes when `leaving_member_id` (its last member on
    the consumer protocol) goes, already preparing a rebalance; and the conversion's records
    (every consumer-group record tombstoned, then the classic GroupMetadataValue) and timers.

    With `replacement` (a classic static member that took the leaving one's instance id), the
    replacement joins with the leaving member's target and nothing rebalances (Kafka)."""
    group_id = group.group_id
    result: Result[None] = Result()
    for member_id in sorted(group.members):
        for key in (
            ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id),
            ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
            ConsumerGroupMemberMetadataKey(group_id, member_id),
        ):
            result.records.append(CoordinatorRecord(key, None))
    for member_id in sorted(set(group.target) - set(group.members)):
        key_t = ConsumerGroupTargetAssignmentMemberKey(group_id, member_id)
        result.records.append(CoordinatorRecord(key_t, None))
    for key_g in (
        ConsumerGroupTargetAssignmentMetadataKey(group_id),
        ConsumerGroupPartitionMetadataKey(group_id),
        ConsumerGroupMetadataKey(group_id),
    ):
        result.records.append(CoordinatorRecord(key_g, None))
    for timer_key in [k for k in deadlines if k[1] == group_id and k[0] in CONSUMER_TIMERS]:
        del deadlines[timer_key]
        result.timers.append(TimerRequest(timer_key, None))

    names = {topic_id: name for name, (topic_id, _) in group.subscription_metadata.items()}
    converted = ClassicGroup(
        group_id,
        state=GroupState.STABLE,
        generation_id=group.group_epoch,
        protocol_type="consumer",
        state_timestamp_ms=now_ms,
    )
    joining = [] if replacement is None else [replacement]
    for member in [*group.members.values(), *joining]:
        if member.member_id == leaving_member_id or member.classic is None:
            continue
        protocols = tuple((p.name, p.metadata) for p in member.classic.supported_protocols)
        taken = leaving_member_id if member is replacement else member.member_id
        target = group.target.get(taken, {})
        assignment = {names[t]: p for t, p in target.items() if t in names}
        version = protocol_version(protocols[0][1]) if protocols else 0
        converted.members[member.member_id] = ClassicMember(
            member_id=member.member_id,
            client_id=member.client_id,
            client_host=member.client_host,
            rebalance_timeout_ms=(
                member.rebalance_timeout_ms
                if member.rebalance_timeout_ms > 0
                else member.classic.session_timeout_ms
            ),
            session_timeout_ms=member.classic.session_timeout_ms,
            protocol_type="consumer",
            protocols=protocols,
            group_instance_id=member.instance_id,
            assignment=serialize_assignment(version, assignment),
        )
        if member.instance_id is not None:
            converted.static_members[member.instance_id] = member.member_id
    converted.leader_id = next(iter(converted.members), None)
    converted.protocol_name = converted.select_protocol()
    result.records.append(
        CoordinatorRecord(GroupMetadataKey(group_id), converted.to_record(now_ms))
    )
    for item in converted.members.values():
        classic.touch(converted, item, now_ms, result)
    if replacement is None:
        classic.prepare_rebalance(converted, config, now_ms, result)
    return converted, result


__all__ = [
    "CONSUMER_TIMERS",
    "CorruptRecordError",
    "can_downgrade",
    "can_upgrade",
    "to_classic_group",
    "to_consumer_group",
]
