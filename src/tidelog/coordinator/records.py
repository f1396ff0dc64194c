"""Kafka's `__consumer_offsets` records: typed key + value, encoded and decoded.

Every record in `__consumer_offsets` is a plain Kafka record whose key and value carry a
big-endian int16 *version* prefix followed by the struct for that version (Kafka's
`group-coordinator/src/main/resources/common/message/*.json`). The key version says which
record type it is (key layouts: `record_keys.py`); the key type says which value schema
follows (value layouts and the flexible encoding: `record_values.py`). A record with a null
value is a tombstone (the group, offset or member is gone; compaction later drops it).
This module re-exports every key and value class, so callers import them from here.

Decoding checks every declared length against the bytes that remain and raises
`CorruptRecordError` (never an IndexError or struct.error).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from tidelog.coordinator.record_keys import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    GroupMetadataKey,
    OffsetCommitKey,
    RecordKey,
)
from tidelog.coordinator.record_values import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitValue,
    RecordValue,
    TopicMetadata,
    TopicPartitions,
)
from tidelog.coordinator.schema import I16, Reader, Writer, read_struct, write_struct
from tidelog.errors import CorruptRecordError

__all__ = [
    "ClassicMemberMetadata",
    "ClassicProtocol",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "CoordinatorRecord",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "RecordKey",
    "RecordValue",
    "TopicMetadata",
    "TopicPartitions",
    "decode_key",
    "decode_record",
    "decode_value",
    "encode_key",
    "encode_value",
    "field_names",
]

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
