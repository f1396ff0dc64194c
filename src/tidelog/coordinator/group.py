"""The classic group: states, members and the persisted view (GroupMetadataValue).

A classic group moves through Kafka's five states; `TRANSITIONS` is the table of allowed moves
(target -> states it may be entered from). The join/sync/heartbeat/leave operations live in
`classic.py`; this module holds the data and the bits both the operations and replay use.

Persistence follows Kafka's group coordinator: only the outcome of a rebalance is written — the
GroupMetadataValue after the leader's SyncGroup (generation, protocol, leader, every member's
subscription and assignment) and after the group empties. The join phase in between (who has
rejoined, parked JoinGroup/SyncGroup requests, deadlines) is in-memory only; after a coordinator
restart members simply rejoin, exactly as with Kafka. `replay()` applies a GroupMetadataValue by
merging it into the group, so replaying the record an operation just produced changes nothing,
and replaying a whole partition rebuilds every group at rest.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

from tidelog.coordinator.messages import DescribedGroup, DescribedMember, ListedGroup
from tidelog.coordinator.records import GroupMetadataValue, MemberMetadata
from tidelog.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    """No members; committed offsets may remain (and expire after offsets retention)."""
    PREPARING_REBALANCE = "PreparingRebalance"
    """Members are (re)joining; JoinGroup requests are parked until all joined or the deadline."""
    COMPLETING_REBALANCE = "CompletingRebalance"
    """The new generation is out; waiting for the leader's SyncGroup with the assignment."""
    STABLE = "Stable"
    """Assignment delivered; members heartbeat."""
    DEAD = "Dead"
    """The group was deleted; requests are answered with COORDINATOR_NOT_AVAILABLE."""


TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalTransition(AssertionError):
    """A programmer error: an operation tried a move the table forbids."""


@dataclass(slots=True)
class ClassicMember:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    assignment: bytes = b""
    join_waiter: int | None = None  # parked JoinGroup (waiter id)
    sync_waiter: int | None = None  # parked SyncGroup
    session_deadline_ms: int = 0

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # told MEMBER_ID_REQUIRED
    pending_sync: set[str] = field(default_factory=set)  # joined, SyncGroup not yet seen
    state_timestamp_ms: int = -1
    join_deadline_ms: int | None = None
    sync_deadline_ms: int | None = None
    initial_delay_active: bool = False  # first join phase of an empty group: wait for more
    initial_delay_remaining_ms: int = 0  # how much longer the initial delay may still extend
    new_member_added: bool = False

    def transition(self, target: GroupState, now_ms: int) -> None:
        if self.state not in TRANSITIONS[target]:
            raise IllegalTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.state = target
        self.state_timestamp_ms = now_ms

    def is_static_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static member whose instance id now belongs to another member id is fenced."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if not names or not protocol_type:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        return bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        members = iter(self.members.values())
        candidates = set(next(members).protocol_names())
        for member in members:
            candidates &= set(member.protocol_names())
        return candidates

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        order: list[str] = []
        for member in self.members.values():
            choice = next(name for name in member.protocol_names() if name in candidates)
            if choice not in votes:
                order.append(choice)
            votes[choice] = votes.get(choice, 0) + 1
        return max(order, key=lambda name: votes[name])  # ties: the first one voted for

    def all_members_joined(self) -> bool:
        awaiting = sum(1 for member in self.members.values() if member.join_waiter is not None)
        return awaiting == len(self.members) and not self.pending_members

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol only); None if unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def describe(self) -> DescribedGroup:
        """DescribeGroups' view (Kafka's ClassicGroup.describe): protocol, metadata and
        assignments only while the group is stable."""
        stable = self.state is GroupState.STABLE
        members = tuple(
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(self.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in self.members.values()
        )
        return DescribedGroup(
            self.group_id,
            ErrorCode.NONE,
            self.state.value,
            self.protocol_type or "",
            (self.protocol_name or "") if stable else "",
            members=members,
        )

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type or "", self.state.value, "classic")

    def to_record(self, now_ms: int) -> GroupMetadataValue:
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=now_ms,
            members=tuple(
                MemberMetadata(
                    member_id=member.member_id,
                    group_instance_id=member.group_instance_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    rebalance_timeout=member.rebalance_timeout_ms,
                    session_timeout=member.session_timeout_ms,
                    subscription=member.metadata(self.protocol_name),
                    assignment=member.assignment,
                )
                for member in self.members.values()
            ),
        )

    def replay(self, value: GroupMetadataValue) -> None:
        """Merge a persisted GroupMetadataValue: a group at rest takes exactly its content."""
        self.protocol_type = value.protocol_type or None
        self.generation_id = value.generation
        self.protocol_name = value.protocol
        self.leader_id = value.leader
        self.state_timestamp_ms = value.current_state_timestamp
        persisted = {member.member_id for member in value.members}
        for member_id in [m for m in self.members if m not in persisted]:
            del self.members[member_id]
        for item in value.members:
            member = self.members.get(item.member_id)
            if member is None:
                member = ClassicMember(
                    member_id=item.member_id,
                    client_id=item.client_id,
                    client_host=item.client_host,
                    rebalance_timeout_ms=item.rebalance_timeout or item.session_timeout,
                    session_timeout_ms=item.session_timeout,
                    protocol_type=value.protocol_type,
                    protocols=((value.protocol or "", item.subscription),),
                    group_instance_id=item.group_instance_id,
                )
                self.members[item.member_id] = member
            elif member.metadata(value.protocol) != item.subscription:
                # A later generation of a member already known (its subscription changed).
                member.protocols = ((value.protocol or "", item.subscription),)
            member.assignment = item.assignment
        self.static_members = {
            m.group_instance_id: m.member_id
            for m in self.members.values()
            if m.group_instance_id is not None
        }
        self.pending_sync.clear()
        if self.state is GroupState.PREPARING_REBALANCE and self.members:
            # Only a downgraded group (KIP-848 migration) is written while rebalancing: it was
            # put in place and told to rebalance; its record must not end that.
            return
        self.state = GroupState.STABLE if self.members else GroupState.EMPTY


def validate_commit(
    group: ClassicGroup, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode:
    """Kafka's fencing of OffsetCommit for a classic group (also TxnOffsetCommit rules)."""
    if group.state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation_id < 0 and group.state is GroupState.EMPTY:
        # Kafka's validateOffsetCommit: an admin client or a consumer outside group
        # management (e.g. assign() with group.protocol=consumer, which sends its member id)
        # may commit to an empty group whatever member id it carries.
        return ErrorCode.NONE
    if generation_id >= 0 or member_id or instance_id is not None:
        if group.is_static_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is GroupState.COMPLETING_REBALANCE:
            # The member has the new generation but not its assignment yet.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE
    if group.state is not GroupState.EMPTY:
        # Offsets of an active group are written by its members only.
        return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.NONE


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def parse_subscription_topics(metadata: bytes) -> list[str] | None:
    """Topics of a ConsumerProtocolSubscription (int16 version, int32 count, int16-length
    strings; later fields ignored). None when the bytes do not parse."""
    try:
        position = 2
        (count,) = _I32.unpack_from(metadata, position)
        position += 4
        if count < 0 or count > len(metadata):
            return None
        topics: list[str] = []
        for _ in range(count):
            (length,) = _I16.unpack_from(metadata, position)
            position += 2
            if length < 0 or position + length > len(metadata):
                return None
            topics.append(metadata[position : position + length].decode())
            position += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
