"""KIP-848 scratch copies and static membership (group.instance.id) as record-producing steps.

`Scratch` is the copy of a consumer group an operation replays its own records on while it
runs (see `consumer_heartbeat`). Static members: member epoch -2 means "gone for a while"; the
member keeps its partitions (no rebalance) until its session expires or a new member id with
the same instance id takes its place at the epoch it left with.
"""

from __future__ import annotations

from dataclasses import replace

from tidelog.coordinator.consumer_group import ConsumerGroup, ConsumerMember, to_topic_partitions
from tidelog.coordinator.messages import (
    JOIN_TIMER,
    REVOCATION_TIMER,
    SESSION_TIMER,
    SYNC_TIMER,
    ConsumerGroupHeartbeatResponse,
    Result,
    TimerKey,
    TimerRequest,
)
from tidelog.coordinator.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    CoordinatorRecord,
    RecordKey,
    RecordValue,
)

LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class Scratch:
    """A copy of the group that records are replayed on while an operation runs."""

    def __init__(self, group: ConsumerGroup) -> None:
        self.group = ConsumerGroup(
            group.group_id,
            group.group_epoch,
            group.assignment_epoch,
            dict(group.members),
            dict(group.target),
            dict(group.subscription_metadata),
        )
        self.records: list[CoordinatorRecord] = []

    def emit(self, key: RecordKey, value: RecordValue | None) -> None:
        record = CoordinatorRecord(key, value)
        self.group.replay(record)
        self.records.append(record)


def static_leave(
    group: ConsumerGroup, member: ConsumerMember
) -> Result[ConsumerGroupHeartbeatResponse]:
    """Epoch -2: a static member goes away for a while; it keeps its partitions (no rebalance)
    until its session expires or a new member with its instance id takes over."""
    scratch = Scratch(group)
    away = replace(
        member,
        member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
        previous_member_epoch=member.member_epoch,
    )
    key = ConsumerGroupCurrentMemberAssignmentKey(group.group_id, member.member_id)
    scratch.emit(key, away.assignment_value())
    return Result(records=scratch.records)


def replace_static(
    group: ConsumerGroup,
    old: ConsumerMember,
    member_id: str,
    deadlines: dict[TimerKey, int],
) -> tuple[Scratch, ConsumerMember]:
    """A static member is back under a new member id: it takes over the old id's target and
    partitions at the epoch it left with, without bumping the group epoch."""
    scratch = Scratch(group)
    group_id = group.group_id
    target = group.target.get(old.member_id, {})
    scratch.emit(ConsumerGroupCurrentMemberAssignmentKey(group_id, old.member_id), None)
    scratch.emit(ConsumerGroupTargetAssignmentMemberKey(group_id, old.member_id), None)
    scratch.emit(ConsumerGroupMemberMetadataKey(group_id, old.member_id), None)
    for kind in (SESSION_TIMER, REVOCATION_TIMER):
        deadlines.pop((kind, group_id, old.member_id), None)
    replacement = replace(
        old,
        member_id=member_id,
        member_epoch=old.previous_member_epoch,
        previous_member_epoch=-1,
    )
    scratch.emit(ConsumerGroupMemberMetadataKey(group_id, member_id), replacement.metadata_value())
    scratch.emit(
        ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(target)),
    )
    key = ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id)
    scratch.emit(key, replacement.assignment_value())
    return scratch, replacement


def replace_member(
    group: ConsumerGroup,
    old: ConsumerMember,
    member_id: str,
    deadlines: dict[TimerKey, int],
) -> tuple[Scratch, ConsumerMember, list[TimerRequest]]:
    """Kafka's replaceMember: a static member's new incarnation (`member_id`) takes the place
    of one on the other protocol (a classic member rolled to the consumer protocol or back):
    the old records go, the new id gets its metadata, target and current assignment at epoch
    0 (no group epoch bump). Returns the scratch, the new member, the old member's timers
    cancelled."""
    scratch = Scratch(group)
    group_id = group.group_id
    target = group.target.get(old.member_id, {})
    scratch.emit(ConsumerGroupCurrentMemberAssignmentKey(group_id, old.member_id), None)
    scratch.emit(ConsumerGroupTargetAssignmentMemberKey(group_id, old.member_id), None)
    scratch.emit(ConsumerGroupMemberMetadataKey(group_id, old.member_id), None)
    cancelled: list[TimerRequest] = []
    for kind in (SESSION_TIMER, REVOCATION_TIMER, JOIN_TIMER, SYNC_TIMER):
        key: TimerKey = (kind, group_id, old.member_id)
        if deadlines.pop(key, None) is not None:
            cancelled.append(TimerRequest(key, None))
    new = replace(old, member_id=member_id, member_epoch=0, previous_member_epoch=0)
    scratch.emit(ConsumerGroupMemberMetadataKey(group_id, member_id), new.metadata_value())
    scratch.emit(
        ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(target)),
    )
    key_c = ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id)
    scratch.emit(key_c, new.assignment_value())
    return scratch, new, cancelled
