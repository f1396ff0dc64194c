"""Kafka's `__consumer_offsets` record schemas: the keys and values the group coordinator writes.

Every record in `__consumer_offsets` is a plain Kafka record whose key and value carry a
big-endian int16 *version* prefix followed by the struct for that version (Kafka's
`group-coordinator/src/main/resources/common/message/*.json`). The key version says which
record type it is; a record with a null value is a tombstone (the group, offset or member is
gone; compaction later drops it).

Key layouts (key version -> fields)::

    0,1  OffsetCommitKey                      group string, topic string, partition int32
    2    GroupMetadataKey                     group string
    3    ConsumerGroupMetadataKey             group_id string
    4    ConsumerGroupPartitionMetadataKey    group_id string
    5    ConsumerGroupMemberMetadataKey       group_id string, member_id string
    6    ConsumerGroupTargetAssignmentMetadataKey  group_id string
    7    ConsumerGroupTargetAssignmentMemberKey    group_id string, member_id string
    8    ConsumerGroupCurrentMemberAssignmentKey   group_id string, member_id string

Keys are never "flexible": strings are int16 length + UTF-8. Values are flexible from the
version named below: strings become compact (uvarint length+1), arrays compact (uvarint count+1),
bytes compact, and each struct ends with a tagged-field section (uvarint count; unknown tags are
skipped on read, none are written). Non-flexible: string int16 length (-1 = null), bytes int32
length (-1 = null), array int32 count.

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
        server_assignor string?, rebalance_timeout_ms int32
    ConsumerGroupTargetAssignmentMetadataValue v0 (flexible)  assignment_epoch int32
    ConsumerGroupTargetAssignmentMemberValue v0 (flexible)
        topic_partitions [topic_id uuid, partitions [int32]]
    ConsumerGroupCurrentMemberAssignmentValue v0 (flexible)
        member_epoch int32, previous_member_epoch int32, state int8,
        assigned_partitions [topic_id uuid, partitions [int32]],
        partitions_pending_revocation [topic_id uuid, partitions [int32]]

A uuid is 16 raw bytes. Decoding checks every declared length against the bytes that remain and
raises `CorruptRecordError` (never an IndexError or struct.error).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, fields
from typing import ClassVar

from tidelog.coordinator.schema import (
    BYTES,
    I16,
    INT8,
    INT32,
    INT32_ARRAY,
    INT64,
    NULLABLE_STRING,
    STRING,
    STRING_ARRAY,
    UUID,
    FieldSpec,
    Reader,
    Writer,
    read_struct,
    write_struct,
)
from tidelog.errors import CorruptRecordError

# ---------------------------------------------------------------- keys


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int
    VERSION: ClassVar[int] = 1
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("group", STRING),
        FieldSpec("topic", STRING),
        FieldSpec("partition", INT32),
    )


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str
    VERSION: ClassVar[int] = 2
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (FieldSpec("group", STRING),)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group_id: str
    VERSION: ClassVar[int] = 3
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (FieldSpec("group_id", STRING),)


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str
    VERSION: ClassVar[int] = 4
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (FieldSpec("group_id", STRING),)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str
    VERSION: ClassVar[int] = 5
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("group_id", STRING),
        FieldSpec("member_id", STRING),
    )


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str
    VERSION: ClassVar[int] = 6
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (FieldSpec("group_id", STRING),)


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str
    VERSION: ClassVar[int] = 7
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("group_id", STRING),
        FieldSpec("member_id", STRING),
    )


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str
    VERSION: ClassVar[int] = 8
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("group_id", STRING),
        FieldSpec("member_id", STRING),
    )


RecordKey = (
    OffsetCommitKey
    | GroupMetadataKey
    | ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
)

# ---------------------------------------------------------------- values


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
class ConsumerGroupMemberMetadataValue:
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    rebalance_timeout_ms: int = -1
    instance_id: str | None = None
    rack_id: str | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
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

_KEY_CLASSES: dict[int, type] = {
    0: OffsetCommitKey,
    1: OffsetCommitKey,
    2: GroupMetadataKey,
    3: ConsumerGroupMetadataKey,
    4: ConsumerGroupPartitionMetadataKey,
    5: ConsumerGroupMemberMetadataKey,
    6: ConsumerGroupTargetAssignmentMetadataKey,
    7: ConsumerGroupTargetAssignmentMemberKey,
    8: ConsumerGroupCurrentMemberAssignmentKey,
}
_VALUE_CLASSES: dict[type, type] = {
    OffsetCommitKey: OffsetCommitValue,
    GroupMetadataKey: GroupMetadataValue,
    ConsumerGroupMetadataKey: ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey: ConsumerGroupPartitionMetadataValue,
    ConsumerGroupMemberMetadataKey: ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMetadataKey: ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey: ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupCurrentMemberAssignmentKey: ConsumerGroupCurrentMemberAssignmentValue,
}


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One `__consumer_offsets` record: a typed key and a typed value (None = tombstone)."""

    key: RecordKey
    value: RecordValue | None

    def key_bytes(self) -> bytes:
        return encode_key(self.key)

    def value_bytes(self) -> bytes | None:
        return None if self.value is None else encode_value(self.value)


def encode_key(key: RecordKey) -> bytes:
    writer = Writer(flexible=False)
    writer.out += I16.pack(key.VERSION)
    write_struct(writer, key, key.VERSION)
    return bytes(writer.out)


def encode_value(value: RecordValue, version: int | None = None) -> bytes:
    chosen = value.version() if version is None else version
    if not 0 <= chosen <= value.MAX_VERSION:
        raise ValueError(f"{type(value).__name__} has no version {chosen}")
    writer = Writer(flexible=chosen >= value.FLEXIBLE_FROM)
    writer.out += I16.pack(chosen)
    write_struct(writer, value, chosen)
    return bytes(writer.out)


def decode_key(data: bytes | memoryview) -> RecordKey:
    reader = Reader(data, flexible=False)
    version = reader.unpack(I16)
    cls = _KEY_CLASSES.get(version)
    if cls is None:
        raise CorruptRecordError(f"__consumer_offsets: unknown key version {version}")
    key: RecordKey = read_struct(reader, cls, version)
    _expect_end(reader)
    return key


def decode_value(key: RecordKey, data: bytes | memoryview | None) -> RecordValue | None:
    if data is None:
        return None
    cls = _VALUE_CLASSES[type(key)]
    reader = Reader(data, flexible=False)
    version = reader.unpack(I16)
    if not 0 <= version <= cls.MAX_VERSION:  # type: ignore[attr-defined]
        raise CorruptRecordError(f"{cls.__name__}: unknown version {version}")
    reader.flexible = version >= cls.FLEXIBLE_FROM  # type: ignore[attr-defined]
    value: RecordValue = read_struct(reader, cls, version)
    return value


def decode_record(key: bytes | memoryview, value: bytes | memoryview | None) -> CoordinatorRecord:
    typed_key = decode_key(key)
    return CoordinatorRecord(typed_key, decode_value(typed_key, value))


def _expect_end(reader: Reader) -> None:
    if reader.position != len(reader.data):
        raise CorruptRecordError(
            f"__consumer_offsets key has {len(reader.data) - reader.position} trailing bytes"
        )


def field_names(cls: type) -> list[str]:
    """The dataclass fields of a record class (used by tests to check schema coverage)."""
    return [item.name for item in fields(cls)]
