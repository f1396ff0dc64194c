"""The consumer group of KIP-848 (`group.protocol=consumer`): data, replay and reconciliation.

All of a consumer group's state is persisted and changes only through `replay()` of the
ConsumerGroup* records (operations in `consumer_heartbeat.py` produce them):

- group epoch (ConsumerGroupMetadataValue): bumped whenever membership, a subscription or the
  subscribed topics' partition counts change;
- subscribed topic metadata (ConsumerGroupPartitionMetadataValue): what the last assignment saw;
- member metadata (ConsumerGroupMemberMetadataValue): client, subscription (topic names and/or
  a topic regex), assignor, timeouts;
- target assignment (TargetAssignmentMember per member + TargetAssignmentMetadata epoch): what the
  server-side assignor decided for the group epoch;
- current member assignment (CurrentMemberAssignmentValue): where each member is on its way to
  the target — member epoch, state, assigned partitions and partitions pending revocation.

Reconciliation (Kafka's CurrentAssignmentBuilder) moves a member toward its target without ever
letting two members own a partition: partitions the member must give up are revoked first (its
epoch stays until it confirms, by reporting owned partitions without them); only then does it
get the new epoch and the partitions no other member still owns or is revoking.

Regex subscriptions (SubscribedTopicRegex): Kafka compiles them with RE2/J and matches whole
topic names (`Matcher.matches`); here Python `re.fullmatch` stands in. The two agree on the
common subset (classes, alternation, repetition, anchors); Python also accepts lookaround and
backreferences, which RE2/J refuses. A regex is resolved against the broker's topics on every
heartbeat, so topics created later join the subscription at the next heartbeat; what it
resolved to is persisted in the subscription metadata record (Kafka keeps it in separate
ConsumerGroupRegularExpression records, refreshed asynchronously at most every 10 s).
"""

from __future__ import annotations

import enum
import functools
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from tidelog.coordinator.messages import DescribedGroup, DescribedMember, ListedGroup
from tidelog.coordinator.records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    TopicMetadata,
    TopicPartitions,
)
from tidelog.errors import ErrorCode

PartitionSet = Mapping[uuid.UUID, frozenset[int]]


class MemberState(enum.IntEnum):
    """A member's reconciliation state (the int8 `state` of CurrentMemberAssignmentValue)."""

    UNREVOKED_PARTITIONS = 0  # must revoke partitions before it may advance its epoch
    UNRELEASED_PARTITIONS = 1  # at the target epoch, waiting for others to release partitions
    STABLE = 2  # owns exactly its target


def to_topic_partitions(partitions: PartitionSet) -> tuple[TopicPartitions, ...]:
    return tuple(
        TopicPartitions(topic_id, tuple(sorted(items)))
        for topic_id, items in sorted(partitions.items(), key=lambda item: str(item[0]))
        if items
    )


def from_topic_partitions(items: tuple[TopicPartitions, ...]) -> dict[uuid.UUID, frozenset[int]]:
    result: dict[uuid.UUID, frozenset[int]] = {}
    for item in items:
        result[item.topic_id] = result.get(item.topic_id, frozenset()) | frozenset(item.partitions)
    return {topic_id: partitions for topic_id, partitions in result.items() if partitions}


@functools.lru_cache(maxsize=256)
def topic_regex(pattern: str) -> re.Pattern[str]:
    """A subscription regex, compiled once; raises `re.error` if it is not valid."""
    return re.compile(pattern)


def _flatten(partitions: PartitionSet) -> set[tuple[uuid.UUID, int]]:
    return {(topic_id, index) for topic_id, items in partitions.items() for index in items}


def _group(pairs: set[tuple[uuid.UUID, int]]) -> dict[uuid.UUID, frozenset[int]]:
    result: dict[uuid.UUID, set[int]] = {}
    for topic_id, index in pairs:
        result.setdefault(topic_id, set()).add(index)
    return {topic_id: frozenset(items) for topic_id, items in result.items()}


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    member_id: str
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None  # never "" (normalised to None)
    rebalance_timeout_ms: int = -1
    instance_id: str | None = None
    rack_id: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: PartitionSet = field(default_factory=dict)
    pending_revocation: PartitionSet = field(default_factory=dict)
    # A member that joined by JoinGroup (mixed group, KIP-848 online migration): its session
    # timeout and embedded-protocol subscriptions; None for ConsumerGroupHeartbeat members.
    classic: ClassicMemberMetadata | None = None

    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            server_assignor=self.server_assignor,
            classic_member_metadata=self.classic,
        )

    def subscribes_to(self, topic: str) -> bool:
        if topic in self.subscribed_topic_names:
            return True
        regex = self.subscribed_topic_regex
        return regex is not None and topic_regex(regex).fullmatch(topic) is not None

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=int(self.state),
            assigned_partitions=to_topic_partitions(self.assigned),
            partitions_pending_revocation=to_topic_partitions(self.pending_revocation),
        )


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)

    def state(self) -> str:
        """Kafka's ConsumerGroupState name, derived (never stored)."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for member in self.members.values():
            if (
                member.state is not MemberState.STABLE
                or member.member_epoch != self.assignment_epoch
            ):
                return "Reconciling"
        return "Stable"

    def subscribed_topics(self, available: Iterable[str]) -> set[str]:
        """Topic names the members subscribe to: named ones, and `available` ones a regex
        matches (the broker's topics when resolving, the recorded ones otherwise)."""
        names = {name for m in self.members.values() for name in m.subscribed_topic_names}
        patterns = {m.subscribed_topic_regex for m in self.members.values()} - {None}
        if patterns:
            regexes = [topic_regex(p) for p in sorted(p for p in patterns if p is not None)]
            names.update(t for t in available if any(r.fullmatch(t) for r in regexes))
        return names

    def subscribed_topic_names(self) -> set[str]:
        """Subscribed topics as last resolved (regexes against the recorded metadata)."""
        return self.subscribed_topics(self.subscription_metadata)

    def owners(self, excluding: str) -> set[tuple[uuid.UUID, int]]:
        """Partitions other members still own or are still revoking."""
        owned: set[tuple[uuid.UUID, int]] = set()
        for member_id, member in self.members.items():
            if member_id != excluding:
                owned |= _flatten(member.assigned) | _flatten(member.pending_revocation)
        return owned

    def describe(self, default_assignor: str) -> DescribedGroup:
        """ConsumerGroupDescribe's view (Kafka's ConsumerGroup.asDescribedGroup); the assignor
        named is the one most members ask for, else `default_assignor`."""
        votes = [m.server_assignor for m in self.members.values() if m.server_assignor]
        members = tuple(
            DescribedMember(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                member_epoch=m.member_epoch,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assigned=to_topic_partitions(m.assigned),
                target=to_topic_partitions(self.target.get(m.member_id, {})),
                classic=m.classic is not None,
            )
            for m in self.members.values()
        )
        return DescribedGroup(
            self.group_id,
            ErrorCode.NONE,
            self.state(),
            "consumer",
            group_type="consumer",
            group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            assignor_name=max(set(votes), key=votes.count) if votes else default_assignor,
            members=members,
        )

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, "consumer", self.state(), "consumer")

    def validate_epoch(self, member_id: str, member_epoch: int) -> ErrorCode:
        """OffsetCommit v9+ / OffsetFetch v9+ member checks for consumer groups.

        As Kafka's ConsumerGroup.validateMemberEpoch (through 4.2): any epoch other than the
        member's current one, older or newer, is STALE_MEMBER_EPOCH (the client refreshes its
        epoch with a heartbeat and retries); FENCED_MEMBER_EPOCH is for heartbeats only.
        """
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def replay(self, record: CoordinatorRecord) -> None:
        key, value = record.key, record.value
        if isinstance(key, ConsumerGroupMetadataKey):
            if isinstance(value, ConsumerGroupMetadataValue):
                self.group_epoch = value.epoch
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            self.subscription_metadata = {}
            if isinstance(value, ConsumerGroupPartitionMetadataValue):
                self.subscription_metadata = {
                    t.topic_name: (t.topic_id, t.num_partitions) for t in value.topics
                }
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            if isinstance(value, ConsumerGroupMemberMetadataValue):
                member = self.members.get(key.member_id) or ConsumerMember(key.member_id)
                self.members[key.member_id] = replace(
                    member,
                    client_id=value.client_id,
                    client_host=value.client_host,
                    subscribed_topic_names=value.subscribed_topic_names,
                    subscribed_topic_regex=value.subscribed_topic_regex or None,
                    rebalance_timeout_ms=value.rebalance_timeout_ms,
                    instance_id=value.instance_id,
                    rack_id=value.rack_id,
                    server_assignor=value.server_assignor,
                    classic=value.classic_member_metadata,
                )
            else:
                self.members.pop(key.member_id, None)
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
                self.target[key.member_id] = from_topic_partitions(value.topic_partitions)
            else:
                self.target.pop(key.member_id, None)
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
                self.assignment_epoch = value.assignment_epoch
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            member = self.members.get(key.member_id) or ConsumerMember(key.member_id)
            if isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
                self.members[key.member_id] = replace(
                    member,
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=MemberState(value.state),
                    assigned=from_topic_partitions(value.assigned_partitions),
                    pending_revocation=from_topic_partitions(value.partitions_pending_revocation),
                )
            elif key.member_id in self.members:
                self.members[key.member_id] = replace(
                    member, member_epoch=0, assigned={}, pending_revocation={}
                )


def reconcile(
    member: ConsumerMember,
    target: PartitionSet,
    target_epoch: int,
    owned: PartitionSet | None,
    owned_by_others: set[tuple[uuid.UUID, int]],
) -> ConsumerMember:
    """The member's next current assignment on its way to `target` (CurrentAssignmentBuilder)."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        revoking = _flatten(member.pending_revocation)
        if owned is None or _flatten(owned) & revoking:
            return member  # still owns partitions it must give up
    elif member.state is MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    assigned = _flatten(member.assigned)
    wanted = _flatten(target)
    revoke = assigned - wanted
    if revoke:
        return replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=_group(assigned & wanted),
            pending_revocation=_group(revoke),
        )
    addable = wanted - assigned
    free = addable - owned_by_others
    unreleased = addable - free
    return replace(
        member,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        previous_member_epoch=(
            member.member_epoch
            if member.member_epoch != target_epoch
            else member.previous_member_epoch
        ),
        member_epoch=target_epoch,
        assigned=_group(assigned | free),
        pending_revocation={},
    )


def partition_metadata_value(
    metadata: Mapping[str, tuple[uuid.UUID, int]],
) -> ConsumerGroupPartitionMetadataValue:
    return ConsumerGroupPartitionMetadataValue(
        tuple(
            TopicMetadata(topic_id, name, count)
            for name, (topic_id, count) in sorted(metadata.items())
        )
    )
