"""Kafka's `__transaction_state` records: TransactionLogKey and TransactionLogValue.

Every record is a plain Kafka record, key and value each a big-endian int16 version followed by
the struct (Kafka's `transaction-coordinator/.../TransactionLogKey.json` and
`TransactionLogValue.json`); a null value is a tombstone (the transactional id expired).

Key, version 0 (never flexible)::

    transactional_id   string (int16 length + UTF-8)

Value, version 0 (what Tidelog writes) or 1 (flexible: compact lengths, tagged fields; read,
tagged fields PreviousProducerId/NextProducerId/ClientTransactionVersion skipped)::

    producer_id                           int64
    producer_epoch                        int16
    transaction_timeout_ms                int32
    transaction_status                    int8   TransactionState code (see `TransactionState`)
    transaction_partitions                nullable array of
      topic                               string
      partition_ids                       array of int32
    transaction_last_update_timestamp_ms  int64
    transaction_start_timestamp_ms        int64  -1 when no transaction has started

Decoding checks every declared length against the bytes left (the schema engine's
`CorruptRecordError`, never an IndexError).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

from tidelog.coordinator.schema import (
    I16,
    INT8,
    INT16,
    INT32,
    INT32_ARRAY,
    INT64,
    STRING,
    FieldSpec,
    Reader,
    Writer,
    read_struct,
    write_struct,
)
from tidelog.errors import CorruptRecordError

KEY_VERSION = 0
VALUE_VERSION = 0  # version 1 is written by Kafka only for transaction version 2 clients
_MAX_VALUE_VERSION = 1


class TransactionState(enum.IntEnum):
    """Kafka's TransactionState codes (the byte in TransactionLogValue)."""

    EMPTY = 0  # a producer id and epoch, no transaction
    ONGOING = 1  # partitions added: records may be in flight
    PREPARE_COMMIT = 2  # EndTxn(commit) accepted: markers being written
    PREPARE_ABORT = 3  # EndTxn(abort), a fence or a timeout: markers being written
    COMPLETE_COMMIT = 4  # every COMMIT marker written
    COMPLETE_ABORT = 5  # every ABORT marker written
    DEAD = 6  # the transactional id expired (a tombstone follows)
    PREPARE_EPOCH_FENCE = 7  # in memory only in Kafka: an Ongoing txn being fenced


@dataclass(frozen=True, slots=True)
class TransactionLogKey:
    transactional_id: str
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (FieldSpec("transactional_id", STRING),)


@dataclass(frozen=True, slots=True)
class TxnPartitions:
    topic: str
    partition_ids: tuple[int, ...]
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("topic", STRING),
        FieldSpec("partition_ids", INT32_ARRAY),
    )


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: tuple[TxnPartitions, ...]
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    SCHEMA: ClassVar[tuple[FieldSpec, ...]] = (
        FieldSpec("producer_id", INT64),
        FieldSpec("producer_epoch", INT16),
        FieldSpec("transaction_timeout_ms", INT32),
        FieldSpec("transaction_status", INT8),
        FieldSpec("transaction_partitions", TxnPartitions),
        FieldSpec("transaction_last_update_timestamp_ms", INT64),
        FieldSpec("transaction_start_timestamp_ms", INT64),
    )

    def partitions(self) -> frozenset[tuple[str, int]]:
        return frozenset(
            (entry.topic, partition)
            for entry in self.transaction_partitions
            for partition in entry.partition_ids
        )


@dataclass(frozen=True, slots=True)
class TxnLogRecord:
    key: TransactionLogKey
    value: TransactionLogValue | None  # None: tombstone

    def key_bytes(self) -> bytes:
        writer = Writer(flexible=False)
        writer.out += I16.pack(KEY_VERSION)
        write_struct(writer, self.key, KEY_VERSION)
        return bytes(writer.out)

    def value_bytes(self) -> bytes | None:
        if self.value is None:
            return None
        writer = Writer(flexible=False)
        writer.out += I16.pack(VALUE_VERSION)
        write_struct(writer, self.value, VALUE_VERSION)
        return bytes(writer.out)


def group_partitions(partitions: frozenset[tuple[str, int]]) -> tuple[TxnPartitions, ...]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return tuple(TxnPartitions(topic, tuple(ids)) for topic, ids in by_topic.items())


def decode_txn_record(key: bytes | memoryview, value: bytes | memoryview | None) -> TxnLogRecord:
    reader = Reader(key, flexible=False)
    version = reader.unpack(I16)
    if version != KEY_VERSION:
        raise CorruptRecordError(f"__transaction_state: unknown key version {version}")
    typed_key: TransactionLogKey = read_struct(reader, TransactionLogKey, version)
    if reader.position != len(reader.data):
        raise CorruptRecordError("__transaction_state key has trailing bytes")
    if value is None:
        return TxnLogRecord(typed_key, None)
    reader = Reader(value, flexible=False)
    version = reader.unpack(I16)
    if not 0 <= version <= _MAX_VALUE_VERSION:
        raise CorruptRecordError(f"TransactionLogValue: unknown version {version}")
    reader.flexible = version >= 1
    typed_value: TransactionLogValue = read_struct(reader, TransactionLogValue, version)
    if typed_value.transaction_status not in TransactionState._value2member_map_:
        raise CorruptRecordError(f"unknown transaction status {typed_value.transaction_status}")
    return TxnLogRecord(typed_key, typed_value)
