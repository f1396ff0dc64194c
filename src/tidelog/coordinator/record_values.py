"""`__consumer_offsets` record values (Kafka's `*Value.json` schemas); records.py encodes them.

Each value is a big-endian int16 version then the struct for that version. Values are flexible
from the version named below: strings become compact (uvarint length+1), arrays compact
(uvarint count+1), bytes compact, and each struct ends with a tagged-field section (uvarint
count; unknown tags are skipped on read, none are written). Non-flexible: string int16 length
(-1 = null), bytes int32 length (-1 = null), array int32 count. A uuid is 16 raw bytes.

Value layouts::

    OffsetCommitValue v0-4 (flexible 4+)
        offset int64, leader_epoch int32 (v3+, default -1), metadata string,
        commit_timestamp int64, expire_timestamp int64 (v1 only, default -1)
    GroupMetadataValue v0-4 (flexible 4+)
        protocol_type string, generation int32, protocol string?, leader string?,
        current_state_timestamp int64 (v2+, default -1),
        members [member_id string, group_instance_id string? (v3+), client_id string,
                 client_host string, rebalance_timeout int32 (v1+), session_timeout int32,
                 subscription bytes, assignment bytes]
    ConsumerGroupMetadataValue v0 (flexible)                epoch int32
    ConsumerGroupPartitionMetadataValue v0 (flexible)
        topics [topic_id uuid, topic_name string, num_partitions int32]
    ConsumerGroupMemberMetadataValue v0 (flexible)
        instance_id string?, rack_id string?, client_id string, client_host string,
        subscribed_topic_names [string], subscribed_topic_regex string?,
        server_assignor string?, rebalance_timeout_ms int32,
        tag 0: classic_member_metadata (a member using the classic protocol in a mixed group)
            [session_timeout_ms int32, supported_protocols [name string, metadata bytes]]
    ConsumerGroupTargetAssignmentMetadataValue v0 (flexible)  assignment_epoch int32
    ConsumerGroupTargetAssignmentMemberValue v0 (flexible)
        topic_partitions [topic_id uuid, partitions [int32]]
    ConsumerGroupCurrentMemberAssignmentValue v0 (flexible)
        member_epoch int32, previous_member_epoch int32, state int8,
        assigned_partitions [topic_id uuid, partitions [int32]],
        partitions_pending_revocation [topic_id uuid, partitions [int32]]
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from tidelog.coordinator.schema import (
    BYTES,
    INT8,
    INT32,
    INT32_ARRAY,
    INT64,
    NULLABLE_STRING,
    STRING,
    STRING_ARRAY,
    UUID,
    FieldSpec,
)


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1
    MAX_VERSION: ClassVar[int] = 4
    FLEXIBLE_FROM: ClassVar[int] = 4
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("offset", INT64),
        FieldSpec("leader_epoch", INT32, 3),
        FieldSpec("metadata", STRING),
        FieldSpec("commit_timestamp", INT64),
        FieldSpec("expire_timestamp", INT64, 1, 1),
    )

    def version(self) -> int:
        # Kafka writes v1 only when an explicit expire timestamp must be kept, else v3.
        return 1 if self.expire_timestamp >= 0 else 3


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One classic-group member inside GroupMetadataValue."""

    member_id: str
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout: int = 0  # v0 has none: the session timeout applies
    session_timeout: int = 0
    subscription: bytes = b""
    assignment: bytes = b""
    group_instance_id: str | None = None
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("member_id", STRING),
        FieldSpec("group_instance_id", NULLABLE_STRING, 3),
        FieldSpec("client_id", STRING),
        FieldSpec("client_host", STRING),
        FieldSpec("rebalance_timeout", INT32, 1),
        FieldSpec("session_timeout", INT32),
        FieldSpec("subscription", BYTES),
        FieldSpec("assignment", BYTES),
    )


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = ()
    MAX_VERSION: ClassVar[int] = 4
    FLEXIBLE_FROM: ClassVar[int] = 4
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("protocol_type", STRING),
        FieldSpec("generation", INT32),
        FieldSpec("protocol", NULLABLE_STRING),
        FieldSpec("leader", NULLABLE_STRING),
        FieldSpec("current_state_timestamp", INT64, 2),
        FieldSpec("members", MemberMetadata),
    )

    def version(self) -> int:
        return 3


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int
    MAX_VERSION: ClassVar[int] = 0
    FLEXIBLE_FROM: ClassVar[int] = 0
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (FieldSpec("epoch", INT32),)

    def version(self) -> int:
        return 0


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("topic_id", UUID),
        FieldSpec("topic_name", STRING),
        FieldSpec("num_partitions", INT32),
    )


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]
    MAX_VERSION: ClassVar[int] = 0
    FLEXIBLE_FROM: ClassVar[int] = 0
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (FieldSpec("topics", TopicMetadata),)

    def version(self) -> int:
        return 0


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("name", STRING),
        FieldSpec("metadata", BYTES),
    )


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member joining by JoinGroup brought: its session timeout and protocols."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("session_timeout_ms", INT32),
        FieldSpec("supported_protocols", ClassicProtocol),
    )


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    rebalance_timeout_ms: int = -1
    instance_id: str | None = None
    rack_id: str | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None
    MAX_VERSION: ClassVar[int] = 0
    FLEXIBLE_FROM: ClassVar[int] = 0
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("instance_id", NULLABLE_STRING),
        FieldSpec("rack_id", NULLABLE_STRING),
        FieldSpec("client_id", STRING),
        FieldSpec("client_host", STRING),
        FieldSpec("subscribed_topic_names", STRING_ARRAY),
        FieldSpec("subscribed_topic_regex", NULLABLE_STRING),
        FieldSpec("server_assignor", NULLABLE_STRING),
        FieldSpec("rebalance_timeout_ms", INT32),
        FieldSpec("classic_member_metadata", ClassicMemberMetadata, tag=0),
    )

    def version(self) -> int:
        return 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    MAX_VERSION: ClassVar[int] = 0
    FLEXIBLE_FROM: ClassVar[int] = 0
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (FieldSpec("assignment_epoch", INT32),)

    def version(self) -> int:
        return 0


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...]
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("topic_id", UUID),
        FieldSpec("partitions", INT32_ARRAY),
    )


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...]
    MAX_VERSION: ClassVar[int] = 0
    FLEXIBLE_FROM: ClassVar[int] = 0
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (FieldSpec("topic_partitions", TopicPartitions),)

    def version(self) -> int:
        return 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[TopicPartitions, ...] = field(default=())
    MAX_VERSION: ClassVar[int] = 0
    FLEXIBLE_FROM: ClassVar[int] = 0
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("member_epoch", INT32),
        FieldSpec("previous_member_epoch", INT32),
        FieldSpec("state", INT8),
        FieldSpec("assigned_partitions", TopicPartitions),
        FieldSpec("partitions_pending_revocation", TopicPartitions),
    )

    def version(self) -> int:
        return 0


RecordValue = (
    OffsetCommitValue
    | GroupMetadataValue
    | ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
)
