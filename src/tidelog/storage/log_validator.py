"""The log validator (Kafka's LogValidator): checks a request's batches and numbers them.

`PartitionLog` runs it before anything is written, so the segment only ever appends
already-numbered batches:

- `validate_batches`: each batch's header and CRC32C (`RecordBatch.validate`, D2: no record
  is decoded), for batches from a client Kafka's `validateBatch` rules (base offset 0,
  recordsCount = lastOffsetDelta + 1, no control batch, a sequence with a producer id; all
  header fields, so compressed batches are checked without inflating them), max.message.bytes
  per batch, the request's total against segment.bytes, and for
  compacted topics that every record has a key (the only produce path that decodes records,
  as in Kafka's LogValidator).
- `assign_offsets` (leader): baseOffset from the log end offset, partitionLeaderEpoch, and for
  message.timestamp.type=LogAppendTime the append time in maxTimestamp (with the timestamp
  type bit and a new CRC). All rewrites happen in the caller's buffer: no copy. The header
  positions are `records/batch.py`'s.
- `check_follower_offsets` (follower): batches keep the leader's offsets and must continue
  the log exactly.

Pure: no I/O, no clock (the append time is passed in).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from tidelog.errors import ErrorCode, InvalidRecordError, KafkaError
from tidelog.records.batch import RecordBatch
from tidelog.records.record import iter_records
from tidelog.storage.config import LogConfig

# Decompression bound for the compacted-topic key check: a batch within max.message.bytes
# may still inflate a lot; 64x (at least 64 MiB) is generous for real data, bounded for bombs.
_INFLATION_LIMIT = 64


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's AppendOrigin): only CLIENT batches get `validateBatch`'s rules."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


def validate_client_batch(batch: RecordBatch) -> None:
    """Kafka's LogValidator.validateBatch for AppendOrigin.CLIENT (magic 2), header fields only:
    the broker assigns offsets, so a client batch starts at 0 and its offset range must equal
    its record count (else lastOffsetDelta, not the records, would decide how far the log end
    moves); control records come only from the transaction coordinator."""
    if batch.base_offset != 0:
        raise InvalidRecordError(
            f"client batch has base offset {batch.base_offset}; it must be 0"
        )
    count = batch.records_count
    if count != batch.last_offset_delta + 1:
        raise InvalidRecordError(
            f"inconsistent batch offset range [0, {batch.last_offset_delta}] and count of "
            f"records {count}"
        )
    if batch.is_control:
        raise InvalidRecordError("clients are not allowed to write control records")
    if batch.producer_id >= 0 and batch.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence number {batch.base_sequence} in record batch with producer id "
            f"{batch.producer_id}"
        )


def validate_batches(
    batches: Sequence[RecordBatch],
    config: LogConfig,
    origin: AppendOrigin = AppendOrigin.COORDINATOR,
) -> int:
    """Check one append's batches for this log; returns their total size in bytes."""
    if not batches:
        raise InvalidRecordError("no record batches to append")
    total_size = 0
    for batch in batches:
        batch.validate()
        if origin is AppendOrigin.CLIENT:
            validate_client_batch(batch)
        if batch.size > config.max_message_bytes:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {batch.size} bytes > max.message.bytes {config.max_message_bytes}",
            )
        total_size += batch.size
    if total_size > config.segment_bytes:
        raise KafkaError(
            ErrorCode.RECORD_LIST_TOO_LARGE,
            f"{total_size} bytes > segment.bytes {config.segment_bytes}",
        )
    return total_size


# Kafka's error message shows at most three record errors (all are in record_errors).
_RECORD_ERRORS_SHOWN = 3


def require_keys(
    batches: Sequence[RecordBatch], max_uncompressed_bytes: int, topic_partition: str = ""
) -> None:
    """Kafka refuses keyless records in a compacted topic (the only produce path that decodes
    records, as Kafka's LogValidator does); control batches carry their own keys. Every
    keyless record is named by its index in the batch (KIP-467 record errors)."""
    record_errors: list[tuple[int, str]] = []
    why = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
    for batch in batches:
        if batch.is_control:
            continue
        limit = max(max_uncompressed_bytes, 1 << 20) * _INFLATION_LIMIT
        for index, record in enumerate(iter_records(batch, max_uncompressed_bytes=limit)):
            if record.key is None:
                record_errors.append((index, why))
    if record_errors:
        shown = ", ".join(
            f"RecordError(batchIndex={index}, message='{message}')"
            for index, message in record_errors[:_RECORD_ERRORS_SHOWN]
        )
        raise InvalidRecordError(
            f"One or more records have been rejected due to {len(record_errors)} record errors "
            "in total, and only showing the first three errors at most: "
            f"[{shown}]",
            tuple(record_errors),
        )


def assign_offsets(
    batches: Sequence[RecordBatch], first_offset: int, leader_epoch: int, append_time_ms: int
) -> int:
    """Number the batches from `first_offset` and stamp the leader epoch; `append_time_ms`
    >= 0 stamps LogAppendTime. Returns the offset after the last record."""
    offset = first_offset
    for batch in batches:
        batch.set_base_offset(offset)
        batch.set_partition_leader_epoch(leader_epoch)
        if append_time_ms >= 0:
            batch.set_log_append_time(append_time_ms)
        offset = batch.next_offset
    return offset


def check_follower_offsets(batches: Sequence[RecordBatch], log_end_offset: int) -> int:
    """Follower batches must start at the log end offset and follow each other; returns the
    offset after the last record."""
    expected = log_end_offset
    for batch in batches:
        if batch.base_offset != expected:
            raise InvalidRecordError(
                f"follower batch at offset {batch.base_offset}, log end offset {expected}"
            )
        expected = batch.next_offset
    return expected
