"""Requests, responses and results of the group coordinator, as plain values.

The coordinator never sees kio entities: `broker/handlers/groups.py` translates each Kafka
request version into these values and back, so the state machines stay version-free and testable
with numbers. Every operation returns a `Result`:

- `records`: `__consumer_offsets` records to append (the caller appends, then replays them);
- `response`: the answer, or None when the request is *parked* (JoinGroup / SyncGroup held until
  the rebalance completes, as Kafka does) and will come back later through `completions`;
- `completions`: answers for requests parked earlier, by the `waiter_id` the caller gave them;
- `timers`: deadlines to (re)arm or cancel; the caller fires `on_timer(key, now_ms)` at them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from tidelog.coordinator.records import CoordinatorRecord, TopicPartitions
from tidelog.errors import ErrorCode

T = TypeVar("T")

# Timer keys are (kind, group_id, member_id); member_id is "" for group-wide timers.
TimerKey = tuple[str, str, str]
JOIN_TIMER = "join"  # classic: rebalance (join phase) deadline or initial rebalance delay
SYNC_TIMER = "sync"  # classic: the leader's SyncGroup deadline after the join phase
HEARTBEAT_TIMER = "heartbeat"  # classic: member session expiry
PENDING_TIMER = "pending"  # classic: member id handed out with MEMBER_ID_REQUIRED never used
SESSION_TIMER = "session"  # consumer (KIP-848): member session expiry
REVOCATION_TIMER = "revocation"  # consumer: member did not revoke within its rebalance timeout


@dataclass(frozen=True, slots=True)
class TimerRequest:
    key: TimerKey
    deadline_ms: int | None  # None cancels the timer


@dataclass(slots=True)
class Result(Generic[T]):
    records: list[CoordinatorRecord] = field(default_factory=list)
    response: T | None = None
    completions: list[tuple[int, object]] = field(default_factory=list)
    timers: list[TimerRequest] = field(default_factory=list)

    def absorb(self, other: Result[object]) -> None:
        """Take over another result's side effects (its response is the caller's business)."""
        self.records.extend(other.records)
        self.completions.extend(other.completions)
        self.timers.extend(other.timers)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Broker settings the coordinator obeys (Kafka names in the comments)."""

    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_group_size: int = 2**31 - 1  # group.max.size
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5000  # group.consumer.heartbeat.interval.ms
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    consumer_max_size: int = 2**31 - 1  # group.consumer.max.size
    # group.consumer.migration.policy: bidirectional | upgrade | downgrade | disabled
    consumer_migration_policy: str = "bidirectional"

    def upgrade_enabled(self) -> bool:
        """A non-empty classic group may become a consumer group (KIP-848 online migration)."""
        return self.consumer_migration_policy in ("bidirectional", "upgrade")

    def downgrade_enabled(self) -> bool:
        """A consumer group left with classic members only may become a classic group."""
        return self.consumer_migration_policy in ("bidirectional", "downgrade")


# Topics as the coordinator sees them: name -> (topic id, partition count).
TopicsImage = Mapping[str, tuple[uuid.UUID, int]]

# ---------------------------------------------------------------- classic protocol


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    waiter_id: int
    new_member_id: str  # what to hand out if the member has none (client_id + "-" + uuid)
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = False  # JoinGroup v4+


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False  # a returning static leader keeps the current assignment


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    waiter_id: int
    assignments: tuple[tuple[str, bytes], ...] = ()
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[LeaveMember, ...]


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error: ErrorCode
    members: tuple[tuple[LeaveMember, ErrorCode], ...] = ()


# ---------------------------------------------------------------- offsets


@dataclass(frozen=True, slots=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    partitions: tuple[CommitPartition, ...]
    generation_id: int = -1  # the member epoch for consumer (KIP-848) groups
    member_id: str = ""
    group_instance_id: str | None = None
    retention_time_ms: int = -1  # OffsetCommit v2-4 only
    api_version: int = 9


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    partitions: tuple[tuple[str, int, ErrorCode], ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    group_id: str
    partitions: tuple[tuple[str, int], ...] | None  # None: every committed partition
    member_id: str | None = None  # v9+: consumer groups validate member and epoch
    member_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    error: ErrorCode
    partitions: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    error: ErrorCode
    partitions: tuple[tuple[str, int, ErrorCode], ...] = ()


# ---------------------------------------------------------------- admin views


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str  # "classic" or "consumer"


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes = b""
    assignment: bytes = b""
    # consumer groups: member epoch and assigned partitions by topic id
    member_epoch: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    assigned: tuple[TopicPartitions, ...] = ()
    target: tuple[TopicPartitions, ...] = ()
    classic: bool = False  # a classic-protocol member of a consumer group (mixed group)


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    group_type: str = "classic"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: tuple[DescribedMember, ...] = ()


# ---------------------------------------------------------------- consumer protocol (KIP-848)


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    new_member_id: str = ""  # v0: the coordinator names the member on join
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged
    subscribed_topic_regex: str | None = None  # None: unchanged; "": no regex any more
    server_assignor: str | None = None
    owned: tuple[TopicPartitions, ...] | None = None  # None: unchanged since last heartbeat
    client_id: str = ""
    client_host: str = ""
    member_id_required: bool = False  # v1+ (KIP-1082): the client names itself


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponse:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: tuple[TopicPartitions, ...] | None = None
