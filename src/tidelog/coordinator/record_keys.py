"""`__consumer_offsets` record keys (Kafka's `*Key.json` schemas); records.py encodes them.

Each key is a big-endian int16 version, which names the record type, then the struct. Keys are
never "flexible": strings are int16 length + UTF-8.

Key layouts (key version -> fields)::

    0,1  OffsetCommitKey                      group string, topic string, partition int32
    2    GroupMetadataKey                     group string
    3    ConsumerGroupMetadataKey             group_id string
    4    ConsumerGroupPartitionMetadataKey    group_id string
    5    ConsumerGroupMemberMetadataKey       group_id string, member_id string
    6    ConsumerGroupTargetAssignmentMetadataKey  group_id string
    7    ConsumerGroupTargetAssignmentMemberKey    group_id string, member_id string
    8    ConsumerGroupCurrentMemberAssignmentKey   group_id string, member_id string
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tidelog.coordinator.schema import INT32, STRING, FieldSpec


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
