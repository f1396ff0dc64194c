"""Kafka's `__share_group_state` records: ShareSnapshot and ShareUpdate (KIP-932).

Every record is a plain Kafka record. Key: int16 record type (0 ShareSnapshot, 1 ShareUpdate)
then, never flexible::

    group_id    string (int16 length + UTF-8)
    topic_id    uuid   16 bytes
    partition   int32

Value: int16 version (0) then a flexible struct (compact lengths as uvarint length+1, a
tagged-field section after each struct, written empty and skipped on read). ShareSnapshotValue::

    snapshot_epoch     int32
    state_epoch        int32
    leader_epoch       int32
    start_offset       int64   the share-partition start offset (SPSO)
    create_timestamp   int64
    write_timestamp    int64
    state_batches      compact array of StateBatch

ShareUpdateValue::

    snapshot_epoch     int32   the snapshot this update applies to
    leader_epoch       int32
    start_offset       int64   -1: unchanged
    state_batches      compact array of StateBatch (only the offsets that changed)

StateBatch::

    first_offset    int64
    last_offset     int64
    delivery_state  int8    0 available, 2 acknowledged, 3 archiving (KIP-1191), 4 archived
    delivery_count  int16

A snapshot is the whole in-flight state of one share partition; an update is applied over the
latest snapshot. Tidelog writes every update cumulative since its snapshot, so keeping only
the latest snapshot and the latest update of a key (compaction) loses nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import ClassVar

from tidelog.coordinator.schema import (
    I16,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    FieldSpec,
    Reader,
    Writer,
    read_struct,
    write_struct,
)
from tidelog.errors import CorruptRecordError

SNAPSHOT_TYPE, UPDATE_TYPE = 0, 1
_DELIVERY_STATES = (0, 2, 3, 4)  # 3: Archiving (KIP-1191)


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("group_id", STRING),
        FieldSpec("topic_id", UUID),
        FieldSpec("partition", INT32),
    )


@dataclass(frozen=True, slots=True)
class PersistedStateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("first_offset", INT64),
        FieldSpec("last_offset", INT64),
        FieldSpec("delivery_state", INT8),
        FieldSpec("delivery_count", INT16),
    )


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[PersistedStateBatch, ...]
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("snapshot_epoch", INT32),
        FieldSpec("state_epoch", INT32),
        FieldSpec("leader_epoch", INT32),
        FieldSpec("start_offset", INT64),
        FieldSpec("create_timestamp", INT64),
        FieldSpec("write_timestamp", INT64),
        FieldSpec("state_batches", PersistedStateBatch),
    )


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersistedStateBatch, ...]
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("snapshot_epoch", INT32),
        FieldSpec("leader_epoch", INT32),
        FieldSpec("start_offset", INT64),
        FieldSpec("state_batches", PersistedStateBatch),
    )


@dataclass(frozen=True, slots=True)
class ShareStateRecord:
    key: SharePartitionKey
    value: ShareSnapshotValue | ShareUpdateValue | None  # None: tombstone (state deleted)
    record_type: int = SNAPSHOT_TYPE

    def key_bytes(self) -> bytes:
        writer = Writer(flexible=False)
        writer.out += I16.pack(self.record_type)
        write_struct(writer, self.key, 0)
        return bytes(writer.out)

    def value_bytes(self) -> bytes | None:
        if self.value is None:
            return None
        writer = Writer(flexible=True)
        writer.out += I16.pack(0)
        write_struct(writer, self.value, 0)
        return bytes(writer.out)


def decode_share_record(
    key: bytes | memoryview, value: bytes | memoryview | None
) -> ShareStateRecord:
    reader = Reader(key, flexible=False)
    record_type = reader.unpack(I16)
    if record_type not in (SNAPSHOT_TYPE, UPDATE_TYPE):
        raise CorruptRecordError(f"__share_group_state: unknown record type {record_type}")
    typed_key: SharePartitionKey = read_struct(reader, SharePartitionKey, 0)
    if reader.position != len(reader.data):
        raise CorruptRecordError("__share_group_state key has trailing bytes")
    if value is None:
        return ShareStateRecord(typed_key, None, record_type)
    reader = Reader(value, flexible=True)
    version = reader.unpack(I16)
    if version != 0:
        raise CorruptRecordError(f"__share_group_state: unknown value version {version}")
    cls = ShareSnapshotValue if record_type == SNAPSHOT_TYPE else ShareUpdateValue
    typed_value: ShareSnapshotValue | ShareUpdateValue = read_struct(reader, cls, 0)
    for batch in typed_value.state_batches:
        if batch.delivery_state not in _DELIVERY_STATES or batch.last_offset < batch.first_offset:
            raise CorruptRecordError(f"__share_group_state: bad state batch {batch}")
    return ShareStateRecord(typed_key, typed_value, record_type)
