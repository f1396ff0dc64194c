"""The log validator alone: numbering, leader epoch, LogAppendTime, follower continuity."""

from __future__ import annotations

import struct

import pytest

from tidelog.errors import ErrorCode, InvalidRecordError, KafkaError
from tidelog.records.batch import (
    CRC_POSITION,
    LAST_OFFSET_DELTA_POSITION,
    Codec,
    RecordBatch,
    TimestampType,
    read_batch_header,
)
from tidelog.records.builder import NewRecord, build_batch
from tidelog.storage import log_validator
from tidelog.storage.config import LogConfig
from tidelog.storage.log_validator import AppendOrigin

from .helpers import make_batch


def test_assign_offsets_numbers_batches_in_place() -> None:
    batches = [make_batch(3), make_batch(2)]
    assert log_validator.assign_offsets(batches, 40, leader_epoch=7, append_time_ms=-1) == 45
    assert [b.base_offset for b in batches] == [40, 43]
    assert all(b.partition_leader_epoch == 7 and b.is_valid() for b in batches)
    assert batches[0].timestamp_type == TimestampType.CREATE_TIME
    header = read_batch_header(batches[1].buffer, 0, position=99)
    assert (header.position, header.base_offset, header.last_offset) == (99, 43, 44)
    assert header.size == batches[1].size


def test_log_append_time_stamps_max_timestamp_and_redoes_the_crc() -> None:
    (batch,) = batches = [make_batch(2, timestamp_ms=5)]
    log_validator.assign_offsets(batches, 0, leader_epoch=0, append_time_ms=123_456)
    assert batch.max_timestamp == 123_456 and batch.is_valid()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME


def test_validate_batches_limits() -> None:
    batch = make_batch(1, value_size=500)
    assert log_validator.validate_batches([batch, batch], LogConfig()) == 2 * batch.size
    with pytest.raises(InvalidRecordError):
        log_validator.validate_batches([], LogConfig())
    with pytest.raises(KafkaError) as too_large:
        log_validator.validate_batches([batch], LogConfig(max_message_bytes=batch.size - 1))
    assert too_large.value.code == ErrorCode.MESSAGE_TOO_LARGE


def test_follower_batches_must_continue_the_log() -> None:
    batches = [make_batch(2), make_batch(1)]
    log_validator.assign_offsets(batches, 10, leader_epoch=1, append_time_ms=-1)
    assert log_validator.check_follower_offsets(batches, 10) == 13
    with pytest.raises(InvalidRecordError):
        log_validator.check_follower_offsets(batches, 11)


def _rewritten(buffer: bytearray, position: int, fmt: str, value: int) -> RecordBatch:
    """`buffer` with one header field rewritten and the CRC redone (a well-formed batch)."""
    struct.pack_into(fmt, buffer, position, value)
    batch = RecordBatch(memoryview(buffer))
    struct.pack_into(">I", buffer, CRC_POSITION, batch.compute_crc())
    return batch


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP])
def test_client_batches_follow_kafkas_validate_batch(codec: Codec) -> None:
    """AppendOrigin.CLIENT (Kafka's LogValidator.validateBatch), from header fields only, for
    compressed batches too: base offset 0, recordsCount = lastOffsetDelta + 1, no control
    batch, a base sequence with a producer id. Other origins keep their own rules."""
    records = [NewRecord(b"k", key=b"k"), NewRecord(b"v", key=b"k")]
    ok = RecordBatch(memoryview(build_batch(records, codec=codec)))
    assert log_validator.validate_batches([ok], LogConfig(), AppendOrigin.CLIENT) == ok.size

    def refused(batch: RecordBatch, words: str) -> None:
        with pytest.raises(InvalidRecordError, match=words):
            log_validator.validate_batches([batch], LogConfig(), AppendOrigin.CLIENT)
        log_validator.validate_batches([batch], LogConfig(), AppendOrigin.COORDINATOR)

    refused(RecordBatch(memoryview(build_batch(records, base_offset=500, codec=codec))),
            "base offset 500")
    # lastOffsetDelta 5 with 2 records would move the log end by 6.
    refused(_rewritten(build_batch(records, codec=codec), LAST_OFFSET_DELTA_POSITION, ">i", 5),
            "count of records 2")
    refused(RecordBatch(memoryview(build_batch(records, codec=codec, control=True))),
            "control records")
    refused(RecordBatch(memoryview(build_batch(records, codec=codec, producer_id=7,
                                               producer_epoch=0))), "sequence")
