"""Control records: the transaction markers a coordinator writes into a partition.

A control batch has the control attribute (bit 5) set and, for transaction markers, the
transactional bit too; it holds one record whose key and value are::

    key    version int16 (0)   type int16 (0 abort, 1 commit; KRaft uses 2 and up)
    value  version int16 (0)   coordinatorEpoch int32      (end-transaction markers only)

Newer versions may append fields; like Kafka, readers take the fields they know and ignore the
rest. A key or value too short for its fields raises CorruptRecordError.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from tidelog.errors import CorruptRecordError
from tidelog.records.batch import RecordBatch, TimestampType
from tidelog.records.builder import NewRecord, build_batch
from tidelog.records.record import Record, iter_records

CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    # KRaft's metadata log uses these; Tidelog only passes them through.
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    control_type: ControlRecordType  # ABORT or COMMIT
    coordinator_epoch: int


def encode_control_key(control_type: ControlRecordType) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, int(control_type))


def parse_control_key(key: bytes | None) -> int:
    """The control type in a control record's key: a ControlRecordType value, or another int
    for a type this version does not know (Kafka's UNKNOWN)."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("control record key shorter than 4 bytes")
    version, control_type = _KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"control record key version {version}")
    return int(control_type)


def encode_end_transaction_value(coordinator_epoch: int) -> bytes:
    return _END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def parse_end_transaction_marker(record: Record) -> EndTransactionMarker:
    """Read an abort or commit marker from a record of a control batch."""
    control_type = parse_control_key(record.key)
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise CorruptRecordError(f"control type {control_type} is not a transaction marker")
    value = record.value
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise CorruptRecordError("end transaction marker value shorter than 6 bytes")
    version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value, 0)
    if version < 0:
        raise CorruptRecordError(f"end transaction marker version {version}")
    return EndTransactionMarker(ControlRecordType(control_type), int(coordinator_epoch))


def read_end_transaction_marker(batch: RecordBatch) -> EndTransactionMarker:
    """The marker of a control batch (its single record)."""
    if not batch.is_control:
        raise CorruptRecordError("not a control batch")
    records = list(iter_records(batch))
    if len(records) != 1:
        raise CorruptRecordError(f"control batch holds {len(records)} records, not 1")
    return parse_end_transaction_marker(records[0])


def build_end_transaction_batch(
    marker: EndTransactionMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    now_ms: int,
) -> bytearray:
    """A transactional control batch holding one abort/commit marker (as the coordinator's
    WriteTxnMarkers asks a partition leader to append)."""
    if marker.control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise ValueError(f"{marker.control_type!r} is not a transaction marker")
    record = NewRecord(
        value=encode_end_transaction_value(marker.coordinator_epoch),
        key=encode_control_key(marker.control_type),
        timestamp_ms=now_ms,
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        timestamp_type=TimestampType.CREATE_TIME,
        partition_leader_epoch=partition_leader_epoch,
        now_ms=now_ms,
    )
