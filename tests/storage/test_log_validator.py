"""The log validator alone: numbering, leader epoch, LogAppendTime, follower continuity."""

from __future__ import annotations

import pytest

from tidelog.errors import ErrorCode, InvalidRecordError, KafkaError
from tidelog.records.batch import TimestampType, read_batch_header
from tidelog.storage import log_validator
from tidelog.storage.config import LogConfig

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
